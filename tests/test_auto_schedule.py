"""Auto-scheduling: sketch rules (golden traces), sampled programs against numpy, trace replay,
and a small tuning run whose log `apply_best` rebuilds."""

from __future__ import annotations

import json

import numpy as np
import pytest

import autotune
import tensorlang as tl
from autotune.auto_schedule import SKETCH_RULES, SketchRule, Trace, generate, replay
from autotune.space import ConfigSpace, FallbackConfig, InstantiationError

import auto_schedule_workloads as W  # noqa: E402 (tests/ is on sys.path under pytest)

AVX2 = "llvm -mcpu=haswell"  # golden traces are for one vector width


def _fallback_trace(func, *args, target=AVX2) -> str:
    with tl.Target(target):
        _, trace = generate(func(*args), FallbackConfig())
    return str(trace)


def _arrays(tensors, rng, n=None):
    def shape(t):
        return [n if tl.arith.const_value(d) is None else int(tl.arith.const_value(d))
                for d in t.shape]

    ins = [rng.standard_normal(shape(t)).astype("float32") for t in tensors
           if not isinstance(t.op, tl.ComputeOp)]
    outs = [np.zeros(shape(t), "float32") for t in tensors if isinstance(t.op, tl.ComputeOp)]
    return ins, outs


# -- each rule on a small DAG -----------------------------------------------------------------


def test_inline_and_elementwise_root_golden():
    def chain(n):
        x = tl.placeholder((n, 64), name="x")
        a = tl.compute((n, 64), lambda i, j: x[i, j] * 2.0, name="a")
        b = tl.compute((n, 64), lambda i, j: tl.exp(a[i, j]), name="b")
        return [x, b]

    assert _fallback_trace(chain, 16) == "\n".join([
        "b.split(j, factor=16)",
        "b.vectorize(j.inner)",
        "a.compute_inline()",
    ])


def test_multi_level_tiling_golden():
    assert _fallback_trace(W.gemm, 64, 64, 32) == "\n".join([
        "C.cache_write('local')",
        "C.split(i, factor=64)",
        "C.split(i.inner, factor=64)",
        "C.split(j, factor=32)",
        "C.split(j.inner, factor=32)",
        "C.reorder(i.outer, j.outer, i.inner.outer, j.inner.outer, i.inner.inner, "
        "j.inner.inner)",
        "C.parallel(j.outer)",
        "C.vectorize(j.inner.inner)",
        "C.local.compute_at(C, j.inner.outer)",
        "C.local.split(i, factor=4)",
        "C.local.split(j, factor=16)",
        "C.local.split(k, factor=32)",
        "C.local.reorder(k.outer, i.outer, j.outer, k.inner, i.inner, j.inner)",
        "C.local.unroll(i.inner)",
        "C.local.split(j.inner, factor=8)",
        "C.local.unroll(j.inner.outer)",
        "C.local.vectorize(j.inner.inner)",
        "C.local.pragma(k.outer, 'auto_unroll_max_step', 64)",
        # 32 steps of 2 vectors are more than the registers hold: the reduction stays rolled
        "C.local.pragma(k.inner, 'scalar_loop', True)",
    ])


def test_parallel_loop_fuses_two_busy_tile_loops():
    trace = _fallback_trace(W.scores, 1, 4, 64, 8)
    assert "S.fuse(h.outer, j.outer)" in trace and "S.parallel(h.outer.j.outer.fused)" in trace
    assert trace.splitlines()[:3] == ["S.transpose_read(K, dim=2)", "K.T.split(i3, factor=8)",
                                      "K.T.vectorize(i3.inner)"]


def test_fused_consumer_golden():
    trace = _fallback_trace(W.gemm_relu, 64, 64, 32)
    assert "cache_write" not in trace
    assert "C.compute_at(D, j.inner.outer)" in trace
    assert trace.splitlines()[0] == "D.split(i, factor=64)"


def test_row_reductions_rfactor_golden():
    assert _fallback_trace(W.softmax, 32, 64) == "\n".join([
        "Y.split(i, factor=1)",
        "Y.split(j, factor=16)",
        "Y.vectorize(j.inner)",
        "S.split(k2, factor=8)",
        "S.rfactor(k2.inner, factor_axis=1)",
        "S.rf.reorder(i, k2.outer, k2.inner)",
        "S.rf.vectorize(k2.inner)",
        "S.rf.compute_at(Y, i.inner)",
        "S.compute_at(Y, i.inner)",
        "E.compute_at(Y, i.inner)",
        "E.vectorize(j)",
        "M.split(k1, factor=8)",
        "M.rfactor(k1.inner, factor_axis=1)",
        "M.rf.reorder(i, k1.outer, k1.inner)",
        "M.rf.vectorize(k1.inner)",
        "M.rf.compute_at(Y, i.inner)",
        "M.compute_at(Y, i.inner)",
    ])


