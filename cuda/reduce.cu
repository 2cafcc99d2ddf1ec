/* reduce.cu — reductions on the device: the CUDA twin of ampy_reduce
 * (reduce.h), reached from _C.reduce through the ampy_cuda_api table.
 *
 * Same contract as csrc/reduce.c: floating inputs (float16/bfloat16/float32/
 * float64) accumulate in double, integer and bool inputs in int64 (wrapping);
 * the result is rounded once into the output dtype with the elem.h
 * conversions. max/min propagate NaN (the NaN of lowest index wins, with its
 * index), ties keep the lowest index. var/std take two passes (mean, then
 * squared deviations), logsumexp subtracts the maximum (an infinite maximum
 * is replaced by 0). The order of the double additions differs from the
 * CPU's (a fixed tree per block instead of four running sums), so a sum
 * rounded to float32 or a half matches the CPU except when the two double
 * sums straddle a rounding boundary; results are deterministic run to run.
 *
 * One block per output (grid-stride over outputs); the block's threads
 * stride over the reduced elements with 64-bit N-d index math and combine
 * in shared memory in a fixed order. Single-pass ops over few large
 * outputs split each output over several blocks, and many outputs along a
 * contiguous kept dim (column sums) use one thread per output and chunk;
 * partials are combined in chunk order (see "split reductions" below).
 * (softmax/log_softmax and cumsum/cumprod: softmax.cu.)
 */
#include <math.h>

#include "common.cuh"
#include "ampy/ewise.h"
#include "ampy/reduce.h"
#include "ampy/reduce_math.h"

