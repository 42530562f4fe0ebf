"""Config spaces, templates and tasks: sizes, index round trips, policies, fallbacks."""

from __future__ import annotations

import math
import threading
import warnings

import numpy as np
import pytest

import autotune
import tensorlang as tl
from autotune.space import ConfigSpace, FallbackConfig, InstantiationError


@autotune.template("test_space/matmul")
def matmul(n: int, dtype: str) -> tuple:
    A = tl.placeholder((n, n), dtype, name="A")
    B = tl.placeholder((n, n), dtype, name="B")
    k = tl.reduce_axis((0, n), name="k")
    C = tl.compute((n, n), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tl.create_schedule(C.op)
    y, x = s[C].op.axis
    cfg = autotune.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    if cfg.is_fallback:
        cfg.fallback_split("tile_x", [-1, 32])
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]


@autotune.template("test_space/explicit_cfg")
def explicit_cfg(cfg: ConfigSpace, n: int) -> tuple:
    A = tl.placeholder((n,), "float32", name="A")
    B = tl.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = tl.create_schedule(B.op)
    cfg.define_split("t", s[B].op.axis[0], num_outputs=3)
    cfg.define_knob("unroll", [False, True])
    cfg.add_flop(123)
    cfg["t"].apply(s, B, s[B].op.axis[0])
    return s, [A, B]


@autotune.template("test_space/rejecting")
def rejecting(n: int) -> tuple:
    A = tl.placeholder((n,), "float32", name="A")
    B = tl.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = tl.create_schedule(B.op)
    cfg = autotune.get_config()
    cfg.define_knob("ok", [1, 0])
    if not cfg["ok"].val:
        cfg.raise_error("this config is not allowed")
    return s, [A, B]


def test_gemm_space_has_64_configs_and_counted_flop() -> None:
    task = autotune.create_task("test_space/matmul", (128, "float32"))
    assert len(task.config_space) == 64
    assert task.flop == 2 * 128**3
    assert task.workload == ["test_space/matmul", [128, "float32"]]
    assert "tile_y" in str(task.config_space)


def test_three_way_split_of_256_has_45_entries_with_exact_products() -> None:
    cfg = ConfigSpace()
    cfg.define_split("s", 256, num_outputs=3)
    assert len(cfg) == 45
    for entity in cfg.knobs["s"].entities:
        assert entity.size[0] == -1 and 256 % math.prod(entity.size[1:]) == 0


def test_non_power_of_two_factors_and_other_policies() -> None:
    cfg = ConfigSpace()
    cfg.define_split("f", 12, policy="factors")
    cfg.define_split("p", 12, policy="power2")
    cfg.define_split("v", 12, policy="verbose")
    cfg.define_split("m", 12, policy="factors", max_factor=4)
    cfg.define_split("c", 12, policy="candidate", candidate=[[-1, 3], [-1, 5]])
    cfg.define_split("flt", 64, filter=lambda e: e.size[-1] >= 8)
    sizes = {k: sorted(e.size[1] for e in knob.entities) for k, knob in cfg.knobs.items()}
    assert sizes["f"] == [1, 2, 3, 4, 6, 12]
    assert sizes["p"] == [1, 2, 4, 8]
    assert sizes["v"] == [1, 2, 3, 4, 6, 8, 12]
    assert sizes["m"] == [1, 2, 3, 4]
    assert sizes["c"] == [3, 5]
    assert sizes["flt"] == [8, 16, 32, 64]


