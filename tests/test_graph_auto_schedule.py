"""Models use the auto-scheduler: extract_tasks lists an auto-scheduled task for every
untemplated kernel with arithmetic, tune spends one budget on them and the templates, and build
applies their records (keyed in the module cache), or the default schedule without one."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import autotune
import topi.graph as tg
from autotune.auto_schedule import AutoTask
from autotune.record import encode
from autotune.result import MeasureErrorNo, MeasureInput, MeasureResult
from topi.graph.auto_tasks import describe_node, node_workload
from topi.graph.build import as_target, tuning_context
from topi.graph.cache import compiler_version
from topi.graph.kernel import kernel_spec
from topi.graph.passes import optimize
from topi.graph.reference import run_reference
from topi.graph.tune import fallback_index

AVX2 = "llvm -mcpu=haswell"


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype("float32")


def mixed(rng: np.random.Generator) -> tg.Graph:
    """A softmax, a layer norm, an elementwise chain and a dense, at awkward sizes (7 rows of
    37)."""
    g = tg.Graph()
    x = g.input("x", (7, 37))
    s = g.softmax(x)
    chain = g.tanh(g.multiply(g.add(x, g.constant(_w(rng, 37))), x))
    g.output(chain)
    ln = g.layer_norm(s, g.constant(_w(rng, 37)), g.constant(_w(rng, 37)))
    g.output(g.dense(ln, g.constant(_w(rng, 13, 37))))
    return g


def _by_name(tasks):
    return {t.name: (t, c) for t, c in tasks}


def test_extract_tasks_lists_auto_tasks_for_untemplated_groups(rng):
    g = mixed(rng)
    tasks = tg.extract_tasks(g, AVX2)
    names = [t.name for t, _ in tasks]
    assert "dense.x86" in names
    auto = [t for t, _ in tasks if isinstance(t, AutoTask)]
    assert {t.name for t in auto} == {"auto/topi.graph/softmax", "auto/topi.graph/layer_norm",
                                      "auto/topi.graph/add+multiply+tanh"}
    assert all(len(t.config_space) > 1 and t.flop > 0 and t.default_tuner == "evolutionary"
               for t in auto)
    # a kernel without arithmetic (a transpose) has nothing to tune
    h = tg.Graph()
    h.output(h.transpose(h.input("x", (7, 37)), (1, 0)))
    assert tg.extract_tasks(h, AVX2) == []
    # only the templates when asked
    assert [t.name for t, _ in tg.extract_tasks(g, AVX2, auto=False)] == ["dense.x86"]
    # an auto task's workload is the node's computation: the same as the kernel build makes
    node = next(n for n in optimize(g).ops if n.op == "softmax")
    tensors = node_workload(describe_node(node))
    assert [tuple(int(d) for d in t.shape) for t in tensors] == [(7, 37), (7, 37)]


def test_equal_nodes_share_one_task_with_a_count(rng):
    g = tg.Graph()
    a, b = g.input("a", (3, 29)), g.input("b", (3, 29))
    g.output(g.softmax(a), g.softmax(b), g.softmax(g.input("c", (29, 3))))
    tasks = [(t.name, t.args, c) for t, c in tg.extract_tasks(g, AVX2)]
    assert [(name, c) for name, _, c in tasks] == [("auto/topi.graph/softmax", 2),
                                                   ("auto/topi.graph/softmax", 1)]
    assert tasks[0][1] != tasks[1][1]


def test_tiny_tune_writes_records_that_build_applies(rng, tmp_path: Path):
    g = mixed(rng)
    log = tmp_path / "mixed.jsonl"
    option = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1),
                                     runner=autotune.LocalRunner(number=2, repeat=1))
    result = tg.tune(g, trials=8, per_round=2, log_file=log, target=AVX2, seed=0,
                     measure_option=option, progress=False, remeasure_top=0)
    assert result.trials == 8
    assert "auto/topi.graph/softmax [[7, 37]]" in str(result)  # the summary shows shapes
    records = autotune.load_records(log)
    best = autotune.best_records(records)
    tuned = {t.name: best[(t.key, t.target)] for t in (s.task for s in result.states)
             if (t.key, t.target) in best}
    assert {"auto/topi.graph/softmax", "auto/topi.graph/layer_norm",
            "auto/topi.graph/add+multiply+tanh"} <= set(tuned)
    assert all(r.trace for r in records if r.result.ok and r.template_name.startswith("auto/"))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = tg.build(g, log_file=log, target=AVX2)
    assert not [w for w in caught if "fallback" in str(w.message)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the dense's fallback
        plain = tg.build(g, target=AVX2)
    inputs = {"x": _w(rng, 7, 37)}
    expected = run_reference(g, inputs)
    for got, want in zip(m(**inputs), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    # each auto-scheduled kernel of the module is the one its best record's config schedules,
    # or the default schedule where that config is the sketch's untuned fallback
    tgt = as_target(AVX2)
    optimized = optimize(g)
    steps = {s.name: s for s in m.steps}
    plain_steps = {s.name: s for s in plain.steps}
    auto_tasks = {s.task.args: s.task for s in result.states if isinstance(s.task, AutoTask)}
    checked = 0
    with tuning_context(log, tgt):
        for node in optimized.ops:
            task = auto_tasks.get((describe_node(node),))
            if task is None:
                continue
            spec = kernel_spec(node)
            chosen = tuned[task.name].config_index
            if chosen == fallback_index(task):
                assert spec.auto is None
                assert steps[node.name].kernel.key == plain_steps[node.name].kernel.key
            else:
                template, config = spec.auto
                assert template.name == task.name and config.index == chosen
                assert steps[node.name].kernel.key == spec.key(str(tgt), compiler_version())
                assert steps[node.name].kernel.key != plain_steps[node.name].kernel.key
            checked += 1
    assert checked == 3


def _line(task: autotune.Task, index: int, seconds: float) -> str:
    return encode(MeasureInput(task, task.config_space.get(index)),
                  MeasureResult((seconds,), MeasureErrorNo.NO_ERROR))


def test_a_record_that_kept_the_untuned_sketch_builds_the_default_schedule(rng, tmp_path):
    """Where no trial beat the sketch's fallback, the build compiles what an untuned build
    compiles; where one did, its config."""
    g = mixed(rng)
    tasks = {t.name: t for t, _ in tg.extract_tasks(g, AVX2) if isinstance(t, AutoTask)}
    softmax, norm = tasks["auto/topi.graph/softmax"], tasks["auto/topi.graph/layer_norm"]
    other = next(i for i in range(len(norm.config_space)) if i != fallback_index(norm))
    log = tmp_path / "kept.jsonl"
    beaten = next(i for i in range(len(softmax.config_space)) if i != fallback_index(softmax))
    log.write_text("".join(line + "\n" for line in (
        _line(softmax, fallback_index(softmax), 1e-5), _line(softmax, beaten, 2e-5),
        _line(norm, fallback_index(norm), 2e-5), _line(norm, other, 1e-5))))
    with tuning_context(log, as_target(AVX2)):
        specs = {n.op: kernel_spec(n) for n in optimize(g).ops}
    assert specs["softmax"].auto is None
    assert specs["layer_norm"].auto is not None and specs["layer_norm"].auto[1].index == other
    m = tg.build(g, log_file=log, target=AVX2)
    inputs = {"x": _w(rng, 7, 37)}
    for got, want in zip(m(**inputs), run_reference(g, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_build_without_records_uses_the_default_schedule(rng):
    g = mixed(rng)
    with tuning_context(None, as_target(AVX2)):
        specs = [kernel_spec(n) for n in optimize(g).ops]
    assert all(s.auto is None for s in specs)


def test_transformer_block_with_auto_scheduled_records_matches_pytorch(tmp_path: Path):
    """A small BERT layer: its softmax and residual + layer norm groups are auto-scheduled
    tasks beside the dense and batch_matmul templates; configs picked by a synthetic timing
    (any valid config can win) build into a module that matches PyTorch."""
    zoo = pytest.importorskip("topi.graph.zoo")
    model = zoo.get("bert_layer", **zoo.REDUCED["bert_layer"])
    g = tg.from_torch(model.module, model.torch_inputs())
    tasks = tg.extract_tasks(g, AVX2)
    auto = [t.name for t, _ in tasks if isinstance(t, AutoTask)]
    assert any("softmax" in n for n in auto) and any("layer_norm" in n for n in auto)
    assert any(t.name == "dense.x86" for t, _ in tasks)

    def synthetic(inputs):
        out = []
        for i in inputs:
            try:
                i.task.instantiate(i.config)
            except autotune.InstantiationError as exc:
                out.append(autotune.MeasureResult((), autotune.MeasureErrorNo.INSTANTIATION_ERROR,
                                                  str(exc)))
                continue
            cost = 1e-3 * (1 + (i.config.index * 7919 % 101) / 101)
            out.append(autotune.MeasureResult((cost,), autotune.MeasureErrorNo.NO_ERROR))
        return out

    log = tmp_path / "bert.jsonl"
    tg.tune(g, trials=3 * len(tasks), per_round=3, log_file=log, target=AVX2, seed=0,
            tuner="random", measure_option=synthetic, progress=False, remeasure_top=0)
    m = tg.build(g, log_file=log, target=AVX2)
    with tuning_context(log, as_target(AVX2)):
        assert sum(kernel_spec(n).auto is not None for n in optimize(g).ops) >= 2
    inputs = model.inputs()
    (name,) = [n.name for n in g.inputs]
    (got,) = m(**{name: inputs["hidden_states"]})
    np.testing.assert_allclose(got, model.torch_outputs(inputs)[0], rtol=1e-4, atol=1e-4)
