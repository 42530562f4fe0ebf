"""Model builds lower one kernel while LLVM compiles the last (topi/graph/cache.py): kernels
requested before any is waited for, a key requested twice compiled once, errors where they
belong, and LLVM facts asked of LLVM once (its lock is held by the compiling thread)."""

from __future__ import annotations

import warnings

import llvmlite.binding as llvm
import numpy as np
import pytest

import tensorlang as tl
import topi
import topi.graph as tg
from tensorlang.codegen.target import host_target
from topi.graph import cache
from topi.graph.reference import run_reference


def _add_one(n: int):
    def make():
        a = tl.placeholder((n,), name="a")
        b = tl.compute((n,), lambda i: a[i] + 1.0, name="b")
        return topi.x86.schedule_injective([b]), [a, b]
    return make


def test_requests_compile_once(tmp_path) -> None:
    cache.clear_memory()
    target = host_target()
    before = cache.STATS["compiled"]
    futures = [cache.request_kernel(f"overlaptest{n}", _add_one(n), target, tmp_path)
               for n in (1, 7, 7, 13)]
    again = cache.request_kernel("overlaptest7", _add_one(7), target, tmp_path)
    assert cache.STATS["compiled"] - before == 3  # the second request of n=7 waits for the first
    kernels = [f.result() for f in futures]
    assert again.result() is kernels[1] is kernels[2]
    for n, kernel in zip((1, 7, 13), (kernels[0], kernels[1], kernels[3])):
        a = np.arange(n, dtype="float32")
        b = np.zeros(n, "float32")
        kernel.module(target)(a, b)
        np.testing.assert_array_equal(b, a + 1)
    cache.clear_memory()
    assert cache.get_kernel("overlaptest13", _add_one(13), target, tmp_path).symbol == \
        kernels[3].symbol  # from disk: the LLVM thread wrote the complete entry


def test_lowering_errors_raise_at_the_request(tmp_path) -> None:
    def bad():
        raise tl.ScheduleError("no schedule for this")

    with pytest.raises(tl.ScheduleError, match="no schedule for this"):
        cache.request_kernel("overlaptestbad", bad, host_target(), tmp_path)
    assert not (tmp_path / "overlaptestbad.json").exists()


def test_model_built_with_overlap_matches_reference(tmp_path) -> None:
    """Several convolutions with pre-packed weights: every kernel and every packing kernel is
    requested before the first is waited for."""
    rng = np.random.default_rng(3)
    g = tg.Graph()
    x = g.input("data", (1, 5, 11, 11))
    y = x
    for cin, cout in ((5, 16), (16, 7), (7, 16)):
        w = g.constant(rng.uniform(-1, 1, (cout, cin, 3, 3)).astype("float32"))
        y = g.relu(g.conv2d(y, w, padding=1))
    g.output(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fallback configs, as intended here
        module = tg.build(g, cache_dir=tmp_path)
    feeds = {"data": rng.uniform(-1, 1, (1, 5, 11, 11)).astype("float32")}
    np.testing.assert_allclose(module(**feeds)[0], run_reference(g, feeds)[0],
                               rtol=1e-4, atol=1e-4)


def test_module_header_is_llvms() -> None:
    for target in (host_target(), tl.Target("llvm -mcpu=haswell")):
        layout, triple = target.module_header()
        assert layout == str(target.target_machine().target_data)
        assert triple == llvm.get_process_triple()
    assert host_target().mcpu == llvm.get_host_cpu_name()
