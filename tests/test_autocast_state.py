"""Autocast and grad-mode state across generators, threads, tasks and contexts.

What is required (ampy/amp/autocast_mode.py and ampy/autograd/_grad_mode.py
say why): a region's exit restores exactly what its entry saw, wherever the
exit runs; nothing of a region is left once it has exited; and the state an
op runs in always equals what is_autocast_enabled()/get_autocast_dtype()
report. Where torch is sane (LIFO nesting, set_* inside a region, a task that
runs after its region has exited, a fresh thread, a decorated generator under
no_grad) the answers are compared with torch's; where torch's thread-local
state leaks (a generator closed inside another region or in another thread)
the reference is the state before the generator started, read from torch.
"""
import asyncio
import contextvars
import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ampy
from ampy import _dispatch
from ampy.amp import _policy as P

A16, A_BF = ampy.float16, ampy.bfloat16


def probe():
    """(what the API reports, the dtype a matmul really runs in) on cpu."""
    x = ampy.ones(2, 2)
    return ampy.is_autocast_enabled("cpu"), ampy.get_autocast_dtype("cpu"), (x @ x).dtype


def torch_probe():
    x = torch.ones(2, 2)
    return torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"), (x @ x).dtype


def same(a, t):
    """ampy probe tuple == torch probe tuple (dtype names compared)."""
    return (a[0], a[1].name, a[2].name) == (t[0], str(t[1])[6:], str(t[2])[6:])


def off():
    return torch_probe()


def consistent(p):
    on, dt, ran = p
    return ran is (dt if on else ampy.float32)


@pytest.fixture(autouse=True)
def nothing_left():
    yield
    assert same(probe(), off()), "autocast state leaked out of the test"
    assert ampy.is_grad_enabled()


def region_gen(dtype):
    with ampy.autocast("cpu", dtype=dtype):
        yield probe()
        yield probe()


# ------------------------------------------------------------- generators
def test_generator_closed_inside_another_region():
    g = region_gen(A16)
    assert next(g)[0]
    with ampy.autocast("cpu", dtype=A_BF):
        g.close()                     # used to raise RuntimeError here
        inside = probe()
    assert inside == (True, A_BF, A_BF)
    assert same(probe(), off())       # used to leave float16 autocast on


def test_generator_exhausted_inside_another_region_and_thrown_into():
    g = region_gen(A16)
    next(g)
    with ampy.autocast("cpu", dtype=A_BF):
        next(g)
        with pytest.raises(StopIteration):
            next(g)
        assert probe() == (True, A_BF, A_BF)
    g = region_gen(A16)
    next(g)
    with ampy.autocast("cpu", enabled=False):
        with pytest.raises(KeyError):
            g.throw(KeyError("k"))
        assert consistent(probe()) and not probe()[0]


def finish_in_thread(g, after=None):
    """Run generator g to its end in a new thread; returns [exception raised, if any] plus
    after()'s value there when given."""
    out = []

    def finish():
        try:
            list(g)
        except BaseException as e:  # noqa: BLE001 (reported to the caller)
            out.append(e)
        if after is not None:
            out.append(after())

    th = threading.Thread(target=finish)
    th.start()
    th.join()
    return out


def test_generator_finished_in_another_thread():
    g = region_gen(A16)
    next(g)
    assert finish_in_thread(g) == []
    assert same(probe(), off())


def test_interleaved_generators_closed_in_any_order():
    for order in ((0, 1, 2), (2, 1, 0), (1, 0, 2), (0, 2, 1)):
        gens = [region_gen(dt) for dt in (A16, A_BF, A16)]
        for g in gens:
            next(g)
        assert probe() == (True, A16, A16)
        left = set(range(3))
        for i in order:
            gens[i].close()
            left.discard(i)
            p = probe()
            assert consistent(p)
            if left:  # the innermost region still open decides
                want = (A16, A_BF, A16)[max(left)]
                assert p == (True, want, want), (order, i)
        assert same(probe(), off()), order


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from(["float16", "bfloat16"])),
                min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_random_open_close_orders_match_the_live_region_model(regions, rnd):
    """Generators open regions in one order and are closed in a random one:
    after every step the state is the fold of the regions still open, in the
    order they were entered (the model), and it is off at the end."""
    def model(live):
        on, dt = False, A_BF
        for i in sorted(live):
            on, dt = regions[i][0], getattr(ampy, regions[i][1])
        return on, dt

    gens = []
    for enabled, dt in regions:
        def gen(enabled=enabled, dt=getattr(ampy, dt)):
            with ampy.autocast("cpu", dtype=dt, enabled=enabled):
                yield
        gens.append(gen())
    live = []
    for i, g in enumerate(gens):
        next(g)
        live.append(i)
        assert probe()[:2] == model(live)
    order = list(range(len(gens)))
    rnd.shuffle(order)
    for i in order:
        gens[i].close()
        live.remove(i)
        p = probe()
        assert p[:2] == model(live) and consistent(p)
    assert same(probe(), off())


