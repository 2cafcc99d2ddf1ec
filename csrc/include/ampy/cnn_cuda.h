/* ampy/cnn_cuda.h — the CUDA twins of cnn.h's functions (cuda/cnn_norm.cu,
 * cuda/cnn_pool.cu, cuda/cnn_resample.cu), filled into ampy_cuda_api
 * (cuda.h) by cuda/module_py.c. Same arguments and contracts as the CPU
 * functions, with the device first; every pointer is
 * device memory (the save_mean / mean / rstd statistics too) and the work is
 * queued on ampy_cuda_stream(device).
 *
 * Where the results can differ from the CPU's:
 *   - the norm statistics are double sums in a fixed block-tree order (the
 *     CPU's are serial): equal up to double rounding, so the float32 mean and
 *     invstd agree except in rare ties;
 *   - max_pool2d, padding and interpolation backward add with atomicAdd into
 *     a float32 buffer (float64 for float64 data; float32 data directly into
 *     the gradient), then one rounding to half: overlapping contributions
 *     are summed in an unspecified order;
 *   - avg_pool2d and adaptive_avg_pool2d backward gather each input's
 *     gradient over the outputs that cover it, in output order, rounding as
 *     the CPU does: the CPU's bits.
 * A bad max-pool index is recorded on the device and raised at the next
 * synchronisation (check.cu) and skipped. */
#ifndef AMPY_CNN_CUDA_H
#define AMPY_CNN_CUDA_H

#include <stdint.h>

#include "ampy/cnn.h"
#include "ampy/dtype.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

ampy_status ampy_cnn_batch_norm_fwd_cuda(int device, int64_t N, int64_t C, int64_t S,
                                         const void *x, int x_dtype, const void *w,
                                         const void *b, void *run_mean, void *run_var,
                                         int p_dtype, int training, double momentum, double eps,
                                         void *y, double *save_mean, double *save_invstd);
ampy_status ampy_cnn_batch_norm_bwd_cuda(int device, int64_t N, int64_t C, int64_t S,
                                         const void *x, int x_dtype, const void *dy,
                                         const void *w, int p_dtype, int training,
                                         const double *save_mean, const double *save_invstd,
                                         void *dx, void *dw, void *db);
ampy_status ampy_cnn_group_norm_fwd_cuda(int device, int64_t N, int64_t C, int64_t S, int64_t G,
                                         const void *x, int x_dtype, const void *w,
                                         const void *b, int p_dtype, double eps, void *y,
                                         double *mean, double *rstd);
ampy_status ampy_cnn_group_norm_bwd_cuda(int device, int64_t N, int64_t C, int64_t S, int64_t G,
                                         const void *x, int x_dtype, const void *dy,
                                         const void *w, int p_dtype, const double *mean,
                                         const double *rstd, void *dx, void *dw, void *db);

ampy_status ampy_cnn_max_pool2d_fwd_cuda(int device, int64_t P, int64_t H, int64_t W, int64_t OH,
                                         int64_t OW, const ampy_cnn_window *win, const void *x,
                                         int dtype, void *y, int64_t *idx);
ampy_status ampy_cnn_max_pool2d_bwd_cuda(int device, int64_t P, int64_t H, int64_t W, int64_t OH,
                                         int64_t OW, const int64_t *idx, const void *dy,
                                         int dtype, void *dx);
ampy_status ampy_cnn_avg_pool2d_fwd_cuda(int device, int64_t P, int64_t H, int64_t W, int64_t OH,
                                         int64_t OW, const ampy_cnn_window *win,
                                         int count_include_pad, int64_t divisor_override,
                                         const void *x, int dtype, void *y);
ampy_status ampy_cnn_avg_pool2d_bwd_cuda(int device, int64_t P, int64_t H, int64_t W, int64_t OH,
                                         int64_t OW, const ampy_cnn_window *win,
                                         int count_include_pad, int64_t divisor_override,
                                         const void *dy, int dtype, void *dx);
ampy_status ampy_cnn_adaptive_avg_pool2d_fwd_cuda(int device, int64_t P, int64_t H, int64_t W,
                                                  int64_t OH, int64_t OW, const void *x,
                                                  int dtype, void *y);
ampy_status ampy_cnn_adaptive_avg_pool2d_bwd_cuda(int device, int64_t P, int64_t H, int64_t W,
                                                  int64_t OH, int64_t OW, const void *dy,
                                                  int dtype, void *dx);

ampy_status ampy_cnn_pad_fwd_cuda(int device, int64_t P, int k, const int64_t *in,
                                  const int64_t *lo, const int64_t *hi, int mode, double value,
                                  const void *x, int dtype, void *y);
ampy_status ampy_cnn_pad_bwd_cuda(int device, int64_t P, int k, const int64_t *in,
                                  const int64_t *lo, const int64_t *hi, int mode, const void *dy,
                                  int dtype, void *dx);
ampy_status ampy_cnn_interp2d_fwd_cuda(int device, int64_t P, int64_t H, int64_t W, int64_t OH,
                                       int64_t OW, int mode, int align_corners, double scale_h,
                                       double scale_w, const void *x, int dtype, void *y);
ampy_status ampy_cnn_interp2d_bwd_cuda(int device, int64_t P, int64_t H, int64_t W, int64_t OH,
                                       int64_t OW, int mode, int align_corners, double scale_h,
                                       double scale_w, const void *dy, int dtype, void *dx);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_CNN_CUDA_H */
