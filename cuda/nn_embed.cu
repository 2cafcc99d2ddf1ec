/* nn_embed.cu — embedding forward/backward, dropout's mask-and-scale and the
 * Philox fills of ampy_fill_random (random.h) on the device, the twins of
 * csrc/nn_misc.c and csrc/random.c (see nn.cu for the shared conventions).
 * Exact matches with the CPU: embedding forward/backward (the backward adds
 * rows per column in index order after a stable radix sort of the indices on
 * the device, no host round trip), mask-and-scale and every random fill.
 * Embedding indices are a deferred device-side check (common.cuh): the
 * forward records "index out of range in self" (raised at the next
 * synchronisation, or at the op in sync-checks mode) and writes zero rows for
 * bad indices; the backward skips them. */
#include <cub/device/device_radix_sort.cuh>

#include "common.cuh"
#include "nn_common.cuh"

namespace {

/* ---- embedding -------------------------------------------------------------------- */
template <typename E>
__global__ void emb_fwd_kernel(int64_t P, const int64_t *idx, int64_t V, int64_t D, const E *w,
                               E *out)
{
    AMPY_GRID_STRIDE(k, P * D)
    {
        const int64_t i = k / D, j = k - i * D, r = idx[i];
        out[k] = r >= 0 && r < V ? w[r * D + j] : (E)0; /* bad: reported by the check */
    }
}

/* sort keys: the row, or V (sorted last, skipped) for padding_idx and bad rows */
__global__ void emb_keys_kernel(int64_t P, const int64_t *idx, int64_t V, int64_t padding_idx,
                                uint64_t *keys, int64_t *pos)
{
    AMPY_GRID_STRIDE(i, P)
    {
        const int64_t r = idx[i];
        keys[i] = r >= 0 && r < V && r != padding_idx ? (uint64_t)r : (uint64_t)V;
        pos[i] = i;
    }
}

/* Thread (sorted position q, column j), working only at the first position
 * of a segment of equal rows: the rows of dy of that segment in increasing
 * position (the radix sort is stable), added from 0 in float (double for
 * float64) and rounded once into dweight[row]: the CPU's order of additions
 * for every element, so the same bits. */
template <typename A>
__global__ void emb_bwd_kernel(int64_t P, int64_t V, int64_t D, const uint64_t *keys,
                               const int64_t *pos, const void *dy, int dt, void *dweight)
{
    AMPY_GRID_STRIDE(t, P * D)
    {
        const int64_t q = t / D, j = t - q * D;
        const uint64_t row = keys[q];
        if (row == (uint64_t)V || (q > 0 && keys[q - 1] == row))
            continue;
        A acc = (A)0;
        for (int64_t k = q; k < P && keys[k] == row; k++)
            acc += (A)ampy_nn_load1(dy, dt, pos[k] * D + j);
        ampy_nn_store1(dweight, dt, (int64_t)row * D + j, (double)acc);
    }
}

/* ---- dropout ------------------------------------------------------------------------ */
__global__ void mask_scale_kernel(int64_t n, const void *x, int dt, const uint8_t *mask, double s,
                                  void *out)
{
    AMPY_GRID_STRIDE(i, n)
    {
        if (dt == AMPY_FLOAT32)
            ((float *)out)[i] = ((const float *)x)[i] * (mask[i] ? (float)s : 0.0f);
        else if (dt == AMPY_FLOAT64)
            ((double *)out)[i] = ((const double *)x)[i] * (mask[i] ? s : 0.0);
        else
            ampy_nn_store1(out, dt, i, (double)((float)ampy_nn_load1(x, dt, i) * (mask[i] ? (float)s : 0.0f)));
    }
}

/* st_from_d of cast.cu: a double rounded once into any dtype */
__device__ __forceinline__ void st_any(char *p, int dt, int64_t i, double v) { ampy_st_d(p, dt, i, v); }

/* csrc/random.c's fill_range, element for element */
__global__ void fill_random_kernel(char *dst, int dt, int64_t n, int kind, uint64_t seed,
                                   uint64_t offset, double a, double b)
{
    AMPY_GRID_STRIDE(i, n)
    {
        if (kind == AMPY_RANDOM_INTEGER) {
            int64_t low;
            uint64_t range;
            ampy_random_int_unpack(a, b, &low, &range);
            ampy_st_i(dst, dt, i,
                      (int64_t)((uint64_t)low + ampy_random_below(offset + (uint64_t)i, seed, range)));
            continue;
        }
        const double v = ampy_random_value(kind, offset + (uint64_t)i, seed, a, b);
        st_any(dst, dt, i, v);
        if (kind == AMPY_RANDOM_UNIFORM &&
            (dt == AMPY_FLOAT32 || dt == AMPY_FLOAT16 || dt == AMPY_BFLOAT16 ||
             dt == AMPY_FLOAT64)) {
            double back = dt == AMPY_FLOAT64 ? ((double *)dst)[i] : (double)ampy_ld_f(dst, dt, i);
            if (back >= b)
                st_any(dst, dt, i, a);
        }
    }
}

} // namespace

static ampy_status emb_check(int device, cudaStream_t st, int64_t P, const int64_t *idx, int64_t V,
                             int64_t D, int dt, const char *fn)
{
    ampy_status s = ampy_nn_embedding_check_args(P, V, D, dt, fn);
    if (s != AMPY_OK)
        return s;
    /* deferred (no sync); in sync-checks mode raised here, before any output */
    return ampy_cuda_check_range(device, st, P, idx, V, 0, AMPY_DEVERR_EMBEDDING, 0);
}

