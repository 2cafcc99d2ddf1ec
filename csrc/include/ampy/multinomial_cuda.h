/* ampy/multinomial_cuda.h — the CUDA twin of ampy_multinomial
 * (cuda/multinomial.cu), filled into ampy_cuda_api (cuda.h) by
 * cuda/module_py.c: the same arguments with the device first, every pointer
 * device memory, the same samples as the CPU for the same uniforms (the
 * running sums are serial in the CPU's order; the keys without replacement
 * are ordered by the CUDA sort, which is the CPU's order).
 *
 * Unlike the CPU function it does not validate the weights (that needs the
 * host to read them): the caller does (ampy/_sorting.py checks CUDA weights
 * with device reductions and one host read of per-row flags before this is
 * called). Invalid weights give some index in [0, ncat), never a fault. */
#ifndef AMPY_MULTINOMIAL_CUDA_H
#define AMPY_MULTINOMIAL_CUDA_H

#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

ampy_status ampy_multinomial_cuda(int device, int64_t rows, int64_t ncat, const double *p,
                                  int64_t ns, int replacement, const double *u, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_MULTINOMIAL_CUDA_H */
