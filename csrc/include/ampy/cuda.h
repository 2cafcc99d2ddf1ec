/* ampy/cuda.h — the CUDA runtime of ampy._C_cuda: devices, the current stream
 * of each device, the caching device allocator, copies and casts.
 *
 * Built only where nvcc exists (cuda/runtime.cu, cuda/cast.cu). Nothing here
 * exposes a CUDA type: streams are `void *` (a cudaStream_t), so plain C code
 * (the binding, libampy) can include this header without the CUDA toolkit.
 *
 * Errors: every CUDA and cuBLAS call is checked; a failure returns
 * AMPY_ERR_RUNTIME (AMPY_ERR_NOMEM for an allocation) with a message that
 * names the call and CUDA's error string, e.g.
 *   "cudaMalloc(1073741824 bytes) on cuda:0: out of memory".
 * Kernel launches are checked with cudaGetLastError() right after the launch.
 * Messages live in the thread-local buffer of ampy_last_error() of the module
 * that holds this code (ampy._C_cuda has its own copy of status.c).
 *
 * Streams and ordering: each device has one current stream (a non-blocking
 * stream created on first use). Every kernel and copy of this module runs on
 * it, asynchronously; only copies to host memory synchronise. The allocator
 * hands a freed block back only to work on the same stream, so freeing a
 * tensor while kernels still read it is safe (stream order).
 */
#ifndef AMPY_CUDA_H
#define AMPY_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "ampy/attention.h"
#include "ampy/cnn.h"
#include "ampy/conv.h"
#include "ampy/dtype.h"
#include "ampy/gemm_cuda.h"
#include "ampy/index_cuda.h"
#include "ampy/optim.h"
#include "ampy/optim_adaptive.h"
#include "ampy/scaler.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- devices ---------------------------------------------------------------- */
/* Number of CUDA devices in *n. With no driver or no device this returns
 * AMPY_ERR_RUNTIME (message: CUDA's reason) and sets *n = 0; it never aborts
 * and may be called on machines without a GPU. */
ampy_status ampy_cuda_device_count(int *n);
ampy_status ampy_cuda_current_device(int *device);
/* Make `device` current for this thread (cudaSetDevice). */
ampy_status ampy_cuda_set_device(int device);
/* Wait for all work on the device's current stream (device < 0: current). */
ampy_status ampy_cuda_synchronize(int device);
/* The device's name (cudaDeviceProp.name) into buf[size], NUL-terminated. */
ampy_status ampy_cuda_device_name(int device, char *buf, size_t size);
/* Compute capability major/minor and multiprocessor count. */
ampy_status ampy_cuda_device_caps(int device, int *major, int *minor, int *sm_count);
/* The device's current stream (a cudaStream_t), created on first use; NULL
 * with an error set on failure. */
void *ampy_cuda_stream(int device);

/* ---- caching allocator --------------------------------------------------------
 * Sizes are rounded up to a size class (512 bytes below 1 MiB, 2 MiB above)
 * and freed blocks are kept per (device, stream) and reused for requests of
 * the same class or a block at most twice as large. cudaMalloc failure frees
 * the cache (after a device synchronise) and retries once. */
/* *out = nbytes of device memory on `device` (nbytes 0 gives a valid unique
 * pointer). Returns AMPY_OK, AMPY_ERR_NOMEM or AMPY_ERR_RUNTIME. */
ampy_status ampy_cuda_alloc(int device, size_t nbytes, void **out);
/* Return a block from ampy_cuda_alloc to the cache. `nbytes` and `device`
 * are those it was allocated with; NULL is ignored. Never fails (an unknown
 * pointer is ignored). Signature matches AmpyStorage.free_fn. */
void ampy_cuda_free(void *ptr, size_t nbytes, int device);

typedef struct ampy_cuda_mem_stats {
    int64_t allocated;     /* bytes in live blocks (rounded sizes)          */
    int64_t max_allocated; /* peak of `allocated` since start / last reset  */
    int64_t reserved;      /* bytes held from cudaMalloc (live + cached)    */
    int64_t max_reserved;
    int64_t num_allocs;    /* cudaMalloc calls made                         */
} ampy_cuda_mem_stats;
ampy_status ampy_cuda_memory_stats(int device, ampy_cuda_mem_stats *out);
void ampy_cuda_reset_peak_memory_stats(int device);
/* cudaFree every cached (unused) block of every device. */
ampy_status ampy_cuda_empty_cache(void);