def test_padding_and_parallel_rfactor_golden():
    conv = _fallback_trace(W.conv3x3, 4, 8, 8, 8)
    assert conv.splitlines()[-4:-2] == ["P.split(x, factor=8)", "P.vectorize(x.inner)"]
    assert "P.fuse(n, c, y)" in conv and "P.parallel(n.c.fused.y.fused)" in conv
    total = _fallback_trace(W.total, 8, 16)
    assert total.splitlines() == ["O.split(a, nparts=2)", "O.rfactor(a.outer, factor_axis=0)",
                                  "O.rf.parallel(a.outer)"]


def test_padding_placements_are_knobs():
    task = autotune.create_task(W.conv3x3, (4, 8, 8, 8), target=AVX2)
    assert task.config_space.knobs["P.place"].entities[2].val == "tile"
    config = next(c for c in task.config_space
                  if c["P.place"].val == "tile" and c["O.parallel"].val)
    assert "P.compute_at(O, " in str(task.trace(config))


def test_user_rule_takes_precedence():
    def everything_root(state, stage):
        return stage.op.name == "a"

    rule = SketchRule("keep_a", everything_root,
                      lambda state, stage: state.tracer.compute_root(stage))

    def chain(n):
        x = tl.placeholder((n, 16), name="x")
        a = tl.compute((n, 16), lambda i, j: x[i, j] + 1.0, name="a")
        b = tl.compute((n, 16), lambda i, j: a[i, j] * 3.0, name="b")
        return [x, b]

    with tl.Target(AVX2):
        _, trace = generate(chain(8), FallbackConfig(), [rule, *SKETCH_RULES])
    assert "a.compute_root()" in str(trace) and "a.compute_inline()" not in str(trace)


# -- every sampled program against numpy ---------------------------------------------------------

CASES = {
    "gemm": (24, 40, 20),
    "gemm_relu": (16, 48, 8),
    "softmax": (6, 40),
    "layer_norm": (5, 48),
    "stencil": (10, 37),
    "conv3x3": (3, 6, 7, 8),
    "scores": (1, 2, 9, 8),
    "maxpool": (2, 8, 10),
    "total": (7, 50),
}


def _check_untuned_and_sampled(name: str, task: autotune.Task, samples: int,
                               rng: np.random.Generator) -> int:
    """Check the untuned program and `samples` sampled ones against numpy; how many built."""
    space = task.config_space
    built = 0
    for cfg in [FallbackConfig()] + [space.get(int(i)) for i in space.sample(rng, samples)]:
        try:
            with task.compile_target:
                s, tensors, _ = task.auto.schedule(cfg, task.args)
        except InstantiationError:
            continue
        W.check_against_numpy(name, s, tensors, AVX2, rng)
        built += 1
    return built


@pytest.mark.parametrize("name", sorted(CASES))
def test_sampled_programs_match_numpy(name):
    rng = np.random.default_rng(1)
    task = autotune.create_task(getattr(W, name), CASES[name], target=AVX2)
    assert _check_untuned_and_sampled(name, task, 4, rng) >= 2


@pytest.mark.parametrize("name,args,rows_axis", [("scores", (1, 2, 13, 8), "S.tile2"),
                                                ("gemm", (23, 40, 11), "C.tile0"),
                                                ("gemm_relu", (26, 19, 9), "C.tile0")])
def test_prime_row_extents_get_partial_row_blocks_that_match_numpy(name, args, rows_axis):
    """An extent with no divisor of 4 to 8 rows (13, 23, 2 x 13) takes register blocks of more
    rows with a partial last one: untuned, and in every sampled program."""
    rng = np.random.default_rng(5)
    task = autotune.create_task(getattr(W, name), args, target=AVX2)
    rows = task.fallback_config()[rows_axis].size[-1]
    assert rows > 2 and args[-2 if name == "scores" else 0] % rows != 0
    assert _check_untuned_and_sampled(name, task, 6, rng) >= 3


@pytest.mark.parametrize("name,args", [("gemm", (20, 300, 7)), ("gemm_relu", (17, 1030, 5))])
def test_panel_reads_of_the_right_operand_match_numpy_and_replay(name, args):
    """Rows of the right operand 1200 and 4120 bytes long: a knob reads it in panels of the
    register block's width (a partial last panel padded with zeros), untuned from 4 KB rows."""
    rng = np.random.default_rng(6)
    task = autotune.create_task(getattr(W, name), args, target=AVX2)
    (knob,) = [k for k in task.config_space.knobs if k.endswith(".panel.B")]
    assert task.fallback_config()[knob].val == (args[1] * 4 >= 4096)
    picked = [c for c in (task.config_space.get(int(i))
                          for i in task.config_space.sample(rng, 40)) if c[knob].val]
    built = 0
    for cfg in picked[:6]:
        try:
            s, tensors = task.instantiate(cfg)
        except InstantiationError:
            continue
        assert "panel_read(B" in str(task.trace(cfg))
        W.check_against_numpy(name, s, tensors, AVX2, rng)
        s2, tensors2 = task.replay(Trace.from_json(json.loads(json.dumps(
            task.trace(cfg).to_json()))))
        with task.compile_target:
            assert str(tl.lower(s, tensors)) == str(tl.lower(s2, tensors2))
        built += 1
    assert built >= 2


