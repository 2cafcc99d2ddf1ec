/* ampy/cnn.h — the non-convolution kernels of convolutional networks:
 * batch_norm and group_norm (statistics, forward, backward), max_pool2d
 * (with argmax indices), avg_pool2d, adaptive_avg_pool2d, padding
 * (constant / reflect / replicate / circular) and interpolation (nearest,
 * bilinear), forward and backward of each.
 *
 * Layout: every tensor argument is contiguous, row-major, on the CPU. Image
 * tensors are read as P = N*C planes of H*W elements (pools, interpolation)
 * or as (N, C, S) with S the product of the spatial sizes (norms). Sizes are
 * in elements and int64. Nothing is allocated for the caller; outputs never
 * alias inputs. Arguments are checked before anything is written: a call
 * that fails changes nothing.
 *
 * Precision (torch's CPU kernels, aten/src/ATen/native/cpu/): float16 and
 * bfloat16 elements are read into float32, computed in float32 and rounded
 * once on store; float32 computes in float32, float64 in float64. The norm
 * statistics (per-channel / per-group sums) accumulate in double. Backward
 * scatters (max/avg pool, pad, interpolate) add into the gradient in its own
 * dtype, output position by output position, as torch's loops do, so
 * overlapping windows round where torch rounds.
 *
 * Threads: planes (or channels, or (sample, group) rows) are split across
 * ampy_parallel_for(); no result depends on the thread count.
 *
 * Statuses: AMPY_OK, AMPY_ERR_DTYPE (a dtype that is not float32, float16,
 * bfloat16 or float64, or mixed where the contract forbids it),
 * AMPY_ERR_VALUE (negative sizes, a window or padding that does not fit,
 * NULL outputs), AMPY_ERR_NOMEM.
 */
#ifndef AMPY_CNN_H
#define AMPY_CNN_H

