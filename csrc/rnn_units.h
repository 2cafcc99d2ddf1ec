/* rnn_units.h — the fused cells of csrc/rnn.c over a range of hidden units
 * [j0, j1) of every row, for the threaded layer loop of csrc/rnn_layer.c
 * (each thread owns some units and all their gates). Serial; the same
 * formulas and roundings as ampy_rnn_cell_fwd / _bwd. */
#ifndef AMPY_RNN_UNITS_H
#define AMPY_RNN_UNITS_H

#include <stdint.h>

/* Forward of one step, float32 / float16 / bfloat16 storage. gx (B, G*H),
 * hx, cx, hy, cy (B, H) in dtype; ws (B, S*H) float32 or NULL; gh: the
 * hidden projection of units j0.. only, float32 (already rounded to dtype
 * for the halves): gate k of unit j0 + u of row b at gh[b * ldg + k * gs + u]. */
typedef struct rnn_units_fwd {
    int mode, dtype;
    int64_t B, H, ldg, gs;
    const void *gx, *hx, *cx;
    const float *gh;
    void *hy, *cy, *ws;
} rnn_units_fwd;

/* scratch: (G + 2) * gs floats. */
void ampy_rnn_cell_fwd_units(const rnn_units_fwd *f, int64_t j0, int64_t j1, float *scratch);

/* Backward of one step, every dtype; arguments as ampy_rnn_cell_bwd's, all
 * full arrays; only units [j0, j1) are read and written. */
void ampy_rnn_cell_bwd_units(int mode, int64_t B, int64_t H, int dtype, int64_t j0, int64_t j1,
                             const void *ws, const void *hx, const void *cx, const void *dhy,
                             const void *dcy, void *dgx, void *dgh, void *dhx, void *dcx);

#endif /* AMPY_RNN_UNITS_H */
