/* ampy/ewise.h — element-wise math over strided, broadcast operands.
 *
 * One entry point, ampy_ewise(), runs any op of the table below over an N-d
 * space. Each element is loaded from its own dtype into a "compute kind"
 * (float for float32/float16/bfloat16, double for float64, int64 for the
 * integer types and bool), the op runs in that kind, and the result is
 * rounded once into the output dtype (STYLE.md: compute in fp32, convert at
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

/* ---- the op table (values are ABI: the Python layer reads the names with
 * ampy_ewise_op_name(); append only) -------------------------------------- */
typedef enum ampy_ewise_op {
    /* unary: out = f(a) */
    AMPY_EW_ABS = 0, AMPY_EW_NEG = 1, AMPY_EW_RECIPROCAL = 2, AMPY_EW_SQUARE = 3,
    AMPY_EW_SIGN = 4, AMPY_EW_EXP = 5, AMPY_EW_EXPM1 = 6, AMPY_EW_EXP2 = 7, AMPY_EW_LOG = 8,
    AMPY_EW_LOG1P = 9, AMPY_EW_LOG2 = 10, AMPY_EW_LOG10 = 11, AMPY_EW_SQRT = 12,
    AMPY_EW_RSQRT = 13, AMPY_EW_SIN = 14, AMPY_EW_COS = 15, AMPY_EW_TAN = 16,
    AMPY_EW_TANH = 17, AMPY_EW_ATAN = 18, AMPY_EW_SIGMOID = 19, AMPY_EW_RELU = 20,
    AMPY_EW_GELU = 21,      /* exact: x/2 (1 + erf(x/sqrt 2))                  */
    AMPY_EW_GELU_TANH = 22, /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   */
    AMPY_EW_ERF = 23, AMPY_EW_SILU = 24,
    AMPY_EW_SOFTPLUS = 25,   /* params: f[0] = beta, f[1] = threshold          */
    AMPY_EW_LEAKY_RELU = 26, /* params: f[0] = negative slope                  */
    AMPY_EW_FLOOR = 27, AMPY_EW_CEIL = 28, AMPY_EW_ROUND = 29 /* half to even */,
    AMPY_EW_TRUNC = 30, AMPY_EW_FRAC = 31, AMPY_EW_ISNAN = 32, AMPY_EW_ISINF = 33,
    AMPY_EW_ISFINITE = 34, AMPY_EW_LOGICAL_NOT = 35, AMPY_EW_BITWISE_NOT = 36,
    AMPY_EW_ELU = 37,        /* params: f[0] = alpha                           */
    AMPY_EW_MISH = 38, AMPY_EW_ASIN = 39, AMPY_EW_ACOS = 40, AMPY_EW_SINH = 41,
    AMPY_EW_COSH = 42, AMPY_EW_LOGSIGMOID = 43,
    /* binary: out = f(a, b) */
    AMPY_EW_ADD = 44,        /* a + alpha*b; params f[0]/i[0] = alpha          */
    AMPY_EW_SUB = 45,        /* a - alpha*b                                     */
    AMPY_EW_MUL = 46, AMPY_EW_DIV = 47, AMPY_EW_POW = 48,
    AMPY_EW_MAXIMUM = 49, AMPY_EW_MINIMUM = 50, /* NaN-propagating          */
    AMPY_EW_FMAX = 51, AMPY_EW_FMIN = 52,       /* NaN-ignoring              */
    AMPY_EW_FMOD = 53,       /* sign of a (C fmod)                              */
    AMPY_EW_REMAINDER = 54,  /* sign of b (Python %)                            */
    AMPY_EW_FLOOR_DIVIDE = 55, AMPY_EW_ATAN2 = 56,
    AMPY_EW_EQ = 57, AMPY_EW_NE = 58, AMPY_EW_LT = 59, AMPY_EW_LE = 60, AMPY_EW_GT = 61,
    AMPY_EW_GE = 62, AMPY_EW_LOGICAL_AND = 63, AMPY_EW_LOGICAL_OR = 64,
    AMPY_EW_LOGICAL_XOR = 65, AMPY_EW_BITWISE_AND = 66, AMPY_EW_BITWISE_OR = 67,
    AMPY_EW_BITWISE_XOR = 68,
    /* ternary */
    AMPY_EW_WHERE = 69,   /* a ? b : c  (a is any dtype, tested != 0)           */
    AMPY_EW_LERP = 70,    /* a + c (b - a), torch's two-sided formula           */
    AMPY_EW_ADDCMUL = 71, /* a + value*b*c; params f[0]/i[0] = value            */
    AMPY_EW_ADDCDIV = 72, /* a + value*b/c                                      */
    AMPY_EW_CLAMP = 73,   /* min(max(a, b), c); NaN in a, b or c gives NaN      */
    AMPY_EW_NUM_OPS = 74
} ampy_ewise_op;

/* Flags of an op (ampy_ewise_op_flags). They drive the dtype rules. */
#define AMPY_EWF_INT_TO_FLOAT 1u /* integer/bool result type -> default float   */
#define AMPY_EWF_OUT_BOOL 2u     /* the result dtype is bool                     */
#define AMPY_EWF_SKIP_FIRST 4u   /* input 0 takes no part in promotion (where)  */
#define AMPY_EWF_INT_ONLY 8u     /* integer/bool operands only (bitwise ops)    */
#define AMPY_EWF_NO_BOOL 16u     /* bool operands rejected (neg, sub)           */
#define AMPY_EWF_SAME_INT 32u    /* integer input: result is the input (floor)  */

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
