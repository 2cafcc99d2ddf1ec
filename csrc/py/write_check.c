/* write_check.c — the check every write path of the binding runs on the
 * tensor it is about to write (declared in pyampy.h): read-only memory
 * (storage flags set on import) and internal overlap (several elements on
 * one memory location, where the result would depend on the write order).
 *
 * Overlap is decided exactly. torch raises only for the case it can see
 * cheaply (a zero stride over a size > 1, as expand makes) and lets other
 * self-overlapping layouts (as_strided) through with undefined results; ampy
 * raises torch's message for those too. The quick tests settle every layout
 * ampy's own views make; only an as_strided view whose strides interleave
 * is settled by marking each element's offset in a bitmap of its span.
 */
#include "pyampy.h"

#include <stdlib.h>

/* Dims of size > 1 with |stride|, sorted by stride; 1 + *zero when a zero
 * stride covers a size > 1. */
static int sorted_dims(const AmpyTensor *t, int64_t *sz, int64_t *st, int *zero)
{
    int n = 0;
    *zero = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] <= 1)
            continue;
        if (t->strides[d] == 0) {
            *zero = 1;
            return n;
        }
        int64_t s = t->strides[d] < 0 ? -t->strides[d] : t->strides[d];
        int i = n++;
        for (; i > 0 && st[i - 1] > s; i--) {
            st[i] = st[i - 1];
            sz[i] = sz[i - 1];
        }
        st[i] = s;
        sz[i] = t->shape[d];
    }
    return n;
}

/* Mark every element's offset (dims of sz/st, all strides > 0) in a bitmap
 * of the span; 1 at the first offset seen twice. */
static int mark_offsets(int n, const int64_t *sz, const int64_t *st, int64_t span)
{
    unsigned char *bits = calloc((size_t)(span / 8 + 1), 1);
    if (!bits) {
        PyErr_NoMemory();
        return -1;
    }
    int64_t idx[AMPY_MAX_DIMS] = {0}, off = 0;
    int hit = 0;
    for (;;) {
        unsigned char m = (unsigned char)(1u << (off & 7));
        if (bits[off >> 3] & m) {
            hit = 1;
            break;
        }
        bits[off >> 3] |= m;
        int d = 0;
        for (; d < n; d++) { /* odometer, dim 0 fastest */
            if (++idx[d] < sz[d]) {
                off += st[d];
                break;
            }
            off -= (sz[d] - 1) * st[d];
            idx[d] = 0;
        }
        if (d == n)
            break;
    }
    free(bits);
    return hit;
}

int ampy_py_internal_overlap(const AmpyTensor *t)
{
    if (t->numel <= 1)
        return 0;
    int64_t sz[AMPY_MAX_DIMS], st[AMPY_MAX_DIMS];
    int zero, n = sorted_dims(t, sz, st, &zero);
    if (zero)
        return 1;
    /* each stride beyond the reach of the smaller ones: no two elements meet */
    int64_t reach = 0;
    int separated = 1;
    for (int i = 0; i < n; i++) {
        if (st[i] <= reach)
            separated = 0;
        reach += (sz[i] - 1) * st[i];
    }
    return separated ? 0 : mark_offsets(n, sz, st, reach);
}

int ampy_py_check_write_slow(const AmpyTensor *t, const char *fn, const char *arg, int flags)
{
    if (((const AmpyStorage *)t->base)->flags)
        return ampy_py_raise_readonly(t, fn, arg);
    if (!(flags & AMPY_PY_WRITE_OVERLAP))
        return 0;
    int o = ampy_py_internal_overlap(t);
    if (o > 0)
        PyErr_SetString(PyExc_RuntimeError,
                        "unsupported operation: more than one element of the written-to tensor "
                        "refers to a single memory location. Please clone() the tensor before "
                        "performing the operation.");
    return o ? -1 : 0;
}
