"""ampy.nn.Module — torch.nn.Module's registration, traversal, state_dict and
conversion semantics (torch/nn/modules/module.py is the reference)."""
from collections import OrderedDict, namedtuple
import itertools

import numpy as np

from ... import _C
from ... import _devices
from ..._convert import from_numpy
from ..._creation import empty
from ... import _dtype as D
from ..._tensor import Tensor, _parse_to_args
from ..parameter import Parameter
from . import _module_hooks

__all__ = ["Module"]

# the hook stores every Module has besides _forward_hooks / _forward_pre_hooks
_HOOK_DICTS = ("_backward_hooks", "_backward_pre_hooks", "_state_dict_pre_hooks",
               "_state_dict_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")
_HOOK_SETS = ("_forward_hooks_with_kwargs", "_forward_hooks_always_called",
              "_forward_pre_hooks_with_kwargs")


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _cuda_missing():
    """The plain error for Module.to("cuda") / .cuda() without a usable GPU
    (None with one); the caller raises it before any parameter moves."""
    cuda = _devices.cuda()
    return None if cuda.is_available() else cuda._unavailable()


def _addindent(s_, num_spaces):
    s = s_.split("\n")
    if len(s) == 1:
        return s_
    first = s.pop(0)
    return first + "\n" + "\n".join((num_spaces * " ") + line for line in s)


def _typename(v):
    if isinstance(v, Tensor):
        return "ampy." + type(v).__name__ if type(v) is not Tensor else "ampy.Tensor"
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _to_ampy(v):
    """A checkpoint value as an ampy Tensor: ampy tensors as they are, NumPy
    arrays and Tensor-likes (anything np.asarray accepts, e.g. torch tensors;
    bfloat16 ones through .float()) as a CPU tensor."""
    if isinstance(v, Tensor):
        return v
    try:
        arr = np.asarray(v)
    except (TypeError, RuntimeError, ValueError):
        arr = np.asarray(v.float())  # torch.bfloat16 has no NumPy dtype
    if arr.dtype == object:
        raise TypeError("not tensor-like")
    # np.ascontiguousarray would make a 0-d value (num_batches_tracked) 1-d
    return from_numpy(arr if arr.flags.c_contiguous else np.ascontiguousarray(arr))


