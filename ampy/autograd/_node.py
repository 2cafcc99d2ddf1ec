"""Graph nodes: what `tensor.grad_fn` points at.

A Node is one recorded op. It keeps what its backward rule needs (the op's
arguments, with tensors the rule does not read replaced by their shape and
dtype), one edge `(node, output_nr)` per tensor input (`next_functions`; `None`
for inputs that do not require grad) and the metadata of its outputs. Leaves
that require grad are reached through an `AccumulateGrad` node, one per leaf,
which adds the incoming gradient into `leaf.grad`.

Each op gets its own Node subclass named like torch's (`AddBackward0`,
`ToCopyBackward0`, ...) so `type(t.grad_fn).__name__`, `grad_fn.name()` and the
tensor repr read as in torch.
"""
import itertools
import re
import weakref

from .._devices import device
from .._shape import numel


__all__ = ["Node", "AccumulateGrad", "node_class", "Meta", "RemovableHandle"]

_SEQ = itertools.count()

_FREED_MSG = ("Trying to backward through the graph a second time (or directly access saved "
              "tensors after they have already been freed). Saved intermediate values of the "
              "graph are freed when you call .backward() or autograd.grad(). Specify "
              "retain_graph=True if you need to backward through the graph a second time or if "
              "you need to access saved tensors after calling backward.")


class Meta:
    """Shape/dtype/device of an argument whose values the backward rule does
    not read (so the graph does not keep its memory alive)."""

    __slots__ = ("shape", "dtype", "_device_index")

    def __init__(self, t):
        self.shape = t.shape
        self.dtype = t.dtype
        self._device_index = t._device_index

    @property
    def ndim(self):
        return len(self.shape)

    def dim(self):
        return len(self.shape)

    def size(self, d=None):
        return self.shape if d is None else self.shape[d]

    def numel(self):
        return numel(self.shape)

    @property
    def device(self):
        i = self._device_index
        return device("cpu") if i < 0 else device("cuda", i)

    def __repr__(self):
        return f"Meta(shape={list(self.shape)}, dtype={self.dtype})"


class RemovableHandle:
    """Returned by register_hook; `remove()` unregisters the hook."""

    __slots__ = ("_hooks", "_key")
    _ids = itertools.count()

    def __init__(self, hooks):
        self._hooks = weakref.ref(hooks) if hasattr(hooks, "__weakref__") else (lambda: hooks)
        self._key = next(RemovableHandle._ids)

    def remove(self):
        d = self._hooks()
        if d is not None:
            d.pop(self._key, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _HookDict(dict):
    """An insertion-ordered dict of hooks that handles can refer to weakly."""

    __slots__ = ("__weakref__",)


def add_hook(holder, attr, fn):
    d = getattr(holder, attr, None)
    if d is None:
        d = _HookDict()
        setattr(holder, attr, d)
    h = RemovableHandle(d)
    d[h._key] = fn
    return h


class Node:
    """Base of every grad_fn. Subclasses set `_rule` (rule(ctx, *grads) ->
    one grad per positional argument; a list for a list argument)."""

    # Plain attributes with class-level defaults: the hook sets only what a
    # node needs (args, kwargs, next_functions, needs_input_grad, _saved,
    # _seq, and out/_out_meta when used), so recording allocates little.
    _rule = None
    _op_name = ""
    args = ()
    kwargs = None
    out = None
    next_functions = ()
    needs_input_grad = ()
    _out_meta = None  # (shape, dtype) per output; None: one output
    _saved = ()
    _freed = False
    _seq = 0
    _tensor_pre_hooks = None
    _retains = None
    _pre_hooks = None
    _post_hooks = None
    _checks_on_unpack = False  # custom Functions: saved tensors checked when read

    def __init__(self):
        self._seq = next(_SEQ)

    # ---- public API, as torch's autograd.graph.Node
    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} object at {hex(id(self))}>"

    @property
    def metadata(self):
        m = self.__dict__.get("metadata_")
        if m is None:
            m = self.metadata_ = {}
        return m

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) -> None or new grad_inputs; runs after
        the node's backward."""
        return add_hook(self, "_post_hooks", fn)

    def register_prehook(self, fn):
        """fn(grad_outputs) -> None or new grad_outputs; runs before it."""
        return add_hook(self, "_pre_hooks", fn)

    # ---- engine side
    def check_saved(self):
        """Raise if the saved tensors were freed or modified in place."""
        if self._freed:
            raise RuntimeError(_FREED_MSG)
        for t, version in self._saved:
            if t._version != version and self._reads(t):
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: [{_type_str(t)} {list(t.shape)}]"
                    f"{_producer(t, self)} is at version {t._version}; expected version "
                    f"{version} instead. Hint: "
                    f"the backtrace further above can point at the operation that failed to "
                    f"compute its gradient.")

    def _reads(self, t):
        """Whether the rule reads saved tensor t for an input that needs grad
        (torch saves an argument only for the inputs whose gradient formula
        uses it, and checks only what it saved)."""
        if self._checks_on_unpack:
            return True
        name = self._op_name
        outs = OUTPUTS_READ.get(name)
        if outs is not None and self.out is not None:
            for i, o in enumerate(self.out):
                if o is t:
                    return i in outs
        use = SAVED_FOR.get(name) or (SAVED_FOR.get(name[:-1]) if name.endswith("_") else None)
        if use is None:
            return True
        needs, found = self.needs_input_grad, False
        for j, a in enumerate(self.args or ()):
            if a is t:
                readers = use.get(j)
                if readers is None or any(i < len(needs) and needs[i] for i in readers):
                    return True
                found = True
        return not found

    def apply(self, grads):
        return type(self)._rule(self, *grads)

    def release(self):
        """Free what the rule saved (after a backward without retain_graph)."""
        if self._saved or self.out is not None:
            self._freed = True
            self._saved = ()
            self.out = None
            self.args = None


