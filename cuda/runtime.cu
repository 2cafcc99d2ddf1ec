/* runtime.cu — devices, one current stream per device, the caching device
 * allocator and host/device copies (ampy/cuda.h).
 *
 * The allocator follows the idea of PyTorch's CUDACachingAllocator, much
 * simplified: sizes round up to a size class; a freed block goes to a free
 * list keyed by (device, stream, size) and is handed out again to a request
 * on the same stream whose class is at most half the block's size away;
 * stream order makes reuse safe without events. When cudaMalloc fails, the
 * cache of that device is released (after a synchronise) and the call is
 * retried once. One mutex guards the tables; CUDA calls that can block
 * (cudaMalloc, cudaFree) run under it too, which is simple and fine for the
 * single-threaded training loops ampy targets.
 *
 * cudart is linked statically (cudart_static): the module loads on machines
 * without a driver, and cudaGetDeviceCount() then reports the reason.
 */
#include <map>
#include <mutex>
#include <stdio.h>
#include <unordered_map>
#include <vector>

#include "common.cuh"

#define MAX_DEVICES 64

ampy_status ampy_cuda_fail(cudaError_t e, const char *what)
{
    (void)cudaGetLastError(); /* clear a sticky non-fatal error so the next call is clean */
    ampy_status s = (e == cudaErrorMemoryAllocation) ? AMPY_ERR_NOMEM : AMPY_ERR_RUNTIME;
    return ampy_error(s, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* ---- devices and streams ------------------------------------------------- */
static std::mutex g_mu;
static cudaStream_t g_streams[MAX_DEVICES];

extern "C" ampy_status ampy_cuda_device_count(int *n)
{
    *n = 0;
    int c = 0;
    cudaError_t e = cudaGetDeviceCount(&c);
    if (e != cudaSuccess)
        return ampy_cuda_fail(e, "cudaGetDeviceCount");
    *n = c;
    return AMPY_OK;
}

extern "C" ampy_status ampy_cuda_current_device(int *device)
{
    AMPY_CUDA_TRY(cudaGetDevice(device), "cudaGetDevice");
    return AMPY_OK;
}

static ampy_status check_index(int device)
{
    int n;
    ampy_status s = ampy_cuda_device_count(&n);
    if (s != AMPY_OK)
        return s;
    if (device < 0 || device >= n || device >= MAX_DEVICES)
        return ampy_error(AMPY_ERR_VALUE, "CUDA error: invalid device ordinal %d (%d devices)",
                          device, n);
    return AMPY_OK;
}

extern "C" ampy_status ampy_cuda_set_device(int device)
{
    ampy_status s = check_index(device);
    if (s != AMPY_OK)
        return s;
    AMPY_CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
    return AMPY_OK;
}

extern "C" void *ampy_cuda_stream(int device)
{
    if (device < 0 || device >= MAX_DEVICES) {
        ampy_error(AMPY_ERR_VALUE, "ampy_cuda_stream: bad device %d", device);
        return NULL;
    }
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_streams[device]) {
        int prev = 0;
        cudaError_t e = cudaGetDevice(&prev);
        if (e == cudaSuccess)
            e = cudaSetDevice(device);
        cudaStream_t st = NULL;
        if (e == cudaSuccess)
            e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            ampy_cuda_fail(e, "cudaStreamCreateWithFlags");
            return NULL;
        }
        cudaSetDevice(prev);
        g_streams[device] = st;
    }
    return (void *)g_streams[device];
}

extern "C" ampy_status ampy_cuda_synchronize(int device)
{
    if (device < 0)
        AMPY_CUDA_TRY(cudaGetDevice(&device), "cudaGetDevice");
    AMPY_CUDA_ENTER(device, st);
    AMPY_CUDA_TRY(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    return ampy_cuda_deferred_error(device); /* a device-side check that failed meanwhile */
}

extern "C" ampy_status ampy_cuda_device_name(int device, char *buf, size_t size)
{
    ampy_status s = check_index(device);
    if (s != AMPY_OK)
        return s;
    cudaDeviceProp p;
    AMPY_CUDA_TRY(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
    snprintf(buf, size, "%s", p.name);
    return AMPY_OK;
}

extern "C" ampy_status ampy_cuda_device_caps(int device, int *major, int *minor, int *sm_count)
{
    ampy_status s = check_index(device);
    if (s != AMPY_OK)
        return s;
    AMPY_CUDA_TRY(cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device),
                  "cudaDeviceGetAttribute(major)");
    AMPY_CUDA_TRY(cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, device),
                  "cudaDeviceGetAttribute(minor)");
    AMPY_CUDA_TRY(cudaDeviceGetAttribute(sm_count, cudaDevAttrMultiProcessorCount, device),
                  "cudaDeviceGetAttribute(multiProcessorCount)");
    return AMPY_OK;
}

/* ---- caching allocator ---------------------------------------------------- */
namespace {
struct Block {
    void *ptr;
    size_t size; /* rounded */
    cudaStream_t stream;
};
struct DeviceCache {
    /* free blocks by size; value holds the stream they belong to */
    std::multimap<size_t, Block> free_blocks;
    std::unordered_map<void *, Block> live;
    ampy_cuda_mem_stats stats;
};
DeviceCache g_cache[MAX_DEVICES];
} // namespace

static size_t round_size(size_t n)
{
    const size_t small = 512, large = (size_t)2 << 20;
    if (n == 0)
        n = 1;
    if (n < ((size_t)1 << 20))
        return (n + small - 1) / small * small;
    return (n + large - 1) / large * large;
}

