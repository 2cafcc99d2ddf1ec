/* ampy/amp_cuda.h — the AMP kernels on CUDA devices: the _cuda twins of
 * finite.h, scaler.h and optim.h (same structs, same per-element math from
 * elem.h, same results bit for bit on every non-NaN input).
 *
 * Differences from the CPU entry points, all for the sake of never
 * synchronising with the host:
 *   - every pointer (tensor data, found_inf, inv_scale, scale, trackers,
 *     step counts) is DEVICE memory of `device`;
 *   - found_inf and inv_scale are read by the kernels, never by the host: a
 *     skipped optimizer step is a kernel that returns early, so there is no
 *     `stepped` output (it would need a sync; read found_inf instead);
 *   - work is queued on the device's current stream (ampy_cuda_stream) and the
 *     call returns before it finishes; errors found later surface at the next
 *     synchronising call.
 * Validation happens on the host before anything is queued (AMPY_ERR_VALUE /
 * AMPY_ERR_DTYPE, nothing written). Launch failures return AMPY_ERR_RUNTIME.
 *
 * Multi-tensor apply (NVIDIA apex csrc/multi_tensor_apply.cuh): tensors are
 * cut into chunks of AMPY_MTA_CHUNK elements; one block of AMPY_MTA_BLOCK
 * threads handles one chunk, each thread AMPY_MTA_ILP elements in flight; the
 * tensor addresses and the block -> (tensor, chunk) map travel in the kernel
 * parameters (< 4 KiB), so one launch covers up to a hundred tensors and a
 * list of any length is a few launches, never one per tensor.
 *
 * ampy._C's bindings (csrc/py/{finite,scaler,optim}_py.c) check the
 * arguments as for the CPU and call these through the ampy_cuda_api table.
 */
#ifndef AMPY_AMP_CUDA_H
#define AMPY_AMP_CUDA_H

#include <stdint.h>

#include "ampy/optim.h"
#include "ampy/scaler.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMPY_MTA_CHUNK 65536
#define AMPY_MTA_BLOCK 512
#define AMPY_MTA_ILP 4

/* ampy_finite_check_unscale on the device.
 *   data[i], numel[i], dtype[i]   as in finite.h (device pointers; host arrays)
 *   found_inf  in,out device float: set to 1.0f on a non-finite stored value
 *   inv_scale  in     device float; 1.0f: check only, nothing written
 * Also flags values that become inf only after unscaling. float32, float16
 * and bfloat16 grads in one call. */
ampy_status ampy_finite_check_unscale_cuda(int device, int64_t ntensors, void *const *data,
                                           const int64_t *numel, const int *dtype,
                                           float *found_inf, const float *inv_scale);

/* ampy_scaler_update on the device: one <<<1,1>>> kernel applying elem.h's
 * ampy_update_scale_elem; scale, growth_tracker, hysteresis_tracker (may be
 * NULL when o->hysteresis == 1) and found_inf are device pointers. */
ampy_status ampy_scaler_update_cuda(int device, float *scale, int32_t *growth_tracker,
                                    int32_t *hysteresis_tracker, const float *found_inf,
                                    const ampy_scaler_options *o);

/* ampy_optim_adam_step on the device. t[i]'s pointers (param, master, grad,
 * moments, step) are device memory; the array t itself is host memory.
 * inv_scale / found_inf: device floats or NULL. The per-tensor step count is
 * read on the device, the bias corrections computed there in double, and the
 * count incremented by a second kernel only when found_inf is 0. */
ampy_status ampy_optim_adam_step_cuda(int device, int64_t n, const ampy_adam_tensor *t,
                                      const ampy_adam_options *o, const float *inv_scale,
                                      const float *found_inf);

/* ampy_optim_sgd_step on the device; pointers as for Adam. */
ampy_status ampy_optim_sgd_step_cuda(int device, int64_t n, const ampy_sgd_tensor *t,
                                     const ampy_sgd_options *o, const float *inv_scale,
                                     const float *found_inf);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_AMP_CUDA_H */
