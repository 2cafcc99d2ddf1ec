/* fuzz_finite.c — libFuzzer target for the multi-tensor non-finite check +
 * unscale (finite.h), and the per-path kernels it dispatches to.
 *
 * The input bytes choose:
 *   [0] number of tensors (mod 6)   [1] CPU level (mod 3)
 *   [2] inv_scale: one of a table (1, 0.5, 2^-16, 65536, 2^-24, 3, 0, -1,
 *       inf, -inf, NaN, FLT_MAX, a subnormal) or, for values >= 13, the float
 *       with bits from the next 4 bytes
 *   [3] bit 0: found_inf starts at 1.0 (it must never be cleared);
 *       bit 1: also feed an invalid call (bad dtype / negative numel / NULL)
 *   then per tensor: [dtype (mod 3)] [numel lo] [numel hi] (numel mod 1500)
 *   the rest: element bytes, repeated to fill the tensors.
 * The outputs (bits of every element, and found_inf) are compared with a
 * scalar reference written here from elem.h's conversions. Each tensor is
 * its own exact-size allocation so ASan sees any access past its end.
 */
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/cpu.h"
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/finite.h"

#define MAXT 5

static void fail(const char *what, int64_t t, int64_t i)
{
    fprintf(stderr, "fuzz_finite: %s (tensor %lld, element %lld, cpu level %s)\n", what,
            (long long)t, (long long)i, ampy_cpu_level_name(ampy_cpu_level_get()));
    abort();
}

/* x * inv; for a NaN inv the payload is defined by finite.h: a NaN x keeps
 * its own, any other x takes inv's, quieted. */
static float mul(float x, float inv)
{
    if (inv != inv)
        return ampy_bits_f32((x != x ? ampy_f32_bits(x) : ampy_f32_bits(inv)) | 0x00400000u);
    return x * inv;
}

