/* ampy/alloc.h — host memory for tensor storage.
 *
 * Small blocks come from the C heap (64-byte aligned). Large blocks
 * (>= AMPY_ALLOC_CACHE_MIN bytes) are kept in a size-class cache when freed
 * and handed out again, so an operation producing a fresh large output
 * (x.half()) does not pay mmap + page faults on every call. The cache holds at
 * most ampy_alloc_set_cache_limit() bytes (default 2 GiB); empty_cache returns
 * everything to the OS. Thread-safe.
 */
#ifndef AMPY_ALLOC_H
#define AMPY_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AMPY_ALLOC_ALIGN 64
#define AMPY_ALLOC_CACHE_MIN ((size_t)1 << 20)

/* Returns a block of at least nbytes (64-byte aligned), or NULL when out of
 * memory. nbytes == 0 returns a valid unique pointer. The caller frees it with
 * ampy_free(p, nbytes) passing the same nbytes. */
void *ampy_alloc(size_t nbytes);
void ampy_free(void *p, size_t nbytes);

typedef struct ampy_alloc_stats {
    int64_t allocated_bytes;     /* bytes in live blocks (requested sizes)  */
    int64_t peak_allocated_bytes;
    int64_t cached_bytes;        /* bytes held in the cache, not in use     */
    int64_t live_blocks;         /* live blocks                             */
    int64_t cache_hits;          /* large allocations served from the cache */
    int64_t cache_misses;        /* large allocations that went to the OS   */
} ampy_alloc_stats;

void ampy_alloc_get_stats(ampy_alloc_stats *out);
void ampy_alloc_reset_peak(void);
void ampy_alloc_empty_cache(void);
void ampy_alloc_set_cache_limit(size_t nbytes);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_ALLOC_H */
