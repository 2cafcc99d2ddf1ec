"""torch's autocast cast-policy lists: which ops run in which dtype, per device.

The lists are torch's, op for op, for every op ampy has or is about to have
(names are ampy's op-table names, which are torch's public names):

- CPU: ``aten/src/ATen/autocast_mode.cpp`` (lower precision, fp32 and promote
  lists for ``AutocastCPU``), checked side by side against torch 2.13 on the
  CPU by tests/test_autocast.py;
- CUDA: the ``AT_FORALL_LOWER_PRECISION_FP`` / ``AT_FORALL_FP32`` /
  ``AT_FORALL_FP32_SET_OPT_DTYPE`` / ``AT_FORALL_PROMOTE`` macros of
  ``aten/src/ATen/autocast_mode.h``.

Policies (torch's ``CastPolicy``):

=====================  ======================================================
lower_precision_fp     cast floating inputs to the autocast dtype (fp32 leaf
                       weights that require grad are cached per region)
fp32                   cast floating inputs to float32
fp32_set_opt_dtype     pass ``dtype=float32`` when the first input is eligible
                       and the caller gave no dtype (``x16.sum()`` -> fp32)
promote                cast floating inputs to the widest floating input type
banned                 raise (CUDA ``binary_cross_entropy``, as torch)
None                   unlisted: run in the input types
=====================  ======================================================

"Eligible" inputs are floating tensors of the region's device that are not
float64; integer and float64 tensors are never touched.

A composite ampy op that torch does not list but whose torch decomposition is
autocast (``cross_entropy`` on CUDA = ``log_softmax`` (fp32_set_opt_dtype) +
``nll_loss`` (fp32)) gets the policy that gives the same result dtypes.

This module is the reference the op table reads when an op is declared
(ampy/_dispatch.py `defop`): it sits below every op, so an op's policy is set
once, at its declaration. ampy/amp/_policy.py prints the table.
"""

__all__ = ["LOWER", "FP32", "FP32_SET_OPT_DTYPE", "PROMOTE", "BANNED", "POLICIES",
           "TORCH_POLICY", "DEVICES", "torch_policy"]

LOWER = "lower_precision_fp"
FP32 = "fp32"
FP32_SET_OPT_DTYPE = "fp32_set_opt_dtype"
PROMOTE = "promote"
BANNED = "banned"

POLICIES = (LOWER, FP32, FP32_SET_OPT_DTYPE, PROMOTE, BANNED)

_CUDA_LOWER = """
conv1d conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d conv_transpose3d convolution
prelu addmm addmv addr matmul einsum mm mv linalg_vecdot linear addbmm baddbmm bmm chain_matmul
linalg_multi_dot lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell scaled_dot_product_attention
"""
_CUDA_FP32 = """
acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow softplus
layer_norm group_norm frobenius_norm nuclear_norm cosine_similarity poisson_nll_loss
cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss kl_div l1_loss smooth_l1_loss
huber_loss mse_loss margin_ranking_loss multilabel_margin_loss soft_margin_loss
triplet_margin_loss multi_margin_loss binary_cross_entropy_with_logits dist pdist cdist renorm
logsumexp upsample_nearest1d upsample_nearest2d upsample_nearest3d upsample_linear1d
upsample_bilinear2d upsample_trilinear3d upsample_bicubic2d
cross_entropy softmin normalize
"""
_CUDA_FP32_SET_OPT_DTYPE = """
prod softmax log_softmax cumprod cumsum linalg_vector_norm linalg_matrix_norm sum
"""
_CUDA_PROMOTE = """
addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot scatter_add
"""
_CUDA_BANNED = "binary_cross_entropy"

_CPU_LOWER = """
conv1d conv2d conv3d bmm mm linalg_vecdot baddbmm addmm addbmm linear matmul conv_tbc
conv_transpose1d conv_transpose2d conv_transpose3d prelu scaled_dot_product_attention
"""
_CPU_FP32 = """
avg_pool3d binary_cross_entropy grid_sampler polar prod quantile nanquantile stft cdist trace
cholesky cholesky_inverse cholesky_solve inverse lu_solve orgqr ormqr pinverse max_pool3d
max_unpool2d max_unpool3d adaptive_avg_pool3d reflection_pad1d reflection_pad2d
replication_pad1d replication_pad2d replication_pad3d mse_loss cosine_embedding_loss nll_loss
nll_loss2d hinge_embedding_loss poisson_nll_loss smooth_l1_loss cross_entropy l1_loss huber_loss
margin_ranking_loss soft_margin_loss triplet_margin_loss multi_margin_loss ctc_loss kl_div
multilabel_margin_loss binary_cross_entropy_with_logits
"""
_CPU_PROMOTE = "stack cat index_copy"

def _build(groups):
    out = {}
    for policy, text in groups:
        for name in text.split():
            out[name] = policy
    return out


# device type -> {op name: policy}. Read-only by convention; user ops join
# through ampy.amp.register_autocast, which writes the op's own OpDef.policy.
TORCH_POLICY = {
    "cpu": _build([(LOWER, _CPU_LOWER), (FP32, _CPU_FP32), (PROMOTE, _CPU_PROMOTE)]),
    "cuda": _build([(LOWER, _CUDA_LOWER), (FP32, _CUDA_FP32),
                    (FP32_SET_OPT_DTYPE, _CUDA_FP32_SET_OPT_DTYPE), (PROMOTE, _CUDA_PROMOTE),
                    (BANNED, _CUDA_BANNED)]),
}
DEVICES = tuple(TORCH_POLICY)


def torch_policy(name):
    """{device type: policy} torch gives op `name` (devices where torch lists
    it; in-place ops are never autocast)."""
    if name.endswith("_"):
        return {}
    return {dev: TORCH_POLICY[dev][name] for dev in DEVICES if name in TORCH_POLICY[dev]}
