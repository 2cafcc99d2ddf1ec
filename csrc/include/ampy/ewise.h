/* ampy/ewise.h — element-wise math over strided, broadcast operands.
 *
 * One entry point, ampy_ewise(), runs any op of the table below over an N-d
 * space. Each element is loaded from its own dtype into a "compute kind"
 * (float for float32/float16/bfloat16, double for float64, int64 for the
 * integer types and bool), the op runs in that kind, and the result is
 * rounded once into the output dtype (compute in fp32, convert at
 * load and store; torch computes half ops in float "opmath" the same way).
 *
 * Work is done in blocks of AMPY_EWISE_BLOCK elements: operands already in
 * the compute kind and contiguous are used in place, others are converted
 * into small stack buffers, so each op is one tight loop over contiguous
 * arrays that the compiler vectorises (no per-element dtype switch).
 *
 * Type promotion (torch.result_type) lives here too so that the binding and
 * the tests share one implementation.
 */
#ifndef AMPY_EWISE_H
#define AMPY_EWISE_H

#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the op table --------------------------------------------------------
 * One line per op: X(ENUM, name, arity, cost, flag, kinds). ENUM gives
 * AMPY_EW_<ENUM> (values in list order: append only, the CUDA module is built
 * against the same list); name is torch's name (ampy_ewise_op_name, and the
 * Python name); arity 1-3; cost 1 = a few cycles per element, 2 = a libm
 * call (it sets the threading grain); flag is one AMPY_EWF_<flag> below (the
 * dtype rules); kinds are the compute kinds with a kernel: FDI float, double
 * and int64, FD float and double, I int64 only. csrc/ewise_ops.c expands the
 * list into its kernel table, cuda/ewise.cu into its arity/kind checks.
 *
 * Semantics where the name does not say it all (torch's): gelu is exact,
 * x/2 (1 + erf(x/sqrt 2)); gelu_tanh is x/2 (1 + tanh(sqrt(2/pi)(x + 0.044715
 * x^3))); round is half to even; softplus takes f[0] = beta, f[1] =
 * threshold; leaky_relu f[0] = negative slope; elu f[0] = alpha; add/sub
 * compute a +- alpha*b with f[0]/i[0] = alpha; maximum/minimum propagate NaN,
 * fmax/fmin ignore it; fmod has the sign of a (C fmod), remainder that of b
 * (Python %); where is a ? b : c with a of any dtype tested != 0; lerp is
 * torch's two-sided formula; addcmul/addcdiv compute a + value*b*c and
 * a + value*b/c with f[0]/i[0] = value; clamp is min(max(a, b), c) and NaN in
 * any operand gives NaN; hardswish is x * clamp(x + 3, 0, 6) / 6. */
#define AMPY_EWISE_OPS(X)                                 \
    X(ABS, abs, 1, 1, NONE, FDI)                      \
    X(NEG, neg, 1, 1, NO_BOOL, FDI)                   \
    X(RECIPROCAL, reciprocal, 1, 1, INT_TO_FLOAT, FD) \
    X(SQUARE, square, 1, 1, NONE, FDI)                \
    X(SIGN, sign, 1, 1, NONE, FDI)                    \
    X(EXP, exp, 1, 2, INT_TO_FLOAT, FD)               \
    X(EXPM1, expm1, 1, 2, INT_TO_FLOAT, FD)           \
    X(EXP2, exp2, 1, 2, INT_TO_FLOAT, FD)             \
    X(LOG, log, 1, 2, INT_TO_FLOAT, FD)               \
    X(LOG1P, log1p, 1, 2, INT_TO_FLOAT, FD)           \
    X(LOG2, log2, 1, 2, INT_TO_FLOAT, FD)             \
    X(LOG10, log10, 1, 2, INT_TO_FLOAT, FD)           \
    X(SQRT, sqrt, 1, 1, INT_TO_FLOAT, FD)             \
    X(RSQRT, rsqrt, 1, 1, INT_TO_FLOAT, FD)           \
    X(SIN, sin, 1, 2, INT_TO_FLOAT, FD)               \
    X(COS, cos, 1, 2, INT_TO_FLOAT, FD)               \
    X(TAN, tan, 1, 2, INT_TO_FLOAT, FD)               \
    X(TANH, tanh, 1, 2, INT_TO_FLOAT, FD)             \
    X(ATAN, atan, 1, 2, INT_TO_FLOAT, FD)             \
    X(SIGMOID, sigmoid, 1, 2, INT_TO_FLOAT, FD)       \
    X(RELU, relu, 1, 1, NONE, FDI)                    \
    X(GELU, gelu, 1, 2, INT_TO_FLOAT, FD)             \
    X(GELU_TANH, gelu_tanh, 1, 2, INT_TO_FLOAT, FD)   \
    X(ERF, erf, 1, 2, INT_TO_FLOAT, FD)               \
    X(SILU, silu, 1, 2, INT_TO_FLOAT, FD)             \
    X(SOFTPLUS, softplus, 1, 2, INT_TO_FLOAT, FD)     \
    X(LEAKY_RELU, leaky_relu, 1, 1, INT_TO_FLOAT, FD) \
    X(FLOOR, floor, 1, 1, SAME_INT, FDI)              \
    X(CEIL, ceil, 1, 1, SAME_INT, FDI)                \
    X(ROUND, round, 1, 1, SAME_INT, FDI)              \
    X(TRUNC, trunc, 1, 1, SAME_INT, FDI)              \
    X(FRAC, frac, 1, 1, NONE, FDI)                    \
    X(ISNAN, isnan, 1, 1, OUT_BOOL, FDI)              \
    X(ISINF, isinf, 1, 1, OUT_BOOL, FDI)              \
    X(ISFINITE, isfinite, 1, 1, OUT_BOOL, FDI)        \
    X(LOGICAL_NOT, logical_not, 1, 1, OUT_BOOL, FDI)  \
    X(BITWISE_NOT, bitwise_not, 1, 1, INT_ONLY, I)    \
    X(ELU, elu, 1, 2, INT_TO_FLOAT, FD)               \
    X(MISH, mish, 1, 2, INT_TO_FLOAT, FD)             \
    X(ASIN, asin, 1, 2, INT_TO_FLOAT, FD)             \
    X(ACOS, acos, 1, 2, INT_TO_FLOAT, FD)             \
    X(SINH, sinh, 1, 2, INT_TO_FLOAT, FD)             \
    X(COSH, cosh, 1, 2, INT_TO_FLOAT, FD)             \
    X(LOGSIGMOID, logsigmoid, 1, 2, INT_TO_FLOAT, FD) \
    X(ADD, add, 2, 1, NONE, FDI)                      \
    X(SUB, sub, 2, 1, NO_BOOL, FDI)                   \
    X(MUL, mul, 2, 1, NONE, FDI)                      \
    X(DIV, div, 2, 1, INT_TO_FLOAT, FD)               \
    X(POW, pow, 2, 2, NONE, FDI)                      \
    X(MAXIMUM, maximum, 2, 1, NONE, FDI)              \
    X(MINIMUM, minimum, 2, 1, NONE, FDI)              \
    X(FMAX, fmax, 2, 1, NONE, FDI)                    \
    X(FMIN, fmin, 2, 1, NONE, FDI)                    \
    X(FMOD, fmod, 2, 2, NONE, FDI)                    \
    X(REMAINDER, remainder, 2, 2, NONE, FDI)          \
    X(FLOOR_DIVIDE, floor_divide, 2, 2, NONE, FDI)    \
    X(ATAN2, atan2, 2, 2, INT_TO_FLOAT, FD)           \
    X(EQ, eq, 2, 1, OUT_BOOL, FDI)                    \
    X(NE, ne, 2, 1, OUT_BOOL, FDI)                    \
    X(LT, lt, 2, 1, OUT_BOOL, FDI)                    \
    X(LE, le, 2, 1, OUT_BOOL, FDI)                    \
    X(GT, gt, 2, 1, OUT_BOOL, FDI)                    \
    X(GE, ge, 2, 1, OUT_BOOL, FDI)                    \
    X(LOGICAL_AND, logical_and, 2, 1, OUT_BOOL, FDI)  \
    X(LOGICAL_OR, logical_or, 2, 1, OUT_BOOL, FDI)    \
    X(LOGICAL_XOR, logical_xor, 2, 1, OUT_BOOL, FDI)  \
    X(BITWISE_AND, bitwise_and, 2, 1, INT_ONLY, I)    \
    X(BITWISE_OR, bitwise_or, 2, 1, INT_ONLY, I)      \
    X(BITWISE_XOR, bitwise_xor, 2, 1, INT_ONLY, I)    \
    X(WHERE, where, 3, 1, SKIP_FIRST, FDI)            \
    X(LERP, lerp, 3, 1, NONE, FD)                     \
    X(ADDCMUL, addcmul, 3, 1, NONE, FDI)              \
    X(ADDCDIV, addcdiv, 3, 1, INT_TO_FLOAT, FD)       \
    X(CLAMP, clamp, 3, 1, NONE, FDI)                  \
    X(HARDSWISH, hardswish, 1, 1, FLOAT_ONLY, FD)

#define AMPY_EW_ENUM_(E, name, arity, cost, flag, kinds) AMPY_EW_##E,
typedef enum ampy_ewise_op { AMPY_EWISE_OPS(AMPY_EW_ENUM_) AMPY_EW_NUM_OPS } ampy_ewise_op;
#undef AMPY_EW_ENUM_

/* Flags of an op (ampy_ewise_op_flags). They drive the dtype rules. */
#define AMPY_EWF_NONE 0u
#define AMPY_EWF_INT_TO_FLOAT 1u /* integer/bool result type -> default float   */
#define AMPY_EWF_OUT_BOOL 2u     /* the result dtype is bool                     */
#define AMPY_EWF_SKIP_FIRST 4u   /* input 0 takes no part in promotion (where)  */
#define AMPY_EWF_INT_ONLY 8u     /* integer/bool operands only (bitwise ops)    */
#define AMPY_EWF_NO_BOOL 16u     /* bool operands rejected (neg, sub)           */
#define AMPY_EWF_SAME_INT 32u    /* integer input: result is the input (floor)  */
#define AMPY_EWF_FLOAT_ONLY 64u  /* floating operands only (hardswish, as torch) */

/* "abs", "add", ... (torch's names); NULL for an invalid op. */
const char *ampy_ewise_op_name(int op);
/* Number of inputs (1, 2 or 3); 0 for an invalid op. */
int ampy_ewise_op_arity(int op);
unsigned ampy_ewise_op_flags(int op);

/* Scalar parameters of an op: f[] used when computing in float/double, i[]
 * when computing in int64 (the caller fills both). */
typedef struct ampy_ewise_params {
    double f[2];
    int64_t i[2];
} ampy_ewise_params;

/* One operand: data points at the element of index (0, ..., 0); strides are
 * in BYTES, one per dim of the iteration space (0 broadcasts). */
typedef struct ampy_ewise_operand {
    void *data;
    const int64_t *strides;
    ampy_dtype dtype;
} ampy_ewise_operand;

/* out = op(in[0], ..., in[arity-1]) over the space (ndim, shape).
 *   op       one of ampy_ewise_op
 *   ndim     0..AMPY_MAX_DIMS; shape[d] >= 0 (elements)
 *   in       arity operands (in), any dtypes, may alias each other
 *   out      out: may be identical to an input (same data and strides:
 *            in-place) but must not partially overlap one, nor have
 *            stride 0 along a dim of size > 1
 *   compute  the dtype the op computes in (its kind: float for the three
 *            float32-class types, double for float64, int64 otherwise)
 *   params   the op's scalars (NULL: none; ops that need them read zeros)
 * Large spaces are split across ampy_get_num_threads() threads.
 * Returns AMPY_OK; AMPY_ERR_VALUE (bad op, ndim, dtype codes);
 * AMPY_ERR_DTYPE (op undefined for the kind, e.g. bitwise ops on floats);
 * AMPY_ERR_RUNTIME (integer division by zero; out is then partly written). */
ampy_status ampy_ewise(ampy_ewise_op op, int ndim, const int64_t *shape,
                       const ampy_ewise_operand *in, const ampy_ewise_operand *out,
                       ampy_dtype compute, const ampy_ewise_params *params);

/* ---- type promotion (torch semantics) ----------------------------------- */
/* torch.promote_types on codes. */
ampy_dtype ampy_promote_types(ampy_dtype a, ampy_dtype b);
/* torch.can_cast(from, to): no float -> integer, no non-bool -> bool. */
int ampy_can_cast(ampy_dtype from, ampy_dtype to);
/* torch's short names used in its error messages: "Float", "Half", "Long"... */
const char *ampy_dtype_torch_name(ampy_dtype d);

/* torch.result_type over n operands. kinds[k] tells the category of operand k:
 *   AMPY_OPERAND_DIM     a tensor with >= 1 dims
 *   AMPY_OPERAND_ZERODIM a 0-dim tensor
 *   AMPY_OPERAND_WRAPPED a Python number (dtypes[k] is bool, int64 or float64;
 *                        floats count as default_float)
 * Higher categories win unless a lower one is of a higher kind (bool <
 * integer < floating), exactly as c10's ResultTypeState. n >= 1. */
#define AMPY_OPERAND_DIM 0
#define AMPY_OPERAND_ZERODIM 1
#define AMPY_OPERAND_WRAPPED 2
ampy_dtype ampy_result_type(int n, const ampy_dtype *dtypes, const int *kinds,
                            ampy_dtype default_float);

/* ---- internal: shared with reduce.c ------------------------------------- */
#define AMPY_EWISE_BLOCK 256
/* Compute kinds. */
#define AMPY_KIND_F32 0
#define AMPY_KIND_F64 1
#define AMPY_KIND_I64 2
static inline int ampy_kind_of(ampy_dtype d)
{
    return d == AMPY_FLOAT64 ? AMPY_KIND_F64
           : (d == AMPY_FLOAT32 || d == AMPY_FLOAT16 || d == AMPY_BFLOAT16) ? AMPY_KIND_F32
                                                                            : AMPY_KIND_I64;
}
/* The dtype whose memory layout is the kind (float32, float64, int64). */
static inline ampy_dtype ampy_kind_dtype(int kind)
{
    return kind == AMPY_KIND_F32 ? AMPY_FLOAT32 : kind == AMPY_KIND_F64 ? AMPY_FLOAT64 : AMPY_INT64;
}
/* Convert n elements at src (dtype, byte stride; 0 broadcasts) into the
 * contiguous buffer dst of the given kind. */
void ampy_ewise_load(const char *src, int64_t stride, ampy_dtype dtype, int kind, void *dst,
                     int64_t n);
/* Store n contiguous elements of kind from src into dst (dtype, byte stride),
 * rounding once. */
void ampy_ewise_store(const void *src, int kind, char *dst, int64_t stride, ampy_dtype dtype,
                      int64_t n);

/* A block kernel: out[0..n) = op(in[0][..], in[1][..], in[2][..]), every
 * array contiguous and of the kernel's kind; out may equal an input.
 * Returns nonzero on an integer division by zero. */
typedef int (*ampy_ewise_kernel)(void *out, const void *const *in, int64_t n,
                                 const ampy_ewise_params *p);
/* The kernel of op for a kind (ewise_ops.c); NULL when undefined. */
ampy_ewise_kernel ampy_ewise_kernel_get(int op, int kind);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_EWISE_H */
