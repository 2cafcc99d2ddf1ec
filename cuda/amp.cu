/* amp.cu — multi-tensor non-finite check + unscale, loss-scale update and
 * fused SGD / Adam(W) with fp32 master weights on CUDA (ampy/amp_cuda.h).
 *
 * The per-element math is elem.h's (ampy_adam_elem, ampy_sgd_elem,
 * ampy_update_scale_elem and the half conversions), compiled with
 * --fmad=false so nvcc contracts nothing the CPU does not: the GPU gives the
 * CPU's bits. The multi-tensor machinery follows apex's multi_tensor_apply:
 * metadata in kernel parameters, chunk 65536, block 512, ILP 4.
 */
#include <math.h>

#include "mta.cuh"

/* ---- non-finite check + unscale ------------------------------------------- */
typedef MtaMeta<1, 64, 320> UnscaleMeta;

template <int DT>
static __device__ __forceinline__ bool unscale_range(void *p, int64_t base, int64_t end, float inv,
                                                     bool write)
{
    bool bad = false;
    for (int64_t i0 = base + threadIdx.x; i0 < end; i0 += (int64_t)BLOCK * ILP) {
        float v[ILP];
        uint32_t raw[ILP];
#pragma unroll
        for (int j = 0; j < ILP; j++) {
            int64_t i = i0 + (int64_t)j * BLOCK;
            raw[j] = 0;
            if (i < end)
                raw[j] = DT == AMPY_FLOAT32 ? ampy_f32_bits(((const float *)p)[i])
                                            : ((const uint16_t *)p)[i];
        }
#pragma unroll
        for (int j = 0; j < ILP; j++) {
            int64_t i = i0 + (int64_t)j * BLOCK;
            if (i >= end)
                continue;
            uint32_t out = raw[j];
            if (write) {
                v[j] = DT == AMPY_FLOAT32   ? ampy_bits_f32(raw[j])
                       : DT == AMPY_FLOAT16 ? ampy_f16_to_f32((uint16_t)raw[j])
                                            : ampy_bf16_to_f32((uint16_t)raw[j]);
                float y = v[j] * inv;
                out = DT == AMPY_FLOAT32   ? ampy_f32_bits(y)
                      : DT == AMPY_FLOAT16 ? ampy_f32_to_f16(y)
                                           : ampy_f32_to_bf16(y);
                if (DT == AMPY_FLOAT32)
                    ((float *)p)[i] = y;
                else
                    ((uint16_t *)p)[i] = (uint16_t)out;
            }
            bad |= DT == AMPY_FLOAT32   ? !ampy_f32_isfinite(ampy_bits_f32(out))
                   : DT == AMPY_FLOAT16 ? !ampy_f16_isfinite_bits((uint16_t)out)
                                        : !ampy_bf16_isfinite_bits((uint16_t)out);
        }
    }
    return bad;
}

__global__ void __launch_bounds__(BLOCK) unscale_kernel(UnscaleMeta m, float *found_inf,
                                                        const float *inv_scale)
{
    const int t = m.block_tensor[blockIdx.x];
    const int64_t base = (int64_t)m.block_chunk[blockIdx.x] * CHUNK;
    const int64_t end = min(m.numel[t], base + (int64_t)CHUNK);
    const float inv = *inv_scale;
    const bool write = inv != 1.0f;
    bool bad;
    switch (m.dt[0][t]) {
    case AMPY_FLOAT16: bad = unscale_range<AMPY_FLOAT16>(m.addr[0][t], base, end, inv, write); break;
    case AMPY_BFLOAT16: bad = unscale_range<AMPY_BFLOAT16>(m.addr[0][t], base, end, inv, write); break;
    default: bad = unscale_range<AMPY_FLOAT32>(m.addr[0][t], base, end, inv, write); break;
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0)
        *found_inf = 1.0f; /* every writer stores the same value */
}

extern "C" ampy_status ampy_finite_check_unscale_cuda(int device, int64_t n, void *const *data,
                                                      const int64_t *numel, const int *dtype,
                                                      float *found_inf, const float *inv_scale)
{
    if (n < 0 || (n > 0 && (!data || !numel || !dtype)) || !found_inf || !inv_scale)
        return ampy_error(AMPY_ERR_VALUE, "non_finite_check_and_unscale_ (cuda): NULL argument");
    ampy_status s = check_numel(n, numel);
    if (s != AMPY_OK)
        return s;
    for (int64_t i = 0; i < n; i++) {
        if (!float_dt(dtype[i]))
            return ampy_error(AMPY_ERR_DTYPE, "non_finite_check_and_unscale_: tensor %lld has "
                              "dtype %s; expected float32, float16 or bfloat16", (long long)i,
                              ampy_dtype_name(dtype[i]));
        if (numel[i] > 0 && !data[i])
            return ampy_error(AMPY_ERR_VALUE, "non_finite_check_and_unscale_: NULL tensor %lld",
                              (long long)i);
    }
    AMPY_CUDA_ENTER(device, st);
    auto fill = [&](UnscaleMeta &m, int slot, int64_t i) {
        m.addr[0][slot] = data[i];
        m.dt[0][slot] = (uint8_t)dtype[i];
    };
    auto launch = [&](const UnscaleMeta &m, int nb) -> ampy_status {
        unscale_kernel<<<nb, BLOCK, 0, st>>>(m, found_inf, inv_scale);
        AMPY_CUDA_LAUNCHED("unscale_kernel");
        return AMPY_OK;
    };
    return mta_run<UnscaleMeta>(n, numel, fill, launch);
}

/* ---- loss-scale update -------------------------------------------------------- */
__global__ void update_scale_kernel(float *scale, int32_t *tracker, int32_t *hyst,
                                    const float *found_inf, ampy_scale_rule r)
{
    ampy_update_scale_elem(scale, tracker, hyst, *found_inf, &r);
}

extern "C" ampy_status ampy_scaler_update_cuda(int device, float *scale, int32_t *growth_tracker,
                                               int32_t *hysteresis_tracker,
                                               const float *found_inf,
                                               const ampy_scaler_options *o)
{
    if (!scale || !growth_tracker || !found_inf || !o)
        return ampy_error(AMPY_ERR_VALUE, "update_scale (cuda): NULL argument");
    if (o->hysteresis < 1 || (o->hysteresis > 1 && !hysteresis_tracker))
        return ampy_error(AMPY_ERR_VALUE, "update_scale: hysteresis=%d needs hysteresis >= 1 and "
                          "a hysteresis_tracker when > 1", (int)o->hysteresis);
    if ((o->has_min_scale && !(ampy_f64_isfinite(o->min_scale) && o->min_scale >= 0.0)) ||
        (o->has_max_scale && !(ampy_f64_isfinite(o->max_scale) && o->max_scale > 0.0)) ||
        (o->has_min_scale && o->has_max_scale && o->min_scale > o->max_scale))
        return ampy_error(AMPY_ERR_VALUE, "update_scale: bad min_scale / max_scale");
    AMPY_CUDA_ENTER(device, st);
    ampy_scale_rule r = {o->growth_factor, o->backoff_factor, o->growth_interval, o->hysteresis,
                         o->has_min_scale, o->has_max_scale, o->min_scale, o->max_scale};
    update_scale_kernel<<<1, 1, 0, st>>>(scale, growth_tracker,
                                         o->hysteresis > 1 ? hysteresis_tracker : NULL, found_inf,
                                         r);
    AMPY_CUDA_LAUNCHED("update_scale_kernel");
    return AMPY_OK;
}
