"""The dependency rules of the source tree, checked with `ast` and a scan of
the C sources:

- no import cycle between ampy's modules (no strongly connected component of
  more than one module in the import graph, module-level and function-level
  imports together);
- a function-level import of an ampy module only from the allow-list
  below, each with the reason it cannot be a module-level import;
- `Python.h` only in the binding files (csrc/py/, cuda/*_py.c, cuda/cuda_py.h);
- nothing outside csrc/py/ includes a binding header (csrc/py/*.h).
"""
import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "ampy")

# (importing module, imported module): why the import runs inside a function.
# A pair that no longer occurs fails test_allow_list_has_no_stale_entries.
FUNCTION_IMPORT_ALLOW = {
    # amp.functional: autograd's no_grad around its strided copies (autograd
    # sits above amp's kernels wrappers)
    ("ampy.amp.functional", "ampy.autograd"): "no_grad for the strided write-back",
    # ampy/cuda reaches back into the layers below at call time
    ("ampy.cuda", "ampy._tensor"): "device() argument parsing",
    ("ampy.cuda", "ampy._creation"): "cuda.manual_seed seeds the default generator",
}

# Cycles that are known and tolerated (none today). A listed cycle that no
# longer exists fails the test below.
KNOWN_CYCLES = []


def _modules():
    """{module name: path} of every .py file under ampy/."""
    out = {}
    for dirpath, _, files in os.walk(PKG):
        for f in files:
            if not f.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), ROOT)[:-3].split(os.sep)
            if rel[-1] == "__init__":
                rel = rel[:-1]
            out[".".join(rel)] = os.path.join(dirpath, f)
    return out


def _is_package(path):
    return os.path.basename(path) == "__init__.py"


def _resolve(mod, path, node, known):
    """The ampy modules an Import/ImportFrom node imports."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "ampy"]
    if node.level:
        base = mod.split(".")
        if not _is_package(path):
            base = base[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != "ampy":
        return []
    out = []
    for a in node.names:
        sub = f"{target}.{a.name}"
        out.append(sub if sub in known else target)
    return out


def _imports(known):
    """[(importer, imported, at_function_level, line)] for every ampy import."""
    edges = []
    for mod, path in known.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)

        def visit(node, in_fn):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for dep in _resolve(mod, path, child, known):
                        if dep != mod:
                            edges.append((mod, dep, in_fn, child.lineno))
                fn = in_fn or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                 ast.Lambda))
                visit(child, fn)

        visit(tree, False)
    return edges


def _sccs(nodes, edges):
    """Tarjan's strongly connected components (iterative)."""
    graph = {n: sorted({b for a, b in edges if a == n and b in nodes}) for n in nodes}
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def test_no_import_cycle():
    known = _modules()
    # The root package imports everything by design; `from .. import _C`
    # resolves to the submodule, so the root is a leaf for everyone else.
    nodes = set(known) - {"ampy"}
    cycles = [c for c in _sccs(nodes, [(a, b) for a, b, _, _ in _imports(known)])
              if len(c) > 1]
    assert [c for c in cycles if c not in KNOWN_CYCLES] == [], \
        f"modules that import each other: {cycles}"
    assert [c for c in KNOWN_CYCLES if c not in cycles] == [], "a known cycle is gone: drop it"


def test_function_level_imports_only_from_the_allow_list():
    known = _modules()
    bad = sorted(f"{a}:{line} imports {b}" for a, b, in_fn, line in _imports(known)
                 if in_fn and (a, b) not in FUNCTION_IMPORT_ALLOW)
    assert bad == [], "function-level imports of ampy outside the allow-list:\n" + "\n".join(bad)


def test_allow_list_has_no_stale_entries():
    known = _modules()
    used = {(a, b) for a, b, in_fn, _ in _imports(known) if in_fn}
    assert sorted(set(FUNCTION_IMPORT_ALLOW) - used) == []


_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def _c_sources():
    for top in ("csrc", "cuda"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".c", ".h", ".cu", ".cuh", ".inc")):
                    p = os.path.join(dirpath, f)
                    with open(p, encoding="utf-8") as fh:
                        yield os.path.relpath(p, ROOT).replace(os.sep, "/"), fh.read()


def _is_binding(rel):
    return (rel.startswith("csrc/py/") or re.fullmatch(r"cuda/[^/]+_py\.c", rel) is not None
            or rel == "cuda/cuda_py.h")


def test_python_h_only_in_binding_files():
    bad = [rel for rel, text in _c_sources()
           if "Python.h" in _INCLUDE.findall(text) and not _is_binding(rel)]
    assert bad == []


def test_csrc_never_includes_binding_headers():
    binding = {f for f in os.listdir(os.path.join(ROOT, "csrc", "py")) if f.endswith(".h")}
    bad = [f"{rel} includes {inc}" for rel, text in _c_sources() if rel.startswith("csrc/")
           and not rel.startswith("csrc/py/")
           for inc in _INCLUDE.findall(text) if os.path.basename(inc) in binding]
    assert bad == []
