"""The autocast policy table as the op table holds it, and its printer.

torch's lists are in ampy/_policy_lists.py; every op gets its policy from them
when it is declared (`defop`), so `OpDef.policy` is complete before any
autocast region opens. `print_policy()` shows the table.
"""
from .. import _dispatch
from .._policy_lists import (BANNED, DEVICES, FP32, FP32_SET_OPT_DTYPE, LOWER, POLICIES,
                             PROMOTE, TORCH_POLICY)

__all__ = ["LOWER", "FP32", "FP32_SET_OPT_DTYPE", "PROMOTE", "BANNED", "POLICIES",
           "TORCH_POLICY", "DEVICES", "BANNED_MESSAGE", "policy_table", "format_policy",
           "print_policy"]

# torch's message for the CUDA-banned op, verbatim.
BANNED_MESSAGE = (
    "ampy.nn.functional.binary_cross_entropy and ampy.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using "
    "ampy.nn.functional.binary_cross_entropy_with_logits\n"
    "or ampy.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast.")


def policy_table(ops=None):
    """{op name: {"cpu": policy, "cuda": policy}} for every op in the table
    that has a policy on some device (or for ``ops``, a list of names)."""
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
