"""einsum: Einstein summation, mapped onto the GEMM.

Each contraction of two operands becomes one batched matmul: the operands
are permuted to (batch, kept, contracted) and (batch, contracted, kept),
reshaped to 3-D (2-D without batch letters) and multiplied by the matmul op,
so halves take the fast fp16/bf16 GEMM with fp32 accumulation and autocast
treats it as torch's einsum (whose CPU decomposition runs bmm). Products with
nothing to contract are element-wise multiplications, letters that only one
operand has and the output lacks are summed first, and more than two
operands are contracted left to right. Ellipses broadcast as in torch.
A letter repeated within one operand takes that operand's diagonal over
those dims first: a strided view whose stride along the letter is the sum of
the repeated dims' strides (as_strided, whose gradient lands on the
diagonal), as torch does. Differentiation goes through the ops it is made of.
"""
import string as _string

from ._gemm import matmul
from ._math import mul
from ._math_reduce import sum as _sum
from ._tensor import Tensor

__all__ = ["einsum"]

_LETTERS = set(_string.ascii_letters)


def _split_equation(equation, n_ops):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) < n_ops:
        raise RuntimeError("einsum(): more operands were provided than specified in the "
                           "equation")
    if len(terms) > n_ops:
        raise RuntimeError("einsum(): fewer operands were provided than specified in the "
                           "equation")
    for t in terms + ([rhs] if arrow else []):
        body = t.replace("...", "")
        bad = [c for c in body if c not in _LETTERS]
        if bad or t.count("...") > 1:
            raise RuntimeError(f"einsum(): invalid subscript given at index {eq.index(t)} in "
                               f"the equation string, subscripts must be in [a-zA-Z]")
    return terms, (rhs if arrow else None)


def _expand_ellipsis(term, ndim, n_ell, k):
    """term's letters with '...' replaced by placeholders for its broadcast dims."""
    if "..." not in term:
        if len(term) != ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                               f"({len(term)}) does not match the number of dimensions "
                               f"({ndim}) for operand {k} and no ellipsis was given")
        return list(term)
    head, _, tail = term.partition("...")
    e = ndim - len(head) - len(tail)
    if e < 0:
        raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                           f"({len(head) + len(tail)}) is more than the number of dimensions "
                           f"({ndim}) for operand {k}")
    return list(head) + [chr(0x100 + n_ell - e + i) for i in range(e)] + list(tail)


def _parse(equation, operands):
    terms, rhs = _split_equation(equation, len(operands))
    n_ell = max((op.ndim - len(t.replace("...", "")) for t, op in zip(terms, operands)
                 if "..." in t), default=0)
    subs = [_expand_ellipsis(t, op.ndim, n_ell, k) for k, (t, op) in
            enumerate(zip(terms, operands))]
    ell = [chr(0x100 + i) for i in range(n_ell)]
    if rhs is None:
        counts = {}
        for s in subs:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + sorted(c for c, n in counts.items() if n == 1 and c in _LETTERS)
    else:
        head, dots, tail = rhs.partition("...")
        out = list(head) + (ell if dots else []) + list(tail)
        seen = set(c for s in subs for c in s)
        for c in out:
            if c not in seen and c in _LETTERS:
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                   f"equation for any input operand")
        if len(set(out)) != len(out):
            raise RuntimeError("einsum(): output subscript appears more than once in the output")
    return subs, out


def _sizes(subs, operands):
    sizes = {}
    for k, (s, op) in enumerate(zip(subs, operands)):
        for c, n in zip(s, op.shape):
            m = sizes.get(c)
            if m is None or m == 1:
                sizes[c] = n
            elif n != m and n != 1:
                name = c if c in _LETTERS else "..."
                raise RuntimeError(f"einsum(): subscript {name} has size {n} for operand {k} "
                                   f"which does not broadcast with previously seen size {m}")
    return sizes