namespace {

#define RED_THREADS 256

typedef ampy_reduce_acc Acc;

struct RedArgs {
    int op, cls, is_int;
    int in_dt, out_dt;
    int64_t isz;
    int nk, nr;                     /* kept dims, reduced dims */
    int64_t kshape[AMPY_MAX_DIMS];  /* kept dims: shape, element strides of in/out/idx */
    int64_t kin[AMPY_MAX_DIMS], kout[AMPY_MAX_DIMS], kidx[AMPY_MAX_DIMS];
    int64_t rshape[AMPY_MAX_DIMS], rin[AMPY_MAX_DIMS];
    int64_t M, R;
    double correction;
    const char *in;
    char *out;
    int64_t *idx;
};

/* Fold element r (flat index over the reduced dims) into a. */
__device__ __forceinline__ void acc_add(const RedArgs &A, int cls, Acc &a, const char *base,
                                        int64_t r, double center)
{
    int64_t off = 0, lin = r;
    for (int d = A.nr - 1; d >= 0; d--) {
        const int64_t n = A.rshape[d];
        const int64_t q = lin / n;
        off += (lin - q * n) * A.rin[d];
        lin = q;
    }
    if (A.is_int) {
        const int64_t v = ampy_ld_i(base, A.in_dt, off);
        switch (cls) {
        case AMPY_RC_SUM: a.is = (int64_t)((uint64_t)a.is + (uint64_t)v); break;
        case AMPY_RC_PROD: a.is = (int64_t)((uint64_t)a.is * (uint64_t)v); break;
        case AMPY_RC_MAX:
            if (!a.has || v > a.ibest) a.ibest = v, a.bidx = r, a.has = 1;
            break;
        case AMPY_RC_MIN:
            if (!a.has || v < a.ibest) a.ibest = v, a.bidx = r, a.has = 1;
            break;
        case AMPY_RC_NZ: a.is += v != 0; break;
        default: break;
        }
        return;
    }
    const double v = ampy_ld_d(base, A.in_dt, off);
    switch (cls) {
    case AMPY_RC_SUM: a.s += v; break;
    case AMPY_RC_SUMSQ: a.s += v * v; break;
    case AMPY_RC_DEV2: a.s += (v - center) * (v - center); break;
    case AMPY_RC_SUMEXP: a.s += exp(v - center); break;
    case AMPY_RC_PROD: a.s *= v; break;
    case AMPY_RC_MAX:
    case AMPY_RC_MIN:
        if (a.nan)
            break; /* the first NaN of this thread stays */
        if (v != v) {
            a.nan = a.has = 1, a.best = v, a.bidx = r;
        } else if (!a.has || (cls == AMPY_RC_MAX ? v > a.best : v < a.best)) {
            a.best = v, a.bidx = r, a.has = 1;
        }
        break;
    case AMPY_RC_NZ: a.is += v != 0.0; break;
    default: break;
    }
}

/* Combine b into a (a holds lower flat indices for max/min ties only via
 * the explicit index comparison, so the order of arguments does not matter
 * for the result). */
__device__ __forceinline__ void acc_combine(const RedArgs &A, int cls, Acc &a, const Acc &b)
{
    switch (cls) {
    case AMPY_RC_SUM:
    case AMPY_RC_SUMSQ:
    case AMPY_RC_DEV2:
    case AMPY_RC_SUMEXP: a.s += b.s; a.is = (int64_t)((uint64_t)a.is + (uint64_t)b.is); break;
    case AMPY_RC_PROD: a.s *= b.s; a.is = (int64_t)((uint64_t)a.is * (uint64_t)b.is); break;
    case AMPY_RC_NZ: a.is += b.is; break;
    case AMPY_RC_MAX:
    case AMPY_RC_MIN: {
        if (!b.has)
            break;
        if (!a.has) {
            a = b;
            break;
        }
        bool take;
        if (A.is_int) {
            take = cls == AMPY_RC_MAX ? (b.ibest > a.ibest || (b.ibest == a.ibest && b.bidx < a.bidx))
                                : (b.ibest < a.ibest || (b.ibest == a.ibest && b.bidx < a.bidx));
        } else if (a.nan || b.nan) {
            take = b.nan && (!a.nan || b.bidx < a.bidx);
        } else {
            take = cls == AMPY_RC_MAX ? (b.best > a.best || (b.best == a.best && b.bidx < a.bidx))
                                : (b.best < a.best || (b.best == a.best && b.bidx < a.bidx));
        }
        if (take)
            a = b;
        break;
    }
    default: break;
    }
}

/* One pass of class cls over the reduced elements of the output at `base`;
 * every thread of the block returns the combined result. */
__device__ Acc block_pass(const RedArgs &A, int cls, const char *base, double center, Acc *sh)
{
    Acc a = ampy_reduce_acc_init(cls);
    for (int64_t r = threadIdx.x; r < A.R; r += blockDim.x)
        acc_add(A, cls, a, base, r, center);
    sh[threadIdx.x] = a;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) {
            Acc x = sh[threadIdx.x];
            acc_combine(A, cls, x, sh[threadIdx.x + w]);
            sh[threadIdx.x] = x;
        }
        __syncthreads();
    }
    Acc r = sh[0];
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(RED_THREADS) reduce_kernel(RedArgs A)
{
    __shared__ Acc sh[RED_THREADS];
    for (int64_t m = blockIdx.x; m < A.M; m += gridDim.x) {
        int64_t oin = 0, oout = 0, oidx = 0, lin = m;
        for (int d = A.nk - 1; d >= 0; d--) {
            const int64_t n = A.kshape[d];
            const int64_t q = lin / n, k = lin - q * n;
            lin = q;
            oin += k * A.kin[d];
            oout += k * A.kout[d];
            oidx += k * A.kidx[d];
        }
        const char *base = A.in + oin * A.isz;
        Acc a = block_pass(A, A.cls, base, 0.0, sh), b = a;
        const int cls2 = ampy_reduce_second_cls(A.op);
        double center = 0.0, v;
        int64_t iv;
        if (cls2 >= 0) {
            center = ampy_reduce_center(A.op, &a, A.R);
            b = block_pass(A, cls2, base, center, sh);
        }
        const int is_int = ampy_reduce_finish(A.op, &a, &b, center, A.R, A.correction, A.is_int,
                                              &v, &iv);
        if (threadIdx.x == 0) {
            if (is_int)
                ampy_st_i(A.out, A.out_dt, oout, iv);
            else
                ampy_st_d(A.out, A.out_dt, oout, v);
            if (A.idx)
                A.idx[oidx] = a.bidx;
        }
    }
}

