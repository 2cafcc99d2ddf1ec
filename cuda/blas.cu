/* blas.cu — GEMM through cuBLAS, loaded at run time (ampy/gemm_cuda.h).
 *
 * Why dlopen: the module must build where the CUDA toolkit has no cuBLAS
 * (CI, this project's machines: cuBLAS ships separately, e.g. as the
 * nvidia-cublas wheel torch depends on) and import where no cuBLAS exists.
 * The few cuBLAS symbols used are declared below with the types and enum
 * values of cublas_api.h (CUDA 12/13; the values are ABI and never change).
 *
 * Row-major C = A @ B is computed as the column-major C^T = B^T A^T, so
 * operands are passed in swapped order and a row-major operand is a
 * column-major one with op N (a transposed view gets op T): no copies.
 */
#include <atomic>
#include <dlfcn.h>
#include <mutex>
#include <stdio.h>
#include <string.h>

#include "ampy/gemm_cuda.h"
#include "common.cuh"

/* ---- the cuBLAS ABI subset -------------------------------------------------------- */
typedef struct cublasContext *cublasHandle_t;
typedef int cublasStatus_t; /* 0 = CUBLAS_STATUS_SUCCESS */
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16 };
enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_64F = 70, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
enum { CUBLAS_GEMM_DEFAULT = -1 };

typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*set_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*set_math_fn)(cublasHandle_t, int);
typedef cublasStatus_t (*set_ws_fn)(cublasHandle_t, void *, size_t);
typedef const char *(*status_string_fn)(cublasStatus_t);
typedef cublasStatus_t (*gemm64_fn)(cublasHandle_t, int, int, int64_t, int64_t, int64_t,
                                    const void *, const void *, cudaDataType, int64_t, long long,
                                    const void *, cudaDataType, int64_t, long long, const void *,
                                    void *, cudaDataType, int64_t, long long, int64_t, int, int);

static struct {
    std::mutex mu;
    int tried;
    void *lib;
    create_fn create;
    set_stream_fn set_stream;
    set_math_fn set_math;
    set_ws_fn set_workspace;
    status_string_fn status_string;
    gemm64_fn gemm;
    char paths[8][512];
    int npaths;
    char why[512];
    cublasHandle_t handle[64];
} B;

/* ampy.backends.cuda.matmul.allow_tf32 (gemm_cuda.h); off by default, as torch. */
static std::atomic<int> g_matmul_tf32{0};

extern "C" void ampy_cuda_set_matmul_tf32(int allow)
{
    g_matmul_tf32.store(allow != 0, std::memory_order_relaxed);
}

extern "C" int ampy_cuda_get_matmul_tf32(void)
{
    return g_matmul_tf32.load(std::memory_order_relaxed);
}

extern "C" ampy_status ampy_cuda_blas_add_path(const char *dir)
{
    std::lock_guard<std::mutex> lock(B.mu);
    if (B.npaths >= 8 || strlen(dir) >= sizeof B.paths[0] - 24)
        return ampy_error(AMPY_ERR_VALUE, "cuBLAS search path list is full or path too long");
    snprintf(B.paths[B.npaths++], sizeof B.paths[0], "%s", dir);
    return AMPY_OK;
}

/* B.mu held. */
static ampy_status load_cublas(void)
{
    if (B.tried)
        return B.lib ? AMPY_OK : ampy_error(AMPY_ERR_RUNTIME, "%s", B.why);
    B.tried = 1;
    const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    for (int i = 0; i < 3 && !B.lib; i++)
        B.lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
    for (int p = 0; p < B.npaths && !B.lib; p++)
        for (int i = 0; i < 3 && !B.lib; i++) {
            char full[600];
            snprintf(full, sizeof full, "%s/%s", B.paths[p], names[i]);
            B.lib = dlopen(full, RTLD_NOW | RTLD_GLOBAL);
        }
    if (!B.lib) {
        snprintf(B.why, sizeof B.why, "cuBLAS not found (dlopen libcublas.so.13/.12 by name and "
                 "in %d extra directories; install nvidia-cublas or set LD_LIBRARY_PATH)",
                 B.npaths);
        return ampy_error(AMPY_ERR_RUNTIME, "%s", B.why);
    }
    B.create = (create_fn)dlsym(B.lib, "cublasCreate_v2");
    B.set_stream = (set_stream_fn)dlsym(B.lib, "cublasSetStream_v2");
    B.set_math = (set_math_fn)dlsym(B.lib, "cublasSetMathMode");
    B.set_workspace = (set_ws_fn)dlsym(B.lib, "cublasSetWorkspace_v2");
    B.status_string = (status_string_fn)dlsym(B.lib, "cublasGetStatusString");
    B.gemm = (gemm64_fn)dlsym(B.lib, "cublasGemmStridedBatchedEx_64");
    if (!B.create || !B.set_stream || !B.set_math || !B.gemm || !B.status_string) {
        snprintf(B.why, sizeof B.why, "cuBLAS was found but lacks cublasGemmStridedBatchedEx_64 "
                 "or another needed symbol (cuBLAS >= 12 is required)");
        B.lib = NULL;
        return ampy_error(AMPY_ERR_RUNTIME, "%s", B.why);
    }
    return AMPY_OK;
}

static ampy_status blas_fail(cublasStatus_t s, const char *what)
{
    return ampy_error(AMPY_ERR_RUNTIME, "%s: %s (cuBLAS status %d)", what,
                      B.status_string ? B.status_string(s) : "?", s);
}

