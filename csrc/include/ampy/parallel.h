/* ampy/parallel.h — the thread pool behind large element loops.
 *
 * A small persistent pthread pool: the calling thread runs the first chunk
 * and waiting workers sleep on a condition variable (no spinning that would
 * steal the second core from the caller or from another library's pool).
 * Safe across fork(): the child starts with a fresh, empty pool.
 */
#ifndef AMPY_PARALLEL_H
#define AMPY_PARALLEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Threads used by large loops (>= 1). Default: the CPUs this process may run
 * on (sched_getaffinity), or AMPY_NUM_THREADS from the environment. */
int ampy_get_num_threads(void);
/* n < 1 is clamped to 1; n above 256 to 256. */
void ampy_set_num_threads(int n);

/* Calls fn(begin, end, ctx) over disjoint ranges covering [0, n). Splits into
 * at most get_num_threads() chunks, each at least `grain` long (grain <= 0
 * means never split). fn runs on the calling thread when not split. Nested
 * calls from inside fn run serially. */
typedef void (*ampy_range_fn)(int64_t begin, int64_t end, void *ctx);
void ampy_parallel_for(int64_t n, int64_t grain, ampy_range_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_PARALLEL_H */
