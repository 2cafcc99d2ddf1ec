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

/* ---- a whole layer of one direction over T steps (csrc/rnn_layer.c, CPU) ----
 * Arrays are contiguous and time-major: gx, dgx, dgh (T, B, G*H), y, cs, dy
 * (T, B, H), ws (T, B, S*H) in the workspace type above; h0, c0, hT-style
 * states (B, H); w_hh (G*H, H), b_hh (G*H). One dtype for all but ws.
 * reverse != 0 runs the steps from t = T-1 down to 0 (the reverse direction
 * of a bidirectional layer); y[t] is always the output at time t. */

/* Forward: per step gh = h W_hh^T + b_hh (b_hh may be NULL) and the fused
 * cell; writes y (every step's h'), cs (every step's c', LSTM; may be NULL
 * otherwise) and ws (or NULL when no backward follows). The final states
 * are y and cs at the last step's time. */
ampy_status ampy_rnn_layer_fwd(int mode, int reverse, int64_t T, int64_t B, int64_t H, int dtype,
                               const void *gx, const void *w_hh, const void *b_hh,
                               const void *h0, const void *c0, void *y, void *cs, void *ws);

typedef struct ampy_rnn_layer_bwd_args {
    int mode, reverse, dtype;
    int64_t T, B, H;
    /* in: what the forward saved and read */
    const void *ws, *y, *cs, *h0, *c0, *w_hh;
    /* in: output gradients, each NULL for zero */
    const void *dy, *dhT, *dcT;
    /* out: dgx (T, B, G*H) always (for LSTM and RNN also the gradient of
     * every step's gh); dgh (T, B, G*H) for GRU (ignored otherwise); the
     * rest NULL when not needed */
    void *dgx, *dgh, *dh0, *dc0, *dw_hh, *db_hh;
} ampy_rnn_layer_bwd_args;

/* Backward through time, then dW_hh and db_hh as one GEMM each over all
 * T*B rows. */
ampy_status ampy_rnn_layer_bwd(const ampy_rnn_layer_bwd_args *args);

/* Which time loop the layer runs. Where ampy_gemm would run a product of
 * the layer on its AVX-512 FMA kernel (float32, float16) or its vdpbf16ps
 * one (bfloat16) and the setting is on (the default), the hidden weight is
 * packed once per call and the loop runs in one parallel region
 * (csrc/rnn_layer_packed.c); otherwise a GEMM per step (also for AMX).
 * Both give the same bits; tests turn the packed loop off to compare them.
 * ampy_rnn_layer_set_packed returns the previous setting;
 * ampy_rnn_layer_packed says whether a layer's products of K terms (the
 * forward's K = H, the backward's K = gates * H) of `dtype` would run in
 * the packed loop now. */
int ampy_rnn_layer_set_packed(int on);
int ampy_rnn_layer_packed(int dtype, int64_t K);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_RNN_H */