#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- batch_norm ------------------------------------------------------------
 * x is (N, C, S). Training: per channel c, mean = sum(x) / (N*S) rounded to
 * the compute type, var_sum = sum((x - mean)^2) (double sums, the
 * difference and its square in the compute type), save_invstd =
 * 1 / sqrt(var_sum / (N*S) + eps); running stats, when given, become
 *   running_mean = momentum * mean + (1 - momentum) * running_mean
 *   running_var  = momentum * var_sum / (N*S - 1) + (1 - momentum) * running_var
 * (float32 arithmetic for float32 parameters, as torch's kernel; double
 * for float64). Evaluation: mean = running_mean, invstd =
 * 1 / sqrt(running_var + eps). Then y = x * alpha + beta with alpha =
 * invstd * w, beta = b - mean * alpha (torch's linear and constant terms).
 *   N, C, S          in      sizes >= 0 (training with N*S < 2 is the
 *                            caller's error to raise)
 *   x                in      N*C*S elements of x_dtype
 *   w, b             in      C elements of p_dtype each, or NULL (ones / zeros)
 *   run_mean,run_var in,out  C elements of p_dtype each, or NULL (both NULL,
 *                            or both given; required when !training)
 *   p_dtype          in      any float dtype for a half or float32 x;
 *                            float64 for a float64 x
 *   y                out     N*C*S elements of x_dtype
 *   save_mean, save_invstd  out  C doubles each (the mean and invstd used) */
ampy_status ampy_cnn_batch_norm_fwd(int64_t N, int64_t C, int64_t S, const void *x, int x_dtype,
                                    const void *w, const void *b, void *run_mean, void *run_var,
                                    int p_dtype, int training, double momentum, double eps,
                                    void *y, double *save_mean, double *save_invstd);

/* Backward of ampy_cnn_batch_norm_fwd, from its save_mean / save_invstd.
 * Per channel: sum = sum(dy), dotp = sum((x - mean) dy) (double); training:
 * dx = (dy - sum/(N*S) - (x - mean) * dotp * invstd^2 / (N*S)) * invstd * w;
 * evaluation: dx = dy * invstd * w. dw = dotp * invstd, db = sum.
 *   dy          in   N*C*S elements of x_dtype
 *   dx          out  N*C*S elements of x_dtype, or NULL (not wanted)
 *   dw, db      out  C elements of p_dtype each, or NULL (not wanted)
 * Other arguments as for the forward. */
ampy_status ampy_cnn_batch_norm_bwd(int64_t N, int64_t C, int64_t S, const void *x, int x_dtype,
                                    const void *dy, const void *w, int p_dtype, int training,
                                    const double *save_mean, const double *save_invstd,
                                    void *dx, void *dw, void *db);

/* ---- group_norm ------------------------------------------------------------
 * x is (N, C, S), C = G * (C / G). Per (n, g): mean and biased variance over
 * the group's (C/G)*S elements (double sums), rstd = 1 / sqrt(var + eps);
 * y = x * (rstd * w_c) + (b_c - rstd * w_c * mean).
 *   G            in   groups, C % G == 0, G >= 1
 *   w, b         in   C elements of p_dtype each, or NULL
 *   y            out  N*C*S elements of x_dtype
 *   mean, rstd   out  N*G doubles each */
ampy_status ampy_cnn_group_norm_fwd(int64_t N, int64_t C, int64_t S, int64_t G, const void *x,
                                    int x_dtype, const void *w, const void *b, int p_dtype,
                                    double eps, void *y, double *mean, double *rstd);

/* Backward of ampy_cnn_group_norm_fwd from its mean / rstd (torch's
 * formula: per (n, c) ds = sum(dy x), db = sum(dy); per (n, g)
 * dx = rstd w_c dy + c2 x + c3 with c2 = (sum_c db w_c * mean -
 * sum_c ds w_c) rstd^3 / D and c3 = -c2 mean - sum_c db w_c * rstd / D,
 * D = (C/G) S; dw_c = sum_n (ds - db mean) rstd, db_c = sum_n db).
 *   dx           out  N*C*S elements of x_dtype, or NULL
 *   dw, db       out  C elements of p_dtype each, or NULL */
ampy_status ampy_cnn_group_norm_bwd(int64_t N, int64_t C, int64_t S, int64_t G, const void *x,
                                    int x_dtype, const void *dy, const void *w, int p_dtype,
                                    const double *mean, const double *rstd, void *dx, void *dw,
                                    void *db);

/* ---- pooling ---------------------------------------------------------------
 * A 2-d window: kernel (kh, kw) >= 1, stride >= 1, padding >= 0, dilation
 * >= 1 (max pool only; avg pool reads dh = dw = 1). */
typedef struct ampy_cnn_window {
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
} ampy_cnn_window;

/* max_pool2d: P planes (H, W) -> (OH, OW). Each output is the largest
 * element of its window (NaN wins, the first maximum wins ties); idx is
 * its flat index ih*W + iw in the plane (int64).
 *   x, y    in / out   P*H*W / P*OH*OW elements of dtype
 *   idx     out        P*OH*OW int64 */
ampy_status ampy_cnn_max_pool2d_fwd(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                    const ampy_cnn_window *win, const void *x, int dtype,
                                    void *y, int64_t *idx);

/* Backward: dx = 0, then dx[p, idx[p, o]] += dy[p, o] for each output o in
 * order. Indices outside [0, H*W) give AMPY_ERR_INDEX. */
ampy_status ampy_cnn_max_pool2d_bwd(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                    const int64_t *idx, const void *dy, int dtype, void *dx);

/* avg_pool2d (torch's window: [o*s - p, min(o*s - p + k, size + p)), its
 * length counted before the clip to the input when count_include_pad):
 * y = sum(window) / divisor, divisor = divisor_override when > 0. Backward:
 * dx[i] += dy[o] / divisor over each window. */
ampy_status ampy_cnn_avg_pool2d_fwd(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                    const ampy_cnn_window *win, int count_include_pad,
                                    int64_t divisor_override, const void *x, int dtype, void *y);
ampy_status ampy_cnn_avg_pool2d_bwd(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                    const ampy_cnn_window *win, int count_include_pad,
                                    int64_t divisor_override, const void *dy, int dtype,
                                    void *dx);

/* adaptive_avg_pool2d: output (oh, ow) averages rows [floor(oh H / OH),
 * ceil((oh + 1) H / OH)) and the same for columns: y = sum / kh / kw.
 * Backward: dx[i] += dy[o] / kh / kw. H, W >= 1 (OH, OW may be 0). */
ampy_status ampy_cnn_adaptive_avg_pool2d_fwd(int64_t P, int64_t H, int64_t W, int64_t OH,
                                             int64_t OW, const void *x, int dtype, void *y);
ampy_status ampy_cnn_adaptive_avg_pool2d_bwd(int64_t P, int64_t H, int64_t W, int64_t OH,
                                             int64_t OW, const void *dy, int dtype, void *dx);

/* ---- padding ---------------------------------------------------------------
 * Pads the last k (1..3) dims of P blocks: in dims in[0..k), pads lo[j],
 * hi[j] (a negative pad crops), out[j] = in[j] + lo[j] + hi[j] >= 0. Modes:
 * constant (value), reflect (|pads| < in[j]), replicate (in[j] >= 1),
 * circular (pads <= in[j]). Backward scatters dy back onto dx
 * (zeroed first) through the same index map, output order. */
typedef enum ampy_cnn_pad_mode {
    AMPY_CNN_PAD_CONSTANT = 0,
    AMPY_CNN_PAD_REFLECT = 1,
    AMPY_CNN_PAD_REPLICATE = 2,
    AMPY_CNN_PAD_CIRCULAR = 3,
} ampy_cnn_pad_mode;

ampy_status ampy_cnn_pad_fwd(int64_t P, int k, const int64_t *in, const int64_t *lo,
                             const int64_t *hi, int mode, double value, const void *x, int dtype,
                             void *y);
ampy_status ampy_cnn_pad_bwd(int64_t P, int k, const int64_t *in, const int64_t *lo,
                             const int64_t *hi, int mode, const void *dy, int dtype, void *dx);

/* ---- interpolation ---------------------------------------------------------
 * P planes (H, W) -> (OH, OW). scale_h / scale_w: the user's scale factors
 * (> 0), or 0 when the output size was given (then H/OH is used).
 * nearest: src = min(floor(dst * (1/scale or H/OH)), H - 1) in float32.
 * bilinear: torch's area_pixel_compute_source_index (align_corners or
 * half-pixel), two neighbours and lambdas per dim, y = (x00 l0w + x01 l1w)
 * l0h + (x10 l0w + x11 l1w) l1h. Backward scatters dy (nearest) or
 * dy * lh * lw (bilinear) onto dx (zeroed first). */
typedef enum ampy_cnn_interp_mode {
    AMPY_CNN_INTERP_NEAREST = 0,
    AMPY_CNN_INTERP_BILINEAR = 1,
} ampy_cnn_interp_mode;

/* mode may also carry the channel count C of (N, C, H, W) planes above its
 * low byte (0: not known, or too large to carry; then C = 1). The CPU
 * bilinear forward needs it to follow torch's channels-last kernel, which
 * torch takes for small outputs (OH + OW <= 128) and, on one thread, for
 * three channels: it weights the four neighbours with lambda products and
 * sums channels in vector blocks and a scalar tail in different orders. */
#define AMPY_CNN_INTERP_MODE(m) ((m) & 0xff)
#define AMPY_CNN_INTERP_CHANNELS(m) (((unsigned)(m)) >> 8)
#define AMPY_CNN_INTERP_WITH_CHANNELS(m, c) \
    ((int)((unsigned)(m) | ((c) > 0 && (c) < (1 << 23) ? (unsigned)(c) << 8 : 0u)))

ampy_status ampy_cnn_interp2d_fwd(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                  int mode, int align_corners, double scale_h, double scale_w,
                                  const void *x, int dtype, void *y);
ampy_status ampy_cnn_interp2d_bwd(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                  int mode, int align_corners, double scale_h, double scale_w,
                                  const void *dy, int dtype, void *dx);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_CNN_H */
