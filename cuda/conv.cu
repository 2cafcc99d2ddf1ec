/* conv.cu — the CUDA twin of csrc/conv.c: 2-d convolution as im2col + the
 * cuBLAS GEMM of blas.cu (ampy_gemm_cuda: fp32 accumulation for halves, no
 * reduced-precision reductions), reached from _C.conv2d_* through the
 * ampy_cuda_api table. Contracts: ampy/conv.h (every pointer device memory).
 *
 * One image at a time: its column buffer (C*KH*KW rows, OH*OW columns) is
 * built by im2col_kernel, then one strided-batched GEMM over the groups.
 *   forward       y[n, g] = w[g] @ col[g] (+ bias, prefilled, beta = 1)
 *   input grad    col[g] = w[g]^T @ dy[n, g] in float32 (float64), then
 *                 col2im_kernel gathers every dx element's contributions (no
 *                 atomics, a fixed order) and rounds once, bias added first
 *   weight grad   acc[g] += dy[n, g] @ col[g]^T (float32 / float64, beta = 1
 *                 after the first image), rounded once into dw at the end
 * The bias gradient is a block sum in double per channel.
 */
#include <string.h>

#include "common.cuh"
#include "ampy/conv.h"
#include "ampy/conv_cuda.h"
#include "ampy/conv_math.h"
#include "ampy/gemm_cuda.h"

namespace {

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

struct Geom {
    int64_t C, H, W, KH, KW, OH, OW, sh, sw, pt, pl, dh, dw;
};

Geom geom_of(const ampy_conv2d_geom *g)
{
    Geom r = {g->C, g->H, g->W, g->KH, g->KW, g->OH, g->OW,
              g->sh, g->sw, g->pt, g->pl, g->dh, g->dw};
    return r;
}

/* col[(c*KH + kh)*KW + kw][oh*OW + ow] = x[c, ih, iw] (0 outside), any x strides. */
__global__ void im2col_kernel(Geom g, const char *x, int64_t xs_c, int64_t xs_h, int64_t xs_w,
                              int es, char *col)
{
    int64_t P = g.OH * g.OW, n = g.C * g.KH * g.KW * P;
    AMPY_GRID_STRIDE(i, n)
    {
        int64_t p = i % P, row = i / P;
        int64_t kw = row % g.KW, kh = (row / g.KW) % g.KH, c = row / (g.KW * g.KH);
        int64_t ih = ampy_conv_in_index(p / g.OW, kh, g.sh, g.pt, g.dh);
        int64_t iw = ampy_conv_in_index(p % g.OW, kw, g.sw, g.pl, g.dw);
        int inside = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W;
        const char *src = x + (size_t)(c * xs_c + ih * xs_h + iw * xs_w) * es;
        char *dst = col + (size_t)i * es;
        if (es == 2)
            *(uint16_t *)dst = inside ? *(const uint16_t *)src : 0;
        else if (es == 4)
            *(uint32_t *)dst = inside ? *(const uint32_t *)src : 0;
        else
            *(uint64_t *)dst = inside ? *(const uint64_t *)src : 0;
    }
}

/* dx[c, ih, iw] = bias[c] + sum of col over the (kh, kw, oh, ow) that read it. */
template <typename A>
__global__ void col2im_kernel(Geom g, const A *col, const void *bias, int dt, void *dx)
{
    int64_t HW = g.H * g.W, n = g.C * HW, P = g.OH * g.OW;
    AMPY_GRID_STRIDE(i, n)
    {
        int64_t c = i / HW, ih = (i % HW) / g.W, iw = i % g.W;
        A acc = 0;
        for (int64_t kh = 0; kh < g.KH; kh++) {
            int64_t oh = ampy_conv_out_index(ih, kh, g.sh, g.pt, g.dh, g.OH);
            if (oh < 0)
                continue;
            for (int64_t kw = 0; kw < g.KW; kw++) {
                int64_t ow = ampy_conv_out_index(iw, kw, g.sw, g.pl, g.dw, g.OW);
                if (ow >= 0)
                    acc += col[((c * g.KH + kh) * g.KW + kw) * P + oh * g.OW + ow];
            }
        }
        if (bias)
            acc += (A)ampy_ld_d((const char *)bias, dt, c);
        ampy_st_d((char *)dx, dt, i, (double)acc);
    }
}

/* out[n][o][p] = bias[o] (element bits copied). */
__global__ void fill_bias_kernel(int64_t N, int64_t O, int64_t P, const char *bias, int es,
                                 char *out)
{
    AMPY_GRID_STRIDE(i, N * O * P)
    {
        const char *b = bias + (size_t)((i / P) % O) * es;
        for (int k = 0; k < es; k++)
            out[(size_t)i * es + k] = b[k];
    }
}

__global__ void round_kernel(int64_t n, const float *src, int dt, void *dst)
{
    AMPY_GRID_STRIDE(i, n)
    ampy_st_f(dst, dt, i, src[i]);
}

#define BIAS_THREADS 256
__global__ void __launch_bounds__(BIAS_THREADS)
bias_kernel(int64_t N, int64_t O, int64_t P, const void *dy, int dt, void *db)
{
    __shared__ double sh[BIAS_THREADS];
    for (int64_t o = blockIdx.x; o < O; o += gridDim.x) {
        double acc = 0.0;
        for (int64_t j = threadIdx.x; j < N * P; j += blockDim.x)
            acc += ampy_ld_d((const char *)dy, dt, ((j / P) * O + o) * P + j % P);
        sh[threadIdx.x] = acc;
        __syncthreads();
        for (int w = blockDim.x / 2; w > 0; w >>= 1) {
            if ((int)threadIdx.x < w)
                sh[threadIdx.x] += sh[threadIdx.x + w];
            __syncthreads();
        }
        if (threadIdx.x == 0)
            ampy_st_d((char *)db, dt, o, sh[0]);
        __syncthreads();
    }
}

ampy_status check(const ampy_conv2d_geom *g, ampy_dtype dt)
{
    ampy_status s = ampy_conv2d_check(g);
    if (s != AMPY_OK)
        return s;
    if (dt != AMPY_FLOAT32 && dt != AMPY_FLOAT64 && !ampy_dtype_is_half(dt))
        return ampy_error(AMPY_ERR_DTYPE, "conv2d (cuda): unsupported dtype");
    return AMPY_OK;
}

ampy_status im2col(const ampy_conv2d_geom *g, cudaStream_t st, const char *x, const int64_t *xs,
                   ampy_dtype dt, void *col)
{
    int64_t n = g->C * g->KH * g->KW * g->OH * g->OW;
    im2col_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        geom_of(g), x, xs[1], xs[2], xs[3], (int)ampy_dtype_size(dt), (char *)col);
    AMPY_CUDA_LAUNCHED("im2col_kernel");
    return AMPY_OK;
}

