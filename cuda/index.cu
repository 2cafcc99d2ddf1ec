/* index.cu — advanced (integer-array / boolean-mask) indexing on the device:
 * the CUDA twins of ampy_index_gather / ampy_index_scatter / ampy_nonzero_*
 * and ampy_index_put_accumulate (csrc/index.c, index.h), reached from
 * ampy._C's index bindings (csrc/py/index_py.c) through the ampy_cuda_api
 * table.
 *
 * The form is index.h's: the k indexed dims are the first k dims of the view,
 * the k index arrays are contiguous int64 of one length P (already
 * broadcast), and the remaining rest_ndim dims are copied whole per index
 * tuple. Strides here are ELEMENT strides. Negative indices count from the
 * end.
 *
 * Index checks are deferred (common.cuh): a check kernel records the first
 * out-of-range index ("index 7 is out of bounds for dimension 0 with size 5",
 * the CPU's message) and the host raises it at the next synchronisation, or
 * at once in sync-checks mode, before anything is written. The copy kernels
 * skip a bad index (gather writes zeros in its row), so memory is never
 * touched out of bounds.
 *
 * Scatter with repeated index tuples, deterministic:
 *   set         the LAST tuple (highest position p) wins, as the CPU's
 *               serial loop;
 *   accumulate  dst += values rows of every repeat, added one at a time and
 *               rounded to the dtype after each addition (the element-wise
 *               add of ewise_expr.h's kinds: float for float32/float16/
 *               bfloat16, double for float64, wrapping int64 for integers),
 *               in increasing p (order = +1: torch's CPU
 *               index_put_(accumulate) and ampy_index_put_accumulate; what
 *               the binding passes) or decreasing p (order = -1).
 * Both sort the tuples' flat destinations stably (cub radix sort of
 * (destination, p) pairs), so each destination's repeats form one segment in
 * increasing p; one thread per (segment, rest element) writes or adds the
 * segment's rows in order. No atomics, the same bits every run.
 *
 * nonzero: a flag per element, an exclusive scan (cub) for the output rows,
 * and the count read back by the host: the one synchronisation of boolean
 * mask indexing (the output's shape depends on it; torch.nonzero syncs too).
 */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <string.h>

#include "common.cuh"
#include "ampy/index_cuda.h"

