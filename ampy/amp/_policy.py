"""The autocast cast-policy table: which ops run in which dtype, per device.

The lists are torch's, op for op, for every op ampy has or is about to have
(names are ampy's op-table names, which are torch's public names):

- CPU: ``aten/src/ATen/autocast_mode.cpp`` (lower precision, fp32 and promote
  lists for ``AutocastCPU``), checked side by side against torch 2.13 on the
  CPU by tests/test_autocast.py;
- CUDA: the ``AT_FORALL_LOWER_PRECISION_FP`` / ``AT_FORALL_FP32`` /
  ``AT_FORALL_FP32_SET_OPT_DTYPE`` / ``AT_FORALL_PROMOTE`` macros of
  ``aten/src/ATen/autocast_mode.h`` (see /work/shared/reference/amp-anchors.md
  §2.5-2.6).

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
"""

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

# torch's message for the CUDA-banned op, verbatim.
BANNED_MESSAGE = (
    "ampy.nn.functional.binary_cross_entropy and ampy.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using "
    "ampy.nn.functional.binary_cross_entropy_with_logits\n"
    "or ampy.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast.")


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

_applied = [0]  # size of the op table when the policies were last written into it


def apply_policies(force=False):
    """Write torch's policy into ``OpDef.policy`` of every op in the table that
    has none yet for a device (ops registered later are picked up the next
    time: autocast calls this on entry, a no-op unless the table grew).
    Policies set explicitly (``register_autocast``, ``defop(policy=...)``) win."""
    from .. import _dispatch
    table = _dispatch._TABLE
    if not force and len(table) == _applied[0]:
        return
    for name, op in table.items():
        pol = op.policy
        if name.endswith("_"):  # in-place ops are never autocast (torch)
            continue
        for dev in DEVICES:
            if dev not in pol:
                pol[dev] = TORCH_POLICY[dev].get(name)
    _applied[0] = len(table)


def policy_table(ops=None):
    """{op name: {"cpu": policy, "cuda": policy}} for every op in the table
    that has a policy on some device (or for ``ops``, a list of names)."""
    from .. import _dispatch
    apply_policies()
    table = _dispatch._TABLE
    names = sorted(table) if ops is None else list(ops)
    out = {}
    for name in names:
        op = table.get(name)
        pol = op.policy if op is not None else {d: TORCH_POLICY[d].get(name) for d in DEVICES}
        if ops is not None or any(pol.get(d) for d in DEVICES):
            out[name] = {d: pol.get(d) for d in DEVICES}
    return out


def format_policy(ops=None):
    rows = policy_table(ops)
    w = max([len(n) for n in rows] + [2])
    cw = max(len(p) for p in POLICIES) + 2
    lines = [f"{'op':<{w}}  {'cpu':<{cw}}{'cuda':<{cw}}", "-" * (w + 2 + 2 * cw)]
    for name, pol in rows.items():
        lines.append(f"{name:<{w}}  {str(pol['cpu'] or '-'):<{cw}}{str(pol['cuda'] or '-'):<{cw}}")
    return "\n".join(lines)


def print_policy(ops=None, file=None):
    """Print the autocast policy of every op ampy has (or of ``ops``)."""
    print(format_policy(ops), file=file)
