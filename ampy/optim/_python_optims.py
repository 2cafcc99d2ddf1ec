"""Adamax, NAdam, RAdam, Rprop and ASGD: torch 2.13's single-tensor updates (what torch runs
for CPU parameters), op for op on ampy's element-wise ops, in the parameter's own dtype.

They are written the way a user writes an optimizer subclass (ampy/optim/optimizer.py's
contract): `step` walks the groups under no_grad and does not claim
`_step_supports_amp_scaling`, so GradScaler unscales the gradients first (scaler.unscale_)
and skips the whole step when they hold an inf/NaN. No fused kernel and no fp32 master
weights here: a float16/bfloat16 parameter is updated in its own precision, as torch does.
State names and the float32 0-d "step" tensors are torch's, so state_dicts load both ways.
"""

from .. import _dtype as D
from .._creation import full, ones, ones_like, tensor, zeros_like
from .._math import maximum, where
from ..autograd import no_grad
from .optimizer import Optimizer

__all__ = ["Adamax", "NAdam", "RAdam", "Rprop", "ASGD"]


def _scalar(value):
    """A float32 0-d tensor (torch's step / mu_product / eta / mu state)."""
    return tensor(float(value), dtype=D.float32)


def _check(cond, msg):
    if not cond:
        raise ValueError(msg)


def _check_common(lr, eps=None, betas=None, weight_decay=0.0):
    _check(0.0 <= lr, f"Invalid learning rate: {lr}")
    if eps is not None:
        _check(0.0 <= eps, f"Invalid epsilon value: {eps}")
    if betas is not None:
        _check(0.0 <= betas[0] < 1.0, f"Invalid beta parameter at index 0: {betas[0]}")
        _check(0.0 <= betas[1] < 1.0, f"Invalid beta parameter at index 1: {betas[1]}")
    _check(0.0 <= weight_decay, f"Invalid weight_decay value: {weight_decay}")


class _SingleTensorOptimizer(Optimizer):
    """step(): for each parameter with a gradient, create its state on first use
    (_init_state) and apply the rule (_update) in place."""

    def _init_state(self, p, group):
        raise NotImplementedError

    def _update(self, p, g, state, group):
        raise NotImplementedError

    _SCALARS = ("step",)   # float32 0-d state entries (torch's); the others are like p

    def _load_state_value(self, p, key, value):
        """A loaded entry in torch's layout: "step" a float32 0-d tensor, the other scalars
        (mu_product, eta, mu) 0-d and the rest of p's shape, all in p's dtype (torch casts
        every entry but "step" to the parameter's dtype on load)."""
        if key in self._SCALARS and key != "step" and value is not None and \
                not isinstance(value, (int, float, bool)):
            # one value, cast to p's dtype as torch casts every entry but "step"
            return super()._load_state_value(p, "step", value).to(p.dtype)
        out = super()._load_state_value(p, key, value)
        if key in self._SCALARS or not hasattr(out, "dtype") or out.dtype is p.dtype:
            return out
        return out.to(p.dtype)

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        self._init_state(p, group)
                    g = p.grad.neg() if group["maximize"] else p.grad
                    self._update(p, g, state, group)
        return loss


def _flags(foreach, maximize, differentiable, capturable):
    return dict(foreach=foreach, maximize=maximize, differentiable=differentiable,
                capturable=capturable)