# argument -> the inputs whose gradient formula reads it (torch's derivatives.yaml),
# for the rules that read an argument only for the other inputs' gradients
SAVED_FOR = {
    "mul": {0: (1,), 1: (0,)}, "div": {0: (1,)}, "fmod": {0: (1,), 1: (1,)},
    "remainder": {0: (1,), 1: (1,)},
    "mm": {0: (1,), 1: (0,)}, "bmm": {0: (1,), 1: (0,)}, "matmul": {0: (1,), 1: (0,)},
    "linear": {0: (1,), 1: (0,)}, "addmm": {1: (2,), 2: (1,)}, "baddbmm": {1: (2,), 2: (1,)},
    "addcmul": {1: (2,), 2: (1,)}, "addcdiv": {1: (2,)}, "lerp": {0: (2,), 1: (2,)},
}

# the outputs a save_out rule reads, where it keeps more (max/min along a dim: the indices)
OUTPUTS_READ = {"max_dim": (1,), "min_dim": (1,), "sort": (1,), "topk": (1,)}

_TYPE_NAMES = {"float32": "Float", "float16": "Half", "bfloat16": "BFloat16", "float64": "Double",
               "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char",
               "uint8": "Byte", "bool": "Bool"}


def _type_str(t):
    dev = "cuda." if t._device_index >= 0 else ""
    return f"ampy.{dev}{_TYPE_NAMES.get(t.dtype.name, t.dtype.name)}Tensor"


def _producer(t, node):
    """', which is output N of Op,' for a tensor made by an op (torch's wording;
    a saved output of `node` is node's)."""
    g, nr = t.grad_fn, getattr(t, "_output_nr", 0)
    if g is None and node.out is not None:
        for i, o in enumerate(node.out):
            if o is t:
                g, nr = node, i
    if g is None:
        return ""
    name = re.sub(r"Backward\d*$", "", g.name()) or g.name()
    return f", which is output {nr} of {name},"


_CLASSES = {}


def node_class(op_name, rule, backward_name=None):
    """The Node subclass of an op (cached per op and rule)."""
    key = (op_name, rule)
    cls = _CLASSES.get(key)
    if cls is None:
        name = backward_name or (getattr(rule, "backward_name", None) or
                                 _camel(op_name) + "Backward0")
        # object.__init__: recording sets _seq itself, and a class without a
        # Python __init__ is several times cheaper to instantiate
        cls = type(name, (Node,), {"_rule": staticmethod(rule), "_op_name": op_name,
                                   "__init__": object.__init__})
        _CLASSES[key] = cls
    return cls


def _camel(name):
    parts = [p for p in name.strip("_").split("_") if p]
    return "".join(p[:1].upper() + p[1:] for p in parts) or "Op"


class AccumulateGrad(Node):
    """The sink of a leaf: adds incoming gradients into `variable.grad`."""

    def __init__(self, variable):
        self._seq = next(_SEQ)
        self.variable = variable

    def release(self):
        pass


def accumulator(leaf):
    """The one AccumulateGrad node of `leaf` (created on first use; the leaf
    refers to it weakly, the graph strongly)."""
    ref = getattr(leaf, "_grad_accumulator", None)
    node = ref() if ref is not None else None
    if node is None:
        node = _new(AccumulateGrad)  # (AccumulateGrad(leaf) without the __init__ call)
        node._seq = next(_SEQ)
        node.variable = leaf
        leaf._grad_accumulator = weakref.ref(node)
    return node


_new = object.__new__
