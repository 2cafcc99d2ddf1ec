/* cnn_pool_max.h — the float32 plane loop of max_pool2d's forward
 * (cnn_pool_max.c), called by cnn_pool.c for float32 planes and for half
 * planes widened to float32. */
#ifndef AMPY_CNN_POOL_MAX_H
#define AMPY_CNN_POOL_MAX_H

#include <stdint.h>

#include "ampy/cnn.h"

/* One plane x (H*W float32) -> y (OH*OW float32, the window maxima) and idx
 * (OH*OW flat indices ih*W + iw): NaN wins, the first maximum wins ties. */
void ampy_cnn_max_plane_f32(const float *x, int64_t H, int64_t W, int64_t OH, int64_t OW,
                            const ampy_cnn_window *w, float *y, int64_t *idx);

#endif /* AMPY_CNN_POOL_MAX_H */
