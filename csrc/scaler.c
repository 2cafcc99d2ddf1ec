/* scaler.c — validation around the loss-scale rule of elem.h (see scaler.h). */
#include "ampy/elem.h"
#include "ampy/scaler.h"

void ampy_scaler_options_default(ampy_scaler_options *o)
{
    o->growth_factor = 2.0;
    o->backoff_factor = 0.5;
    o->growth_interval = 2000;
    o->hysteresis = 1;
    o->has_min_scale = 0;
    o->min_scale = 0.0;
    o->has_max_scale = 0;
    o->max_scale = 0.0;
}

ampy_status ampy_scaler_options_check(const ampy_scaler_options *o, int has_hysteresis_tracker)
{
    if (!o)
        return ampy_error(AMPY_ERR_VALUE, "update_scale: options must not be NULL");
    if (o->hysteresis < 1)
        return ampy_error(AMPY_ERR_VALUE, "update_scale: hysteresis must be >= 1, got %d",
                          (int)o->hysteresis);
    if (o->hysteresis > 1 && !has_hysteresis_tracker)
        return ampy_error(AMPY_ERR_VALUE, "update_scale: hysteresis=%d needs a hysteresis_tracker",
                          (int)o->hysteresis);
    if (o->has_min_scale && !(ampy_f64_isfinite(o->min_scale) && o->min_scale >= 0.0))
        return ampy_error(AMPY_ERR_VALUE, "update_scale: min_scale must be finite and >= 0, got %g",
                          o->min_scale);
    if (o->has_max_scale && !(ampy_f64_isfinite(o->max_scale) && o->max_scale > 0.0))
        return ampy_error(AMPY_ERR_VALUE, "update_scale: max_scale must be finite and > 0, got %g",
                          o->max_scale);
    if (o->has_min_scale && o->has_max_scale && o->min_scale > o->max_scale)
        return ampy_error(AMPY_ERR_VALUE, "update_scale: min_scale (%g) > max_scale (%g)",
                          o->min_scale, o->max_scale);
    return AMPY_OK;
}

ampy_status ampy_scaler_update(float *scale, int32_t *growth_tracker, int32_t *hysteresis_tracker,
                               const float *found_inf, const ampy_scaler_options *o)
{
    if (!scale || !growth_tracker || !found_inf || !o)
        return ampy_error(AMPY_ERR_VALUE, "update_scale: scale, growth_tracker, found_inf and "
                                          "options must not be NULL");
    ampy_status st = ampy_scaler_options_check(o, hysteresis_tracker != NULL);
    if (st != AMPY_OK)
        return st;
    ampy_scale_rule r = {o->growth_factor, o->backoff_factor, o->growth_interval, o->hysteresis,
                         o->has_min_scale, o->has_max_scale, o->min_scale, o->max_scale};
    ampy_update_scale_elem(scale, growth_tracker, o->hysteresis > 1 ? hysteresis_tracker : 0,
                           *found_inf, &r);
    return AMPY_OK;
}