/* ---- copies and casts --------------------------------------------------------- */
/* Copy nbytes between host (device == -1) and device memory, or within one
 * device, on the current stream of the device involved. Copies to the host
 * synchronise before returning; host-to-device copies return once the host
 * buffer may be reused. Returns AMPY_OK / AMPY_ERR_RUNTIME (also for two
 * different GPUs: peer copies are not supported). */
ampy_status ampy_cuda_memcpy(void *dst, int dst_device, const void *src, int src_device,
                             size_t nbytes);

/* Strided dtype conversion on one device: the CUDA twin of ampy_cast (cast.h),
 * element for element the same bits (the same elem.h conversions).
 *   ndim, shape      the shape of dst (<= AMPY_MAX_DIMS dims)
 *   src, src_strides device memory; ELEMENT strides, 0 broadcasts
 *   dst, dst_strides device memory; must not partially overlap src
 * 64-bit indexing throughout. Returns AMPY_OK, AMPY_ERR_DTYPE / AMPY_ERR_VALUE
 * (bad codes, ndim), AMPY_ERR_RUNTIME (launch failure). */
ampy_status ampy_cast_cuda(int device, int ndim, const int64_t *shape, const void *src,
                           const int64_t *src_strides, ampy_dtype src_dtype, void *dst,
                           const int64_t *dst_strides, ampy_dtype dst_dtype);

/* Fill n contiguous elements of dst with `value` converted once to dtype. */
ampy_status ampy_fill_cuda(int device, void *dst, ampy_dtype dtype, int64_t n, double value);

/* ---- element-wise ops, reductions, softmax (cuda/ewise.cu, cuda/reduce.cu) ---
 * The CUDA twins of ampy_ewise (ewise.h), ampy_reduce and ampy_softmax
 * (reduce.h), with the same arguments (byte strides) plus the device. The
 * operand structs are ewise.h's; they are declared here as incomplete types
 * so this header stays free of ewise.h.
 * ampy_ewise_cuda: bit k of host_scalars set means in[k] is a host value
 * (a Python number: data points at it in host memory, strides all 0); it
 * is passed to the kernel by value. Every other pointer is device memory. */
struct ampy_ewise_operand;
struct ampy_ewise_params;
ampy_status ampy_ewise_cuda(int device, int op, int ndim, const int64_t *shape,
                            const struct ampy_ewise_operand *in,
                            const struct ampy_ewise_operand *out, ampy_dtype compute,
                            const struct ampy_ewise_params *params, unsigned host_scalars);
ampy_status ampy_reduce_cuda(int device, int op, int ndim, const int64_t *shape, const void *in,
                             const int64_t *in_strides, ampy_dtype in_dtype, uint32_t reduce_mask,
                             void *out, const int64_t *out_strides, ampy_dtype out_dtype,
                             int64_t *idx_out, const int64_t *idx_strides, double correction);
ampy_status ampy_softmax_cuda(int device, int ndim, const int64_t *shape, const void *in,
                              const int64_t *in_strides, ampy_dtype in_dtype, int dim, void *out,
                              const int64_t *out_strides, ampy_dtype out_dtype, int log);
/* cumsum (op 0) / cumprod (op 1), as ampy_scan (reduce.h). */
ampy_status ampy_scan_cuda(int device, int op, int ndim, const int64_t *shape, const void *in,
                           const int64_t *in_strides, ampy_dtype in_dtype, int dim, void *out,
                           const int64_t *out_strides, ampy_dtype out_dtype);

/* ---- nn kernels and random fills (cuda/nn.cu) ----------------------------------
 * The CUDA twins of ampy/nn.h's functions and of ampy_fill_random (random.h):
 * the same arguments with the device first; all pointers are device memory.
 * Checks of device-resident indices (targets, embedding indices) are deferred:
 * a bad index is recorded on the device and raised at the next host
 * synchronisation (cuda/check.cu; ampy.cuda.set_sync_checks(True) raises at
 * the op instead). */