namespace {

struct Spec {
    int k, rest_ndim, isz;
    int64_t P, R; /* tuples, elements per tuple */
    const int64_t *idx[AMPY_MAX_DIMS];
    int64_t sizes[AMPY_MAX_DIMS], strides[AMPY_MAX_DIMS];
    int64_t rest_shape[AMPY_MAX_DIMS], rest_strides[AMPY_MAX_DIMS];
    int64_t vstrides[AMPY_MAX_DIMS + 1]; /* scatter: the values' [P, rest...] strides */
};

/* element offset of tuple p in the indexed view into *off; false when an
 * index is bad */
__device__ __forceinline__ bool tuple_offset(const Spec &S, int64_t p, int64_t *off)
{
    int64_t o = 0;
    for (int j = 0; j < S.k; j++) {
        int64_t v = S.idx[j][p];
        const int64_t n = S.sizes[j];
        if (v < -n || v >= n)
            return false;
        o += (v < 0 ? v + n : v) * S.strides[j];
    }
    *off = o;
    return true;
}

/* flat row-major destination of tuple p over the indexed dims; `total` (the
 * number of destinations, sorted last) when an index is bad */
__device__ __forceinline__ uint64_t tuple_key(const Spec &S, int64_t p, uint64_t total)
{
    uint64_t key = 0;
    for (int j = 0; j < S.k; j++) {
        int64_t v = S.idx[j][p];
        const int64_t n = S.sizes[j];
        if (v < -n || v >= n)
            return total;
        key = key * (uint64_t)n + (uint64_t)(v < 0 ? v + n : v);
    }
    return key;
}

/* element offset of rest element r with the given strides */
__device__ __forceinline__ int64_t rest_offset(const Spec &S, int64_t r, const int64_t *st)
{
    int64_t off = 0;
    for (int d = S.rest_ndim - 1; d >= 0; d--) {
        const int64_t n = S.rest_shape[d];
        const int64_t q = r / n;
        off += (r - q * n) * st[d];
        r = q;
    }
    return off;
}

__device__ __forceinline__ void copy_elem(char *dst, int64_t di, const char *src, int64_t si,
                                          int isz)
{
    switch (isz) {
    case 1: ((uint8_t *)dst)[di] = ((const uint8_t *)src)[si]; break;
    case 2: ((uint16_t *)dst)[di] = ((const uint16_t *)src)[si]; break;
    case 4: ((uint32_t *)dst)[di] = ((const uint32_t *)src)[si]; break;
    default: ((uint64_t *)dst)[di] = ((const uint64_t *)src)[si]; break;
    }
}

/* out[p, r] = src[tuple p, r]; out is contiguous [P, R]. */
__global__ void index_gather_kernel(Spec S, const char *src, char *out)
{
    AMPY_GRID_STRIDE(i, S.P * S.R)
    {
        const int64_t p = i / S.R, r = i - p * S.R;
        int64_t off = 0;
        if (!tuple_offset(S, p, &off)) {
            const uint64_t zero = 0;
            copy_elem(out, i, (const char *)&zero, 0, S.isz);
            continue;
        }
        copy_elem(out, i, src, off + rest_offset(S, r, S.rest_strides), S.isz);
    }
}

__global__ void index_keys_kernel(Spec S, uint64_t total, uint64_t *keys, int64_t *pos)
{
    AMPY_GRID_STRIDE(p, S.P)
    {
        keys[p] = tuple_key(S, p, total);
        pos[p] = p;
    }
}

/* dst[d] + v in the element-wise add's compute kind, rounded once to dt */
__device__ __forceinline__ void add_into(char *dst, int64_t di, const char *v, int64_t vi, int dt)
{
    if (dt == AMPY_FLOAT64) {
        ((double *)dst)[di] = ((const double *)dst)[di] + ((const double *)v)[vi];
    } else if (dt == AMPY_FLOAT32 || dt == AMPY_FLOAT16 || dt == AMPY_BFLOAT16) {
        ampy_st_f(dst, dt, di, ampy_ld_f(dst, dt, di) + ampy_ld_f(v, dt, vi));
    } else {
        const uint64_t s = (uint64_t)ampy_ld_i(dst, dt, di) + (uint64_t)ampy_ld_i(v, dt, vi);
        ampy_st_i(dst, dt, di, (int64_t)s);
    }
}

/* One thread per (sorted position q, rest element r); the thread of a
 * segment's first position handles the whole segment of equal keys. */
__global__ void index_scatter_kernel(Spec S, uint64_t total, const uint64_t *keys,
                                     const int64_t *pos, char *dst, const char *vals, int dt,
                                     int accumulate, int order)
{
    AMPY_GRID_STRIDE(i, S.P * S.R)
    {
        const int64_t q = i / S.R, r = i - q * S.R;
        const uint64_t key = keys[q];
        if (key == total || (q > 0 && keys[q - 1] == key))
            continue; /* a bad index, or not the segment's first position */
        int64_t end = q + 1;
        while (end < S.P && keys[end] == key)
            end++;
        int64_t doff = 0;
        tuple_offset(S, pos[q], &doff); /* valid: bad tuples have key == total */
        doff += rest_offset(S, r, S.rest_strides);
        int64_t vrest = 0;
        {
            int64_t rr = r;
            for (int d = S.rest_ndim - 1; d >= 0; d--) {
                const int64_t n = S.rest_shape[d];
                const int64_t qq = rr / n;
                vrest += (rr - qq * n) * S.vstrides[1 + d];
                rr = qq;
            }
        }
        if (!accumulate) { /* the last write wins: the highest p, the segment's end */
            copy_elem(dst, doff, vals, pos[end - 1] * S.vstrides[0] + vrest, S.isz);
            continue;
        }
        if (order > 0) {
            for (int64_t t = q; t < end; t++)
                add_into(dst, doff, vals, pos[t] * S.vstrides[0] + vrest, dt);
        } else {
            for (int64_t t = end - 1; t >= q; t--)
                add_into(dst, doff, vals, pos[t] * S.vstrides[0] + vrest, dt);
        }
    }
}

struct NzArgs {
    int ndim;
    int64_t shape[AMPY_MAX_DIMS], strides[AMPY_MAX_DIMS];
    const uint8_t *mask;
};

__device__ __forceinline__ int64_t nz_offset(const NzArgs &A, int64_t lin)
{
    int64_t off = 0;
    for (int d = A.ndim - 1; d >= 0; d--) {
        const int64_t n = A.shape[d];
        const int64_t q = lin / n;
        off += (lin - q * n) * A.strides[d];
        lin = q;
    }
    return off;
}

__global__ void nz_flags_kernel(NzArgs A, int64_t n, int64_t *flags)
{
    AMPY_GRID_STRIDE(i, n)
    flags[i] = A.mask[nz_offset(A, i)] != 0;
}

/* rows[i] (exclusive scan of the flags) is element i's output row; the last
 * element's flag + row is the count. out[row, d] = multi-index of i. */
__global__ void nz_fill_kernel(NzArgs A, int64_t n, const int64_t *rows, int64_t *out)
{
    AMPY_GRID_STRIDE(i, n)
    {
        if (!A.mask[nz_offset(A, i)])
            continue;
        int64_t *o = out + rows[i] * A.ndim, lin = i;
        for (int d = A.ndim - 1; d >= 0; d--) {
            const int64_t q = lin / A.shape[d];
            o[d] = lin - q * A.shape[d];
            lin = q;
        }
    }
}

__global__ void nz_count_kernel(int64_t n, const int64_t *flags, const int64_t *rows,
                                int64_t *count)
{
    *count = n ? rows[n - 1] + flags[n - 1] : 0;
}

/* Device scratch that frees itself. */
struct Buf {
    int device;
    size_t n;
    void *p;
    explicit Buf(int d) : device(d), n(0), p(NULL) {}
    ampy_status get(size_t bytes)
    {
        n = bytes ? bytes : 1;
        return ampy_cuda_alloc(device, n, &p);
    }
    ~Buf()
    {
        if (p)
            ampy_cuda_free(p, n, device);
    }
};

ampy_status fill_spec(Spec *S, const ampy_index_cuda_spec *s, const char *fn)
{
    if (s->k < 1 || s->k > AMPY_MAX_DIMS || s->rest_ndim < 0 ||
        s->k + s->rest_ndim > AMPY_MAX_DIMS || s->P < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s (cuda): bad index spec", fn);
    if (s->itemsize != 1 && s->itemsize != 2 && s->itemsize != 4 && s->itemsize != 8)
        return ampy_error(AMPY_ERR_VALUE, "%s (cuda): bad itemsize %d", fn, s->itemsize);
    memset(S, 0, sizeof *S);
    S->k = s->k;
    S->rest_ndim = s->rest_ndim;
    S->isz = s->itemsize;
    S->P = s->P;
    S->R = 1;
    for (int j = 0; j < s->k; j++) {
        S->idx[j] = s->idx[j];
        S->sizes[j] = s->sizes[j];
        S->strides[j] = s->strides[j];
    }
    for (int d = 0; d < s->rest_ndim; d++) {
        S->rest_shape[d] = s->rest_shape[d];
        S->rest_strides[d] = s->rest_strides[d];
        S->R *= s->rest_shape[d];
    }
    return AMPY_OK;
}

/* the deferred range check of every index array (dim j of the view) */
ampy_status check_all(int device, cudaStream_t st, const Spec &S)
{
    for (int j = 0; j < S.k; j++) {
        ampy_status s = ampy_cuda_check_range(device, st, S.P, S.idx[j], S.sizes[j], 1,
                                              AMPY_DEVERR_INDEX, j);
        if (s != AMPY_OK)
            return s;
    }
    return AMPY_OK;
}

} // namespace

extern "C" ampy_status ampy_index_gather_cuda(int device, const ampy_index_cuda_spec *s,
                                              const void *src, void *out)
{
    Spec S;
    ampy_status rc = fill_spec(&S, s, "index");
    if (rc != AMPY_OK)
        return rc;
    if (S.P == 0 || S.R == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    rc = check_all(device, st, S);
    if (rc != AMPY_OK)
        return rc;
    index_gather_kernel<<<ampy_cuda_blocks(S.P * S.R, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0,
                          st>>>(S, (const char *)src, (char *)out);
    AMPY_CUDA_LAUNCHED("index_gather_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_index_scatter_cuda(int device, const ampy_index_cuda_spec *s,
                                               void *dst, const void *values,
                                               const int64_t *vstrides, int dtype, int accumulate,
                                               int order)
{
    Spec S;
    ampy_status rc = fill_spec(&S, s, "index_put_");
    if (rc != AMPY_OK)
        return rc;
    if (!ampy_dtype_valid(dtype) || (int)ampy_dtype_size((ampy_dtype)dtype) != S.isz)
        return ampy_error(AMPY_ERR_DTYPE, "index_put_ (cuda): bad dtype");
    for (int d = 0; d <= S.rest_ndim; d++)
        S.vstrides[d] = vstrides[d];
    if (S.P == 0 || S.R == 0)
        return AMPY_OK;
    if (S.P > 0x7fffffff)
        return ampy_error(AMPY_ERR_VALUE, "index_put_ (cuda): more than 2^31-1 index tuples");
    /* the number of destinations and the key bits the sort needs */
    uint64_t total = 1;
    for (int j = 0; j < S.k; j++) {
        if (S.sizes[j] == 0 || total > (~0ull >> 1) / (uint64_t)S.sizes[j]) {
            total = S.sizes[j] == 0 ? 0 : ~0ull >> 1;
            break;
        }
        total *= (uint64_t)S.sizes[j];
    }
    int bits = 1;
    while (bits < 64 && (total >> bits) != 0)
        bits++;
    AMPY_CUDA_ENTER(device, st);
    rc = check_all(device, st, S);
    if (rc != AMPY_OK)
        return rc;
    const int n = (int)S.P;
    size_t tmp_bytes = 0;
    AMPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(NULL, tmp_bytes, (const uint64_t *)NULL,
                                                  (uint64_t *)NULL, (const int64_t *)NULL,
                                                  (int64_t *)NULL, n, 0, bits, st),
                  "cub::DeviceRadixSort::SortPairs (size query)");
    const size_t arr = ((size_t)n * 8 + 255) & ~(size_t)255;
    Buf buf(device);
    rc = buf.get(4 * arr + tmp_bytes);
    if (rc != AMPY_OK)
        return rc;
    char *b = (char *)buf.p;
    uint64_t *keys_in = (uint64_t *)b, *keys = (uint64_t *)(b + arr);
    int64_t *pos_in = (int64_t *)(b + 2 * arr), *pos = (int64_t *)(b + 3 * arr);
    index_keys_kernel<<<ampy_cuda_blocks(S.P, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        S, total, keys_in, pos_in);
    AMPY_CUDA_LAUNCHED("index_keys_kernel");
    AMPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(b + 4 * arr, tmp_bytes, keys_in, keys, pos_in,
                                                  pos, n, 0, bits, st),
                  "cub::DeviceRadixSort::SortPairs");
    index_scatter_kernel<<<ampy_cuda_blocks(S.P * S.R, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0,
                           st>>>(S, total, keys, pos, (char *)dst, (const char *)values,
                                 dtype, accumulate, order);
    AMPY_CUDA_LAUNCHED("index_scatter_kernel");
    return AMPY_OK;
}

/* The kernels' view of the mask (ndim <= AMPY_MAX_DIMS); returns its element count. */
static int64_t nz_args(int ndim, const int64_t *shape, const int64_t *strides,
                       const uint8_t *mask, NzArgs *A)
{
    memset(A, 0, sizeof *A);
    A->ndim = ndim;
    A->mask = mask;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        A->shape[d] = shape[d];
        A->strides[d] = strides[d];
        n *= shape[d];
    }
    return n;
}

extern "C" ampy_status ampy_nonzero_cuda(int device, int ndim, const int64_t *shape,
                                         const int64_t *strides, const uint8_t *mask,
                                         int64_t *scratch, int64_t *count)
{
    if (ndim < 0 || ndim > AMPY_MAX_DIMS)
        return ampy_error(AMPY_ERR_VALUE, "nonzero (cuda): bad ndim %d", ndim);
    NzArgs A;
    const int64_t n = nz_args(ndim, shape, strides, mask, &A);
    *count = 0;
    if (n == 0)
        return AMPY_OK;
    if (n > 0x7fffffff)
        return ampy_error(AMPY_ERR_VALUE, "nonzero (cuda): more than 2^31-1 elements");
    AMPY_CUDA_ENTER(device, st);
    /* scratch: [n] flags then [n] rows then 1 count (the caller allocates 2n + 1) */
    int64_t *flags = scratch, *rows = scratch + n, *cnt = scratch + 2 * n;
    nz_flags_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(A, n,
                                                                                       flags);
    AMPY_CUDA_LAUNCHED("nz_flags_kernel");
    size_t tmp_bytes = 0;
    AMPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(NULL, tmp_bytes, flags, rows, (int)n, st),
                  "cub::DeviceScan::ExclusiveSum (size query)");
    Buf tmp(device);
    ampy_status rc = tmp.get(tmp_bytes);
    if (rc != AMPY_OK)
        return rc;
    AMPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(tmp.p, tmp_bytes, flags, rows, (int)n, st),
                  "cub::DeviceScan::ExclusiveSum");
    nz_count_kernel<<<1, 1, 0, st>>>(n, flags, rows, cnt);
    AMPY_CUDA_LAUNCHED("nz_count_kernel");
    return ampy_cuda_memcpy(count, -1, cnt, device, sizeof *count); /* the one sync */
}

extern "C" ampy_status ampy_nonzero_fill_cuda(int device, int ndim, const int64_t *shape,
                                              const int64_t *strides, const uint8_t *mask,
                                              const int64_t *scratch, int64_t *out)
{
    if (ndim < 0 || ndim > AMPY_MAX_DIMS)
        return ampy_error(AMPY_ERR_VALUE, "nonzero (cuda): bad ndim %d", ndim);
    NzArgs A;
    const int64_t n = nz_args(ndim, shape, strides, mask, &A);
    if (n == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    nz_fill_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        A, n, scratch + n, out);
    AMPY_CUDA_LAUNCHED("nz_fill_kernel");
    return AMPY_OK;
}
