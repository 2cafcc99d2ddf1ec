"""The float64 steps of ampy.optim (SGD, Adam/AdamW, RMSprop, Adagrad,
Adadelta): torch.optim's single-tensor formulas (torch 2.13's
`_single_tensor_*`, what torch runs for CPU params), op for op, on ampy's
float64 element-wise ops (the fused C kernels are float32). State tensors of
a float64 parameter are float64, as torch's zeros_like(param) / clone(grad);
"step" stays a float32 0-d tensor, as torch keeps it.

Where one of ampy's ops rounds otherwise than torch's CPU kernel:
- lerp: torch's is one fused multiply-add, fma(w, end - self, self) for
  |w| < 0.5, else fma(w - 1, end - self, end); ampy's lerp rounds the
  product first. `_lerp_` writes it with add(alpha=), which is one fma in
  ampy as in torch: the same bits.
- addcmul: torch's is fma(value * t1, t2, self); ampy's rounds the product
  value * t1 * t2 before the add: at most half an ulp of that product apart
  (the same bits whenever the product is exact).
- sqrt: torch's vectorised float64 sqrt (16 elements and more) is within
  one ulp, not always correctly rounded; ampy's is correctly rounded.
So SGD is torch's to the bit; Adam's exp_avg_sq and the updates that read it
are within a few ulp (tests/test_optim_f64_sgd_adam.py bounds them).

GradScaler's protocol is the fused kernels': the gradient is multiplied by
inv_scale (and stored back) when one is given; a non-zero found_inf skips
the step after that unscaling and leaves params, state and step alone.
"""
from .._math import maximum

__all__ = ["sgd", "adam", "rmsprop", "adagrad", "adadelta", "step_f64"]


def _grad(p, g, group):
    """torch's first lines: the negated gradient with maximize, then the L2
    weight decay grad + wd * param (AdamW's decoupled decay is the rule's)."""
    g = g.neg() if group["maximize"] else g
    wd = group["weight_decay"]
    if wd == 0 or group.get("decoupled_weight_decay", False):
        return g
    return g.add(p, alpha=wd)


def _lerp_(start, end, weight):
    """start.lerp_(end, weight) rounded as torch's CPU lerp (one fma)."""
    d = end.sub(start)
    if abs(weight) < 0.5:
        return start.add_(d, alpha=weight)
    return start.copy_(end.add(d, alpha=weight - 1))


def sgd(p, g, st, group):
    """st: {"momentum_buffer": tensor or None}; a None buffer becomes a copy
    of the gradient, as torch's first momentum step."""
    momentum = group["momentum"]
    if momentum != 0:
        buf = st["momentum_buffer"]
        if buf is None:
            buf = st["momentum_buffer"] = g.clone()
        else:
            buf.mul_(momentum).add_(g, alpha=1 - group["dampening"])
        g = g.add(buf, alpha=momentum) if group["nesterov"] else buf
    p.add_(g, alpha=-group["lr"])


def adam(p, g, st, group):
    """Adam and AdamW (group["decoupled_weight_decay"]), torch's non-capturable
    branch: the bias corrections are Python floats of the float32 step."""
    beta1, beta2 = group["betas"]
    lr, wd = group["lr"], group["weight_decay"]
    if wd != 0 and group.get("decoupled_weight_decay", False):
        p.mul_(1 - lr * wd)
    m, v = st["exp_avg"], st["exp_avg_sq"]
    _lerp_(m, g, 1 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    step = float(st["step"].item())
    step_size = lr / (1 - beta1 ** step)
    bc2_sqrt = (1 - beta2 ** step) ** 0.5
    if group["amsgrad"]:
        v = maximum(st["max_exp_avg_sq"], v, out=st["max_exp_avg_sq"])
    denom = (v.sqrt() / bc2_sqrt).add_(group["eps"])
    p.addcdiv_(m, denom, value=-step_size)


def rmsprop(p, g, st, group):
    alpha, eps, lr = group["alpha"], group["eps"], group["lr"]
    v = st["square_avg"]
    v.mul_(alpha).addcmul_(g, g, value=1 - alpha)
    if group["centered"]:
        ga = st["grad_avg"]
        _lerp_(ga, g, 1 - alpha)
        avg = v.addcmul(ga, ga, value=-1).sqrt_()
    else:
        avg = v.sqrt()
    avg = avg.add_(eps)
    if group["momentum"] > 0:
        buf = st["momentum_buffer"]
        buf.mul_(group["momentum"]).addcdiv_(g, avg)
        p.add_(buf, alpha=-lr)
    else:
        p.addcdiv_(g, avg, value=-lr)


def adagrad(p, g, st, group):
    step = float(st["step"].item())
    clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
    s = st["sum"]
    s.addcmul_(g, g, value=1)
    std = s.sqrt().add_(group["eps"])
    p.addcdiv_(g, std, value=-clr)


def adadelta(p, g, st, group):
    rho, eps = group["rho"], group["eps"]
    v, acc = st["square_avg"], st["acc_delta"]
    v.mul_(rho).addcmul_(g, g, value=1 - rho)
    std = v.add(eps).sqrt_()
    delta = acc.add(eps).sqrt_()
    delta.div_(std).mul_(g)
    acc.mul_(rho).addcmul_(delta, delta, value=1 - rho)
    p.add_(delta, alpha=-group["lr"])


def step_f64(rule, params, grads, states, group, inv_scale, found_inf):
    """One step of `rule` (one of the above) over float64 params with their
    float64 grads, each updated in place, one after the other (torch's
    single-tensor loop); a state holding "step" counts it up first. Returns
    True when applied, False when found_inf skipped it."""
    if inv_scale is not None:
        inv = float(inv_scale.item())
        for g in grads:
            g.mul_(inv)
    if found_inf is not None and float(found_inf.item()) != 0.0:
        return False
    for p, g, st in zip(params, grads, states):
        if "step" in st:
            st["step"].add_(1)
        rule(p, _grad(p, g, group), st, group)
    return True