ampy_gemm_cuda_args gemm_args(int64_t batch, int64_t m, int64_t n, int64_t k, ampy_dtype in,
                              ampy_dtype out, double beta)
{
    ampy_gemm_cuda_args a;
    memset(&a, 0, sizeof a);
    a.batch = batch, a.m = m, a.n = n, a.k = k, a.in_dtype = in, a.out_dtype = out;
    a.alpha = 1.0, a.beta = beta;
    return a;
}

} // namespace

extern "C" ampy_status ampy_conv2d_forward_cuda(int device, const ampy_conv2d_geom *g,
                                                ampy_dtype dt, const void *x, const int64_t *xs,
                                                const void *w, const void *bias, void *y)
{
    ampy_status s = check(g, dt);
    int64_t G = g->groups, Og = g->O / G, P = g->OH * g->OW, Kg = g->C / G * g->KH * g->KW;
    if (s != AMPY_OK || g->N * g->O * P == 0)
        return s;
    size_t es = ampy_dtype_size(dt);
    AMPY_CUDA_ENTER(device, st);
    if (bias) {
        fill_bias_kernel<<<ampy_cuda_blocks(g->N * g->O * P, AMPY_CUDA_THREADS),
                           AMPY_CUDA_THREADS, 0, st>>>(g->N, g->O, P, (const char *)bias,
                                                      (int)es, (char *)y);
        AMPY_CUDA_LAUNCHED("fill_bias_kernel");
    }
    Buf col(device);
    if ((s = col.get((size_t)(g->C * g->KH * g->KW * P) * es)) != AMPY_OK)
        return s;
    for (int64_t n = 0; n < g->N && s == AMPY_OK; n++) {
        if ((s = im2col(g, st, (const char *)x + (size_t)(n * xs[0]) * es, xs, dt, col.p)))
            break;
        ampy_gemm_cuda_args a = gemm_args(G, Og, P, Kg, dt, dt, bias ? 1.0 : 0.0);
        a.a = w, a.sa_b = Og * Kg, a.sa_m = Kg, a.sa_k = 1;
        a.b = col.p, a.sb_b = Kg * P, a.sb_k = P, a.sb_n = 1;
        a.c = (char *)y + (size_t)(n * g->O * P) * es, a.sc_b = Og * P, a.ldc = P;
        s = ampy_gemm_cuda(device, &a);
    }
    return s;
}

