/* scaler_py.c — binding of scaler.h (the loss-scale update). */
#include "pyampy.h"

#include "amp_py.h"
#include "ampy/cuda.h"
#include "ampy/scaler.h"

/* The numbers of the call (args[3..8]) into *o; *h = hysteresis. */
static int parse_options(PyObject *const *args, ampy_scaler_options *o, long *hp, const char *fn)
{
    ampy_scaler_options_default(o);
    o->growth_factor = PyFloat_AsDouble(args[3]);
    if (o->growth_factor == -1.0 && PyErr_Occurred())
        return -1;
    o->backoff_factor = PyFloat_AsDouble(args[4]);
    if (o->backoff_factor == -1.0 && PyErr_Occurred())
        return -1;
    long long gi = PyLong_AsLongLong(args[5]);
    if (gi == -1 && PyErr_Occurred())
        return -1;
    o->growth_interval = (int64_t)gi;
    if (args[6] != Py_None) {
        o->has_min_scale = 1;
        o->min_scale = PyFloat_AsDouble(args[6]);
        if (o->min_scale == -1.0 && PyErr_Occurred())
            return -1;
    }
    if (args[7] != Py_None) {
        o->has_max_scale = 1;
        o->max_scale = PyFloat_AsDouble(args[7]);
        if (o->max_scale == -1.0 && PyErr_Occurred())
            return -1;
    }
    long h = PyLong_AsLong(args[8]);
    if (h == -1 && PyErr_Occurred())
        return -1;
    if (h < 1 || h > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: hysteresis must be an integer >= 1, got %ld", fn, h);
        return -1;
    }
    o->hysteresis = (int32_t)h;
    *hp = h;
    return 0;
}

/* _amp_update_scale_(scale, growth_tracker, found_inf, growth_factor,
 *                    backoff_factor, growth_interval, min_scale, max_scale,
 *                    hysteresis, hysteresis_tracker) */
static PyObject *f_update_scale(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *fn = "update_scale_";
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "_amp_update_scale_ takes 10 arguments, got %zd", nargs);
        return NULL;
    }
    int dev = AMPY_PY_AMP_NO_DEVICE;
    float *scale = ampy_py_amp_scalar(args[0], AMPY_FLOAT32, fn, "scale", &dev);
    int32_t *tracker =
        scale ? ampy_py_amp_scalar(args[1], AMPY_INT32, fn, "growth_tracker", &dev) : NULL;
    float *found = tracker ? ampy_py_amp_scalar(args[2], AMPY_FLOAT32, fn, "found_inf", &dev) : NULL;
    if (!found || ampy_py_check_write((AmpyTensor *)args[0], fn, "scale", 0) < 0 ||
        ampy_py_check_write((AmpyTensor *)args[1], fn, "growth_tracker", 0) < 0)
        return NULL;
    ampy_scaler_options o;
    long h;
    if (parse_options(args, &o, &h, fn) < 0)
        return NULL;
    int32_t *htracker = NULL;
    if (args[9] != Py_None) {
        htracker = ampy_py_amp_scalar(args[9], AMPY_INT32, fn, "hysteresis_tracker", &dev);
        if (!htracker ||
            ampy_py_check_write((AmpyTensor *)args[9], fn, "hysteresis_tracker", 0) < 0)
            return NULL;
    } else if (h > 1) {
        PyErr_Format(PyExc_ValueError, "%s: hysteresis=%ld needs a hysteresis_tracker (a 1-element "
                                       "int32 tensor initialised to %ld)",
                     fn, h, h);
        return NULL;
    }
    void *ptrs[4] = {scale, tracker, found, htracker};
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            if (ptrs[i] && ptrs[i] == ptrs[j]) {
                PyErr_Format(PyExc_ValueError, "%s: scale, growth_tracker, found_inf and "
                                               "hysteresis_tracker must be distinct tensors", fn);
                return NULL;
            }
    ampy_status s = ampy_scaler_options_check(&o, htracker != NULL);
    if (s != AMPY_OK)
        return ampy_py_raise(s);
    if (dev >= 0) { /* CUDA: one device kernel, found_inf read there (cuda/amp.cu) */
        const ampy_cuda_api *api = ampy_py_cuda_api();
        if (!api)
            return NULL;
        s = api->scaler_update(dev, scale, tracker, htracker, found, &o);
        if (s != AMPY_OK)
            return ampy_py_raise_cuda(s);
    } else if ((s = ampy_scaler_update(scale, tracker, htracker, found, &o)) != AMPY_OK) {
        return ampy_py_raise(s);
    }
    ampy_py_bump_version((AmpyTensor *)args[0]);
    ampy_py_bump_version((AmpyTensor *)args[1]);
    if (htracker)
        ampy_py_bump_version((AmpyTensor *)args[9]);
    Py_RETURN_NONE;
}

PyMethodDef ampy_py_scaler_methods[] = {
    {"_amp_update_scale_", (PyCFunction)(void (*)(void))f_update_scale, METH_FASTCALL,
     "_amp_update_scale_($module, scale, growth_tracker, found_inf, growth_factor,\n"
     "                   backoff_factor, growth_interval, min_scale, max_scale,\n"
     "                   hysteresis, hysteresis_tracker, /)\n--\n\n"
     "torch._amp_update_scale_ on 1-element tensors of one device (scale float32, trackers\n"
     "int32),\n"
     "plus optional min/max bounds and hysteresis. See csrc/include/ampy/scaler.h."},
    {NULL, NULL, 0, NULL},
};
