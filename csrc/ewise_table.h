/* ewise_table.h — the element-wise op table, internal to libampy.
 *
 * One row per ampy_ewise_op (ewise_ops.c): its name (the Python name), its
 * arity, its cost class, its dtype flags (AMPY_EWF_*) and its block kernels
 * for the three compute kinds (float, double, int64; NULL where the op does
 * not exist for that kind). ewise.c reads the rows; adding an op is one enum
 * value in ewise.h, one formula in ewise_expr.h, one kernel and one row in
 * ewise_ops.c (and its case in cuda/ewise.cu). See docs/ADDING_AN_OP.md.
 */
#ifndef AMPY_EWISE_TABLE_H
#define AMPY_EWISE_TABLE_H

#include "ampy/ewise.h"

typedef struct {
    const char *name;
    unsigned char arity;
    unsigned char cost; /* 1 = a few cycles per element, 2 = a libm call */
    unsigned flags;
    ampy_ewise_kernel kernel[3];
} ampy_ewise_row;

/* The row of `op`, or NULL when op is not an op code. */
const ampy_ewise_row *ampy_ewise_row_get(int op);

#endif