def _take_diagonals(x, s, k):
    """x (letters s, some repeated) as the view along its diagonals: one dim
    per distinct letter, in first-seen order; the repeated dims' sizes must
    agree (torch's check and message)."""
    if len(set(s)) == len(s):
        return x, s
    letters, shape, strides = [], [], []
    for c, n, st in zip(s, x.shape, x.stride()):
        if c in letters:
            j = letters.index(c)
            if n != shape[j]:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {k} but "
                                   f"the sizes don't match, {n} != {shape[j]}")
            strides[j] += st
        else:
            letters.append(c)
            shape.append(n)
            strides.append(st)
    return x.as_strided(shape, strides), letters


def _sum_out(x, s, keep):
    """x (letters s) summed over the letters not in `keep`."""
    dims = [i for i, c in enumerate(s) if c not in keep]
    if dims:
        x = _sum(x, dims)
        s = [c for c in s if c in keep]
    return x, s


def _arrange(x, s, order, sizes):
    """x (letters s) permuted to `order` (letters missing from s inserted as
    size-1 dims) and expanded to the full sizes."""
    perm = [s.index(c) for c in order if c in s]
    if perm != list(range(len(perm))):
        x = x.permute(*perm)
    if len(perm) != len(order) or any(x.shape[i] != sizes[c] for i, c in enumerate(
            c for c in order if c in s)):
        present = [c for c in order if c in s]
        shape = [sizes[c] if c in s else 1 for c in order]
        x = x.reshape(*[x.shape[present.index(c)] if c in s else 1 for c in order])
        x = x.expand(*shape)
    return x


def _prod(cs, sizes):
    p = 1
    for c in cs:
        p *= sizes[c]
    return p


def _contract(a, sa, b, sb, keep, sizes):
    """a (letters sa) times b (letters sb), summed over the letters they share
    that are not in `keep`; returns (result, its letters)."""
    a, sa = _sum_out(a, sa, set(sb) | keep)
    b, sb = _sum_out(b, sb, set(sa) | keep)
    batch = [c for c in sa if c in sb and c in keep]
    con = [c for c in sa if c in sb and c not in keep]
    ra = [c for c in sa if c not in sb]
    rb = [c for c in sb if c not in sa]
    if not con:
        order = batch + ra + rb
        return mul(_arrange(a, sa, order, sizes), _arrange(b, sb, order, sizes)), order
    nb, m, k, n = (_prod(cs, sizes) for cs in (batch, ra, con, rb))
    a3 = _arrange(a, sa, batch + ra + con, sizes)
    b3 = _arrange(b, sb, batch + con + rb, sizes)
    if batch:
        r = matmul(a3.reshape(nb, m, k), b3.reshape(nb, k, n))
    else:
        r = matmul(a3.reshape(m, k), b3.reshape(k, n))
    order = batch + ra + rb
    return r.reshape(*[sizes[c] for c in order]), order


def einsum(equation, *operands):
    """einsum(equation, *operands): torch.einsum's sum of products over the
    subscripts that the output lacks (operands may also be given as one
    list)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError("einsum(): argument 'equation' must be str")
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    for op in operands:
        if not isinstance(op, Tensor):
            raise TypeError(f"einsum(): operands must be Tensors, not {type(op).__name__}")
    subs, out = _parse(equation, operands)
    diag = [_take_diagonals(op, sb, k) for k, (op, sb) in enumerate(zip(operands, subs))]
    operands, subs = tuple(d[0] for d in diag), [d[1] for d in diag]
    sizes = _sizes(subs, operands)
    x, sx = operands[0], subs[0]
    for j in range(1, len(operands)):
        later = set(out).union(*[set(s) for s in subs[j + 1:]])
        x, sx = _contract(x, sx, operands[j], subs[j], later, sizes)
    x, sx = _sum_out(x, sx, set(out))
    if len(operands) == 1 and sx == out:
        return x.clone() if x is operands[0] else x
    return _arrange(x, sx, out, sizes)