class _Handle:
    _ids = itertools.count()

    def __init__(self, d, *extra):
        self._d, self._extra, self.id = d, extra, next(_Handle._ids)

    def remove(self):
        self._d.pop(self.id, None)
        for e in self._extra:
            e.discard(self.id) if isinstance(e, set) else e.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class Module:
    """Base class of all layers: holds Parameters, buffers and child Modules
    registered by attribute assignment, and walks them for parameters(),
    state_dict(), to(), train()/eval()."""

    training: bool
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() takes 1 positional argument but "
                            f"{len(args) + 1} were given")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        for k in _HOOK_DICTS:
            d[k] = OrderedDict()
        for k in _HOOK_SETS:
            d[k] = set()

    def forward(self, *input):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  f'"forward" function')

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        if d["_forward_pre_hooks"] or d["_forward_hooks"] or d.get("_backward_hooks") or \
                d.get("_backward_pre_hooks"):
            return _module_hooks.hooked_call(self, args, kwargs)
        return self.forward(*args, **kwargs)

    def _add_hook(self, store, hook, prepend, *flags):
        """Register hook in self.<store>; flags: (set name, on) pairs marking its id."""
        marks = [getattr(self, name) for name, on in flags if on]
        h = _Handle(getattr(self, store), *marks)
        getattr(self, store)[h.id] = hook
        for m in marks:
            m.add(h.id)
        if prepend:
            getattr(self, store).move_to_end(h.id, last=False)
        return h

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """hook(module, args, output) -> None or a new output, after forward;
        with_kwargs: hook(module, args, kwargs, output); always_call: also when forward
        raises (output None)."""
        return self._add_hook("_forward_hooks", hook, prepend,
                              ("_forward_hooks_with_kwargs", with_kwargs),
                              ("_forward_hooks_always_called", always_call))

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) -> None or new args, before forward; with_kwargs:
        hook(module, args, kwargs) -> None or (new_args, new_kwargs)."""
        return self._add_hook("_forward_pre_hooks", hook, prepend,
                              ("_forward_pre_hooks_with_kwargs", with_kwargs))

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> None or new grad_input, once the
        gradients of the module's inputs are computed."""
        return self._add_hook("_backward_hooks", hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> None or new grad_output, before the module's
        backward runs."""
        return self._add_hook("_backward_pre_hooks", hook, prepend)

    def register_state_dict_pre_hook(self, hook):
        """hook(module, prefix, keep_vars) before this module's state_dict entries."""
        return self._add_hook("_state_dict_pre_hooks", hook, False)

    def register_state_dict_post_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) after them (may edit in place)."""
        return self._add_hook("_state_dict_hooks", hook, False)

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs) before this module loads its entries."""
        return self._add_hook("_load_state_dict_pre_hooks", hook, False)

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) after load_state_dict (may edit the key lists)."""
        return self._add_hook("_load_state_dict_post_hooks", hook, False)

    def get_extra_state(self):
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be "
                           "called. Please file an issue at https://github.com/pytorch/pytorch/"
                           "issues/new?template=bug-report.yml to report this bug.")

    def set_extra_state(self, state):
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be "
                           "called. Please file an issue at https://github.com/pytorch/pytorch/"
                           "issues/new?template=bug-report.yml to report this bug.")

    def _has_extra_state(self):
        return type(self).get_extra_state is not Module.get_extra_state

    def compile(self, *args, **kwargs):
        """torch.compile in place: ampy runs the module eagerly (its kernels are already
        compiled C), so this only accepts torch's arguments and returns None."""
        return None

    # ------------------------------------------------------------ registration
    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter", self._parameters)
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            f"(torch.nn.Parameter or None required)")
        elif param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             f"parameters must be created explicitly. To express '{name}' as a "
                             f"function of another Tensor, compute the value in the forward() "
                             f"method.")
        else:
            self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer", self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            f"(torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        self._check_name(name, "module", self._modules)
        self._modules[name] = module

    register_module = add_module

    def _check_name(self, name, kind, own):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if hasattr(self, name) and name not in own:
            raise KeyError(f"attribute '{name}' already exists")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_everywhere(name, keep="_parameters")   # keeps its place, as torch
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                f"(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = d.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                self._remove_everywhere(name, keep="_modules")
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{_typename(value)}' as child module "
                                    f"'{name}' (torch.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = d.get("_buffers")
                if buffers is not None and name in buffers:
                    if value is not None and not isinstance(value, Tensor):
                        raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                        f"(torch.Tensor or None expected)")
                    buffers[name] = value
                else:
                    object.__setattr__(self, name, value)

    def _remove_everywhere(self, name, keep=None):
        """name dropped from the instance dict and every store but keep (a replaced
        parameter or submodule keeps its position in its own store, as in torch)."""
        self.__dict__.pop(name, None)
        for k in ("_parameters", "_buffers", "_modules"):
            if k != keep:
                self.__dict__[k].pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __getattr__(self, name):
        d = self.__dict__
        for k in ("_parameters", "_buffers", "_modules"):
            own = d.get(k)
            if own is not None and name in own:
                return own[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for k in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__[k]:
                del self.__dict__[k][name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = set(dir(type(self))) | set(self.__dict__)
        for k in ("_parameters", "_buffers", "_modules"):
            keys |= set(self.__dict__[k])
        return sorted(k for k in keys if not k[0].isdigit())

    # --------------------------------------------------------------- traversal
    def _named_members(self, get, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mprefix, m in mods:
            for k, v in get(m):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (mprefix + ("." if mprefix else "") + k, v)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                       remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                       remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name,
                                       remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def get_submodule(self, target):
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{mod._get_name()} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return mod._buffers[name]

    def set_submodule(self, target, module, strict=False):
        """Replace (or, strict=False, add) the submodule at the dotted path target."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(parent, name, module)

    def to_empty(self, *, device=None, recurse=True):
        """Every parameter and buffer replaced by uninitialized memory of its shape and
        dtype (on device)."""
        def fresh(t):
            return empty(tuple(t.shape), dtype=t.dtype, device=device if device is not None
                         else t.device)
        return self._apply(fresh)

    def share_memory(self):
        """A no-op on ampy's CPU tensors: they already live in ordinary process memory, and
        ampy has no torch.multiprocessing to share them through. Returns self."""
        return self

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ modes
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                g = p.grad
                if g.grad_fn is not None:
                    g = g.detach()
                    p.grad = g
                g.zero_()

    # -------------------------------------------------------------- conversion
    def _apply(self, fn):
        """fn(tensor) -> tensor over every parameter, grad and buffer. Parameters
        keep their identity (torch's `param.data = fn(param)`), so optimizers
        built before the conversion still hold them."""
        for m in self.children():
            m._apply(fn)
        for key, p in self._parameters.items():
            if p is None:
                continue
            new = fn(p.detach())
            if new is not p and (new.data_ptr() != p.data_ptr() or new.dtype is not p.dtype):
                g = p.grad
                p.grad = None
                _C.nn_set_data_(p, new.detach())
                if g is not None:
                    p.grad = fn(g.detach())
        for key, b in self._buffers.items():
            if b is not None:
                self._buffers[key] = fn(b)
        return self

    def to(self, *args, **kwargs):
        dev, dt = _parse_to_args(args, dict(kwargs))
        if dev is not None and dev.type == "cuda" and (err := _cuda_missing()):
            raise err from None
        if dt is not None and not dt.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dt}")

        def convert(t):
            out = t
            if dt is not None and t.dtype.is_floating_point and t.dtype is not dt:
                out = _C.cast(out, dt)
            if dev is not None and out.device != dev:
                out = out.to(dev)
            return out
        return self._apply(convert)

    def _cast_floats(self, dt):
        return self._apply(lambda t: _C.cast(t, dt) if t.dtype.is_floating_point and
                           t.dtype is not dt else t)

    def half(self):
        return self._cast_floats(D.float16)

    def bfloat16(self):
        return self._cast_floats(D.bfloat16)

    def float(self):
        return self._cast_floats(D.float32)

    def double(self):
        return self._cast_floats(D.float64)

    def type(self, dst_type):
        return self._apply(lambda t: t.type(dst_type))

    def cuda(self, device=None):
        if err := _cuda_missing():
            raise err from None
        return self._apply(lambda t: t.cuda(device))

    def cpu(self):
        return self._apply(lambda t: t.cpu())

    # -------------------------------------------------------------- state_dict
    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        if args:  # torch's deprecated positional form (destination, prefix, keep_vars)
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
        for hook in self.__dict__.get("_state_dict_pre_hooks", {}).values():
            hook(self, prefix, keep_vars)
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if self._has_extra_state():
            destination[prefix + "_extra_state"] = self.get_extra_state()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
        for hook in self.__dict__.get("_state_dict_hooks", {}).values():
            r = hook(self, destination, prefix, {})
            if r is not None:
                raise RuntimeError("state_dict post-hook must return None")
        return destination

    def _load_from_state_dict(self, state_dict, prefix, strict, missing, unexpected, errors,
                              assign):
        for hook in self.__dict__.get("_load_state_dict_pre_hooks", {}).values():
            hook(self, state_dict, prefix, {}, strict, missing, unexpected, errors)
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items())
                 if v is not None}
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing.append(key)
                continue
            value = state_dict[key]
            try:
                src = _to_ampy(value)
            except (TypeError, ValueError, AttributeError, RuntimeError):
                errors.append(f'While copying the parameter named "{key}", expected torch.Tensor '
                              f'or Tensor-like object from checkpoint but received '
                              f'{type(value)}')
                continue
            if tuple(src.shape) != tuple(param.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape {src.shape} "
                              f"from checkpoint, the shape in current model is {param.shape}.")
                continue
            if assign:
                new = src.detach()
                if name in self._parameters:
                    setattr(self, name, Parameter(new, param.requires_grad))
                else:
                    self._buffers[name] = new
            else:
                _C.copy_(param, src)
        extra = prefix + "_extra_state"
        if self._has_extra_state():
            if extra in state_dict:
                self.set_extra_state(state_dict[extra])
            elif strict:
                missing.append(extra)
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    rest = key[len(prefix):]
                    head = rest.split(".", 1)[0]
                    if head not in self._modules and rest not in local and \
                            not (rest == "_extra_state" and self._has_extra_state()):
                        unexpected.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []

        def load(module, prefix):
            module._load_from_state_dict(state_dict, prefix, True, missing, unexpected, errors,
                                         assign)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")
        load(self, "")
        keys = _IncompatibleKeys(missing, unexpected)
        for m in self.modules():
            for hook in m.__dict__.get("_load_state_dict_post_hooks", {}).values():
                if hook(m, keys) is not None:
                    raise RuntimeError("load_state_dict post-hook must return None")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return keys

    # -------------------------------------------------------------------- repr
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"
