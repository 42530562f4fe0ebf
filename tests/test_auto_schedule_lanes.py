"""Auto-scheduling: register blocks vectorized along an outer axis (a convolution's output
channels when its width wastes lanes), through a transposed input copy and a cache in a
channel-innermost layout; checked against numpy on awkward shapes for AVX-512 and AVX2."""

from __future__ import annotations

import json

import numpy as np
import pytest

import autotune
import tensorlang as tl
from autotune.auto_schedule import Trace
from autotune.space import FallbackConfig, InstantiationError

import auto_schedule_workloads as W  # noqa: E402 (tests/ is on sys.path under pytest)

TARGETS = ["llvm -mcpu=skylake-avx512", "llvm -mcpu=haswell"]


def _cases(lanes: int) -> dict[str, tuple]:
    """Workloads whose innermost extent (7, 13, 3) wastes lanes and whose output channels or
    rows are whole vectors; the other extents are primes."""
    return {"conv3x3": (3, 5, 7, 2 * lanes), "gemm_relu": (2 * lanes, 13, 11),
            "gemm": (lanes, 3, 5)}


def _with_outer_lanes(task, rng, count):
    """The lane knob, its outer-axis value and `count` random configs that take it."""
    space = task.config_space
    (knob,) = [k for k in space.knobs if k.endswith(".lanes") and "tile" not in k]
    outer = space.knobs[knob].entities[1].val
    found = []
    for index in space.sample(rng, 400):
        config = space.get(int(index))
        if config[knob].val == outer:
            found.append(config)
        if len(found) == count:
            break
    return knob, outer, found


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["conv3x3", "gemm_relu", "gemm"])
def test_lanes_along_an_outer_axis_match_numpy(target, name):
    lanes = tl.Target(target).vector_lanes("float32")
    task = autotune.create_task(getattr(W, name), _cases(lanes)[name], target=target)
    rng = np.random.default_rng(7)
    knob, outer, configs = _with_outer_lanes(task, rng, 6)
    assert knob in task.config_space.knobs and len(configs) == 6
    built = 0
    for config in configs:
        try:
            s, tensors = task.instantiate(config)
        except InstantiationError:
            continue
        trace = str(task.trace(config))
        assert "layout=" in trace, trace
        W.check_against_numpy(name, s, tensors, target, rng, tol=1e-4)
        built += 1
    assert built >= 3


def test_untuned_default_runs_the_lanes_along_whole_vectors_when_the_copy_is_cheap():
    """37 x 23 output points per copied weight: the lanes run along the output channels, the
    weights copied in blocks; 5 x 7 points per weight: they stay along the width."""
    task = autotune.create_task(W.conv3x3, (2, 37, 23, 16), target=TARGETS[0])
    trace = str(task.trace(FallbackConfig()))
    assert "O.cache_write('local', layout=(0, 2, 3, 1))" in trace
    assert "O.transpose_read(W, dim=0)" in trace and "W.T.unroll(i3.inner)" in trace
    small = autotune.create_task(W.conv3x3, (3, 5, 7, 16), target=TARGETS[0])
    assert "layout=" not in str(small.trace(FallbackConfig()))


def test_no_lane_knob_when_the_innermost_axis_fills_whole_vectors():
    task = autotune.create_task(W.conv3x3, (3, 5, 16, 16), target=TARGETS[0])
    assert not any(k.endswith(".lanes") for k in task.config_space.knobs)


def test_layout_trace_replays_to_the_same_ir():
    task = autotune.create_task(W.conv3x3, (3, 5, 7, 16), target=TARGETS[0])
    _, _, configs = _with_outer_lanes(task, np.random.default_rng(3), 20)
    config = next(c for c in configs if _instantiates(task, c))
    s, tensors = task.instantiate(config)
    trace = Trace.from_json(json.loads(json.dumps(task.trace(config).to_json())))
    s2, tensors2 = task.replay(trace)
    with task.compile_target:
        assert str(tl.lower(s, tensors)) == str(tl.lower(s2, tensors2))


def _instantiates(task, config) -> bool:
    try:
        task.instantiate(config)
    except InstantiationError:
        return False
    return True


def test_cache_write_layout_computes_the_same_and_checks_the_permutation():
    A = tl.placeholder((5, 7), name="A")
    k = tl.reduce_axis((0, 3), name="k")
    B = tl.compute((5, 7), lambda i, j: tl.sum(A[i, j] * 2.0, axis=k), name="B")
    s = tl.create_schedule(B.op)
    cache = s.cache_write(B, "local", layout=(1, 0))
    assert [int(d) for d in cache.shape] == [7, 5]
    s[cache].compute_at(s[B], s[B].op.axis[0])
    f = tl.build(s, [A, B])
    a = np.random.default_rng(0).standard_normal((5, 7)).astype("float32")
    b = np.zeros((5, 7), "float32")
    f(a, b)
    np.testing.assert_allclose(b, a * 6, rtol=1e-6)
    for bad in ((0, 0), (0, 1, 2), (1, True)):
        s = tl.create_schedule(B.op)
        with pytest.raises(tl.ScheduleError, match="permutation"):
            s.cache_write(B, "local", layout=bad)