def test_symbolic_shape_programs_match_numpy():
    rng = np.random.default_rng(2)
    space = ConfigSpace()
    with tl.Target(AVX2):
        generate(W.gemm_symbolic(32, 16), space)
    for cfg in [FallbackConfig()] + [space.get(int(i)) for i in space.sample(rng, 3)]:
        try:
            with tl.Target(AVX2):
                tensors = W.gemm_symbolic(32, 16)
                s, _ = generate(tensors, cfg)
        except InstantiationError:
            continue
        f = tl.build(s, tensors, target=AVX2)
        ins, outs = _arrays(tensors, rng, n=37)
        f(*ins, *outs)
        np.testing.assert_allclose(outs[-1], ins[0] @ ins[1], rtol=1e-4, atol=1e-4)


def test_over_budget_register_block_is_rejected_before_build():
    task = autotune.create_task(W.gemm, (64, 64, 64), target=AVX2)
    space = task.config_space
    big = next(c for c in space if c["C.tile0"].size[-1] == 8 and c["C.tile1"].size[-1] == 16)
    with pytest.raises(InstantiationError, match="register block"):
        task.trace(big)


# -- traces: printed, logged, replayed ----------------------------------------------------------


@pytest.mark.parametrize("name,args", [("softmax", (16, 48)), ("scores", (1, 2, 16, 8)),
                                       ("conv3x3", (4, 8, 8, 8))])
def test_trace_json_round_trip_and_replay_gives_same_ir(name, args):
    task = autotune.create_task(getattr(W, name), args, target=AVX2)
    rng = np.random.default_rng(4)
    for index in task.config_space.sample(rng, 20):
        config = task.config_space.get(int(index))
        try:
            s, tensors = task.instantiate(config)
            break
        except InstantiationError:
            continue
    trace = Trace.from_json(json.loads(json.dumps(task.trace(config).to_json())))
    s2, tensors2 = task.replay(trace)
    with task.compile_target:
        assert str(tl.lower(s, tensors)) == str(tl.lower(s2, tensors2))


def test_replay_rejects_a_trace_of_another_compute():
    with tl.Target(AVX2):
        _, trace = generate(W.gemm(32, 32, 32), FallbackConfig())
        tensors = W.stencil(8, 8)
        s = tl.create_schedule(tensors[-1].op)
        with pytest.raises(tl.ScheduleError):
            replay(trace, s)


# -- create_task by name, tune, apply_best -------------------------------------------------------


@autotune.workload("test_auto_schedule/softmax")
def _registered_softmax(n, d):
    return W.softmax(n, d)


def test_tuning_run_records_traces_that_apply_best_rebuilds(tmp_path):
    log = tmp_path / "sm.jsonl"
    task = autotune.create_task("test_auto_schedule/softmax", (16, 48), target=AVX2)
    assert isinstance(task, autotune.auto_schedule.AutoTask)
    assert task.name == "auto/test_auto_schedule/softmax"
    option = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1),
                                     runner=autotune.LocalRunner(number=2, repeat=1))
    result = autotune.tune(task, trials=6, log_file=str(log), measure_option=option,
                           progress=False, seed=0, remeasure_top=0)
    assert result.config is not None
    records = autotune.load_records(str(log))
    assert records and all(r.trace for r in records if r.result.ok)
    best = task.best_record(str(log))
    s, tensors = task.apply_best(str(log))
    s_cfg, tensors_cfg = task.instantiate(task.config_space.get(best.config_index))
    with task.compile_target:
        assert str(tl.lower(s, tensors)) == str(tl.lower(s_cfg, tensors_cfg))
    rng = np.random.default_rng(3)
    f = tl.build(s, tensors, target=AVX2)
    ins, outs = _arrays(tensors, rng)
    f(*ins, *outs)
    np.testing.assert_allclose(outs[-1], W.REFERENCES["softmax"](*ins), rtol=1e-4, atol=1e-6)
    # apply_history_best serves the same config to a direct call
    with autotune.apply_history_best(str(log)):
        s_ctx, tensors_ctx = task.apply_best()
    with task.compile_target:
        assert str(tl.lower(s_ctx, tensors_ctx)) == str(tl.lower(s, tensors))


def test_apply_best_without_records_is_the_default(tmp_path):
    task = autotune.create_task(W.stencil, (12, 20), target=AVX2)
    empty = tmp_path / "none.jsonl"
    empty.write_text("")
    s, tensors = task.apply_best(str(empty))
    s_d, tensors_d = task.default_schedule()
    with task.compile_target:
        assert str(tl.lower(s, tensors)) == str(tl.lower(s_d, tensors_d))