/* ---- split reductions (single-pass ops: every op but var, std, logsumexp) ----
 * Many elements per output and few outputs: G blocks per output each reduce
 * a contiguous chunk of the reduced index range into a partial. Many outputs
 * whose innermost kept dim is contiguous (x.sum(0) of a row-major matrix):
 * one THREAD per (output, chunk), consecutive threads on consecutive
 * outputs, so every load of a warp is coalesced. Either way a final kernel
 * combines the G partials of each output in chunk order (deterministic). */
__device__ __forceinline__ void out_offsets(const RedArgs &A, int64_t m, int64_t *oin,
                                            int64_t *oout, int64_t *oidx)
{
    int64_t i0 = 0, o0 = 0, x0 = 0, lin = m;
    for (int d = A.nk - 1; d >= 0; d--) {
        const int64_t n = A.kshape[d];
        const int64_t q = lin / n, k = lin - q * n;
        lin = q;
        i0 += k * A.kin[d];
        o0 += k * A.kout[d];
        x0 += k * A.kidx[d];
    }
    *oin = i0, *oout = o0, *oidx = x0;
}

__global__ void __launch_bounds__(RED_THREADS)
reduce_partial_blocks(RedArgs A, int64_t G, int64_t chunk, Acc *part)
{
    __shared__ Acc sh[RED_THREADS];
    for (int64_t b = blockIdx.x; b < A.M * G; b += gridDim.x) {
        const int64_t m = b / G, g = b - m * G;
        int64_t oin, oout, oidx;
        out_offsets(A, m, &oin, &oout, &oidx);
        const char *base = A.in + oin * A.isz;
        const int64_t r0 = g * chunk, r1 = r0 + chunk < A.R ? r0 + chunk : A.R;
        Acc a = ampy_reduce_acc_init(A.cls);
        for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x)
            acc_add(A, A.cls, a, base, r, 0.0);
        sh[threadIdx.x] = a;
        __syncthreads();
        for (int w = blockDim.x / 2; w > 0; w >>= 1) {
            if ((int)threadIdx.x < w) {
                Acc x = sh[threadIdx.x];
                acc_combine(A, A.cls, x, sh[threadIdx.x + w]);
                sh[threadIdx.x] = x;
            }
            __syncthreads();
        }
        if (threadIdx.x == 0)
            part[m * G + g] = sh[0];
        __syncthreads();
    }
}

__global__ void reduce_partial_columns(RedArgs A, int64_t G, int64_t chunk, Acc *part)
{
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < A.M * G;
         t += (int64_t)blockDim.x * gridDim.x) {
        const int64_t g = t / A.M, m = t - g * A.M;
        int64_t oin, oout, oidx;
        out_offsets(A, m, &oin, &oout, &oidx);
        const char *base = A.in + oin * A.isz;
        const int64_t r0 = g * chunk, r1 = r0 + chunk < A.R ? r0 + chunk : A.R;
        Acc a = ampy_reduce_acc_init(A.cls);
        for (int64_t r = r0; r < r1; r++)
            acc_add(A, A.cls, a, base, r, 0.0);
        part[m * G + g] = a;
    }
}

__global__ void reduce_final(RedArgs A, int64_t G, const Acc *part)
{
    AMPY_GRID_STRIDE(m, A.M)
    {
        Acc a = part[m * G];
        for (int64_t g = 1; g < G; g++)
            acc_combine(A, A.cls, a, part[m * G + g]);
        int64_t oin, oout, oidx;
        out_offsets(A, m, &oin, &oout, &oidx);
        double v;
        int64_t iv;
        /* single-pass ops only (see above): no second pass */
        const int is_int = ampy_reduce_finish(A.op, &a, &a, 0.0, A.R, A.correction, A.is_int,
                                              &v, &iv);
        if (is_int)
            ampy_st_i(A.out, A.out_dt, oout, iv);
        else
            ampy_st_d(A.out, A.out_dt, oout, v);
        if (A.idx)
            A.idx[oidx] = a.bidx;
    }
}

unsigned grid_for(int64_t M) { return (unsigned)(M < 65535 * 8 ? (M < 1 ? 1 : M) : 65535 * 8); }

} // namespace