#define BLAS_TRY(call, what)                  \
    do {                                      \
        cublasStatus_t bs_ = (call);          \
        if (bs_ != 0)                         \
            return blas_fail(bs_, (what));    \
    } while (0)

/* The device's handle, bound to its current stream (B.mu held). */
static ampy_status get_handle(int device, cudaStream_t st, cublasHandle_t *out)
{
    if (device < 0 || device >= 64)
        return ampy_error(AMPY_ERR_VALUE, "gemm: bad device %d", device);
    if (!B.handle[device]) {
        BLAS_TRY(B.create(&B.handle[device]), "cublasCreate");
        BLAS_TRY(B.set_math(B.handle[device],
                            CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION),
                 "cublasSetMathMode");
        if (B.set_workspace) { /* 32 MiB, as torch on Hopper; kept for the process */
            void *ws = NULL;
            const size_t wsz = (size_t)32 << 20;
            ampy_status s = ampy_cuda_alloc(device, wsz, &ws);
            if (s != AMPY_OK)
                return s;
            BLAS_TRY(B.set_workspace(B.handle[device], ws, wsz), "cublasSetWorkspace");
        }
    }
    BLAS_TRY(B.set_stream(B.handle[device], st), "cublasSetStream");
    *out = B.handle[device];
    return AMPY_OK;
}

/* Column-major view of a row-major r x c operand with strides (s_r, s_c):
 * op and leading dimension, or -1 when neither stride is unit. */
static int col_major_op(int64_t r, int64_t c, int64_t s_r, int64_t s_c, int64_t *ld)
{
    if ((s_c == 1 || c == 1) && (s_r >= (c > 1 ? c : 1) || r == 1)) {
        *ld = r == 1 ? (c > 1 ? c : 1) : s_r;
        return CUBLAS_OP_N;
    }
    if ((s_r == 1 || r == 1) && (s_c >= (r > 1 ? r : 1) || c == 1)) {
        *ld = c == 1 ? (r > 1 ? r : 1) : s_c;
        return CUBLAS_OP_T;
    }
    return -1;
}

static int cuda_type(ampy_dtype d, cudaDataType *out)
{
    switch (d) {
    case AMPY_FLOAT16: *out = CUDA_R_16F; return 1;
    case AMPY_BFLOAT16: *out = CUDA_R_16BF; return 1;
    case AMPY_FLOAT32: *out = CUDA_R_32F; return 1;
    case AMPY_FLOAT64: *out = CUDA_R_64F; return 1;
    default: return 0;
    }
}

extern "C" ampy_status ampy_gemm_cuda(int device, const ampy_gemm_cuda_args *g)
{
    cudaDataType ti, to;
    if (!cuda_type(g->in_dtype, &ti) || !cuda_type(g->out_dtype, &to) ||
        !(g->out_dtype == g->in_dtype ||
          (ampy_dtype_is_half(g->in_dtype) && g->out_dtype == AMPY_FLOAT32)))
        return ampy_error(AMPY_ERR_DTYPE, "matmul (cuda): %s inputs with %s output are not "
                          "supported", ampy_dtype_name(g->in_dtype),
                          ampy_dtype_name(g->out_dtype));
    if (g->batch < 0 || g->m < 0 || g->n < 0 || g->k < 0)
        return ampy_error(AMPY_ERR_VALUE, "matmul (cuda): negative size");
    if (g->batch == 0 || g->m == 0 || g->n == 0)
        return AMPY_OK;
    int64_t lda, ldb;
    int opa = col_major_op(g->m, g->k, g->sa_m, g->sa_k, &lda);
    int opb = col_major_op(g->k, g->n, g->sb_k, g->sb_n, &ldb);
    if (opa < 0 || opb < 0)
        return ampy_error(AMPY_ERR_VALUE, "matmul (cuda): operand %c has no unit stride; make it "
                          "contiguous first", opa < 0 ? 'A' : 'B');
    int64_t ldc = g->n == 1 ? 1 : g->ldc;
    AMPY_CUDA_ENTER(device, st);
    std::lock_guard<std::mutex> lock(B.mu);
    ampy_status s = load_cublas();
    if (s != AMPY_OK)
        return s;
    cublasHandle_t h;
    s = get_handle(device, st, &h);
    if (s != AMPY_OK)
        return s;
    const int tf32 = g->in_dtype == AMPY_FLOAT32 && ampy_cuda_get_matmul_tf32();
    const int compute = g->in_dtype == AMPY_FLOAT64 ? CUBLAS_COMPUTE_64F
                        : tf32                      ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                    : CUBLAS_COMPUTE_32F;
    float af = (float)g->alpha, bf = (float)g->beta;
    double ad = g->alpha, bd = g->beta;
    const void *alpha = compute == CUBLAS_COMPUTE_64F ? (const void *)&ad : (const void *)&af;
    const void *beta = compute == CUBLAS_COMPUTE_64F ? (const void *)&bd : (const void *)&bf;
    /* column-major: C^T (n x m) = op(B)^T-view (n x k) * op(A)^T-view (k x m) */
    BLAS_TRY(B.gemm(h, opb, opa, g->n, g->m, g->k, alpha, g->b, ti, ldb, g->sb_b, g->a, ti, lda,
                    g->sa_b, beta, g->c, to, ldc, g->sc_b, g->batch, compute, CUBLAS_GEMM_DEFAULT),
             "cublasGemmStridedBatchedEx_64");
    return AMPY_OK;
}
