/* index.c — gather/scatter by integer index arrays and nonzero (index.h). */
#include <string.h>

#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/index.h"
#include "ampy/iter.h"

static ampy_status check_indices(const ampy_index_spec *s)
{
    for (int j = 0; j < s->k; j++) {
        const int64_t n = s->sizes[j];
        for (int64_t p = 0; p < s->P; p++) {
            int64_t v = s->idx[j][p];
            if (v < -n || v >= n)
                return ampy_error(AMPY_ERR_INDEX,
                                  "index %lld is out of bounds for dimension %d with size %lld",
                                  (long long)v, j, (long long)n);
        }
    }
    return AMPY_OK;
}

static int64_t offset_of(const ampy_index_spec *s, int64_t p)
{
    int64_t off = 0;
    for (int j = 0; j < s->k; j++) {
        int64_t v = s->idx[j][p];
        off += (v < 0 ? v + s->sizes[j] : v) * s->strides[j];
    }
    return off;
}

static void copy_elems(char **ptrs, const int64_t *st, int64_t n, void *ctx)
{
    const size_t isz = *(const size_t *)ctx;
    char *d = ptrs[0];
    const char *a = ptrs[1];
    for (int64_t i = 0; i < n; i++, d += st[0], a += st[1])
        memcpy(d, a, isz);
}

static int64_t rest_numel(const ampy_index_spec *s)
{
    int64_t n = 1;
    for (int d = 0; d < s->rest_ndim; d++)
        n *= s->rest_shape[d];
    return n;
}

ampy_status ampy_index_gather(const ampy_index_spec *s, const char *src, char *out)
{
    ampy_status st = check_indices(s);
    if (st != AMPY_OK)
        return st;
    const int64_t rn = rest_numel(s);
    int64_t strides[2 * AMPY_MAX_DIMS], acc = (int64_t)s->itemsize;
    for (int d = s->rest_ndim - 1; d >= 0; d--) {
        strides[d] = acc; /* out is contiguous */
        strides[s->rest_ndim + d] = s->rest_strides[d];
        acc *= s->rest_shape[d];
    }
    for (int64_t p = 0; p < s->P; p++) {
        const char *from = src + offset_of(s, p);
        char *to = out + p * rn * (int64_t)s->itemsize;
        if (s->rest_ndim == 0) {
            memcpy(to, from, s->itemsize);
            continue;
        }
        char *ptrs[2] = {to, (char *)from};
        ampy_iter_run(s->rest_ndim, s->rest_shape, 2, ptrs, strides, copy_elems,
                      (void *)&s->itemsize, 0);
    }
    return AMPY_OK;
}

ampy_status ampy_index_scatter(const ampy_index_spec *s, char *dst, const char *values,
                               const int64_t *vstrides)
{
    ampy_status st = check_indices(s);
    if (st != AMPY_OK)
        return st;
    int64_t strides[2 * AMPY_MAX_DIMS];
    for (int d = 0; d < s->rest_ndim; d++) {
        strides[d] = s->rest_strides[d];
        strides[s->rest_ndim + d] = vstrides[1 + d];
    }
    for (int64_t p = 0; p < s->P; p++) {
        char *to = dst + offset_of(s, p);
        const char *from = values + p * vstrides[0];
        if (s->rest_ndim == 0) {
            memcpy(to, from, s->itemsize);
            continue;
        }
        char *ptrs[2] = {to, (char *)from};
        ampy_iter_run(s->rest_ndim, s->rest_shape, 2, ptrs, strides, copy_elems,
                      (void *)&s->itemsize, 0);
    }
    return AMPY_OK;
}

/* dst += a element by element, rounded to the dtype after each addition
 * (halves: added in float, as torch's c10::Half arithmetic). */