/* Release every free block of one device (g_mu held). */
static ampy_status release_cache(int device)
{
    DeviceCache &c = g_cache[device];
    if (c.free_blocks.empty())
        return AMPY_OK;
    AMPY_CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
    AMPY_CUDA_TRY(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    for (auto &kv : c.free_blocks) {
        AMPY_CUDA_TRY(cudaFree(kv.second.ptr), "cudaFree");
        c.stats.reserved -= (int64_t)kv.second.size;
    }
    c.free_blocks.clear();
    return AMPY_OK;
}

extern "C" ampy_status ampy_cuda_alloc(int device, size_t nbytes, void **out)
{
    *out = NULL;
    if (device < 0 || device >= MAX_DEVICES)
        return ampy_error(AMPY_ERR_VALUE, "cuda alloc: bad device %d", device);
    if (nbytes > ((size_t)1 << 48))
        return ampy_error(AMPY_ERR_NOMEM, "cuda alloc: %zu bytes is too large", nbytes);
    cudaStream_t st = (cudaStream_t)ampy_cuda_stream(device);
    if (!st)
        return AMPY_ERR_RUNTIME;
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(g_mu);
    DeviceCache &c = g_cache[device];
    for (auto it = c.free_blocks.lower_bound(size);
         it != c.free_blocks.end() && it->first <= 2 * size; ++it) {
        if (it->second.stream != st)
            continue;
        Block b = it->second;
        c.free_blocks.erase(it);
        c.live[b.ptr] = b;
        c.stats.allocated += (int64_t)b.size;
        if (c.stats.allocated > c.stats.max_allocated)
            c.stats.max_allocated = c.stats.allocated;
        *out = b.ptr;
        return AMPY_OK;
    }
    AMPY_CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        ampy_status s = release_cache(device);
        if (s != AMPY_OK)
            return s;
        e = cudaMalloc(&p, size);
    }
    if (e != cudaSuccess) {
        char what[96];
        snprintf(what, sizeof what, "cudaMalloc(%zu bytes) on cuda:%d", size, device);
        return ampy_cuda_fail(e, what);
    }
    Block b = {p, size, st};
    c.live[p] = b;
    c.stats.num_allocs++;
    c.stats.allocated += (int64_t)size;
    c.stats.reserved += (int64_t)size;
    if (c.stats.allocated > c.stats.max_allocated)
        c.stats.max_allocated = c.stats.allocated;
    if (c.stats.reserved > c.stats.max_reserved)
        c.stats.max_reserved = c.stats.reserved;
    *out = p;
    return AMPY_OK;
}

extern "C" void ampy_cuda_free(void *ptr, size_t nbytes, int device)
{
    (void)nbytes;
    if (!ptr || device < 0 || device >= MAX_DEVICES)
        return;
    std::lock_guard<std::mutex> lock(g_mu);
    DeviceCache &c = g_cache[device];
    auto it = c.live.find(ptr);
    if (it == c.live.end())
        return;
    Block b = it->second;
    c.live.erase(it);
    c.stats.allocated -= (int64_t)b.size;
    c.free_blocks.insert(std::make_pair(b.size, b));
}

extern "C" ampy_status ampy_cuda_memory_stats(int device, ampy_cuda_mem_stats *out)
{
    if (device < 0 || device >= MAX_DEVICES)
        return ampy_error(AMPY_ERR_VALUE, "memory stats: bad device %d", device);
    std::lock_guard<std::mutex> lock(g_mu);
    *out = g_cache[device].stats;
    return AMPY_OK;
}

extern "C" void ampy_cuda_reset_peak_memory_stats(int device)
{
    if (device < 0 || device >= MAX_DEVICES)
        return;
    std::lock_guard<std::mutex> lock(g_mu);
    ampy_cuda_mem_stats &s = g_cache[device].stats;
    s.max_allocated = s.allocated;
    s.max_reserved = s.reserved;
}

extern "C" ampy_status ampy_cuda_empty_cache(void)
{
    std::lock_guard<std::mutex> lock(g_mu);
    for (int d = 0; d < MAX_DEVICES; d++) {
        ampy_status s = release_cache(d);
        if (s != AMPY_OK)
            return s;
    }
    return AMPY_OK;
}

/* ---- copies ------------------------------------------------------------------- */
extern "C" ampy_status ampy_cuda_memcpy(void *dst, int dst_device, const void *src,
                                        int src_device, size_t nbytes)
{
    if (nbytes == 0)
        return AMPY_OK;
    if (dst_device >= 0 && src_device >= 0 && dst_device != src_device)
        return ampy_error(AMPY_ERR_RUNTIME,
                          "copy between cuda:%d and cuda:%d: peer copies are not supported; "
                          "go through .cpu()", src_device, dst_device);
    if (dst_device < 0 && src_device < 0)
        return ampy_error(AMPY_ERR_VALUE, "ampy_cuda_memcpy: both sides are host memory");
    int device = dst_device >= 0 ? dst_device : src_device;
    AMPY_CUDA_ENTER(device, st);
    cudaMemcpyKind kind = dst_device < 0   ? cudaMemcpyDeviceToHost
                          : src_device < 0 ? cudaMemcpyHostToDevice
                                           : cudaMemcpyDeviceToDevice;
    AMPY_CUDA_TRY(cudaMemcpyAsync(dst, src, nbytes, kind, st), "cudaMemcpyAsync");
    if (kind == cudaMemcpyDeviceToHost) {
        AMPY_CUDA_TRY(cudaStreamSynchronize(st), "cudaStreamSynchronize (device to host copy)");
        return ampy_cuda_deferred_error(device); /* a device-side check that failed meanwhile */
    }
    return AMPY_OK;
}
