/* rnn_layer_packed.h — the packed-weight, one-parallel-region time loops of
 * csrc/rnn_layer_packed.c, used by csrc/rnn_layer.c when
 * ampy_rnn_pack_kind(dtype, K) >= 0 (arguments already checked there). */
#ifndef AMPY_RNN_LAYER_PACKED_H
#define AMPY_RNN_LAYER_PACKED_H

#include <stdint.h>

#include "ampy/rnn.h"

/* ampy_rnn_layer_fwd's whole loop. */
ampy_status ampy_rnn_layer_fwd_packed(int kind, int mode, int reverse, int64_t T, int64_t B,
                                      int64_t H, int dt, const void *gx, const void *w_hh,
                                      const void *b_hh, const void *h0, const void *c0,
                                      void *y, void *cs, void *ws);

/* ampy_rnn_layer_bwd's time loop: dgx (and dgh), dh0, dc0; not dW_hh, db_hh. */
ampy_status ampy_rnn_layer_bwd_steps_packed(int kind, const ampy_rnn_layer_bwd_args *a);

#endif /* AMPY_RNN_LAYER_PACKED_H */
