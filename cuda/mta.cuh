/* mta.cuh — multi-tensor apply (NVIDIA apex csrc/multi_tensor_apply.cuh,
 * rewritten): kernel-parameter metadata and the host-side packer shared by
 * amp.cu (unscale) and optim.cu (SGD/Adam), plus their element access.
 */
#ifndef AMPY_CUDA_MTA_CUH
#define AMPY_CUDA_MTA_CUH

#include "ampy/amp_cuda.h"
#include "common.cuh"

#define CHUNK AMPY_MTA_CHUNK
#define BLOCK AMPY_MTA_BLOCK
#define ILP AMPY_MTA_ILP

/* ---- multi-tensor apply: metadata and the host-side packer ------------------ */
template <int DEPTH, int MAXT, int MAXB>
struct MtaMeta {
    static constexpr int kMaxT = MAXT, kMaxB = MAXB;
    void *addr[DEPTH][MAXT];
    int64_t numel[MAXT];
    float *step[MAXT];          /* Adam: per-tensor step count                 */
    uint8_t dt[2][MAXT];        /* dtype of operand 0 (param/grad) and of grad */
    uint8_t first[MAXT];        /* SGD: momentum buffer holds no state yet     */
    uint8_t block_tensor[MAXB];
    int32_t block_chunk[MAXB];
};

/* Packs tensors i in [0, n) (fill(meta, slot, i) stores one tensor's fields)
 * and launches launch(meta, nblocks) whenever the metadata is full; a tensor
 * cut by a launch continues in slot 0 of the next one. */
template <typename Meta, typename Fill, typename Launch>
static ampy_status mta_run(int64_t n, const int64_t *numel_of, Fill fill, Launch launch)
{
    static_assert(sizeof(Meta) <= 3900, "kernel parameters must stay under 4 KiB");
    const int MAXT = Meta::kMaxT, MAXB = Meta::kMaxB;
    Meta m;
    int nt = 0, nb = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t ne = numel_of[i];
        if (ne == 0)
            continue;
        fill(m, nt, i);
        m.numel[nt] = ne;
        nt++;
        const int64_t chunks = (ne + CHUNK - 1) / CHUNK;
        for (int64_t c = 0; c < chunks; c++) {
            m.block_tensor[nb] = (uint8_t)(nt - 1);
            m.block_chunk[nb] = (int32_t)c;
            nb++;
            const bool last_chunk = c == chunks - 1;
            if (nb == MAXB || (nt == MAXT && last_chunk)) {
                ampy_status s = launch(m, nb);
                if (s != AMPY_OK)
                    return s;
                nb = 0;
                if (last_chunk) {
                    nt = 0;
                } else { /* the tensor goes on in the next launch */
                    fill(m, 0, i);
                    m.numel[0] = ne;
                    nt = 1;
                }
            }
        }
    }
    return nb > 0 ? launch(m, nb) : AMPY_OK;
}

static ampy_status check_numel(int64_t n, const int64_t *numel)
{
    for (int64_t i = 0; i < n; i++)
        if (numel[i] < 0 || numel[i] / CHUNK > INT32_MAX)
            return ampy_error(AMPY_ERR_VALUE, "tensor %lld: bad numel %lld", (long long)i,
                              (long long)numel[i]);
    return AMPY_OK;
}

static bool float_dt(int dt) { return dt == AMPY_FLOAT32 || ampy_dtype_is_half(dt); }

#endif /* AMPY_CUDA_MTA_CUH */