ampy_status ampy_nn_layer_norm_fwd_cuda(int device, int64_t M, int64_t N, const void *x,
                                        int x_dtype, const void *w, const void *b, int w_dtype,
                                        double eps, void *y, double *mean, double *rstd);
ampy_status ampy_nn_layer_norm_bwd_cuda(int device, int64_t M, int64_t N, const void *x,
                                        int x_dtype, const void *w, int w_dtype, const void *dy,
                                        const double *mean, const double *rstd, double eps,
                                        void *dx, void *dw, void *db);
ampy_status ampy_nn_cross_entropy_fwd_cuda(int device, int64_t M, int64_t C, const void *x,
                                           int x_dtype, const int64_t *target, const void *w,
                                           int64_t ignore_index, double ls, int reduction,
                                           void *out, double *lse);
ampy_status ampy_nn_cross_entropy_bwd_cuda(int device, int64_t M, int64_t C, const void *x,
                                           int x_dtype, const int64_t *target, const void *w,
                                           int64_t ignore_index, double ls, int reduction,
                                           const void *dout, const double *lse, void *dx);
ampy_status ampy_nn_nll_loss_fwd_cuda(int device, int64_t M, int64_t C, const void *x,
                                      int x_dtype, const int64_t *target, const void *w,
                                      int64_t ignore_index, int reduction, void *out);
ampy_status ampy_nn_nll_loss_bwd_cuda(int device, int64_t M, int64_t C, int x_dtype,
                                      const int64_t *target, const void *w, int64_t ignore_index,
                                      int reduction, const void *dout, void *dx);
ampy_status ampy_nn_embedding_fwd_cuda(int device, int64_t P, const int64_t *idx, int64_t V,
                                       int64_t D, const void *weight, int w_dtype, void *out);
ampy_status ampy_nn_embedding_bwd_cuda(int device, int64_t P, const int64_t *idx, int64_t V,
                                       int64_t D, const void *dy, int w_dtype, int64_t padding_idx,
                                       void *dweight);
ampy_status ampy_nn_mask_scale_cuda(int device, int64_t n, const void *x, int dtype,
                                    const uint8_t *mask, double scale, void *out);
ampy_status ampy_nn_mse_fwd_cuda(int device, int64_t n, const void *x, const void *y, int dtype,
                                 int reduction, void *out);
ampy_status ampy_nn_mse_bwd_cuda(int device, int64_t n, const void *x, const void *y, int dtype,
                                 int reduction, const void *dout, void *dx, void *dy);
ampy_status ampy_fill_random_cuda(int device, void *dst, ampy_dtype dtype, int64_t n, int kind,
                                  uint64_t seed, uint64_t offset, double a, double b);

/* rnn: the fused recurrent cells of ampy/rnn.h (cuda/rnn.cu) */
ampy_status ampy_rnn_cell_fwd_cuda(int device, int mode, int64_t B, int64_t H, int dtype,
                                   const void *gx, const void *gh, const void *hx, const void *cx,
                                   void *hy, void *cy, void *ws);
ampy_status ampy_rnn_cell_bwd_cuda(int device, int mode, int64_t B, int64_t H, int dtype,
                                   const void *ws, const void *hx, const void *cx,
                                   const void *dhy, const void *dcy, void *dgx, void *dgh,
                                   void *dhx, void *dcx);
/* ---- fused attention (cuda/attention.cu) --------------------------------------
 * The CUDA twins of ampy_attention_fwd/bwd (attention.h): the problem struct in
 * host memory, its pointers and out/lse/dq/dk/dv in device memory. */
ampy_status ampy_attention_fwd_cuda(int device, const ampy_attn_problem *p, void *out, void *lse);
ampy_status ampy_attention_bwd_cuda(int device, const ampy_attn_problem *p, const void *out,
                                    const void *dout, const void *lse, void *dq, void *dk,
                                    void *dv);

/* ---- the table ampy._C uses (through a PyCapsule named "ampy._C_cuda.api") ---
 * ampy._C never links CUDA: it calls the runtime through these pointers. */