extern "C" ampy_status ampy_conv2d_backward_input_cuda(int device, const ampy_conv2d_geom *g,
                                                       ampy_dtype dt, const void *dy,
                                                       const void *w, const void *bias, void *dx)
{
    ampy_status s = check(g, dt);
    int64_t G = g->groups, Og = g->O / G, P = g->OH * g->OW, Kg = g->C / G * g->KH * g->KW;
    int64_t HW = g->H * g->W;
    if (s != AMPY_OK || g->N * g->C * HW == 0)
        return s;
    ampy_dtype acc = dt == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32;
    size_t es = ampy_dtype_size(dt), as = ampy_dtype_size(acc);
    AMPY_CUDA_ENTER(device, st);
    Buf col(device);
    if ((s = col.get((size_t)(g->C * g->KH * g->KW * P) * as)) != AMPY_OK)
        return s;
    Geom gg = geom_of(g);
    for (int64_t n = 0; n < g->N && s == AMPY_OK; n++) {
        ampy_gemm_cuda_args a = gemm_args(G, Kg, P, Og, dt, acc, 0.0);
        a.a = w, a.sa_b = Og * Kg, a.sa_m = 1, a.sa_k = Kg;
        a.b = (const char *)dy + (size_t)(n * g->O * P) * es, a.sb_b = Og * P, a.sb_k = P;
        a.sb_n = 1;
        a.c = col.p, a.sc_b = Kg * P, a.ldc = P;
        if ((s = ampy_gemm_cuda(device, &a)) != AMPY_OK)
            break;
        char *out = (char *)dx + (size_t)(n * g->C * HW) * es;
        unsigned blocks = ampy_cuda_blocks(g->C * HW, AMPY_CUDA_THREADS);
        if (acc == AMPY_FLOAT64)
            col2im_kernel<double><<<blocks, AMPY_CUDA_THREADS, 0, st>>>(
                gg, (const double *)col.p, bias, dt, out);
        else
            col2im_kernel<float><<<blocks, AMPY_CUDA_THREADS, 0, st>>>(
                gg, (const float *)col.p, bias, dt, out);
        AMPY_CUDA_LAUNCHED("col2im_kernel");
    }
    return s;
}

extern "C" ampy_status ampy_conv2d_backward_weight_cuda(int device, const ampy_conv2d_geom *g,
                                                        ampy_dtype dt, const void *x,
                                                        const int64_t *xs, const void *dy,
                                                        void *dw)
{
    ampy_status s = check(g, dt);
    if (s != AMPY_OK)
        return s;
    int64_t G = g->groups, Og = g->O / G, P = g->OH * g->OW, Kg = g->C / G * g->KH * g->KW;
    int64_t nw = g->O * Kg;
    size_t es = ampy_dtype_size(dt);
    AMPY_CUDA_ENTER(device, st);
    if (g->N * P == 0) {
        AMPY_CUDA_TRY(cudaMemsetAsync(dw, 0, (size_t)nw * es, st), "cudaMemsetAsync");
        return AMPY_OK;
    }
    int half = ampy_dtype_is_half(dt);
    ampy_dtype acc = half ? AMPY_FLOAT32 : dt;
    Buf col(device), accb(device);
    if ((s = col.get((size_t)(g->C * g->KH * g->KW * P) * es)) != AMPY_OK ||
        (half && (s = accb.get((size_t)nw * sizeof(float))) != AMPY_OK))
        return s;
    void *c = half ? accb.p : dw;
    for (int64_t n = 0; n < g->N && s == AMPY_OK; n++) {
        if ((s = im2col(g, st, (const char *)x + (size_t)(n * xs[0]) * es, xs, dt, col.p)))
            break;
        ampy_gemm_cuda_args a = gemm_args(G, Og, Kg, P, dt, acc, n == 0 ? 0.0 : 1.0);
        a.a = (const char *)dy + (size_t)(n * g->O * P) * es, a.sa_b = Og * P, a.sa_m = P;
        a.sa_k = 1;
        a.b = col.p, a.sb_b = Kg * P, a.sb_k = 1, a.sb_n = P;
        a.c = c, a.sc_b = Og * Kg, a.ldc = Kg;
        s = ampy_gemm_cuda(device, &a);
    }
    if (s == AMPY_OK && half) {
        round_kernel<<<ampy_cuda_blocks(nw, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
            nw, (const float *)accb.p, dt, dw);
        AMPY_CUDA_LAUNCHED("round_kernel");
    }
    return s;
}

extern "C" ampy_status ampy_conv_backward_bias_cuda(int device, int64_t N, int64_t O, int64_t P,
                                                    ampy_dtype dt, const void *dy, void *db)
{
    if (N < 0 || O < 0 || P < 0)
        return ampy_error(AMPY_ERR_VALUE, "conv2d (cuda): negative size");
    if (dt != AMPY_FLOAT32 && dt != AMPY_FLOAT64 && !ampy_dtype_is_half(dt))
        return ampy_error(AMPY_ERR_DTYPE, "conv2d (cuda): unsupported dtype");
    if (O == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    unsigned blocks = (unsigned)(O < 65535 ? O : 65535);
    bias_kernel<<<blocks, BIAS_THREADS, 0, st>>>(N, O, P, dy, dt, db);
    AMPY_CUDA_LAUNCHED("bias_kernel");
    return AMPY_OK;
}
