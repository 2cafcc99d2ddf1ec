/* optim_py.h — argument helpers shared by the fused-optimizer bindings
 * (optim_py.c defines them; optim_adaptive_py.c uses them too). Each raises
 * a TypeError/ValueError naming the function and the argument and returns
 * -1 / NULL on failure.
 */
#ifndef AMPY_OPTIM_PY_H
#define AMPY_OPTIM_PY_H

#include "amp_py.h"

/* The lists every optimizer shares: params, grads and (optional) masters,
 * and the device they are on (with inv_scale / found_inf). */
typedef struct {
    ampy_py_amp_tensors p, g, m;
    int64_t total;
    int device;
} optpy_lists;

/* A float (or int) argument as a double; a bool argument's truth. */
int optpy_get_double(PyObject *o, double *out, const char *fn, const char *arg);
int optpy_get_bool(PyObject *o, int *out);
/* Keyword values: absent (NULL) keeps *out's default. */
int optpy_opt_double(PyObject *o, double *out, const char *fn, const char *arg);
int optpy_opt_bool(PyObject *o, int *out);
/* Optional 1-element float32 tensor (None -> NULL, *ok stays 1; else *ok = 0
 * on failure); *device takes its device. */
const float *optpy_opt_scalar(PyObject *o, const char *fn, const char *arg, int *device, int *ok);

/* params, grads (written when grads_written) and masters (None or a list
 * with None for float32 params), checked against each other; c->device holds
 * the device of inv_scale / found_inf on entry. */
int optpy_parse_common(optpy_lists *c, PyObject *params, PyObject *grads, PyObject *masters,
                       int grads_written, const char *fn);
void optpy_common_free(optpy_lists *c);
/* A float32 state list shaped like params, entry for entry. */
int optpy_parse_state(ampy_py_amp_tensors *s, PyObject *seq, optpy_lists *c, const char *fn,
                      const char *arg, int allow_none);
/* Bump the version of every tensor of the list (written in place). */
void optpy_bump_all(ampy_py_amp_tensors *l);
/* Whether the grads are written back (see optim_py.c); may set *write. */
int optpy_grads_written(int device, int *write, const float *inv);
/* True/False (CPU: stepped or skipped) or None (GPU). */
PyObject *optpy_step_result(int device, int stepped);
/* Raise for a failed step (the CUDA module's message on a GPU). */
void optpy_raise_step(int device, ampy_status st);

#endif /* AMPY_OPTIM_PY_H */
