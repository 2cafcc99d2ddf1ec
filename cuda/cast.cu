/* cast.cu — dtype conversion and fills on the device (ampy_cast_cuda,
 * ampy_fill_cuda in ampy/cuda.h).
 *
 * The rule is csrc/cast.c's, element for element: the source is loaded into
 * its kind (float for float32/float16/bfloat16, double for float64, int64
 * for the integer types and bool) and stored through the destination's
 * converter from that kind, so every value is rounded exactly once, by the
 * same elem.h functions the CPU runs: the bits match the CPU for all inputs.
 *
 * Two kernels: a contiguous one for the four AMP conversions and same-dtype
 * copies (templated, vector-friendly), and a generic N-d strided one with
 * 64-bit index math for everything else (broadcasting, transposes).
 */
#include "common.cuh"

/* ---- stores from each kind -------------------------------------------------- */
AMPY_ELEM void st_from_f(char *p, int dt, float v) { ampy_st_f(p, dt, 0, v); }

AMPY_ELEM void st_from_d(char *p, int dt, double v) { ampy_st_d(p, dt, 0, v); }

AMPY_ELEM void st_from_i(char *p, int dt, int64_t v) { ampy_st_i(p, dt, 0, v); }

/* One element from src (dtype sdt) to dst (dtype ddt), through sdt's kind. */
AMPY_ELEM void cast_one(const char *s, int sdt, char *d, int ddt)
{
    switch (sdt) {
    case AMPY_FLOAT32: st_from_f(d, ddt, *(const float *)s); break;
    case AMPY_FLOAT16: st_from_f(d, ddt, ampy_f16_to_f32(*(const uint16_t *)s)); break;
    case AMPY_BFLOAT16: st_from_f(d, ddt, ampy_bf16_to_f32(*(const uint16_t *)s)); break;
    case AMPY_FLOAT64: st_from_d(d, ddt, *(const double *)s); break;
    case AMPY_INT64: st_from_i(d, ddt, *(const int64_t *)s); break;
    case AMPY_INT32: st_from_i(d, ddt, *(const int32_t *)s); break;
    case AMPY_UINT8: st_from_i(d, ddt, *(const uint8_t *)s); break;
    default: st_from_i(d, ddt, *(const uint8_t *)s != 0); break;
    }
}

__global__ void cast_strided_kernel(ampy_cuda_walk w, int64_t n, const char *src, int sdt,
                                    int64_t ssz, char *dst, int ddt, int64_t dsz)
{
    AMPY_GRID_STRIDE(i, n)
    {
        int64_t off[AMPY_CUDA_MAX_OPERANDS];
        ampy_walk_offsets(w, i, off);
        cast_one(src + off[0] * ssz, sdt, dst + off[1] * dsz, ddt);
    }
}

/* Contiguous AMP conversions: To/From are the storage types. */
template <int SDT, int DDT>
__global__ void cast_contig_kernel(const void *__restrict__ src, void *__restrict__ dst, int64_t n)
{
    AMPY_GRID_STRIDE(i, n)
    {
        if (SDT == AMPY_FLOAT32 && DDT == AMPY_FLOAT16)
            ((uint16_t *)dst)[i] = ampy_f32_to_f16(((const float *)src)[i]);
        else if (SDT == AMPY_FLOAT32 && DDT == AMPY_BFLOAT16)
            ((uint16_t *)dst)[i] = ampy_f32_to_bf16(((const float *)src)[i]);
        else if (SDT == AMPY_FLOAT16 && DDT == AMPY_FLOAT32)
            ((float *)dst)[i] = ampy_f16_to_f32(((const uint16_t *)src)[i]);
        else
            ((float *)dst)[i] = ampy_bf16_to_f32(((const uint16_t *)src)[i]);
    }
}

static int is_contig(int ndim, const int64_t *shape, const int64_t *strides)
{
    int64_t expect = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] != 1 && strides[d] != expect)
            return 0;
        expect *= shape[d];
    }
    return 1;
}