class Adamax(_SingleTensorOptimizer):
    """Adam with the infinity norm: exp_inf = max(beta2 * exp_inf, |g| + eps)."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check_common(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      **_flags(foreach, maximize, differentiable, capturable)))

    def _init_state(self, p, group):
        self.state[p].update(step=_scalar(0.0), exp_avg=zeros_like(p), exp_inf=zeros_like(p))

    def _update(self, p, g, st, group):
        beta1, beta2 = group["betas"]
        st["step"].add_(1)
        if group["weight_decay"] != 0:
            g = g.add(p, alpha=group["weight_decay"])
        st["exp_avg"].lerp_(g, 1 - beta1)
        maximum(st["exp_inf"].mul_(beta2), g.abs().add_(group["eps"]), out=st["exp_inf"])
        clr = group["lr"] / (1 - beta1 ** st["step"].item())
        p.addcdiv_(st["exp_avg"], st["exp_inf"], value=-clr)


class NAdam(_SingleTensorOptimizer):
    """Adam with Nesterov momentum and the momentum-decay schedule mu_t (Dozat 2016);
    decoupled_weight_decay gives NAdamW."""

    _SCALARS = ("step", "mu_product")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check_common(lr, eps, betas, weight_decay)
        _check(0.0 <= momentum_decay, f"Invalid momentum_decay value: {momentum_decay}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      **_flags(foreach, maximize, differentiable, capturable)))

    def _init_state(self, p, group):
        self.state[p].update(step=_scalar(0.0), mu_product=_scalar(1.0), exp_avg=zeros_like(p),
                             exp_avg_sq=zeros_like(p))

    def _update(self, p, g, st, group):
        beta1, beta2 = group["betas"]
        lr, wd, psi = group["lr"], group["weight_decay"], group["momentum_decay"]
        st["step"].add_(1)
        step = st["step"].item()
        bc2 = 1 - beta2 ** step
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                g = g.add(p, alpha=wd)
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * psi))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * psi))
        st["mu_product"].mul_(mu)
        m, v = st["exp_avg"], st["exp_avg_sq"]
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        denom = v.div(bc2).sqrt().add_(group["eps"])
        mp = st["mu_product"].item()
        p.addcdiv_(g, denom, value=-lr * (1.0 - mu) / (1.0 - mp))
        p.addcdiv_(m, denom, value=(-lr * mu_next) / (1.0 - mp * mu_next))


class RAdam(_SingleTensorOptimizer):
    """Rectified Adam: plain momentum SGD while the variance estimate is unreliable
    (rho_t <= 5), Adam with the rectification term afterwards."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check_common(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      **_flags(foreach, maximize, differentiable, capturable)))

    def _init_state(self, p, group):
        self.state[p].update(step=_scalar(0.0), exp_avg=zeros_like(p), exp_avg_sq=zeros_like(p))

    def _update(self, p, g, st, group):
        beta1, beta2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        st["step"].add_(1)
        step = st["step"].item()
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                g = g.add(p, alpha=wd)
        m, v = st["exp_avg"], st["exp_avg_sq"]
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        bc1, bc2 = 1 - beta1 ** step, 1 - beta2 ** step
        m_hat = m / bc1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bc2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf /
                    ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive = (bc2 ** 0.5) / v.sqrt().add_(group["eps"])
            p.add_(m_hat * lr * adaptive * rect, alpha=-1.0)
        else:
            p.add_(m_hat * lr, alpha=-1.0)


class Rprop(_SingleTensorOptimizer):
    """Resilient backpropagation: per-element step sizes grow by etaplus while the
    gradient keeps its sign and shrink by etaminus when it flips (that step is skipped)."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check(0.0 <= lr, f"Invalid learning rate: {lr}")
        _check(0.0 < etas[0] < 1.0 < etas[1], f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes,
                                      **_flags(foreach, maximize, differentiable, capturable)))

    def _init_state(self, p, group):
        self.state[p].update(step=_scalar(0.0), prev=zeros_like(p),
                             step_size=full(tuple(p.grad.shape), group["lr"],
                                            dtype=p.grad.dtype))

    def _update(self, p, g, st, group):
        etaminus, etaplus = group["etas"]
        lo, hi = group["step_sizes"]
        st["step"].add_(1)
        s = g.mul(st["prev"]).sign()
        factor = where(s.gt(0), etaplus, where(s.lt(0), etaminus, ones_like(s)))
        st["step_size"].mul_(factor).clamp_(lo, hi)
        g = where(factor.eq(etaminus), 0.0, g)
        p.addcmul_(g.sign(), st["step_size"], value=-1)
        st["prev"].copy_(g)


class ASGD(_SingleTensorOptimizer):
    """Averaged SGD (Polyak and Juditsky): SGD with a decaying step eta_t and the running
    average ax of the iterates from step t0 on."""

    _SCALARS = ("step", "eta", "mu")

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _check_common(lr, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay,
                                      **_flags(foreach, maximize, differentiable, capturable)))

    def _init_state(self, p, group):
        self.state[p].update(step=_scalar(0.0), eta=_scalar(group["lr"]),
                             mu=ones((), dtype=D.float32), ax=zeros_like(p))

    def _update(self, p, g, st, group):
        lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
        st["step"].add_(1)
        if group["weight_decay"] != 0:
            g = g.add(p, alpha=group["weight_decay"])
        eta = st["eta"].item()
        p.mul_(1 - lambd * eta)
        p.add_(g, alpha=-eta)
        if st["mu"].item() != 1:
            st["ax"].add_(p.sub(st["ax"]).mul_(st["mu"]))
        else:
            st["ax"].copy_(p)
        step = st["step"].item()
        st["eta"].copy_(_scalar(lr / ((1 + lambd * lr * step) ** alpha)))
        st["mu"].copy_(_scalar(1 / max(1, step - t0)))


