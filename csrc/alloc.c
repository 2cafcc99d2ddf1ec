/* alloc.c — host allocator with a cache for large blocks (see alloc.h).
 *
 * Why: an allocating cast of a 16M-element tensor spends most of its time in
 * mmap and first-touch page faults, not in converting (torch's x.half() runs
 * 4-9x slower than a cast into a reused buffer). Large freed blocks are kept
 * in size classes and handed back out, already faulted in.
 *
 * Size classes: sizes >= 1 MiB are rounded up to a multiple of 1/8 of their
 * power of two (at most 12.5 % waste). Each class keeps a LIFO free list.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/alloc.h"

typedef struct block {
    struct block *next;
    void *ptr;
    size_t size;
} block_t;

#define NUM_CLASSES 512
static block_t *free_lists[NUM_CLASSES];
static block_t *spare_nodes; /* recycled list nodes */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static ampy_alloc_stats stats;
static size_t cache_limit = (size_t)2 << 30;

/* Round a large size up to its class size; *cls gets the class index. */
static size_t class_size(size_t n, int *cls)
{
    int p = 63 - __builtin_clzll((unsigned long long)n); /* n >= 1 MiB, so n != 0 */
    size_t step = ((size_t)1 << p) >> 3;
    size_t rounded = (n + step - 1) & ~(step - 1);
    int sub = (int)((rounded >> (p - 3)) - 8); /* 0..8 */
    int c = (p - 20) * 9 + sub;
    *cls = c < NUM_CLASSES ? c : -1;
    return rounded;
}

/* Blocks of 2 MiB or more start on a 2 MiB boundary and ask the kernel for
 * transparent huge pages (Linux MADV_HUGEPAGE; "madvise" is the usual THP
 * setting, so nothing happens without the request). The kernels stream
 * through megabytes of activations and GEMM panels; with 4 KiB pages every
 * 4 KiB of a strided walk is a TLB miss (the block training step runs ~6 %
 * faster). AMPY_NO_HUGEPAGES=1 turns it off. */
#define HUGE_PAGE ((size_t)2 << 20)

static int want_huge_pages(void)
{
#ifdef MADV_HUGEPAGE
    const char *e = getenv("AMPY_NO_HUGEPAGES");
    return !(e && *e && strcmp(e, "0") != 0);
#else
    return 0;
#endif
}

static void *os_alloc(size_t n)
{
    void *p = NULL;
    if (n >= HUGE_PAGE && want_huge_pages()) {
        if (posix_memalign(&p, HUGE_PAGE, n) != 0)
            return NULL;
#ifdef MADV_HUGEPAGE
        (void)madvise(p, n & ~(HUGE_PAGE - 1), MADV_HUGEPAGE); /* advice only */
#endif
        return p;
    }
    if (posix_memalign(&p, AMPY_ALLOC_ALIGN, n ? n : AMPY_ALLOC_ALIGN) != 0)
        return NULL;
    return p;
}

void *ampy_alloc(size_t nbytes)
{
    if (nbytes < AMPY_ALLOC_CACHE_MIN) {
        void *p = os_alloc(nbytes);
        if (p) {
            pthread_mutex_lock(&lock);
            stats.allocated_bytes += (int64_t)nbytes;
            stats.live_blocks++;
            if (stats.allocated_bytes > stats.peak_allocated_bytes)
                stats.peak_allocated_bytes = stats.allocated_bytes;
            pthread_mutex_unlock(&lock);
        }
        return p;
    }
    /* More than the 128 TiB of an x86-64 / AArch64 user address space can
     * never succeed; refusing it here also keeps sanitizer allocators (which
     * abort on absurd requests) on the MemoryError path. */
    if (nbytes > ((size_t)1 << 47))
        return NULL;
    int cls;
    size_t rounded = class_size(nbytes, &cls);
    void *p = NULL;
    pthread_mutex_lock(&lock);
    if (cls >= 0 && free_lists[cls]) {
        block_t *b = free_lists[cls];
        free_lists[cls] = b->next;
        p = b->ptr;
        b->next = spare_nodes;
        spare_nodes = b;
        stats.cached_bytes -= (int64_t)rounded;
        stats.cache_hits++;
    }
    pthread_mutex_unlock(&lock);
    if (!p) {
        p = os_alloc(rounded);
        if (!p) {
            ampy_alloc_empty_cache(); /* give cached memory back and retry once */
            p = os_alloc(rounded);
        }
        if (!p)
            return NULL;
        pthread_mutex_lock(&lock);
        stats.cache_misses++;
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    stats.allocated_bytes += (int64_t)nbytes;
    stats.live_blocks++;
    if (stats.allocated_bytes > stats.peak_allocated_bytes)
        stats.peak_allocated_bytes = stats.allocated_bytes;
    pthread_mutex_unlock(&lock);
    return p;
}

void ampy_free(void *p, size_t nbytes)
{
    if (!p)
        return;
    pthread_mutex_lock(&lock);
    stats.allocated_bytes -= (int64_t)nbytes;
    stats.live_blocks--;
    if (nbytes >= AMPY_ALLOC_CACHE_MIN) {
        int cls;
        size_t rounded = class_size(nbytes, &cls);
        if (cls >= 0 && (size_t)stats.cached_bytes + rounded <= cache_limit) {
            block_t *b = spare_nodes;
            if (b)
                spare_nodes = b->next;
            else
                b = (block_t *)malloc(sizeof *b);
            if (b) {
                b->ptr = p;
                b->size = rounded;
                b->next = free_lists[cls];
                free_lists[cls] = b;
                stats.cached_bytes += (int64_t)rounded;
                pthread_mutex_unlock(&lock);
                return;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    free(p);
}

void ampy_alloc_get_stats(ampy_alloc_stats *out)
{
    pthread_mutex_lock(&lock);
    *out = stats;
    pthread_mutex_unlock(&lock);
}

void ampy_alloc_reset_peak(void)
{
    pthread_mutex_lock(&lock);
    stats.peak_allocated_bytes = stats.allocated_bytes;
    pthread_mutex_unlock(&lock);
}

void ampy_alloc_empty_cache(void)
{
    block_t *all = NULL;
    pthread_mutex_lock(&lock);
    for (int c = 0; c < NUM_CLASSES; c++) {
        while (free_lists[c]) {
            block_t *b = free_lists[c];
            free_lists[c] = b->next;
            b->next = all;
            all = b;
        }
    }
    stats.cached_bytes = 0;
    pthread_mutex_unlock(&lock);
    while (all) {
        block_t *b = all;
        all = b->next;
        free(b->ptr);
        free(b);
    }
    pthread_mutex_lock(&lock);
    while (spare_nodes) {
        block_t *b = spare_nodes;
        spare_nodes = b->next;
        free(b);
    }
    pthread_mutex_unlock(&lock);
}

void ampy_alloc_set_cache_limit(size_t nbytes)
{
    pthread_mutex_lock(&lock);
    cache_limit = nbytes;
    int over = stats.cached_bytes > (int64_t)nbytes;
    pthread_mutex_unlock(&lock);
    if (over)
        ampy_alloc_empty_cache();
}
