/* ampy/conv_cuda.h — the CUDA twins of conv.h's functions (cuda/conv.cu),
 * filled into ampy_cuda_api (cuda.h) by cuda/module_py.c. Same contracts as
 * the CPU functions, plus the device; every pointer is device memory and the
 * work is queued on ampy_cuda_stream(device). */
#ifndef AMPY_CONV_CUDA_H
#define AMPY_CONV_CUDA_H

#include <stdint.h>

#include "ampy/conv.h"

#ifdef __cplusplus
extern "C" {
#endif

ampy_status ampy_conv2d_forward_cuda(int device, const ampy_conv2d_geom *g, ampy_dtype dtype,
                                     const void *x, const int64_t *xs, const void *w,
                                     const void *bias, void *y);
ampy_status ampy_conv2d_backward_input_cuda(int device, const ampy_conv2d_geom *g,
                                            ampy_dtype dtype, const void *dy, const void *w,
                                            const void *bias, void *dx);
ampy_status ampy_conv2d_backward_weight_cuda(int device, const ampy_conv2d_geom *g,
                                             ampy_dtype dtype, const void *x, const int64_t *xs,
                                             const void *dy, void *dw);
ampy_status ampy_conv_backward_bias_cuda(int device, int64_t N, int64_t O, int64_t P,
                                         ampy_dtype dtype, const void *dy, void *db);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_CONV_CUDA_H */