extern "C" ampy_status ampy_nn_embedding_fwd_cuda(int device, int64_t P, const int64_t *idx,
                                                  int64_t V, int64_t D, const void *weight,
                                                  int w_dtype, void *out)
{
    AMPY_CUDA_ENTER(device, st);
    ampy_status s = emb_check(device, st, P, idx, V, D, w_dtype, "embedding");
    if (s != AMPY_OK || P * D == 0)
        return s;
    const unsigned grid = ampy_cuda_blocks(P * D, AMPY_CUDA_THREADS);
    switch (ampy_dtype_size((ampy_dtype)w_dtype)) {
    case 1:
        emb_fwd_kernel<uint8_t><<<grid, AMPY_CUDA_THREADS, 0, st>>>(
            P, idx, V, D, (const uint8_t *)weight, (uint8_t *)out);
        break;
    case 2:
        emb_fwd_kernel<uint16_t><<<grid, AMPY_CUDA_THREADS, 0, st>>>(
            P, idx, V, D, (const uint16_t *)weight, (uint16_t *)out);
        break;
    case 4:
        emb_fwd_kernel<uint32_t><<<grid, AMPY_CUDA_THREADS, 0, st>>>(
            P, idx, V, D, (const uint32_t *)weight, (uint32_t *)out);
        break;
    default:
        emb_fwd_kernel<uint64_t><<<grid, AMPY_CUDA_THREADS, 0, st>>>(
            P, idx, V, D, (const uint64_t *)weight, (uint64_t *)out);
        break;
    }
    AMPY_CUDA_LAUNCHED("emb_fwd_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_nn_embedding_bwd_cuda(int device, int64_t P, const int64_t *idx,
                                                  int64_t V, int64_t D, const void *dy,
                                                  int w_dtype, int64_t padding_idx,
                                                  void *dweight)
{
    ampy_status s = ampy_nn_embedding_check_args(P, V, D, w_dtype, "embedding_backward");
    if (s != AMPY_OK)
        return s;
    if (!ampy_nn_is_float(w_dtype))
        return ampy_error(AMPY_ERR_DTYPE, "embedding_backward: weight must be floating point");
    if (V * D == 0)
        return AMPY_OK;
    if (P > 0x7fffffff)
        return ampy_error(AMPY_ERR_VALUE, "embedding_backward: more than 2^31-1 indices");
    AMPY_CUDA_ENTER(device, st);
    AMPY_CUDA_TRY(cudaMemsetAsync(dweight, 0, (size_t)(V * D) * ampy_dtype_size((ampy_dtype)w_dtype),
                                  st),
                  "cudaMemsetAsync");
    if (P == 0)
        return AMPY_OK;
    /* The indices were checked by the forward (bad ones are skipped here).
     * A stable radix sort of (row, position) pairs on the device groups each
     * row's positions in increasing order: no host round trip. */
    int bits = 1;
    while (bits < 64 && ((uint64_t)V >> bits) != 0)
        bits++;
    const int n = (int)P;
    size_t tmp_bytes = 0;
    AMPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(NULL, tmp_bytes, (const uint64_t *)NULL,
                                                  (uint64_t *)NULL, (const int64_t *)NULL,
                                                  (int64_t *)NULL, n, 0, bits, st),
                  "cub::DeviceRadixSort::SortPairs (size query)");
    const size_t arr = ((size_t)n * 8 + 255) & ~(size_t)255;
    Scratch sc(device);
    s = sc.get(4 * arr + tmp_bytes);
    if (s != AMPY_OK)
        return s;
    char *b = (char *)sc.p;
    uint64_t *keys_in = (uint64_t *)b, *keys = (uint64_t *)(b + arr);
    int64_t *pos_in = (int64_t *)(b + 2 * arr), *pos = (int64_t *)(b + 3 * arr);
    emb_keys_kernel<<<ampy_cuda_blocks(P, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        P, idx, V, padding_idx, keys_in, pos_in);
    AMPY_CUDA_LAUNCHED("emb_keys_kernel");
    AMPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(b + 4 * arr, tmp_bytes, keys_in, keys, pos_in,
                                                  pos, n, 0, bits, st),
                  "cub::DeviceRadixSort::SortPairs");
    const unsigned grid = ampy_cuda_blocks(P * D, AMPY_CUDA_THREADS);
    if (w_dtype == AMPY_FLOAT64)
        emb_bwd_kernel<double><<<grid, AMPY_CUDA_THREADS, 0, st>>>(P, V, D, keys, pos, dy, w_dtype,
                                                                    dweight);
    else
        emb_bwd_kernel<float><<<grid, AMPY_CUDA_THREADS, 0, st>>>(P, V, D, keys, pos, dy, w_dtype,
                                                                   dweight);
    AMPY_CUDA_LAUNCHED("emb_bwd_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_nn_mask_scale_cuda(int device, int64_t n, const void *x, int dtype,
                                               const uint8_t *mask, double scale, void *out)
{
    ampy_status st_args = ampy_nn_mask_scale_check_args(n, dtype);
    if (st_args != AMPY_OK)
        return st_args;
    const double s = ampy_dropout_scale(dtype, scale);
    if (n == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    mask_scale_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        n, x, dtype, mask, s, out);
    AMPY_CUDA_LAUNCHED("mask_scale_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_fill_random_cuda(int device, void *dst, ampy_dtype dtype, int64_t n,
                                             int kind, uint64_t seed, uint64_t offset, double a,
                                             double b)
{
    ampy_status s = ampy_fill_random_check_args(dtype, n, kind);
    if (s != AMPY_OK)
        return s;
    if (n == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    fill_random_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        (char *)dst, dtype, n, kind, seed, offset, a, b);
    AMPY_CUDA_LAUNCHED("fill_random_kernel");
    return AMPY_OK;
}