def test_decorated_generator_function_runs_its_body_in_the_region():
    @ampy.autocast("cpu", dtype=A16)
    def gen():
        yield probe()
        yield probe()

    seen = []
    for p in gen():
        seen.append((p, probe()))
    assert [s[0] for s in seen] == [(True, A16, A16)] * 2
    assert all(same(s[1], off()) for s in seen)  # the consumer is outside the region


def test_decorated_async_generator_runs_its_body_in_the_region():
    @ampy.autocast("cpu", dtype=A16)
    async def agen():
        for _ in range(2):
            await asyncio.sleep(0)
            yield probe()

    async def main():
        return [(p, probe()) async for p in agen()]

    seen = asyncio.run(main())
    assert [s[0] for s in seen] == [(True, A16, A16)] * 2
    assert all(same(s[1], off()) for s in seen)


def test_decorator_recursion_with_an_exception_deep_inside():
    @ampy.autocast("cpu", dtype=A16)
    def rec(n):
        with ampy.autocast("cpu", dtype=A_BF if n % 2 else A16):
            if n == 0:
                raise ValueError("bottom")
            return rec(n - 1)

    with pytest.raises(ValueError):
        rec(30)
    with ampy.autocast("cpu", dtype=A_BF):
        with pytest.raises(ValueError):
            rec(5)
        assert probe() == (True, A_BF, A_BF)


# -------------------------------------------------------- LIFO vs torch
def test_nested_regions_and_setters_match_torch():
    def run(lib, dt16, dtbf, probe_fn):
        seen = [probe_fn()]
        with lib.autocast("cpu", dtype=dtbf):
            seen.append(probe_fn())
            with lib.autocast("cpu", dtype=dt16):
                seen.append(probe_fn())
                lib.set_autocast_enabled("cpu", False)
                seen.append(probe_fn())
                lib.set_autocast_dtype("cpu", dtbf)
                with lib.autocast("cpu", enabled=True):
                    seen.append(probe_fn())
                seen.append(probe_fn())
            seen.append(probe_fn())
            with lib.autocast("cpu", enabled=False):
                seen.append(probe_fn())
            try:
                with lib.autocast("cpu", dtype=dt16):
                    raise KeyError
            except KeyError:
                pass
            seen.append(probe_fn())
        seen.append(probe_fn())
        return seen

    a = run(ampy, A16, A_BF, probe)
    t = run(torch, torch.float16, torch.bfloat16, torch_probe)
    assert len(a) == len(t) and all(same(x, y) for x, y in zip(a, t)), (a, t)


def test_setters_outside_a_region_stay_like_torch():
    try:
        ampy.set_autocast_dtype("cpu", A16)
        torch.set_autocast_dtype("cpu", torch.float16)
        with ampy.autocast("cpu"), torch.autocast("cpu"):
            assert same(probe(), torch_probe())
        assert same(probe(), torch_probe())
    finally:
        ampy.set_autocast_dtype("cpu", A_BF)
        torch.set_autocast_dtype("cpu", torch.bfloat16)


# --------------------------------------------------- threads and tasks
def test_thread_started_inside_a_region_matches_torch():
    def seen_in_thread(lib, dt, probe_fn):
        out = []
        with lib.autocast("cpu", dtype=dt):
            th = threading.Thread(target=lambda: out.append(probe_fn()))
            th.start()
            th.join()
        return out[0]

    assert same(seen_in_thread(ampy, A16, probe), seen_in_thread(torch, torch.float16,
                                                                 torch_probe))


