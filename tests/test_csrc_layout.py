"""libampy's files are split where a concern ends: a textual `#include "*.inc"` is only
used for a template (one text compiled more than once, with different macros), never to
cut a file at some line; and no kernel function runs past ~80 lines."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"

# fragment -> the files that include it. vmath_impl.inc is the portable/AVX-512 template
# (VM_FN/VM_ATTR), compiled by vmath.c and vmath_x86.c; its parts: the erf/gelu
# functions (both builds) and the AVX-512 build's table-driven gelu and tanh, which use
# the template's helpers and fill its op table. nn_rows.inc is instantiated three times
# by nn.c (NN_T float portable, float AVX-512, double). attention_impl.inc is the fused
# attention's block loops, compiled by attention.c with a float and a double accumulator;
# attention_bwd.inc is its backward part.
TEMPLATES = {
    "vmath_impl.inc": {"vmath.c", "vmath_x86.c"},
    "vmath_erf_gelu.inc": {"vmath_impl.inc"},
    "vmath_gelu_avx512.inc": {"vmath_impl.inc"},
    "vmath_tanh_avx512.inc": {"vmath_impl.inc"},
    "nn_rows.inc": {"nn.c"},
    "attention_impl.inc": {"attention.c"},
    "attention_bwd.inc": {"attention_impl.inc"},
}
# cnn_norm.inc: the batch/group norm loops, instantiated three times by cnn_norm.c
# (float portable, float AVX2+FMA, double)
TEMPLATES["cnn_norm.inc"] = {"cnn_norm.c"}
# clip_kernels.inc: clip_grad_norm_'s norm and scale loops, instantiated three times by
# clip.c (portable, AVX2, AVX-512)
TEMPLATES["clip_kernels.inc"] = {"clip.c"}


def includes():
    """{included fragment: {including file}} for every .inc / .c included in csrc/."""
    found = {}
    for p in sorted(CSRC.glob("*")):
        if p.suffix not in (".c", ".h", ".inc"):
            continue
        for m in re.finditer(r'^\s*#\s*include\s+"([^"]+\.(?:inc|c))"', p.read_text(), re.M):
            found.setdefault(m.group(1), set()).add(p.name)
    return found


def test_inc_fragments_are_templates_only():
    assert includes() == TEMPLATES
    assert {p.name for p in CSRC.glob("*.inc")} == set(TEMPLATES)


def test_templates_are_instantiated_more_than_once():
    nn = (CSRC / "nn.c").read_text()
    assert nn.count('#include "nn_rows.inc"') >= 2
    for user in TEMPLATES["vmath_impl.inc"]:
        assert re.search(r"#define VM_FN|#define VM_SFX", (CSRC / user).read_text()), user


def long_functions(path, limit):
    """(line, length) of every function whose body ({ ... } at column 0) exceeds limit."""
    out, start = [], None
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("{"):
            start = i
        elif line.startswith("}") and start is not None:
            if i - start + 1 > limit:
                out.append((i, i - start + 1))
            start = None
    return out


def test_kernel_functions_fit_in_80_lines():
    bad = [f"{p.name}:{line}: {n} lines" for p in sorted(CSRC.glob("*.[ci]*"))
           if p.suffix in (".c", ".inc") for line, n in long_functions(p, 80)]
    assert not bad, "\n".join(bad)
