/* ampy/dtype.h — element types known to libampy.
 *
 * The numeric values are part of the ABI (the Python layer and the CUDA
 * module use them): never renumber, only append.
 */
#ifndef AMPY_DTYPE_H
#define AMPY_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ampy_dtype {
    AMPY_FLOAT32 = 0,
    AMPY_FLOAT16 = 1,  /* IEEE binary16, stored as uint16_t bits            */
    AMPY_BFLOAT16 = 2, /* bfloat16 (top half of a float32), uint16_t bits   */
    AMPY_FLOAT64 = 3,
    AMPY_INT64 = 4,
    AMPY_INT32 = 5,
    AMPY_UINT8 = 6,
    AMPY_BOOL = 7,     /* one byte, 0 or 1                                   */
    AMPY_NUM_DTYPES = 8
} ampy_dtype;

/* Size of one element in bytes; 0 for an invalid code. */
static inline size_t ampy_dtype_size(int dt)
{
    static const unsigned char sizes[AMPY_NUM_DTYPES] = {4, 2, 2, 8, 8, 4, 1, 1};
    return (dt >= 0 && dt < AMPY_NUM_DTYPES) ? sizes[dt] : 0;
}

static inline int ampy_dtype_valid(int dt) { return dt >= 0 && dt < AMPY_NUM_DTYPES; }

static inline int ampy_dtype_is_half(int dt)
{
    return dt == AMPY_FLOAT16 || dt == AMPY_BFLOAT16;
}

static inline int ampy_dtype_is_float(int dt)
{
    return dt == AMPY_FLOAT32 || dt == AMPY_FLOAT64 || ampy_dtype_is_half(dt);
}

/* "float32", "float16", ... ; "invalid" for an unknown code. */
const char *ampy_dtype_name(int dt);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_DTYPE_H */
