/* ampy/scaler.h — the dynamic loss-scale update (GradScaler.update()).
 *
 * By default bit-identical to torch._amp_update_scale_ (aten
 * AmpGradScalerKernels.cpp):
 *
 *     if found_inf != 0:   scale = (float)((double)scale * backoff_factor); tracker = 0
 *     else:                tracker + 1 == growth_interval ?
 *                              grow scale = (float)((double)scale * growth_factor)
 *                              unless that is inf, and tracker = 0
 *                            : tracker += 1
 *
 * Optional extras, off by default (ampy_scale_rule in elem.h holds the exact
 * rule, shared with the CUDA build):
 *   min_scale    a backed-off scale never goes below it (apex min_loss_scale)
 *   max_scale    a grown scale never goes above it (apex max_loss_scale)
 *   hysteresis   N > 1: back off only after N consecutive overflows
 *                (apex update_scale_hysteresis, DeepSpeed
 *                consecutive_hysteresis=True); needs an int32 hysteresis
 *                tracker, initialised to N by the caller, refilled to N by
 *                every clean step, decremented (not below 0) by each overflow.
 */
#ifndef AMPY_SCALER_H
#define AMPY_SCALER_H

#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ampy_scaler_options {
    double growth_factor;    /* torch default 2.0; any value accepted, as torch  */
    double backoff_factor;   /* torch default 0.5; any value accepted, as torch  */
    int64_t growth_interval; /* torch default 2000; compared with `==` (int64, as
                                torch's argument: 2**31 and above never grow)   */
    int32_t hysteresis;      /* >= 1; 1 = torch behaviour                        */
    int has_min_scale;       /* 0: no lower bound                                */
    double min_scale;        /* finite, >= 0, used when has_min_scale            */
    int has_max_scale;       /* 0: no upper bound                                */
    double max_scale;        /* finite, > 0, >= min_scale, used when has_max_scale */
} ampy_scaler_options;

/* Fills *o with torch's defaults (2.0, 0.5, 2000, hysteresis 1, no bounds). */
void ampy_scaler_options_default(ampy_scaler_options *o);

/* The checks of ampy_scaler_update on the options alone (hysteresis >= 1,
 * a tracker when hysteresis > 1, the bounds): AMPY_OK or AMPY_ERR_VALUE. The
 * binding runs it before choosing the CPU or the CUDA update. */
ampy_status ampy_scaler_options_check(const ampy_scaler_options *o, int has_hysteresis_tracker);

/* One update of the loss scale, in place.
 *   scale               in,out  one float32 (the current loss scale)
 *   growth_tracker      in,out  one int32 (successful steps since the last
 *                               growth or overflow)
 *   hysteresis_tracker  in,out  one int32, or NULL when o->hysteresis == 1
 *   found_inf           in      one float32; any non-zero value (NaN too)
 *                               means this step overflowed
 *   o                   in      the rule's constants
 * None of the pointers may alias another. Returns AMPY_OK, or
 * AMPY_ERR_VALUE (NULL pointers, hysteresis < 1, hysteresis > 1 without a
 * tracker, a negative / non-finite / crossed min_scale or max_scale) before
 * writing anything. */
ampy_status ampy_scaler_update(float *scale, int32_t *growth_tracker, int32_t *hysteresis_tracker,
                               const float *found_inf, const ampy_scaler_options *o);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_SCALER_H */
