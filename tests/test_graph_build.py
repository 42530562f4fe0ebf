"""topi.graph.build: hand-built graphs against numpy, kernel counts, the disk cache, errors,
benchmarking and export_library (run in a fresh process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import topi.graph as tg
from topi.graph import cache
from topi.graph.reference import run_reference

ROOT = Path(__file__).resolve().parent.parent


def _w(rng: np.random.Generator, *shape: int, low: float = -1.0) -> np.ndarray:
    return rng.uniform(low, 1.0, size=shape).astype("float32")


def _inputs(g: tg.Graph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {i.name: _w(rng, *i.shape) for i in g.inputs}


def _build(g: tg.Graph, **kwargs) -> tg.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned workloads: fallback configs, as intended here
        return tg.build(g, **kwargs)


def model() -> tg.Graph:
    """A CNN and a transformer block in one graph, from a fixed seed (rebuilt by a subprocess)."""
    rng = np.random.default_rng(7)
    g = cnn(rng)
    x = g.input("tokens", (7, 12))
    g.output(g.gelu(g.bias_add(g.dense(x, g.constant(_w(rng, 20, 12))),
                               g.constant(_w(rng, 20)), axis=-1)))
    return g


def cnn(rng: np.random.Generator) -> tg.Graph:
    """Strided conv with asymmetric padding, batch norm, residual block, ceil-mode pooling."""
    g = tg.Graph()
    x = g.input("data", (1, 3, 19, 13))
    y = g.conv2d(x, g.constant(_w(rng, 17, 3, 3, 3)), stride=2, padding=(1, 0, 2, 1))
    y = g.relu(g.batch_norm(y, *[g.constant(_w(rng, 17, low=0.5)) for _ in range(4)]))
    z = g.conv2d(y, g.constant(_w(rng, 17, 17, 3, 3)), padding="SAME", dilation=(1, 2))
    z = g.relu(g.add(g.bias_add(z, g.constant(_w(rng, 17))), y))
    p = g.max_pool2d(z, 3, stride=2, padding=1, ceil_mode=True)
    g.output(g.reshape(g.global_avg_pool2d(p), (1, 17)), z)
    return g


def mobile(rng: np.random.Generator) -> tg.Graph:
    """Depthwise with a channel multiplier and dilation, grouped conv, avg pool, concat, pad."""
    g = tg.Graph()
    x = g.input("x", (2, 6, 11, 7))
    dw = g.leaky_relu(g.conv2d(x, g.constant(_w(rng, 12, 1, 3, 3)), groups=6, padding=2,
                               dilation=2), alpha=0.1)
    gc = g.conv2d(dw, g.constant(_w(rng, 9, 4, 1, 1)), groups=3)
    a = g.avg_pool2d(gc, (3, 2), stride=(2, 1), padding=(1, 0, 1, 1), count_include_pad=False)
    b = g.pad(g.max_pool2d(gc, 2, stride=2), (0, 0, 1, 0), (0, 0, 0, 4), pad_value=-1.0)
    g.output(g.concatenate([a, b], axis=1))
    return g


def transformer(rng: np.random.Generator) -> tg.Graph:
    """Dense + bias + gelu, batched matmul with broadcast, softmax, layer_norm, transposes."""
    g = tg.Graph()
    x = g.input("tokens", (7, 12))
    h = g.gelu(g.bias_add(g.dense(x, g.constant(_w(rng, 20, 12))), g.constant(_w(rng, 20)),
                          axis=-1))
    q = g.transpose(g.reshape(h, (7, 4, 5)), (1, 0, 2))              # (4, 7, 5)
    scores = g.divide(g.batch_matmul(q, q), 3.0)                        # (4, 7, 7)
    attn = g.matmul(g.softmax(scores), q)                               # (4, 7, 5)
    mixed = g.matmul(attn, g.constant(_w(rng, 5, 5)), transpose_b=True)
    flat = g.reshape(g.transpose(mixed, (1, 0, 2)), (7, 20))
    out = g.layer_norm(g.subtract(flat, h), g.constant(_w(rng, 20)), g.constant(_w(rng, 20)))
    g.output(g.log_softmax(out, axis=0))
    return g


@pytest.mark.parametrize("make", [cnn, mobile, transformer])
def test_hand_built_graphs_match_numpy(make, rng: np.random.Generator) -> None:
    g = make(rng)
    m = _build(g)
    inputs = _inputs(g, rng)
    got = m(**inputs)
    want = run_reference(g, inputs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)
    # A second call reuses the buffers and gives the same result.
    np.testing.assert_array_equal(m(**inputs)[0], got[0])


def test_conv_bn_relu_chain_runs_as_one_kernel_per_conv(rng: np.random.Generator) -> None:
    g = tg.Graph()
    y = g.input("x", (1, 8, 12, 12))
    for _ in range(3):
        y = g.conv2d(y, g.constant(_w(rng, 8, 8, 3, 3)), padding=1)
        y = g.relu(g.batch_norm(y, *[g.constant(_w(rng, 8, low=0.5)) for _ in range(4)]))
    g.output(y)
    m = _build(g, target="llvm -mcpu=haswell")  # 8 channels: one AVX2 vector, NCHW8c
    # conv + bn + relu in one kernel, three times, in NCHW8c between the layout transforms of
    # the input and the output.
    ops = [n.op if n.body is None else n.attrs["anchor"] for n in m.graph.ops]
    assert ops == ["layout_transform", *["conv2d_NCHWc"] * 3, "layout_transform"]
    assert m.kernels == 3  # three identical conv kernels, compiled once
    inputs = _inputs(g, rng)
    np.testing.assert_allclose(m(**inputs)[0], run_reference(g, inputs)[0], rtol=1e-4,
                               atol=1e-5)
    # The constant weights were packed by the layout pass: the kernel reads the blocked layout.
    assert all(step.arrays[1].shape == (1, 8, 3, 3, 8) for step in m.steps[1:4])
    unfused = _build(g, target="llvm -mcpu=haswell",
                     pipeline=[p for p in tg.passes.PIPELINE if p[0] != "fuse_ops"])
    assert len(unfused.steps) == 2 + 9  # conv, bias_add (the folded batch norm), relu
    np.testing.assert_allclose(unfused(**inputs)[0], m(**inputs)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rows", [1, 5])
def test_weights_are_prepacked_where_the_schedule_packs_them(rng: np.random.Generator,
                                                            rows: int) -> None:
    g = tg.Graph()
    x = g.input("x", (rows, 33))
    g.output(g.relu(g.dense(x, g.constant(_w(rng, 19, 33)))))
    m = _build(g)
    (step,) = m.steps
    # A GEMM reads 16-wide panels, packed once here; a batch-1 dense (a GEMV) reads the rows.
    assert step.arrays[1].shape == ((2, 33, 16) if rows > 1 else (19, 33))
    unpacked = _build(g, prepack=False)
    assert unpacked.steps[0].arrays[1].shape == (19, 33)
    inputs = _inputs(g, rng)
    np.testing.assert_allclose(m(**inputs)[0], run_reference(g, inputs)[0], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(m(**inputs)[0], unpacked(**inputs)[0])


def test_second_build_compiles_nothing(tmp_path: Path) -> None:
    g = model()  # gelu's kernel calls libmvec, which loading from disk must provide
    cache.clear_memory()
    cache.STATS.clear()
    first = _build(g, cache_dir=tmp_path / "kernels")
    assert cache.STATS["compiled"] > 0
    inputs = _inputs(g, np.random.default_rng(1))
    np.savez(tmp_path / "io.npz", *first(**inputs), **inputs)
    # A new process builds the same model: everything comes from the disk cache.
    script = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        sys.path.insert(0, {str(ROOT / "tests")!r})
        import test_graph_build as t
        from topi.graph import cache
        saved = np.load({str(tmp_path / "io.npz")!r})
        g = t.model()
        m = t._build(g, cache_dir={str(tmp_path / "kernels")!r})
        outs = m(**{{i.name: saved[i.name] for i in g.inputs}})
        for k, out in enumerate(outs):
            np.testing.assert_array_equal(out, saved[f"arr_{{k}}"])
        print(json.dumps(dict(cache.STATS)))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats.get("compiled", 0) == 0 and stats["disk"] > 0, stats


def test_untuned_workloads_get_one_summary_warning(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x = g.input("x", (1, 4, 6, 6))
    y = g.conv2d(x, g.constant(_w(rng, 4, 4, 3, 3)), padding=1)
    y = g.conv2d(y, g.constant(_w(rng, 5, 4, 3, 3)))
    g.output(g.dense(g.reshape(y, (1, 80)), g.constant(_w(rng, 3, 80))))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tg.build(g)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert messages[0].startswith("3 tunable workload(s) have no tuned config")
    assert "conv2d_nchw.x86 [(1, 4, 6, 6), (4, 4, 3, 3), 1, 1, 1, 'float32']" in messages[0]
    assert "dense.x86 [(1, 80), (3, 80), 'float32']" in messages[0]


def test_bad_inputs_and_bad_builds_raise_clear_errors(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x = g.input("x", (2, 3))
    g.output(g.relu(x))
    m = _build(g)
    good = _w(rng, 2, 3)
    with pytest.raises(TypeError, match=r"unknown model input\(s\) \['y'\]; the model takes "
                                        r"x: float32\[2, 3\]"):
        m(x=good, y=good)
    with pytest.raises(TypeError, match=r"missing model input\(s\) \['x'\]"):
        m()
    with pytest.raises(ValueError, match=r"input 'x' must have shape \(2, 3\), got \(3, 2\)"):
        m(x=good.T.copy())
    with pytest.raises(TypeError, match="input 'x' must have dtype float32, got float64"):
        m(x=good.astype("float64"))
    with pytest.raises(TypeError, match="must be a numpy array"):
        m(x=good.tolist())
    with pytest.raises(TypeError, match="takes a topi.graph.Graph"):
        tg.build("model.onnx")
    with pytest.raises(ValueError, match="no outputs"):
        tg.build(tg.Graph())
    with pytest.raises(FileNotFoundError, match="does-not-exist.jsonl"):
        tg.build(g, log_file="does-not-exist.jsonl")
    with pytest.raises(TypeError, match="target"):
        tg.build(g, target=3)


def test_benchmark_and_profile_report_latencies(rng: np.random.Generator) -> None:
    g = transformer(rng)
    m = _build(g)
    result = m.benchmark(repeat=3, number=2)
    assert len(result.results) == 3 and 0 < result.min <= result.median <= result.max
    assert "ms" in str(result)
    table = m.profile(number=2).splitlines()
    assert len(table) == len(m.steps) + 2 and table[-1].startswith("total")
    assert {line.split()[0] for line in table[1:-1]} == {s.name for s in m.steps}
    # Each call says which ops it runs: a fused kernel is named after its last op only.
    assert table[0].split()[:3] == ["kernel", "call", "ops"]
    assert {tuple(line.split()[:2]) for line in table[1:-1]} == {(s.name, s.op) for s in m.steps}
    by_name = {n.name: n for n in m.graph.ops}
    fused = [s for s in m.steps if by_name[s.name].op == "fused"]
    assert fused and all(s.op == "+".join(b.op for b in by_name[s.name].body.ops) for s in fused)
    with pytest.raises(ValueError, match="repeat"):
        _build(g).benchmark(repeat=0)


def test_export_library_runs_in_a_fresh_process(rng: np.random.Generator,
                                                tmp_path: Path) -> None:
    g = cnn(rng)
    m = _build(g)
    inputs = _inputs(g, rng)
    lib = tmp_path / "model.so"
    m.export_library(lib)
    np.save(tmp_path / "data.npy", inputs["data"])
    for k, out in enumerate(m(**inputs)):
        np.save(tmp_path / f"want{k}.npy", out)
    # The fresh process loads the library with ctypes alone: no topi, autotune or compiler.
    script = textwrap.dedent(f"""
        import ctypes, json, sys
        import numpy as np
        lib = ctypes.CDLL({str(lib)!r})
        meta = json.loads(ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "tlg_meta"))))
        data = np.load({str(tmp_path / "data.npy")!r})
        outs = [np.empty(shape, dtype) for _, shape, dtype in meta["outputs"]]
        ins = (ctypes.c_void_p * 1)(data.ctypes.data)
        ptrs = (ctypes.c_void_p * len(outs))(*(o.ctypes.data for o in outs))
        assert lib.tlg_run(ins, ptrs) == 0
        for k, o in enumerate(outs):
            np.testing.assert_array_equal(o, np.load({str(tmp_path)!r} + f"/want{{k}}.npy"))
        assert not any(m.split(".")[0] in ("topi", "autotune", "tensorlang", "llvmlite")
                       for m in sys.modules), sorted(sys.modules)
        print("ok", [n for n, _, _ in meta["inputs"]])
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok ['data']"
    loaded = tg.load_module(lib)
    np.testing.assert_array_equal(loaded(**inputs)[1], m(**inputs)[1])
    with pytest.raises(ValueError, match="must have shape"):
        loaded(data=inputs["data"][:, :, :5])


def test_avx2_target_matches_numpy(rng: np.random.Generator) -> None:
    g = cnn(rng)
    m = _build(g, target="llvm -mcpu=haswell")
    assert str(m.target) == "llvm -mcpu=haswell"
    inputs = _inputs(g, rng)
    for a, b in zip(m(**inputs), run_reference(g, inputs)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)


def test_outputs_may_be_inputs_or_constants(rng: np.random.Generator, tmp_path: Path) -> None:
    g = tg.Graph()
    x = g.input("x", (2, 3))
    c = g.constant(_w(rng, 2, 3))
    g.output(c, x, g.relu(x))
    m = _build(g)
    value = _w(rng, 2, 3)
    m.export_library(tmp_path / "tiny.so")
    for run in (m, tg.load_module(tmp_path / "tiny.so")):
        const, same, act = run(x=value)
        np.testing.assert_array_equal(const, c.value)
        np.testing.assert_array_equal(same, value)
        np.testing.assert_array_equal(act, np.maximum(value, 0))