/* The reference: element bytes after the call, and whether it is "bad". */
static int ref_elem(int dt, const unsigned char *in, unsigned char *out, float inv)
{
    if (dt == AMPY_FLOAT32) {
        float x;
        memcpy(&x, in, 4);
        float y = inv == 1.0f ? x : mul(x, inv);
        memcpy(out, &y, 4);
        return !ampy_f32_isfinite(y);
    }
    uint16_t h;
    memcpy(&h, in, 2);
    if (inv != 1.0f) {
        float v = dt == AMPY_FLOAT16 ? ampy_f16_to_f32(h) : ampy_bf16_to_f32(h);
        v = mul(v, inv);
        h = dt == AMPY_FLOAT16 ? ampy_f32_to_f16(v) : ampy_f32_to_bf16(v);
    }
    memcpy(out, &h, 2);
    return dt == AMPY_FLOAT16 ? !ampy_f16_isfinite_bits(h) : !ampy_bf16_isfinite_bits(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    const int64_t nt = data[0] % (MAXT + 1);
    ampy_cpu_level_set(data[1] % 3);
    static const float table[13] = {1.0f, 0.5f, 1.0f / 65536, 65536.0f, 1.0f / 16777216,
                                    3.0f, 0.0f, -1.0f, 0, 0, 0, FLT_MAX, 1e-40f};
    float inv;
    size_t pos = 4;
    const int sel = data[2];
    if (sel < 13) {
        inv = table[sel];
        if (sel == 8) inv = ampy_bits_f32(0x7F800000u);
        if (sel == 9) inv = ampy_bits_f32(0xFF800000u);
        if (sel == 10) inv = ampy_bits_f32(0x7FC00001u);
    } else {
        if (size < pos + 4)
            return 0;
        uint32_t u;
        memcpy(&u, data + pos, 4);
        inv = ampy_bits_f32(u);
        pos += 4;
    }
    const float found0 = (data[3] & 1) ? 1.0f : 0.0f;
    const int bad_call = (data[3] & 2) != 0;

    int dtype[MAXT];
    int64_t numel[MAXT];
    void *ptrs[MAXT];
    unsigned char *orig[MAXT];
    for (int64_t t = 0; t < nt; t++) {
        if (pos + 3 > size)
            return 0;
        dtype[t] = data[pos] % 3; /* AMPY_FLOAT32, AMPY_FLOAT16, AMPY_BFLOAT16 */
        numel[t] = ((int64_t)data[pos + 1] | (int64_t)data[pos + 2] << 8) % 1500;
        pos += 3;
    }
    const size_t rest = size - pos;
    size_t fill = 0;
    for (int64_t t = 0; t < nt; t++) {
        const size_t bytes = (size_t)numel[t] * ampy_dtype_size(dtype[t]);
        ptrs[t] = numel[t] ? malloc(bytes) : NULL; /* NULL is allowed for numel 0 */
        orig[t] = malloc(bytes + 1);
        for (size_t b = 0; b < bytes; b++, fill++)
            orig[t][b] = rest ? data[pos + fill % rest] : (unsigned char)(fill * 97u + 5u);
        if (bytes)
            memcpy(ptrs[t], orig[t], bytes);
    }

    if (bad_call && nt > 0) {
        /* each invalid list is refused before any memory is touched */
        const int64_t t = (data[3] >> 2) % nt;
        const int keep_dt = dtype[t];
        const int64_t keep_n = numel[t];
        float f = found0;
        const int which = (data[3] >> 5) % 3;
        if (which == 0)
            dtype[t] = 4 + (data[3] >> 2) % 5; /* int64 ... bool, one past the last */
        else if (which == 1)
            numel[t] = -1 - keep_n;
        else
            numel[t] = keep_n + 1, ptrs[t] = keep_n ? ptrs[t] : NULL;
        void *saved = ptrs[t];
        if (which == 2)
            ptrs[t] = NULL;
        ampy_status st = ampy_finite_check_unscale(nt, ptrs, numel, dtype, &f, &inv);
        ptrs[t] = saved;
        dtype[t] = keep_dt;
        numel[t] = keep_n;
        if (st == AMPY_OK)
            fail("an invalid tensor list was accepted", t, -1);
        if (memcmp(&f, &found0, 4) != 0)
            fail("found_inf changed by a refused call", t, -1);
        for (int64_t u = 0; u < nt; u++)
            if (numel[u] && memcmp(ptrs[u], orig[u], numel[u] * ampy_dtype_size(dtype[u])) != 0)
                fail("a refused call modified a tensor", u, -1);
    }

    float found = found0;
    if (ampy_finite_check_unscale(nt, ptrs, numel, dtype, &found, &inv) != AMPY_OK)
        fail("a valid call returned an error", -1, -1);
    int any_bad = 0;
    for (int64_t t = 0; t < nt; t++) {
        const size_t es = ampy_dtype_size(dtype[t]);
        int tensor_bad = 0;
        for (int64_t i = 0; i < numel[t]; i++) {
            unsigned char want[4];
            tensor_bad |= ref_elem(dtype[t], orig[t] + i * es, want, inv);
            if (memcmp(want, (unsigned char *)ptrs[t] + i * es, es) != 0)
                fail("wrong output bits", t, i);
        }
        any_bad |= tensor_bad;
        /* the per-path kernels agree with the reference on their own */
        if (numel[t]) {
            unsigned char *copy = malloc(numel[t] * es);
            memcpy(copy, orig[t], numel[t] * es);
            if (ampy_finite_run_portable(copy, numel[t], dtype[t], inv) != tensor_bad)
                fail("portable kernel: wrong found flag", t, -1);
            if (memcmp(copy, ptrs[t], numel[t] * es) != 0)
                fail("portable kernel: wrong bits", t, -1);
            if (ampy_cpu_level_get() >= AMPY_CPU_AVX512) {
                memcpy(copy, orig[t], numel[t] * es);
                if (ampy_finite_run_avx512(copy, numel[t], dtype[t], inv) != tensor_bad)
                    fail("avx512 kernel: wrong found flag", t, -1);
                if (memcmp(copy, ptrs[t], numel[t] * es) != 0)
                    fail("avx512 kernel: wrong bits", t, -1);
            }
            free(copy);
        }
    }
    const float want_found = (any_bad || found0 == 1.0f) ? 1.0f : 0.0f;
    if (memcmp(&found, &want_found, 4) != 0)
        fail("wrong found_inf", -1, -1);
    for (int64_t t = 0; t < nt; t++) {
        free(ptrs[t]);
        free(orig[t]);
    }
    return 0;
}
