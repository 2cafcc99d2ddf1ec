/* ampy/rnn.h — one time step of the recurrent cells (LSTM, GRU, Elman RNN
 * with tanh or relu), forward and backward, over a batch of rows.
 *
 * The matrix products are not here: the caller computes the input
 * projection of every time step as one GEMM (gx = x W_ih^T + b_ih) and, per
 * step, the hidden projection (gh = h W_hh^T + b_hh), then calls the fused
 * cell, which adds them, applies the gates and writes the new state. The
 * per-element formulas are in ampy/rnn_math.h (shared with cuda/rnn.cu).
 *
 * Layout: every array is contiguous, row-major, rows = the batch B.
 * Gate arrays are (B, G*H) with the gates of a row side by side in torch's
 * order (LSTM: i f g o, G = 4; GRU: r z n, G = 3; RNN: G = 1); state arrays
 * are (B, H). All tensors of a call share `dtype` (float32, float16,
 * bfloat16 or float64); halves compute in float32 and round once on store.
 * The workspace `ws` holds the activations the backward reads, (B, S*H)
 * (S = 5 LSTM, 4 GRU, 1 RNN) in float32, or float64 when dtype is float64.
 * Statuses: AMPY_OK; AMPY_ERR_VALUE (unknown mode, negative size, a
 * required pointer NULL); AMPY_ERR_DTYPE (dtype not floating).
 */
#ifndef AMPY_RNN_H
#define AMPY_RNN_H

#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ampy_rnn_mode {
    AMPY_RNN_LSTM = 0,
    AMPY_RNN_GRU = 1,
    AMPY_RNN_TANH = 2,
    AMPY_RNN_RELU = 3
} ampy_rnn_mode;

/* Forward of one step.
 *   gx, gh  in   (B, G*H) input and hidden projections (biases included)
 *   hx      in   (B, H) previous hidden state (GRU; ignored otherwise, may be NULL)
 *   cx      in   (B, H) previous cell state (LSTM; ignored otherwise, may be NULL)
 *   hy      out  (B, H) new hidden state
 *   cy      out  (B, H) new cell state (LSTM; ignored otherwise)
 *   ws      out  (B, S*H) saved activations, or NULL when no backward follows
 * The outputs must not overlap the inputs. */
ampy_status ampy_rnn_cell_fwd(int mode, int64_t B, int64_t H, int dtype, const void *gx,
                              const void *gh, const void *hx, const void *cx, void *hy, void *cy,
                              void *ws);

/* Backward of one step, from the forward's workspace.
 *   ws      in   (B, S*H) what ampy_rnn_cell_fwd saved
 *   hx, cx  in   the forward's previous states (hx: GRU, cx: LSTM)
 *   dhy     in   (B, H) gradient of hy, or NULL for zero
 *   dcy     in   (B, H) gradient of cy (LSTM), or NULL for zero
 *   dgx     out  (B, G*H) gradient of gx (for LSTM and RNN also that of gh)
 *   dgh     out  (B, G*H) gradient of gh (GRU; ignored otherwise)
 *   dhx     out  (B, H) gradient of hx through the cell's direct use of it
 *                (GRU; ignored otherwise; the part through gh is the caller's)
 *   dcx     out  (B, H) gradient of cx (LSTM), or NULL when not needed */
ampy_status ampy_rnn_cell_bwd(int mode, int64_t B, int64_t H, int dtype, const void *ws,
                              const void *hx, const void *cx, const void *dhy, const void *dcy,
                              void *dgx, void *dgh, void *dhx, void *dcx);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_RNN_H */