#define AMPY_CUDA_API_VERSION 5
typedef struct ampy_cuda_api {
    int version; /* AMPY_CUDA_API_VERSION */
    ampy_status (*alloc)(int device, size_t nbytes, void **out);
    void (*free)(void *ptr, size_t nbytes, int device);
    ampy_status (*memcpy)(void *dst, int dst_device, const void *src, int src_device,
                          size_t nbytes);
    ampy_status (*cast)(int device, int ndim, const int64_t *shape, const void *src,
                        const int64_t *src_strides, ampy_dtype src_dtype, void *dst,
                        const int64_t *dst_strides, ampy_dtype dst_dtype);
    ampy_status (*synchronize)(int device);
    const char *(*last_error)(void); /* the message of the module's last failure */
    /* version 2 */
    ampy_status (*ewise)(int device, int op, int ndim, const int64_t *shape,
                         const struct ampy_ewise_operand *in, const struct ampy_ewise_operand *out,
                         ampy_dtype compute, const struct ampy_ewise_params *params,
                         unsigned host_scalars);
    ampy_status (*reduce)(int device, int op, int ndim, const int64_t *shape, const void *in,
                          const int64_t *in_strides, ampy_dtype in_dtype, uint32_t reduce_mask,
                          void *out, const int64_t *out_strides, ampy_dtype out_dtype,
                          int64_t *idx_out, const int64_t *idx_strides, double correction);
    ampy_status (*softmax)(int device, int ndim, const int64_t *shape, const void *in,
                           const int64_t *in_strides, ampy_dtype in_dtype, int dim, void *out,
                           const int64_t *out_strides, ampy_dtype out_dtype, int log);
    ampy_status (*nn_layer_norm_fwd)(int, int64_t, int64_t, const void *, int, const void *,
                                     const void *, int, double, void *, double *, double *);
    ampy_status (*nn_layer_norm_bwd)(int, int64_t, int64_t, const void *, int, const void *, int,
                                     const void *, const double *, const double *, double, void *,
                                     void *, void *);
    ampy_status (*nn_cross_entropy_fwd)(int, int64_t, int64_t, const void *, int, const int64_t *,
                                        const void *, int64_t, double, int, void *, double *);
    ampy_status (*nn_cross_entropy_bwd)(int, int64_t, int64_t, const void *, int, const int64_t *,
                                        const void *, int64_t, double, int, const void *,
                                        const double *, void *);
    ampy_status (*nn_nll_loss_fwd)(int, int64_t, int64_t, const void *, int, const int64_t *,
                                   const void *, int64_t, int, void *);
    ampy_status (*nn_nll_loss_bwd)(int, int64_t, int64_t, int, const int64_t *, const void *,
                                   int64_t, int, const void *, void *);
    ampy_status (*nn_embedding_fwd)(int, int64_t, const int64_t *, int64_t, int64_t, const void *,
                                    int, void *);
    ampy_status (*nn_embedding_bwd)(int, int64_t, const int64_t *, int64_t, int64_t, const void *,
                                    int, int64_t, void *);
    ampy_status (*nn_mask_scale)(int, int64_t, const void *, int, const uint8_t *, double,
                                 void *);
    ampy_status (*fill_random)(int, void *, ampy_dtype, int64_t, int, uint64_t, uint64_t, double,
                               double);
    ampy_status (*nn_mse_fwd)(int, int64_t, const void *, const void *, int, int, void *);
    ampy_status (*nn_mse_bwd)(int, int64_t, const void *, const void *, int, int, const void *,
                              void *, void *);
    ampy_status (*scan)(int, int, int, const int64_t *, const void *, const int64_t *, ampy_dtype,
                        int, void *, const int64_t *, ampy_dtype);
    /* version 3: GEMM, advanced indexing and the AMP kernels (gemm_cuda.h,
     * index_cuda.h, amp_cuda.h), and fills; the _C bindings of those ops
     * (csrc/py/{gemm,index,finite,scaler,optim}_py.c) call them for CUDA tensors. */
    ampy_status (*fill)(int device, void *dst, ampy_dtype dtype, int64_t n, double value);
    ampy_status (*gemm)(int device, const ampy_gemm_cuda_args *g);
    ampy_status (*index_gather)(int device, const ampy_index_cuda_spec *s, const void *src,
                                void *out);
    ampy_status (*index_scatter)(int device, const ampy_index_cuda_spec *s, void *dst,
                                 const void *values, const int64_t *vstrides, int dtype,
                                 int accumulate, int order);
    ampy_status (*nonzero_count)(int device, int ndim, const int64_t *shape,
                                 const int64_t *strides, const uint8_t *mask, int64_t *scratch,
                                 int64_t *count);
    ampy_status (*nonzero_fill)(int device, int ndim, const int64_t *shape,
                                const int64_t *strides, const uint8_t *mask,
                                const int64_t *scratch, int64_t *out);
    ampy_status (*finite_check_unscale)(int device, int64_t ntensors, void *const *data,
                                        const int64_t *numel, const int *dtype, float *found_inf,
                                        const float *inv_scale);
    ampy_status (*scaler_update)(int device, float *scale, int32_t *growth_tracker,
                                 int32_t *hysteresis_tracker, const float *found_inf,
                                 const ampy_scaler_options *o);
    ampy_status (*adam_step)(int device, int64_t n, const ampy_adam_tensor *t,
                             const ampy_adam_options *o, const float *inv_scale,
                             const float *found_inf);
    ampy_status (*sgd_step)(int device, int64_t n, const ampy_sgd_tensor *t,
                            const ampy_sgd_options *o, const float *inv_scale,
                            const float *found_inf);
    /* train */
    /* version 4: RMSprop / Adagrad / Adadelta (optim_adaptive.h) */
    ampy_status (*adaptive_step)(int device, int64_t n, const ampy_adaptive_tensor *t,
                                 const ampy_adaptive_options *o, const float *inv_scale,
                                 const float *found_inf);
    /* conv: the convolution kernels of cuda/conv.cu (contracts as
     * conv.h's CPU functions, plus the device) */
    ampy_status (*conv2d_forward)(int device, const ampy_conv2d_geom *g,
                                       ampy_dtype dtype, const void *x, const int64_t *xs,
                                       const void *w, const void *bias, void *y);
    ampy_status (*conv2d_backward_input)(int device, const ampy_conv2d_geom *g,
                                              ampy_dtype dtype, const void *dy, const void *w,
                                              const void *bias, void *dx);
    ampy_status (*conv2d_backward_weight)(int device, const ampy_conv2d_geom *g,
                                               ampy_dtype dtype, const void *x,
                                               const int64_t *xs, const void *dy, void *dw);
    ampy_status (*conv_backward_bias)(int device, int64_t N, int64_t O, int64_t P,
                                           ampy_dtype dtype, const void *dy, void *db);
    /* rnn */
    ampy_status (*rnn_cell_fwd)(int device, int mode, int64_t B, int64_t H, int dtype,
                                const void *gx, const void *gh, const void *hx, const void *cx,
                                void *hy, void *cy, void *ws);
    ampy_status (*rnn_cell_bwd)(int device, int mode, int64_t B, int64_t H, int dtype,
                                const void *ws, const void *hx, const void *cx, const void *dhy,
                                const void *dcy, void *dgx, void *dgh, void *dhx, void *dcx);
    /* attn: fused attention (cuda/attention.cu) */
    ampy_status (*attention_fwd)(int device, const ampy_attn_problem *p, void *out, void *lse);
    ampy_status (*attention_bwd)(int device, const ampy_attn_problem *p, const void *out,
                                 const void *dout, const void *lse, void *dq, void *dk, void *dv);
    /* utils: clip_grad_norm_'s multi-tensor total norm and scale (clip.h),
     * and the float32 GEMM math mode (1: TF32 tensor cores, 0: full
     * float32; gemm_cuda.h) */
    ampy_status (*clip_total_norm)(int device, int64_t ntensors, const void *const *data,
                                   const int64_t *numel, const int *dtype, double p,
                                   int out_dtype, void *out);
    ampy_status (*clip_scale)(int device, int64_t ntensors, void *const *data,
                              const int64_t *numel, const int *dtype, const void *coef,
                              int coef_dtype);
    void (*set_matmul_tf32)(int allow);
    int (*get_matmul_tf32)(void);
    /* cnn, sort: the norms, pools, padding and interpolation of
     * cuda/cnn_*.cu (cnn_cuda.h), the row sorts of cuda/sort.cu
     * (sort_cuda.h) and the sampler of cuda/multinomial.cu
     * (multinomial_cuda.h); contracts as cnn.h's, sort.h's and
     * multinomial.h's, plus the device */
    ampy_status (*cnn_batch_norm_fwd)(int device, int64_t N, int64_t C, int64_t S, const void *x,
                                      int x_dtype, const void *w, const void *b, void *run_mean,
                                      void *run_var, int p_dtype, int training, double momentum,
                                      double eps, void *y, double *save_mean,
                                      double *save_invstd);
    ampy_status (*cnn_batch_norm_bwd)(int device, int64_t N, int64_t C, int64_t S, const void *x,
                                      int x_dtype, const void *dy, const void *w, int p_dtype,
                                      int training, const double *save_mean,
                                      const double *save_invstd, void *dx, void *dw, void *db);
    ampy_status (*cnn_group_norm_fwd)(int device, int64_t N, int64_t C, int64_t S, int64_t G,
                                      const void *x, int x_dtype, const void *w, const void *b,
                                      int p_dtype, double eps, void *y, double *mean,
                                      double *rstd);
    ampy_status (*cnn_group_norm_bwd)(int device, int64_t N, int64_t C, int64_t S, int64_t G,
                                      const void *x, int x_dtype, const void *dy, const void *w,
                                      int p_dtype, const double *mean, const double *rstd,
                                      void *dx, void *dw, void *db);
    ampy_status (*cnn_max_pool2d_fwd)(int device, int64_t P, int64_t H, int64_t W, int64_t OH,
                                      int64_t OW, const ampy_cnn_window *win, const void *x,
                                      int dtype, void *y, int64_t *idx);
    ampy_status (*cnn_max_pool2d_bwd)(int device, int64_t P, int64_t H, int64_t W, int64_t OH,
                                      int64_t OW, const int64_t *idx, const void *dy, int dtype,
                                      void *dx);
    ampy_status (*cnn_avg_pool2d_fwd)(int device, int64_t P, int64_t H, int64_t W, int64_t OH,
                                      int64_t OW, const ampy_cnn_window *win,
                                      int count_include_pad, int64_t divisor_override,
                                      const void *x, int dtype, void *y);
    ampy_status (*cnn_avg_pool2d_bwd)(int device, int64_t P, int64_t H, int64_t W, int64_t OH,
                                      int64_t OW, const ampy_cnn_window *win,
                                      int count_include_pad, int64_t divisor_override,
                                      const void *dy, int dtype, void *dx);
    ampy_status (*cnn_adaptive_avg_pool2d_fwd)(int device, int64_t P, int64_t H, int64_t W,
                                               int64_t OH, int64_t OW, const void *x, int dtype,
                                               void *y);
    ampy_status (*cnn_adaptive_avg_pool2d_bwd)(int device, int64_t P, int64_t H, int64_t W,
                                               int64_t OH, int64_t OW, const void *dy, int dtype,
                                               void *dx);
    ampy_status (*cnn_pad_fwd)(int device, int64_t P, int k, const int64_t *in, const int64_t *lo,
                               const int64_t *hi, int mode, double value, const void *x,
                               int dtype, void *y);
    ampy_status (*cnn_pad_bwd)(int device, int64_t P, int k, const int64_t *in, const int64_t *lo,
                               const int64_t *hi, int mode, const void *dy, int dtype, void *dx);
    ampy_status (*cnn_interp2d_fwd)(int device, int64_t P, int64_t H, int64_t W, int64_t OH,
                                    int64_t OW, int mode, int align_corners, double scale_h,
                                    double scale_w, const void *x, int dtype, void *y);
    ampy_status (*cnn_interp2d_bwd)(int device, int64_t P, int64_t H, int64_t W, int64_t OH,
                                    int64_t OW, int mode, int align_corners, double scale_h,
                                    double scale_w, const void *dy, int dtype, void *dx);
    ampy_status (*sort)(int device, ampy_dtype dtype, int64_t rows, int64_t n, const void *in,
                        int descending, void *values, int64_t *indices);
    ampy_status (*topk)(int device, ampy_dtype dtype, int64_t rows, int64_t n, int64_t k,
                        int largest, const void *in, void *values, int64_t *indices);
    ampy_status (*multinomial)(int device, int64_t rows, int64_t ncat, const double *p,
                               int64_t ns, int replacement, const double *u, int64_t *out);
} ampy_cuda_api;

#ifdef __cplusplus
}
#endif
#endif /* AMPY_CUDA_H */
