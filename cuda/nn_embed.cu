/* nn_embed.cu — embedding forward/backward, dropout's mask-and-scale and the
 * Philox fills of ampy_fill_random (random.h) on the device, the twins of
 * csrc/nn_misc.c and csrc/random.c (see nn.cu for the shared conventions).
 * Exact matches with the CPU: embedding forward/backward (the backward adds
 * rows per column in index order after a stable sort of the indices on the
 * host), mask-and-scale and every random fill. Embedding indices are checked
 * by a small kernel whose flag the host reads back (one sync) before anything
 * is written. */
#include "common.cuh"
#include "nn_common.cuh"

namespace {

/* ---- embedding -------------------------------------------------------------------- */
__global__ void idx_check_kernel(int64_t P, const int64_t *idx, int64_t V,
                                 unsigned long long *bad)
{
    AMPY_GRID_STRIDE(i, P)
    {
        if (idx[i] < 0 || idx[i] >= V)
            atomicMin(bad, (unsigned long long)i);
    }
}

template <typename E>
__global__ void emb_fwd_kernel(int64_t P, const int64_t *idx, int64_t D, const E *w, E *out)
{
    AMPY_GRID_STRIDE(k, P * D)
    {
        const int64_t i = k / D, j = k - i * D;
        out[k] = w[idx[i] * D + j];
    }
}

/* Thread (segment s, column j): the rows of dy whose index is seg_row[s],
 * in increasing position (perm is a stable sort of the indices), added from
 * 0 in float (double for float64) and rounded once into dweight[seg_row[s]]:
 * the CPU's order of additions for every element, so the same bits. */
template <typename A>
__global__ void emb_bwd_kernel(int64_t nseg, int64_t D, const int64_t *perm,
                               const int64_t *seg_start, const int64_t *seg_row, const void *dy,
                               int dt, void *dweight)
{
    AMPY_GRID_STRIDE(t, nseg * D)
    {
        const int64_t sg = t / D, j = t - sg * D;
        A acc = (A)0;
        for (int64_t k = seg_start[sg]; k < seg_start[sg + 1]; k++)
            acc += (A)load1(dy, dt, perm[k] * D + j);
        store1(dweight, dt, seg_row[sg] * D + j, (double)acc);
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
            store1(out, dt, i, (double)((float)load1(x, dt, i) * (mask[i] ? (float)s : 0.0f)));
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
        uint32_t r[4];
        ampy_philox4x32(offset + (uint64_t)i, seed, r);
        double v;
        switch (kind) {
        case AMPY_RANDOM_UNIFORM: v = a + (b - a) * ampy_u32_to_unit(r[0]); break;
        case AMPY_RANDOM_NORMAL: {
            double u1 = ((double)r[0] + 1.0) / 4294967296.0;
            double u2 = (double)r[1] / 4294967296.0;
            v = a + b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
            break;
        }
        case AMPY_RANDOM_INTEGER: {
            uint64_t range = (uint64_t)(int64_t)(b - a);
            uint64_t x = ((uint64_t)r[0] << 32) | r[1];
            v = a + (double)(x % range);
            break;
        }
        default: v = ampy_u32_to_unit(r[0]) < a ? 1.0 : 0.0; break;
        }
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
    if (P < 0 || V < 0 || D < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s: negative size", fn);
    if (!ampy_dtype_valid(dt))
        return ampy_error(AMPY_ERR_DTYPE, "%s: invalid dtype", fn);
    if (P == 0)
        return AMPY_OK;
    Scratch sc(device);
    ampy_status s = sc.get(sizeof(unsigned long long));
    if (s != AMPY_OK)
        return s;
    unsigned long long *flag = (unsigned long long *)sc.p;
    AMPY_CUDA_TRY(cudaMemsetAsync(flag, 0xFF, sizeof *flag, st), "cudaMemsetAsync");
    idx_check_kernel<<<ampy_cuda_blocks(P, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(P, idx,
                                                                                        V, flag);
    AMPY_CUDA_LAUNCHED("idx_check_kernel");
    int64_t bad;
    s = read_flag(device, st, flag, &bad);
    if (s != AMPY_OK)
        return s;
    if (bad >= 0)
        return ampy_error(AMPY_ERR_INDEX, "index out of range in self");
    return AMPY_OK;
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
            P, idx, D, (const uint8_t *)weight, (uint8_t *)out);
        break;
    case 2:
        emb_fwd_kernel<uint16_t><<<grid, AMPY_CUDA_THREADS, 0, st>>>(
            P, idx, D, (const uint16_t *)weight, (uint16_t *)out);
        break;
    case 4:
        emb_fwd_kernel<uint32_t><<<grid, AMPY_CUDA_THREADS, 0, st>>>(
            P, idx, D, (const uint32_t *)weight, (uint32_t *)out);
        break;
    default:
        emb_fwd_kernel<uint64_t><<<grid, AMPY_CUDA_THREADS, 0, st>>>(
            P, idx, D, (const uint64_t *)weight, (uint64_t *)out);
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
    if (P < 0 || V < 0 || D < 0)
        return ampy_error(AMPY_ERR_VALUE, "embedding_backward: negative size");
    if (!ampy_dtype_valid(w_dtype))
        return ampy_error(AMPY_ERR_DTYPE, "embedding_backward: invalid dtype");
    AMPY_CUDA_ENTER(device, st);
    /* The indices come to the host (one sync, which also serves the bounds
     * check) for a stable counting sort into per-row segments. */
    int64_t *h = (int64_t *)malloc((size_t)(P > 0 ? P : 1) * sizeof(int64_t));
    if (!h)
        return ampy_error(AMPY_ERR_NOMEM, "embedding_backward: out of memory");
    ampy_status s = P > 0 ? ampy_cuda_memcpy(h, -1, idx, device, (size_t)P * sizeof(int64_t))
                          : AMPY_OK;
    for (int64_t i = 0; s == AMPY_OK && i < P; i++)
        if (h[i] < 0 || h[i] >= V)
            s = ampy_error(AMPY_ERR_INDEX, "index out of range in self");
    if (s == AMPY_OK && !nn_float(w_dtype))
        s = ampy_error(AMPY_ERR_DTYPE, "embedding_backward: weight must be floating point");
    if (s != AMPY_OK || V * D == 0) {
        free(h);
        return s;
    }
    AMPY_CUDA_TRY(cudaMemsetAsync(dweight, 0, (size_t)(V * D) * ampy_dtype_size((ampy_dtype)w_dtype),
                                  st),
                  "cudaMemsetAsync");
    /* counts per row -> segment starts -> stable placement */
    int64_t *cnt = (int64_t *)calloc((size_t)(V > 0 ? V : 1), sizeof(int64_t));
    int64_t *buf = (int64_t *)malloc((size_t)(3 * P + 2) * sizeof(int64_t));
    if (!cnt || !buf) {
        free(h), free(cnt), free(buf);
        return ampy_error(AMPY_ERR_NOMEM, "embedding_backward: out of memory");
    }
    int64_t kept = 0, nseg = 0;
    for (int64_t i = 0; i < P; i++)
        if (h[i] != padding_idx && cnt[h[i]]++ == 0)
            nseg++;
    /* buf: perm[kept] | seg_start[nseg + 1] | seg_row[nseg]; cnt becomes the
     * running write position of each row */
    int64_t *seg_start = buf + P, *seg_row = buf + P + nseg + 1;
    int64_t pos = 0, sidx = 0;
    for (int64_t r = 0; r < V; r++) {
        if (!cnt[r])
            continue;
        seg_start[sidx] = pos, seg_row[sidx] = r, sidx++;
        int64_t c = cnt[r];
        cnt[r] = pos;
        pos += c;
    }
    kept = pos;
    seg_start[nseg] = kept;
    for (int64_t i = 0; i < P; i++)
        if (h[i] != padding_idx)
            buf[cnt[h[i]]++] = i;
    /* pack perm next to the segment arrays for one upload */
    memmove(buf + kept, seg_start, (size_t)(2 * nseg + 1) * sizeof(int64_t));
    const size_t nb = (size_t)(kept + 2 * nseg + 1) * sizeof(int64_t);
    free(h), free(cnt);
    if (nseg == 0) {
        free(buf);
        return AMPY_OK;
    }
    Scratch dev(device);
    s = dev.get(nb);
    if (s == AMPY_OK)
        s = ampy_cuda_memcpy(dev.p, device, buf, -1, nb);
    free(buf);
    if (s != AMPY_OK)
        return s;
    const int64_t *dperm = (const int64_t *)dev.p, *dstart = dperm + kept,
                  *drow = dstart + nseg + 1;
    const unsigned grid = ampy_cuda_blocks(nseg * D, AMPY_CUDA_THREADS);
    if (w_dtype == AMPY_FLOAT64)
        emb_bwd_kernel<double><<<grid, AMPY_CUDA_THREADS, 0, st>>>(nseg, D, dperm, dstart, drow,
                                                                    dy, w_dtype, dweight);
    else
        emb_bwd_kernel<float><<<grid, AMPY_CUDA_THREADS, 0, st>>>(nseg, D, dperm, dstart, drow,
                                                                   dy, w_dtype, dweight);
    AMPY_CUDA_LAUNCHED("emb_bwd_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_nn_mask_scale_cuda(int device, int64_t n, const void *x, int dtype,
                                               const uint8_t *mask, double scale, void *out)
{
    if (n < 0)
        return ampy_error(AMPY_ERR_VALUE, "dropout: negative size");
    if (!nn_float(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "dropout: input must be a floating-point tensor");
    /* csrc/nn_misc.c: the scale is a tensor of the input's dtype in ATen */
    double s = dtype == AMPY_FLOAT64 ? scale : (double)(float)scale;
    if (dtype == AMPY_FLOAT16)
        s = ampy_f16_to_f32(ampy_f64_to_f16(scale));
    else if (dtype == AMPY_BFLOAT16)
        s = ampy_bf16_to_f32(ampy_f64_to_bf16(scale));
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
    if (!ampy_dtype_valid(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "fill_random: invalid dtype %d", (int)dtype);
    if (n < 0 || kind < 0 || kind > AMPY_RANDOM_BERNOULLI)
        return ampy_error(AMPY_ERR_VALUE, "fill_random: bad kind %d or size %lld", kind,
                          (long long)n);
    if (kind == AMPY_RANDOM_INTEGER && !(b > a))
        return ampy_error(AMPY_ERR_VALUE, "randint: empty range [%g, %g)", a, b);
    if (n == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    fill_random_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        (char *)dst, dtype, n, kind, seed, offset, a, b);
    AMPY_CUDA_LAUNCHED("fill_random_kernel");
    return AMPY_OK;
}
