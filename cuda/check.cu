/* check.cu — deferred device-side argument checks (see common.cuh): the
 * per-device error record in mapped pinned host memory, the sync-checks
 * switch, the reporting at synchronisation points and a shared index-range
 * check kernel.
 *
 * Why mapped host memory: after any stream synchronisation the host reads the
 * record directly, so a synchronisation point costs no extra copy. The claim
 * word lives in device memory, so the atomicCAS that picks the first failure
 * is an ordinary device atomic.
 */
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"

namespace {

#define MAX_DEVICES 64

struct Slot {
    unsigned int *claim;      /* device memory */
    ampy_cuda_err *host, *dev; /* the mapped record: host and device views */
};
Slot g_slots[MAX_DEVICES];
std::mutex g_lock;
int g_sync_checks = -1; /* -1: not read from the environment yet */

__global__ void check_range_kernel(int64_t P, const int64_t *idx, int64_t n, int negative_ok,
                                   ampy_cuda_errslot slot, unsigned code, int arg)
{
    AMPY_GRID_STRIDE(p, P)
    {
        const int64_t v = idx[p];
        if (v >= n || v < (negative_ok ? -n : 0))
            ampy_dev_fail(slot, code, arg, v, n);
    }
}

const char *kernel_of(unsigned code)
{
    switch (code) {
    case AMPY_DEVERR_INDEX: return "advanced indexing";
    case AMPY_DEVERR_TARGET: return "cross_entropy/nll_loss";
    case AMPY_DEVERR_EMBEDDING: return "embedding";
    default: return "integer fmod/remainder/floor_divide";
    }
}

ampy_status report(const ampy_cuda_err &e, bool deferred)
{
    char msg[256];
    ampy_status st = AMPY_ERR_INDEX;
    switch (e.code) {
    case AMPY_DEVERR_INDEX:
        snprintf(msg, sizeof msg, "index %lld is out of bounds for dimension %d with size %lld",
                 e.value, e.arg, e.size);
        break;
    case AMPY_DEVERR_TARGET: snprintf(msg, sizeof msg, "Target %lld is out of bounds.", e.value); break;
    case AMPY_DEVERR_EMBEDDING: snprintf(msg, sizeof msg, "index out of range in self"); break;
    default:
        snprintf(msg, sizeof msg, "ZeroDivisionError");
        st = AMPY_ERR_RUNTIME;
        break;
    }
    if (!deferred)
        return ampy_error(st, "%s", msg);
    return ampy_error(st, "%s (found on the device by an earlier %s kernel and reported at this "
                      "synchronisation point; ampy.cuda.set_sync_checks(True) raises it at the op)",
                      msg, kernel_of(e.code));
}

} // namespace

extern "C" void ampy_cuda_set_sync_checks(int on) { g_sync_checks = on ? 1 : 0; }

extern "C" int ampy_cuda_get_sync_checks(void)
{
    if (g_sync_checks < 0) {
        const char *v = getenv("AMPY_CUDA_SYNC_CHECKS");
        g_sync_checks = v && v[0] && strcmp(v, "0") != 0;
    }
    return g_sync_checks;
}

ampy_status ampy_cuda_errslot_get(int device, ampy_cuda_errslot *out)
{
    if (device < 0 || device >= MAX_DEVICES)
        return ampy_error(AMPY_ERR_VALUE, "cuda:%d: device index out of range", device);
    std::lock_guard<std::mutex> g(g_lock);
    Slot &s = g_slots[device];
    if (!s.claim) {
        AMPY_CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
        void *h = NULL, *c = NULL;
        AMPY_CUDA_TRY(cudaHostAlloc(&h, sizeof(ampy_cuda_err), cudaHostAllocMapped),
                      "cudaHostAlloc(error record)");
        memset(h, 0, sizeof(ampy_cuda_err));
        void *d = NULL;
        cudaError_t e = cudaHostGetDevicePointer(&d, h, 0);
        if (e == cudaSuccess)
            e = cudaMalloc(&c, sizeof(unsigned int));
        if (e == cudaSuccess)
            e = cudaMemset(c, 0, sizeof(unsigned int)); /* once per device, synchronous */
        if (e != cudaSuccess) {
            cudaFreeHost(h);
            if (c)
                cudaFree(c);
            return ampy_cuda_fail(e, "error record of the device checks");
        }
        s.host = (ampy_cuda_err *)h;
        s.dev = (ampy_cuda_err *)d;
        s.claim = (unsigned int *)c;
    }
    out->claim = s.claim;
    out->rec = s.dev;
    return AMPY_OK;
}

static ampy_status take(int device, bool deferred)
{
    if (device < 0 || device >= MAX_DEVICES)
        return AMPY_OK;
    ampy_cuda_err e;
    unsigned int *claim;
    {
        std::lock_guard<std::mutex> g(g_lock);
        Slot &s = g_slots[device];
        if (!s.host || !((volatile ampy_cuda_err *)s.host)->code)
            return AMPY_OK;
        e = *s.host;
        memset(s.host, 0, sizeof *s.host);
        claim = s.claim;
    }
    /* free the claim for the next failure, in stream order (no wait) */
    cudaStream_t st = (cudaStream_t)ampy_cuda_stream(device);
    if (st)
        AMPY_CUDA_TRY(cudaMemsetAsync(claim, 0, sizeof(unsigned int), st), "cudaMemsetAsync");
    return report(e, deferred);
}

ampy_status ampy_cuda_deferred_error(int device) { return take(device, true); }

ampy_status ampy_cuda_checked(int device, cudaStream_t st)
{
    if (!ampy_cuda_get_sync_checks())
        return AMPY_OK;
    AMPY_CUDA_TRY(cudaStreamSynchronize(st), "cudaStreamSynchronize (sync checks)");
    return take(device, false); /* raised at the op: the CPU's plain message */
}

ampy_status ampy_cuda_check_range(int device, cudaStream_t st, int64_t P, const int64_t *idx,
                                  int64_t n, int negative_ok, unsigned code, int arg)
{
    if (P <= 0)
        return AMPY_OK;
    ampy_cuda_errslot slot;
    ampy_status s = ampy_cuda_errslot_get(device, &slot);
    if (s != AMPY_OK)
        return s;
    check_range_kernel<<<ampy_cuda_blocks(P, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        P, idx, n, negative_ok, slot, code, arg);
    AMPY_CUDA_LAUNCHED("check_range_kernel");
    return ampy_cuda_checked(device, st);
}
