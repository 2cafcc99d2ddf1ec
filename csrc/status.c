/* status.c — thread-local error messages behind ampy_status (see status.h). */
#include <stdarg.h>
#include <stdio.h>

#include "ampy/dtype.h"
#include "ampy/status.h"

static _Thread_local char last_error[512];

ampy_status ampy_error(ampy_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

const char *ampy_last_error(void) { return last_error; }

const char *ampy_dtype_name(int dt)
{
    static const char *const names[AMPY_NUM_DTYPES] = {
        "float32", "float16", "bfloat16", "float64", "int64", "int32", "uint8", "bool"};
    return ampy_dtype_valid(dt) ? names[dt] : "invalid";
}