def _task_outliving_region(lib, dt, probe_fn):
    async def child(started, go, out):
        out.append(probe_fn())
        started.set()
        await go.wait()
        out.append(probe_fn())

    async def main():
        started, go, out = asyncio.Event(), asyncio.Event(), []
        with lib.autocast("cpu", dtype=dt):
            task = asyncio.create_task(child(started, go, out))
            await started.wait()
        go.set()
        await task
        return out

    return asyncio.run(main())


def test_task_outliving_its_region_matches_torch():
    a = _task_outliving_region(ampy, A16, probe)
    t = _task_outliving_region(torch, torch.float16, torch_probe)
    assert same(a[0], t[0]) and same(a[1], t[1]), (a, t)
    assert a[1] == (False, A_BF, ampy.float32)


def test_task_outliving_its_region_while_another_region_is_open():
    """The hook is installed (a region is open in the parent), so the task's
    matmul used to run in the dead region's float16 while the API said off."""
    async def child(go, out):
        await go.wait()
        out.append(probe())

    async def main():
        go, out = asyncio.Event(), []
        with ampy.autocast("cpu", dtype=A16):
            task = asyncio.create_task(child(go, out))
            await asyncio.sleep(0)
        with ampy.autocast("cpu", dtype=A_BF):
            go.set()
            await task
            parent = probe()
        return out[0], parent

    child_p, parent_p = asyncio.run(main())
    assert consistent(child_p) and child_p[0] is False
    assert parent_p == (True, A_BF, A_BF)


def test_task_nested_region_survives_parent_region_exit():
    async def child(go, out):
        with ampy.autocast("cpu", enabled=False):
            await go.wait()
            out.append(probe())
        with ampy.autocast("cpu", dtype=A_BF):
            out.append(probe())
        out.append(probe())

    async def main():
        go, out = asyncio.Event(), []
        with ampy.autocast("cpu", dtype=A16):
            task = asyncio.create_task(child(go, out))
            await asyncio.sleep(0)
        go.set()
        await task
        return out

    out = asyncio.run(main())
    assert [consistent(p) for p in out] == [True] * 3
    assert [p[0] for p in out] == [False, True, False] and out[1][2] is A_BF


def test_copied_context_sees_only_live_regions():
    with ampy.autocast("cpu", dtype=A16):
        ctx = contextvars.copy_context()
        assert ctx.run(probe) == (True, A16, A16)
    assert same(ctx.run(probe), off())
    with ampy.autocast("cpu", dtype=A_BF):
        assert same(ctx.run(probe), off())  # a copy made before this region


def test_to_thread_inside_and_after_a_region():
    async def main():
        with ampy.autocast("cpu", dtype=A16):
            inside = await asyncio.to_thread(probe)
        return inside, await asyncio.to_thread(probe)

    inside, after = asyncio.run(main())
    assert inside == (True, A16, A16) and same(after, off())


# ------------------------------------------------------ weight-cast cache
@pytest.fixture
def low_op():
    name = "_test_state_low"
    _dispatch.defop(name, policy={"cpu": P.LOWER, "cuda": None})(lambda *a, **k: (a, k))
    op = _dispatch.get_op(name)
    yield lambda w: _dispatch.dispatch(op, w)[0][0]  # the cast autocast made
    _dispatch._TABLE.pop(name, None)


def test_cache_cleared_when_outermost_region_exits_out_of_order(low_op):
    w = ampy.ones(3).requires_grad_()
    g = region_gen(A16)
    next(g)                               # outer region: the generator's
    with ampy.autocast("cpu", dtype=A16):
        c1 = low_op(w)
        assert low_op(w) is c1            # nested region shares the cache
        g.close()                         # outermost exits: its cache goes
        c2 = low_op(w)
        assert c2 is not c1 and low_op(w) is c2
    with ampy.autocast("cpu", dtype=A16):
        assert low_op(w) is not c2


def test_cache_not_shared_with_another_thread(low_op):
    w = ampy.ones(3).requires_grad_()

    async def main():
        with ampy.autocast("cpu", dtype=A16):
            mine = low_op(w)
            bare = await asyncio.to_thread(lambda: (low_op(w), low_op(w)))
            own = await asyncio.to_thread(own_region)
            return mine, bare, own

    def own_region():
        with ampy.autocast("cpu", dtype=A16):
            return low_op(w), low_op(w)

    mine, (b1, b2), (o1, o2) = asyncio.run(main())
    assert b1.dtype is A16 and b1 is not mine and b2 is not b1  # main's cache: not here
    assert o1.dtype is A16 and o1 is o2 and o1 is not mine      # its own region's cache


