"""The math the CPU (csrc/) and the GPU (cuda/) both compute is written once,
in headers both include, and tested once in C.

- The shared helpers (AMPY_ELEM functions of csrc/include/ampy/*_math.h,
  elem.h, nn.h, random.h, ewise_expr.h) are not defined again in cuda/ or in
  csrc/*.c, and the formulas and messages they hold appear nowhere else.
- Each CPU file and its CUDA twin include the shared header of their concern.
- Every helper of the *_math.h headers is exercised by tests/c/test_shared_math.c,
  and every op of the device's float op table (AMPY_EX_FLOAT_SWITCH) by
  tests/c/test_ewise_expr_f32.c; both C tests are built and run here (and by
  `make ctest` under ASan).
"""
import os
import re
import shutil
import subprocess
import sysconfig

import pytest

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INC = os.path.join(HERE, "csrc", "include", "ampy")
SHARED_MATH = ["optim_math.h", "reduce_math.h", "nn_math.h", "clip_math.h"]


def _read(*parts):
    with open(os.path.join(HERE, *parts)) as f:
        return f.read()


def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _sources(folder, exts):
    d = os.path.join(HERE, folder)
    return sorted(os.path.join(folder, f) for f in os.listdir(d) if f.endswith(exts))


def _kernel_sources():
    return _sources("csrc", (".c", ".inc")) + _sources("cuda", (".cu", ".cuh"))


def _helpers(header):
    """Names of the functions a header defines (AMPY_ELEM or static inline)."""
    text = _strip_comments(_read("csrc", "include", "ampy", header))
    return re.findall(r"(?:AMPY_ELEM|static inline)\s+[\w\s\*]+?\b(\w+)\s*\(", text)


def _defines(text, name):
    """True when text defines a function called name: the name follows only
    type words at the start of its line, and a body follows its parameters."""
    for m in re.finditer(r"\b%s\s*\(" % re.escape(name), text):
        line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        if not re.fullmatch(r"\s*[A-Za-z_][\w \t\*]*[\s\*]", line):
            continue
        depth, i = 0, m.end() - 1
        while i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        if re.match(r"\s*(const\s*)?\{", text[i:]):
            return True
    return False


def test_shared_headers_exist_and_define_helpers():
    for h in SHARED_MATH:
        assert len(_helpers(h)) >= 5, h


@pytest.mark.parametrize("header", SHARED_MATH + ["elem.h", "nn.h", "random.h", "ewise_expr.h"])
def test_no_kernel_file_defines_a_copy_of_a_shared_helper(header):
    names = _helpers(header)
    assert names
    for src in _kernel_sources():
        text = _strip_comments(_read(src))
        copies = [n for n in names if _defines(text, n)]
        assert not copies, f"{src} defines its own {copies} ({header} has them)"


# A fingerprint of each formula or message that lives in a shared header: it
# must appear in no .c/.cu file (it did, in both, before the headers).
FINGERPRINTS = {
    "Adam bias corrections": r"1\.0\s*-\s*pow\(\s*o(->|\.)beta[12]",
    "Adam bc2 ** 0.5": r"bc2_sqrt\s*=",
    "SGD 1 - dampening": r"one_m_damp\s*=",
    "optimizer messages": r"Invalid (learning rate|epsilon value|beta parameter|weight_decay value"
                          r"|momentum value|dampening value)",
    "var/std divisor": r"correction\s*>\s*0\.0\s*\?",
    "logsumexp centre": r"isinf\(\s*\w+(\.|->)best\s*\)",
    "reduction op names": r'"logsumexp",\s*"all"',
    "cross-entropy smoothing": r"\(1\.0\s*-\s*(c->)?ls\)\s*\*\s*l\b",
    "cross-entropy gradient": r"\(1\.0\s*-\s*(c->)?ls\)\s*\*\s*wt\s*/",
    "label_smoothing message": r"label_smoothing must be between",
    "dropout scale rounding": r"ampy_f64_to_f16\(\s*scale\s*\)",
    "mse element loss rounding": r"ampy_f16_to_f32\(ampy_f64_to_f16\([dv]\)\)",
    "loss reduction message": r"is not a valid value for reduction",
    "Box-Muller": r"sqrt\(\s*-2\.0\s*\*\s*log\(",
    "fill_random message": r"fill_random: bad kind",
}


@pytest.mark.parametrize("what", sorted(FINGERPRINTS))
def test_shared_formula_appears_only_in_its_header(what):
    pat = re.compile(FINGERPRINTS[what])
    found = [s for s in _kernel_sources() if pat.search(_strip_comments(_read(s)))]
    assert not found, f"{what}: written again in {found}"
    headers = [h for h in os.listdir(INC) if pat.search(_strip_comments(_read(INC, h)))]
    assert len(headers) == 1, (what, headers)


