"""The float64 steps of RMSprop, Adagrad and Adadelta: torch.optim's
single-tensor formulas, op for op, on ampy's float64 element-wise ops (the
fused C kernel is float32). State tensors of a float64 parameter are
float64, as torch's zeros_like(param); "step" stays a float32 0-d tensor.

GradScaler's protocol is the fused kernel's: the gradient is multiplied by
inv_scale (and stored back) when one is given; a non-zero found_inf skips
the step after that unscaling and leaves params, state and step alone.
"""
__all__ = ["rmsprop", "adagrad", "adadelta", "step_f64"]


def _grad(p, g, group):
    g = g.neg() if group["maximize"] else g
    wd = group["weight_decay"]
    return g.add(p, alpha=wd) if wd != 0 else g


def rmsprop(p, g, st, group):
    alpha, eps, lr = group["alpha"], group["eps"], group["lr"]
    v = st["square_avg"]
    v.mul_(alpha).addcmul_(g, g, value=1 - alpha)
    if group["centered"]:
        ga = st["grad_avg"]
        ga.lerp_(g, 1 - alpha)
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
    """One step of `rule` (rmsprop, adagrad or adadelta above) over float64
    params with their float64 grads, each updated in place. Returns True when applied, False when found_inf skipped it."""
    if inv_scale is not None:
        inv = float(inv_scale.item())
        for g in grads:
            g.mul_(inv)
    if found_inf is not None and float(found_inf.item()) != 0.0:
        return False
    for p, g, st in zip(params, grads, states):
        st["step"].add_(1)
        rule(p, _grad(p, g, group), st, group)
    return True