def test_index_round_trips_over_the_whole_space() -> None:
    cfg = ConfigSpace()
    cfg.define_split("a", 24, num_outputs=3)
    cfg.define_knob("k", [1, 2, 3])
    cfg.define_annotate("an", [None, None], policy="try_unroll_vec")
    n = len(cfg)
    assert n == len(cfg.knobs["a"]) * 3 * 6
    digits = cfg.points2knobs(np.arange(n))
    assert np.array_equal(cfg.knobs2points(digits), np.arange(n))
    for i in [0, 1, n // 2, n - 1]:
        assert cfg.knob2point(cfg.point2knob(i)) == i
        assert cfg.get(i).index == i
        assert list(digits[i]) == cfg.get(i).knob_indices
    with pytest.raises(IndexError):
        cfg.get(n)


def test_reorder_and_annotate_policies() -> None:
    A = tl.placeholder((4, 4, 4), "float32", name="A")
    B = tl.compute((4, 4, 4), lambda i, j, k: A[i, j, k] + 1.0, name="B")
    axes = list(B.op.axis)
    cfg = ConfigSpace()
    cfg.define_reorder("all", axes, policy="all")
    cfg.define_reorder("iv", axes, policy="interval", interval=(1, 3))
    cfg.define_reorder("cand", axes, policy="candidate", candidate=[axes, axes[::-1]])
    cfg.define_annotate("u", axes, policy="try_unroll")
    cfg.define_annotate("v", axes, policy="try_vec")
    assert [len(cfg.knobs[k]) for k in ("all", "iv", "cand", "u", "v")] == [6, 2, 2, 8, 2]
    assert cfg.knobs["cand"].entities[1].perm == [2, 1, 0]
    s = tl.create_schedule(B.op)
    order = cfg.knobs["cand"].entities[1].apply(s, B, axes)
    assert [a.name for a in order] == ["k", "j", "i"]


def test_instantiation_applies_the_split_and_explicit_cfg_argument() -> None:
    task = autotune.create_task("test_space/explicit_cfg", (64,))
    assert task.flop == 123
    assert len(task.config_space) == 28 * 2
    config = task.config_space.get(len(task.config_space) - 1)
    s, args = task.instantiate(config)
    assert len(args) == 2
    text = str(tl.lower(s, args))
    inner = config["t"].size[-1]
    assert f"range({inner})" in text


def test_raise_error_rejects_only_the_bad_config() -> None:
    task = autotune.create_task("test_space/rejecting", (8,))
    assert len(task.config_space) == 2
    task.instantiate(0)
    with pytest.raises(InstantiationError, match="not allowed"):
        task.instantiate(1)


def test_multi_filter_shrinks_the_space() -> None:
    cfg = ConfigSpace()
    cfg.define_split("a", 16)
    cfg.define_split("b", 16)
    cfg.multi_filter(lambda c: c["a"].size[-1] * c["b"].size[-1] <= 16)
    assert len(cfg) == 15  # pairs of exponents (p, q) with p + q <= 4
    assert all(cfg.is_valid(int(i)) for i in cfg.valid_indices())
    rng = np.random.default_rng(0)
    assert all(cfg.is_valid(int(i)) for i in cfg.sample(rng, 50))


def test_fallback_config_is_reasonable_and_overridable() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s, args = matmul(96, "float32")
        matmul(96, "float32")
    assert sum("fallback" in str(w.message) for w in caught) == 1  # warned once
    cfg = FallbackConfig()
    cfg.define_split("x", 96, num_outputs=3)
    assert cfg.is_fallback and cfg["x"].size == [-1, 1, 16]
    cfg.define_knob("k", [7, 8])
    cfg.fallback_knob("k", 8)
    assert cfg["k"].val == 8
    text = str(tl.lower(s, args))
    assert "range(32)" in text  # the template's own fallback_split


def test_get_config_is_scoped_per_thread() -> None:
    task = autotune.create_task("test_space/matmul", (64, "float32"))
    seen: dict[int, int] = {}

    def work(index: int) -> None:
        s, args = task.instantiate(index)
        seen[index] = len(str(tl.lower(s, args)))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(0, 49, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == len(threads)
    with pytest.raises(RuntimeError, match="inside a template"):
        autotune.get_config()


def test_unknown_template_and_bad_arguments_raise_clearly() -> None:
    with pytest.raises(ValueError, match="no autotune template named"):
        autotune.create_task("test_space/missing", (1,))
    with pytest.raises(TypeError, match="JSON"):
        autotune.create_task("test_space/matmul", (object(), "float32"))