def test_region_exit_without_enter_raises():
    ac = ampy.autocast("cpu")
    with pytest.raises(RuntimeError, match="without a matching __enter__"):
        ac.__exit__(None, None, None)
    with ac:
        pass
    with pytest.raises(RuntimeError, match="without a matching __enter__"):
        ac.__exit__(None, None, None)


# --------------------------------------------------------------- grad mode
def grad_gen(ctx):
    with ctx():
        yield ampy.is_grad_enabled()
        yield ampy.is_grad_enabled()


def test_no_grad_generator_closed_inside_enable_grad():
    g = grad_gen(ampy.no_grad)
    assert next(g) is False
    with ampy.enable_grad():
        g.close()
        assert ampy.is_grad_enabled()     # used to be False here
    assert ampy.is_grad_enabled()


def test_enable_grad_generator_outliving_no_grad_block():
    with ampy.no_grad():
        g = grad_gen(ampy.enable_grad)
        assert next(g) is True
    assert ampy.is_grad_enabled()         # used to stay off after the block
    g.close()
    assert ampy.is_grad_enabled()


def test_no_grad_generator_finished_in_another_thread():
    g = grad_gen(ampy.no_grad)
    next(g)
    assert finish_in_thread(g, ampy.is_grad_enabled) == [True] and ampy.is_grad_enabled()


@pytest.mark.parametrize("name", ["no_grad", "enable_grad", "inference_mode"])
def test_decorated_generator_grad_mode_matches_torch(name):
    def run(lib):
        @getattr(lib, name)()
        def gen():
            yield lib.is_grad_enabled()
            yield lib.is_grad_enabled()

        out = []
        with lib.set_grad_enabled(name != "enable_grad"):
            for v in gen():
                out.append((v, lib.is_grad_enabled()))
        return out

    assert run(ampy) == run(torch)


def test_grad_mode_exit_without_enter_raises():
    with pytest.raises(RuntimeError, match="without a matching __enter__"):
        ampy.no_grad().__exit__(None, None, None)
    assert ampy.is_grad_enabled()


def test_setters_in_a_loop_do_not_grow_the_state():
    from ampy.amp import _autocast_state as S

    def chain_len():
        n, k = S.TOP.get(), 0
        while n is not None:
            n, k = n.parent, k + 1
        return k

    start = chain_len()
    try:
        for i in range(1000):
            ampy.set_autocast_dtype("cpu", A16 if i % 2 else A_BF)
            ampy.set_autocast_cache_enabled(bool(i % 2))
            with ampy.autocast("cpu"):
                ampy.set_autocast_enabled("cpu", False)
        assert chain_len() <= start + 1
        assert ampy.get_autocast_dtype("cpu") is A16 and ampy.is_autocast_cache_enabled()
    finally:
        ampy.set_autocast_dtype("cpu", A_BF)
        ampy.set_autocast_cache_enabled(True)


def test_set_autocast_enabled_outside_any_region_matches_torch():
    """In a fresh process (no region ever entered): the ops get their rules,
    and a cacheable weight (fp32 leaf requiring grad) has no cache to hit."""
    import os
    import subprocess
    import sys
    code = """if 1:
        import ampy, torch
        ampy.set_autocast_enabled("cpu", True)
        torch.set_autocast_enabled("cpu", True)
        a = ampy.nn.functional.linear(ampy.ones(2, 2), ampy.ones(2, 2).requires_grad_())
        t = torch.nn.functional.linear(torch.ones(2, 2), torch.ones(2, 2, requires_grad=True))
        ok = ampy.is_autocast_enabled("cpu") == torch.is_autocast_enabled("cpu")
        ampy.set_autocast_enabled("cpu", False)
        torch.set_autocast_enabled("cpu", False)
        x = ampy.ones(2, 2)
        print(a.dtype.name, str(t.dtype)[6:], ok, (x @ x).dtype.name)
    """
    root = os.path.dirname(os.path.dirname(ampy.__file__))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["bfloat16", "bfloat16", "True", "float32"]
