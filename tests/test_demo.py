"""python -m ampy.demo: the quick mode trains the character GPT all four ways,
and the table's fields are real: flushed-gradient shares recounted from the
gradients themselves, skipped steps against the loss-scale trajectory, the
allocator's activation bytes, the CPU path that ran."""
import io
import os

import numpy as np
import pytest

import ampy
from ampy import _demo_data, _demo_model, _demo_report, _demo_train, demo

QUICK = _demo_train.Config(**{k: v for k, v in demo.QUICK.items()})


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "demo.png"
    buf = io.StringIO()
    import contextlib
    with contextlib.redirect_stdout(buf):
        results = demo.main(["--quick", "--out", str(out)])
    return results, buf.getvalue(), out


def test_text_is_generated_not_downloaded():
    a, b = _demo_data.CharData(20_000, seed=1), _demo_data.CharData(20_000, seed=1)
    assert np.array_equal(a.train, b.train) and a.itos == b.itos
    assert 20 <= a.vocab <= 40 and len(a.train) + len(a.val) == 20_000
    text = a.decode(a.train[:2000])
    assert "the " in text and ". " in text and (" sees " in text or " see " in text)
    x, y = a.batch(np.random.default_rng(0), 4, 16)
    assert x.shape == y.shape == (4, 16) and x.dtype == np.int64
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])  # targets: the next character


def test_progress_bar_off_a_terminal():
    buf = io.StringIO()
    bar = _demo_report.Progress(3, "run", width=6, file=buf)
    for _ in range(3):
        bar.update(loss=0.5)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2  # the first step and the last
    assert "[##....] 1/3 loss 0.5" in lines[0] and "[######] 3/3 loss 0.5" in lines[1]


def test_quick_runs_all_four_modes(quick):
    results, text, out = quick
    assert [r.mode.name for r in results] == [m.name for m in _demo_train.MODES]
    for r in results:
        assert len(r.losses) == QUICK.steps and np.isfinite(r.losses).all()
        assert r.step_time > 0 and 0 <= r.val_acc <= 1 and np.isfinite(r.val_loss)
        assert r.mode.name in text
    assert "flushed act" in text and "vs fp32" in text
    assert out.exists() and 10_000 < out.stat().st_size < 200_000 and f"wrote {out}" in text


def test_cpu_path_line_names_the_level_that_ran(quick):
    info = ampy._C.cpu_info()
    line = _demo_report.cpu_path_line(info)
    assert f"level '{info['level']}'" in line and line in quick[1]
    assert f"avx512_fp16 {'yes' if info['avx512_fp16'] else 'no'}" in line
    for level in ("amx", "avx512bf16", "avx512", "portable"):
        assert "Speed-ups depend" in _demo_report.cpu_path_line(dict(info, level=level))


def test_time_and_speedup_columns_are_the_measured_ones(quick):
    results, text, _ = quick
    base = results[0].step_time
    for r in results:
        assert r.step_time == float(np.median(r.step_times[2:]))
        row = next(line for line in text.splitlines() if line.startswith(r.mode.name + " "))
        assert f"{r.step_time * 1e3:.1f}" in row and f"{base / r.step_time:.2f}x" in row


def test_activation_memory_comes_from_the_allocator(quick):
    f32, bf16, sc, raw = quick[0]
    assert f32.act_bytes > 0 and f32.peak_bytes >= f32.act_bytes
    for r in (bf16, sc, raw):  # half activations: less than float32's, more than half of it
        assert 0.4 * f32.act_bytes < r.act_bytes < f32.act_bytes


def _independent_counts(mode, step0_scale):
    """Recount the flushed gradients of the first probe (step 0, the initial
    weights, the first batch) with a plain backward and a fresh grouping."""
    cfg = QUICK
    data = _demo_data.CharData(20_000, seed=cfg.seed)
    model = _demo_model.build(ampy, data.vocab, d=cfg.d, n_layer=cfg.n_layer,
                              n_head=cfg.n_head, T=cfg.T, seed=cfg.seed)
    xn, yn = data.batch(np.random.default_rng(cfg.seed), cfg.batch, cfg.T)
    x, y = ampy.tensor(xn), ampy.tensor(yn)

    def grads(autocast, scale):
        for p in model.parameters():
            p.grad = None
        taps = {}
        model.set_taps(taps)
        with ampy.autocast("cpu", dtype=ampy.float16, enabled=autocast):
            logits = model(x)
            loss = ampy.nn.functional.cross_entropy(logits.reshape(-1, data.vocab),
                                                    y.reshape(-1))
        (loss * scale).backward()
        model.set_taps(None)
        return ({n: p.grad.float().numpy() for n, p in model.named_parameters()},
                {n: t.grad.float().numpy() for n, t in taps.items()})

    ref, ref_act = grads(False, 1.0)
    got, got_act = grads(True, step0_scale)
    z = sum(int(((got[n] == 0) & (ref[n] != 0)).sum()) for n in ref)
    nz = sum(int((ref[n] != 0).sum()) for n in ref)
    za = sum(int(((got_act[n] == 0) & (ref_act[n] != 0)).sum()) for n in ref_act)
    na = sum(int((ref_act[n] != 0).sum()) for n in ref_act)
    return (z, nz), (za, na)