extern "C" ampy_status ampy_reduce_cuda(int device, int op, int ndim, const int64_t *shape,
                                        const void *in, const int64_t *in_strides,
                                        ampy_dtype in_dtype, uint32_t reduce_mask, void *out,
                                        const int64_t *out_strides, ampy_dtype out_dtype,
                                        int64_t *idx_out, const int64_t *idx_strides,
                                        double correction)
{
    ampy_status s = ampy_reduce_check_args(op, ndim, in_dtype, out_dtype);
    if (s != AMPY_OK)
        return s;
    const int is_int = !ampy_dtype_is_float(in_dtype);
    RedArgs A;
    memset(&A, 0, sizeof A);
    A.op = op;
    A.cls = ampy_reduce_first_cls(op);
    A.is_int = is_int;
    A.in_dt = in_dtype;
    A.out_dt = out_dtype;
    A.isz = (int64_t)ampy_dtype_size(in_dtype);
    A.correction = correction;
    A.in = (const char *)in;
    A.out = (char *)out;
    A.idx = (op == AMPY_RED_MAX || op == AMPY_RED_MIN) ? idx_out : NULL;
    const int64_t isz = (int64_t)ampy_dtype_size(in_dtype);
    const int64_t osz = (int64_t)ampy_dtype_size(out_dtype);
    A.M = 1;
    A.R = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return ampy_error(AMPY_ERR_VALUE, "reduce (cuda): negative dimension");
        if (reduce_mask >> d & 1u) {
            A.R *= shape[d];
            if (shape[d] != 1) {
                A.rshape[A.nr] = shape[d];
                A.rin[A.nr] = in_strides[d] / isz;
                A.nr++;
            }
        } else {
            A.M *= shape[d];
            if (shape[d] != 1) {
                A.kshape[A.nk] = shape[d];
                A.kin[A.nk] = in_strides[d] / isz;
                A.kout[A.nk] = out_strides[d] / osz;
                A.kidx[A.nk] = A.idx ? idx_strides[d] / 8 : 0;
                A.nk++;
            }
        }
    }
    if (A.M == 0)
        return AMPY_OK;
    s = ampy_reduce_check_nonempty(op, A.R);
    if (s != AMPY_OK)
        return s;
    AMPY_CUDA_ENTER(device, st);
    const bool single = ampy_reduce_second_cls(op) < 0;
    const bool columns = single && A.nk > 0 && A.kin[A.nk - 1] == 1 && A.M >= 32 && A.R >= 2;
    int64_t G = 1;
    if (columns) /* about 64K threads, at least 8 elements each */
        G = (65536 + A.M - 1) / A.M, G = G > A.R / 8 ? A.R / 8 : G;
    else if (single && A.M < 512 && A.R >= 32768) /* ~2048 blocks, >= 8K elements each */
        G = 2048 / A.M, G = G > A.R / 8192 ? A.R / 8192 : G;
    if (G < 1)
        G = 1;
    if (!columns && G == 1) {
        reduce_kernel<<<grid_for(A.M), RED_THREADS, 0, st>>>(A);
        AMPY_CUDA_LAUNCHED("reduce_kernel");
        return AMPY_OK;
    }
    const int64_t chunk = (A.R + G - 1) / G;
    void *part = NULL;
    const size_t pbytes = (size_t)(A.M * G) * sizeof(Acc);
    s = ampy_cuda_alloc(device, pbytes, &part);
    if (s != AMPY_OK)
        return s;
    if (columns)
        reduce_partial_columns<<<ampy_cuda_blocks(A.M * G, 128), 128, 0, st>>>(A, G, chunk,
                                                                               (Acc *)part);
    else
        reduce_partial_blocks<<<grid_for(A.M * G), RED_THREADS, 0, st>>>(A, G, chunk, (Acc *)part);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) {
        reduce_final<<<ampy_cuda_blocks(A.M, 128), 128, 0, st>>>(A, G, (const Acc *)part);
        e = cudaGetLastError();
    }
    ampy_cuda_free(part, pbytes, device); /* stream-ordered: reused only after these run */
    if (e != cudaSuccess)
        return ampy_cuda_fail(e, "launch of reduce_partial/reduce_final");
    return AMPY_OK;
}
