/* ampy/cnn_pool3d.h — pools over volumes: max_pool3d (with argmax
 * indices), avg_pool3d, adaptive_avg_pool3d and adaptive_max_pool3d,
 * forward (and the backward of the averages; a max pool's backward is
 * ampy_cnn_max_pool2d_bwd's scatter with the plane read as 1 x D*H*W).
 * Kernels in csrc/cnn_pool3d.c. adaptive_max_pool2d and the 1-d pools run
 * these with D = 1 (and H = 1).
 *
 * Layout and precision as ampy/cnn.h: P contiguous volumes of D*H*W
 * elements; float16 / bfloat16 read into float32 and rounded once on store;
 * indices are flat in the volume (id*H*W + ih*W + iw, int64). Maxima: NaN
 * wins, the first maximum in (d, h, w) scan order wins ties (torch's
 * `val > maxval || isnan(val)`). Arguments are checked before anything is
 * written. Threads split the volumes; no result depends on their count.
 */
#ifndef AMPY_CNN_POOL3D_H
#define AMPY_CNN_POOL3D_H

#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A 3-d window: kernel >= 1, stride >= 1, padding >= 0, dilation >= 1
 * (max pool only; avg pool reads 1), each (depth, height, width). */
typedef struct ampy_cnn_window3 {
    int64_t k[3], s[3], p[3], d[3];
} ampy_cnn_window3;

/* Sizes of one call: input (D, H, W) and output (OD, OH, OW) per volume. */
typedef struct ampy_cnn_vol {
    int64_t P, in[3], out[3];
} ampy_cnn_vol;

/* max_pool3d: y = max over the dilated window clipped to the volume,
 * idx its flat index.   x: P*D*H*W, y: P*OD*OH*OW of dtype, idx int64. */
ampy_status ampy_cnn_max_pool3d_fwd(const ampy_cnn_vol *v, const ampy_cnn_window3 *w,
                                    const void *x, int dtype, void *y, int64_t *idx);

/* avg_pool3d (torch's window per dim: [o*s - p, min(o*s - p + k, n + p)),
 * counted before the clip when count_include_pad; divisor_override > 0
 * replaces the count): y = sum / divisor, sum in float32 (float64 for
 * float64). Backward: dx = 0, then per output in order the share
 * dy / divisor rounded to dtype is added to each element of its window. */
ampy_status ampy_cnn_avg_pool3d_fwd(const ampy_cnn_vol *v, const ampy_cnn_window3 *w,
                                    int count_include_pad, int64_t divisor_override,
                                    const void *x, int dtype, void *y);
ampy_status ampy_cnn_avg_pool3d_bwd(const ampy_cnn_vol *v, const ampy_cnn_window3 *w,
                                    int count_include_pad, int64_t divisor_override,
                                    const void *dy, int dtype, void *dx);

/* adaptive windows per dim [floor(o n / n_out), ceil((o + 1) n / n_out)).
 * avg: y = sum / kd / kh / kw (each division in the compute type);
 * backward dx[i] += dy / kd / kh / kw (each division rounded to dtype).
 * max: y = the window's maximum, idx its flat index. Input sizes >= 1. */
ampy_status ampy_cnn_adaptive_avg_pool3d_fwd(const ampy_cnn_vol *v, const void *x, int dtype,
                                             void *y);
ampy_status ampy_cnn_adaptive_avg_pool3d_bwd(const ampy_cnn_vol *v, const void *dy, int dtype,
                                             void *dx);
ampy_status ampy_cnn_adaptive_max_pool3d_fwd(const ampy_cnn_vol *v, const void *x, int dtype,
                                             void *y, int64_t *idx);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_CNN_POOL3D_H */