def test_flushed_share_is_real_and_recounts(quick):
    results, text, _ = quick
    raw, sc = results[3], results[2]
    assert raw.mode.name == "fp16, no scaler" and not raw.mode.scaler
    assert raw.underflow_total("act") > 0  # float16 at loss scale 1 loses gradients
    assert raw.underflow_total("act") > 3 * sc.underflow_total("act")
    assert f"{raw.underflow_total('act'):.2%}" in text
    step, counts = raw.act_probes[0]
    assert step == 0
    (pz, pn), (az, an) = _independent_counts(raw.mode, 1.0)
    assert (az, an) == tuple(map(sum, zip(*counts.values())))
    assert (pz, pn) == tuple(map(sum, zip(*raw.probes[0][1].values())))
    assert an > 0 and pn > 0
    (_, _), (saz, san) = _independent_counts(sc.mode, QUICK.init_scale)
    assert (saz, san) == tuple(map(sum, zip(*sc.act_probes[0][1].values())))
    for r in results[:2]:
        assert not r.probes and not r.act_probes  # no float16: nothing to flush


def test_flushed_counts_helper():
    g = {"a": np.array([0.0, 1.0, 0.0, 0.0], np.float32), "b": np.array([0.0], np.float32)}
    ref = {"a": np.array([1e-9, 1.0, 0.0, 2.0], np.float32), "b": np.array([3.0], np.float32)}
    assert _demo_train.flushed_counts(g, ref, {"x": ["a"], "y": ["b"]}) == {"x": (2, 3),
                                                                          "y": (1, 1)}


def _check_trajectory(r):
    sc = np.asarray(r.scales)
    if not r.mode.scaler:
        assert not any(r.skipped) and (sc == 1.0).all() and r.final_scale is None
        return
    nxt = np.append(sc[1:], r.final_scale)
    np.testing.assert_array_equal(np.asarray(r.skipped), nxt < sc)
    assert ((nxt == sc) | (nxt == 2 * sc) | (nxt == sc / 2)).all()


def test_skipped_steps_follow_the_scale_trajectory(quick):
    for r in quick[0]:
        _check_trajectory(r)


def test_an_overflowing_scale_skips_steps_and_backs_off():
    """From a loss scale of 2**30 the float16 gradients overflow: the first
    steps are skipped (the scale halves each time) until they fit."""
    cfg = _demo_train.Config(**{**QUICK.__dict__, "steps": 30, "init_scale": 2.0 ** 30,
                                "probes": 0})
    data = _demo_data.CharData(20_000)
    r = _demo_train.train(ampy, data, cfg, _demo_train.MODES[2])
    _check_trajectory(r)
    assert r.skipped[0] and 1 <= sum(r.skipped) < 30
    assert r.final_scale == 2.0 ** 30 / 2 ** sum(r.skipped)
    row = _demo_report.table([r]).splitlines()[2]
    assert f"{sum(r.skipped):>8d}{r.final_scale:>8.0f}" in row


def test_reading_says_when_the_effect_was_small(quick):
    results = quick[0]
    lines = _demo_report.reading(results)
    assert lines[0].startswith("Without loss scaling")
    raw, sc = results[3], results[2]
    flagged = any("The underflow effect in this run was small" in line for line in lines)
    assert flagged == (raw.underflow_total("act") < 0.01)
    loss_line = next(line for line in lines if line.startswith("Validation loss"))
    assert f"{raw.val_loss:.3f} without the scaler vs {sc.val_loss:.3f}" in loss_line
    noise = max(abs(r.val_loss - results[0].val_loss) for r in results[1:3])
    assert ("effect in this short run was small" in loss_line) == (
        abs(raw.val_loss - sc.val_loss) <= noise)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_compare_torch_side_by_side(quick, capsys):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    results = quick[0]
    cfg = _demo_train.Config(**{**QUICK.__dict__, "steps": 2})
    tres = demo.compare_torch(results, _demo_data.CharData(20_000), cfg, 2)
    text = capsys.readouterr().out
    assert [r.mode.name for r in tres] == [r.mode.name for r in results]
    # the same weights and batches: torch's first loss is ampy's to float32 rounding
    for a, t in zip(results, tres):
        assert abs(a.losses[0] - t.losses[0]) < 1e-3 * a.losses[0]
    assert "GEMM 512x512x512" in text and "float16 here: torch runs at" in text
    assert torch.__version__ in text


def test_legacy_digits_helpers_still_exported():
    x_tr, y_tr, x_te, y_te = demo.load_digits()
    assert x_tr.shape == (1437, 64) and len(y_te) == 360
    assert os.path.exists(demo.DATA)
    assert callable(demo.make_model) and callable(demo.train) and callable(demo.initial_state)


def test_gemm_rates_and_bad_arguments():
    r = demo.gemm_rates([ampy], n=64, rounds=2)
    assert set(r) == {"ampy"} and set(r["ampy"]) == {"float32", "bfloat16", "float16"}
    assert all(v > 0 for v in r["ampy"].values())
    for bad in (["--steps", "0"], ["--threads", "0"], ["--batch", "-1"]):
        with pytest.raises(SystemExit):
            demo.main(bad)