@pytest.mark.parametrize("header, users", [
    ("optim_math.h", ["csrc/optim.c", "cuda/optim.cu", "csrc/optim_adaptive.c",
                      "cuda/optim_adaptive.cu"]),
    ("reduce_math.h", ["csrc/reduce.c", "cuda/reduce.cu"]),
    ("nn_math.h", ["csrc/nn.c", "csrc/nn_misc.c", "cuda/nn_common.cuh"]),
    ("random.h", ["csrc/random.c", "cuda/nn_common.cuh"]),
    ("ewise_expr.h", ["csrc/ewise_ops.c", "cuda/ewise.cu"]),
    ("elem.h", ["cuda/common.cuh"]),
    ("clip_math.h", ["csrc/clip.c", "cuda/clip.cu"]),
])
def test_cpu_and_cuda_include_the_shared_header(header, users):
    for u in users:
        assert f'#include "ampy/{header}"' in _read(u), (u, header)


def _includes(path, seen=None):
    """Every header path reaches through #include "..." (cuda/ and csrc/include)."""
    seen = set() if seen is None else seen
    for name in re.findall(r'#include "([^"]+)"', _read(path)):
        for d in (os.path.dirname(path), "cuda", os.path.join("csrc", "include")):
            cand = os.path.normpath(os.path.join(d, name))
            if os.path.exists(os.path.join(HERE, cand)):
                if cand not in seen:
                    seen.add(cand)
                    _includes(cand, seen)
                break
    return seen


def test_every_cuda_kernel_reaches_elem_h():
    """Each .cu reaches elem.h (the conversions and element math), and the nn
    kernels nn_math.h through nn_common.cuh."""
    cu = _sources("cuda", (".cu",))
    assert cu
    for f in cu:
        assert os.path.join("csrc", "include", "ampy", "elem.h") in _includes(f), f
    for f in ("nn.cu", "nn_norm.cu", "nn_embed.cu"):
        assert os.path.join("csrc", "include", "ampy", "nn_math.h") in _includes("cuda/" + f), f


def test_device_float_ops_are_the_shared_switch():
    """cuda/ewise.cu computes its float ops with ewise_expr.h's switch, not a
    copy of it."""
    text = _strip_comments(_read("cuda", "ewise.cu"))
    assert "AMPY_EX_FLOAT_SWITCH(" in text
    assert "case AMPY_EW_GELU" not in text and "case AMPY_EW_SIGMOID" not in text


def _switch_ops():
    text = _read("csrc", "include", "ampy", "ewise_expr.h")
    body = text[text.index("#define AMPY_EX_FLOAT_SWITCH"):]
    return sorted(set(re.findall(r"case (AMPY_EW_\w+):", body)))


def test_every_device_float_op_is_measured_in_c():
    ops = _switch_ops()
    assert len(ops) > 60
    test = _read("tests", "c", "test_ewise_expr_f32.c")
    missing = [op for op in ops if not re.search(r"\{%s," % op, test)]
    assert not missing, f"not in tests/c/test_ewise_expr_f32.c's tables: {missing}"


def test_every_shared_helper_is_unit_tested_in_c():
    test = _read("tests", "c", "test_shared_math.c") + _read("tests", "c",
                                                              "test_optim_adaptive_math.c")
    # the checks' internals (repr, predicates) are exercised through the checks
    internal = {"ampy_optim_pyrepr", "ampy_optim_nonneg", "ampy_optim_float_dtype",
                "ampy_optim_check_tensor", "ampy_reduce_float_only"}
    names = [n for h in SHARED_MATH for n in _helpers(h)]
    names += ["ampy_random_value", "ampy_fill_random_check_args"]
    missing = [n for n in names if n not in internal and not re.search(r"\b%s\(" % n, test)]
    assert not missing, f"not called by tests/c/test_shared_math.c: {missing}"


def _cc():
    cc = os.environ.get("CC") or (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) or shutil.which("gcc") or shutil.which("cc")


@pytest.mark.parametrize("test, sources", [
    ("test_shared_math", ["status.c"]),
    ("test_optim_adaptive_math", ["status.c"]),
    ("test_ewise_expr_f32", ["status.c", "cpu.c", "vmath.c", "vmath_x86.c"]),
])
def test_c_unit_test_passes(tmp_path, test, sources):
    cc = _cc()
    assert cc, "no C compiler (the extension needs one too)"
    exe = str(tmp_path / test)
    cmd = [cc, "-std=c11", "-O2", "-fno-math-errno", "-Wall", "-Wextra", "-Wno-unused-parameter",
           "-Werror", "-I" + os.path.join(HERE, "csrc", "include"),
           os.path.join(HERE, "tests", "c", test + ".c")]
    cmd += [os.path.join(HERE, "csrc", s) for s in sources] + ["-o", exe, "-lm", "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    r = subprocess.run([exe], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