extern "C" ampy_status ampy_cast_cuda(int device, int ndim, const int64_t *shape, const void *src,
                                      const int64_t *src_strides, ampy_dtype sdt, void *dst,
                                      const int64_t *dst_strides, ampy_dtype ddt)
{
    if (!ampy_dtype_valid(sdt) || !ampy_dtype_valid(ddt))
        return ampy_error(AMPY_ERR_DTYPE, "cast (cuda): invalid dtype code %d -> %d", (int)sdt,
                          (int)ddt);
    if (ndim < 0 || ndim > AMPY_MAX_DIMS)
        return ampy_error(AMPY_ERR_VALUE, "cast (cuda): bad ndim %d", ndim);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return ampy_error(AMPY_ERR_VALUE, "cast (cuda): negative dimension");
        n *= shape[d];
    }
    if (n == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    const int contig = is_contig(ndim, shape, src_strides) && is_contig(ndim, shape, dst_strides);
    const unsigned grid = ampy_cuda_blocks(n, AMPY_CUDA_THREADS);
    if (contig && sdt == ddt) {
        AMPY_CUDA_TRY(cudaMemcpyAsync(dst, src, (size_t)n * ampy_dtype_size(sdt),
                                      cudaMemcpyDeviceToDevice, st),
                      "cudaMemcpyAsync (cast)");
        return AMPY_OK;
    }
    if (contig && ((sdt == AMPY_FLOAT32 && ampy_dtype_is_half(ddt)) ||
                   (ddt == AMPY_FLOAT32 && ampy_dtype_is_half(sdt)))) {
        if (sdt == AMPY_FLOAT32 && ddt == AMPY_FLOAT16)
            cast_contig_kernel<AMPY_FLOAT32, AMPY_FLOAT16><<<grid, AMPY_CUDA_THREADS, 0, st>>>(src, dst, n);
        else if (sdt == AMPY_FLOAT32)
            cast_contig_kernel<AMPY_FLOAT32, AMPY_BFLOAT16><<<grid, AMPY_CUDA_THREADS, 0, st>>>(src, dst, n);
        else if (sdt == AMPY_FLOAT16)
            cast_contig_kernel<AMPY_FLOAT16, AMPY_FLOAT32><<<grid, AMPY_CUDA_THREADS, 0, st>>>(src, dst, n);
        else
            cast_contig_kernel<AMPY_BFLOAT16, AMPY_FLOAT32><<<grid, AMPY_CUDA_THREADS, 0, st>>>(src, dst, n);
        AMPY_CUDA_LAUNCHED("cast_contig_kernel");
        return AMPY_OK;
    }
    ampy_cuda_walk w;
    const int64_t *strides[2] = {src_strides, dst_strides};
    ampy_walk_init(&w, ndim, shape, 2, strides);
    cast_strided_kernel<<<grid, AMPY_CUDA_THREADS, 0, st>>>(
        w, n, (const char *)src, sdt, (int64_t)ampy_dtype_size(sdt), (char *)dst, ddt,
        (int64_t)ampy_dtype_size(ddt));
    AMPY_CUDA_LAUNCHED("cast_strided_kernel");
    return AMPY_OK;
}

__global__ void fill_kernel(char *dst, int dt, int64_t isz, int64_t n, double v)
{
    AMPY_GRID_STRIDE(i, n) { st_from_d(dst + i * isz, dt, v); }
}

extern "C" ampy_status ampy_fill_cuda(int device, void *dst, ampy_dtype dtype, int64_t n,
                                      double value)
{
    if (!ampy_dtype_valid(dtype) || n < 0)
        return ampy_error(AMPY_ERR_VALUE, "fill (cuda): bad dtype %d or size %lld", (int)dtype,
                          (long long)n);
    if (n == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    if (value == 0.0 && !(ampy_f64_bits(value) >> 63)) {
        AMPY_CUDA_TRY(cudaMemsetAsync(dst, 0, (size_t)n * ampy_dtype_size(dtype), st),
                      "cudaMemsetAsync");
        return AMPY_OK;
    }
    fill_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        (char *)dst, dtype, (int64_t)ampy_dtype_size(dtype), n, value);
    AMPY_CUDA_LAUNCHED("fill_kernel");
    return AMPY_OK;
}