static void add_elems(char **ptrs, const int64_t *st, int64_t n, void *ctx)
{
    const ampy_dtype dt = *(const ampy_dtype *)ctx;
    char *d = ptrs[0];
    const char *a = ptrs[1];
    for (int64_t i = 0; i < n; i++, d += st[0], a += st[1]) {
        if (dt == AMPY_FLOAT32) {
            float x, y;
            memcpy(&x, d, 4);
            memcpy(&y, a, 4);
            x += y;
            memcpy(d, &x, 4);
        } else if (dt == AMPY_FLOAT64) {
            double x, y;
            memcpy(&x, d, 8);
            memcpy(&y, a, 8);
            x += y;
            memcpy(d, &x, 8);
        } else {
            uint16_t x, y;
            memcpy(&x, d, 2);
            memcpy(&y, a, 2);
            x = dt == AMPY_FLOAT16 ? ampy_f32_to_f16(ampy_f16_to_f32(x) + ampy_f16_to_f32(y))
                                   : ampy_f32_to_bf16(ampy_bf16_to_f32(x) + ampy_bf16_to_f32(y));
            memcpy(d, &x, 2);
        }
    }
}

ampy_status ampy_index_put_accumulate(const ampy_index_spec *s, char *dst, ampy_dtype dtype,
                                      const char *values, const int64_t *vstrides)
{
    if (!ampy_dtype_is_float(dtype) || ampy_dtype_size(dtype) != s->itemsize)
        return ampy_error(AMPY_ERR_DTYPE,
                          "index_put_ with accumulate=True: expected a float32, float64, float16 "
                          "or bfloat16 tensor, got %s",
                          ampy_dtype_name(dtype));
    ampy_status st = check_indices(s);
    if (st != AMPY_OK)
        return st;
    int64_t one[2] = {1, 1}, strides[2 * AMPY_MAX_DIMS];
    const int64_t *shape = s->rest_ndim ? s->rest_shape : one;
    const int nd = s->rest_ndim ? s->rest_ndim : 1;
    for (int d = 0; d < s->rest_ndim; d++) {
        strides[d] = s->rest_strides[d];
        strides[nd + d] = vstrides[1 + d];
    }
    if (!s->rest_ndim)
        strides[0] = strides[1] = 0;
    for (int64_t p = 0; p < s->P; p++) { /* in index order: torch's serial CPU loop */
        char *ptrs[2] = {dst + offset_of(s, p), (char *)(values + p * vstrides[0])};
        ampy_iter_run(nd, shape, 2, ptrs, strides, add_elems, &dtype, 0);
    }
    return AMPY_OK;
}

/* Walk every element of a strided view in row-major order. */
#define FOR_EACH_ELEM(ndim, shape, strides, BODY)                                 \
    do {                                                                          \
        int64_t idx_[AMPY_MAX_DIMS] = {0}, total_ = 1, off_ = 0;                  \
        for (int d_ = 0; d_ < (ndim); d_++)                                       \
            total_ *= (shape)[d_];                                                \
        for (int64_t i_ = 0; i_ < total_; i_++) {                                 \
            BODY;                                                                 \
            for (int d_ = (ndim) - 1; d_ >= 0; d_--) {                            \
                off_ += (strides)[d_];                                            \
                if (++idx_[d_] < (shape)[d_])                                     \
                    break;                                                        \
                off_ -= (strides)[d_] * (shape)[d_];                              \
                idx_[d_] = 0;                                                     \
            }                                                                     \
        }                                                                         \
    } while (0)

int64_t ampy_nonzero_count(int ndim, const int64_t *shape, const int64_t *strides,
                           const uint8_t *mask)
{
    int64_t count = 0;
    FOR_EACH_ELEM(ndim, shape, strides, count += mask[off_] != 0);
    return count;
}

void ampy_nonzero_fill(int ndim, const int64_t *shape, const int64_t *strides,
                       const uint8_t *mask, int64_t *out)
{
    FOR_EACH_ELEM(ndim, shape, strides, {
        if (mask[off_]) {
            for (int d = 0; d < ndim; d++)
                *out++ = idx_[d];
        }
    });
}
