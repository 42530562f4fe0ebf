"""Symbolic dims through the graph: a model built once runs every size within its bounds."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import topi.graph as tg
from topi.graph.cache import STATS
from topi.graph.reference import run_reference
from topi.symbolic import dim_var

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")


class _Layer(torch.nn.Module):
    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads, self.d = heads, d
        self.qkv, self.o = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.f1, self.f2 = torch.nn.Linear(d, 2 * d), torch.nn.Linear(2 * d, d)

    def forward(self, x, mask):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).split(self.d, dim=-1))
        a = (q @ k.transpose(-1, -2) / math.sqrt(self.d // self.heads) + mask).softmax(-1) @ v
        x = self.ln1(x + self.o(a.transpose(1, 2).reshape(b, n, self.d)))
        return self.ln2(x + self.f2(torch.nn.functional.gelu(self.f1(x))))


class Encoder(torch.nn.Module):
    """BERT-style: token and position embeddings, a padding mask, two encoder layers."""

    def __init__(self, vocab: int = 50, d: int = 32, max_len: int = 64) -> None:
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(max_len, d)
        self.ln = torch.nn.LayerNorm(d)
        self.layers = torch.nn.ModuleList([_Layer(d), _Layer(d)])

    def forward(self, ids, attn):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.ln(self.tok(ids) + self.pos(pos))
        mask = (1.0 - attn[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, mask)
        return x


SIZES = [(1, 1), (1, 5), (2, 7), (3, 13), (4, 64)]  # 1, primes and the bounds
BOUNDS = {"batch": (1, 4), "seq": (1, 64)}


def _inputs(b: int, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    attn = np.ones((b, n), "int64")
    attn[0, n // 2 + 1:] = 0
    return {"ids": rng.integers(0, 50, (b, n)).astype("int64"), "attn": attn}


@pytest.fixture(scope="module")
def encoder_onnx(tmp_path_factory):
    torch.manual_seed(0)
    model = Encoder().eval()
    path = str(tmp_path_factory.mktemp("sym") / "encoder.onnx")
    example = tuple(torch.from_numpy(v) for v in _inputs(2, 8).values())
    axes = {0: "batch", 1: "seq"}
    torch.onnx.export(model, example, path, input_names=["ids", "attn"], output_names=["out"],
                      dynamic_axes={"ids": axes, "attn": axes, "out": axes}, dynamo=False,
                      opset_version=17)
    return path


@pytest.fixture(scope="module")
def encoder_module(encoder_onnx):
    g = tg.from_onnx(encoder_onnx)
    return tg.build(g, bounds=BOUNDS)


def test_onnx_keeps_symbolic_dims(encoder_onnx):
    g = tg.from_onnx(encoder_onnx)
    assert g.node("ids").shape == (dim_var("batch"), dim_var("seq"))
    assert g.node("attn").shape[1] is g.node("ids").shape[1]  # one variable per name
    fixed = tg.from_onnx(encoder_onnx, shapes={"ids": (2, 9), "attn": (2, 9)})
    assert fixed.outputs[0].shape == (2, 9, 32)


def test_built_once_matches_onnxruntime_at_every_size(encoder_onnx, encoder_module):
    session = ort.InferenceSession(encoder_onnx)
    compiled = STATS["compiled"]
    for b, n in SIZES:
        inputs = _inputs(b, n)
        start = time.perf_counter()
        (out,) = encoder_module(**inputs)
        assert time.perf_counter() - start < 1.0, f"first call at {b}x{n}"
        (expected,) = session.run(None, inputs)
        np.testing.assert_allclose(out, expected, atol=2e-3, rtol=2e-3)
    assert STATS["compiled"] == compiled  # nothing compiled at call time


def test_out_of_bounds_and_inconsistent_sizes_raise(encoder_module):
    with pytest.raises(ValueError, match=r"'ids' dim 1 \(seq\).*outside"):
        encoder_module(**_inputs(1, 65))
    bad = _inputs(2, 7)
    bad["attn"] = bad["attn"][:, :6]
    with pytest.raises(ValueError, match=r"'attn' dim 1 \(seq\)"):
        encoder_module(**bad)


def test_hand_built_graph_against_reference():
    g = tg.Graph()
    x = g.input("x", ("n", 16))
    rng = np.random.default_rng(1)
    w = g.constant(rng.standard_normal((24, 16)).astype("float32"), "w")
    y = g.gelu(g.dense(x, w))
    y = g.softmax(g.reshape(y, (-1, 4, 6)), axis=-1)
    g.output(y)
    assert y.shape == (dim_var("n"), 4, 6)
    m = tg.build(g, bounds={"n": 100})
    for n in (1, 3, 31, 100):
        xv = rng.standard_normal((n, 16)).astype("float32")
        np.testing.assert_allclose(m(x=xv)[0], run_reference(g, {"x": xv})[0], atol=1e-4)


def test_from_torch_with_dims_built_once():
    from torch.export import Dim

    torch.manual_seed(0)
    model = Encoder().eval()
    example = tuple(torch.from_numpy(v) for v in _inputs(2, 8).values())
    batch, seq = Dim("batch", max=4), Dim("seq", max=64)
    g = tg.from_torch(model, example, dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}))
    assert g.node("ids").shape == (dim_var("batch"), dim_var("seq"))
    assert g.bounds == BOUNDS  # from the Dims' max
    m = tg.build(g)
    compiled = STATS["compiled"]
    for b, n in [(1, 5), (2, 7), (3, 13), (4, 64)]:
        inputs = _inputs(b, n)
        start = time.perf_counter()
        (out,) = m(**inputs)
        assert time.perf_counter() - start < 1.0, f"first call at {b}x{n}"
        with torch.no_grad():
            expected = model(*(torch.from_numpy(v) for v in inputs.values())).numpy()
        np.testing.assert_allclose(out, expected, atol=2e-3, rtol=2e-3)
    assert STATS["compiled"] == compiled  # nothing compiled at call time
    with pytest.raises(ValueError, match=r"'ids' dim 1 \(seq\).*outside"):
        m(**_inputs(1, 65))


def test_exported_library_runs_sizes_in_a_fresh_process(encoder_onnx, encoder_module,
                                                        tmp_path):
    import subprocess
    import sys
    import textwrap

    path = str(tmp_path / "encoder.so")
    encoder_module.export_library(path)
    sizes = [(1, 1), (3, 13), (4, 64)]  # 1, a prime and the bounds
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import onnxruntime as ort
        sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent)!r})
        import topi.graph as tg
        from test_graph_symbolic import _inputs
        lib = tg.load_module({path!r})
        session = ort.InferenceSession({encoder_onnx!r})
        for b, n in {sizes!r}:
            inputs = _inputs(b, n)
            (out,) = lib(**inputs)
            assert out.shape == (b, n, 32), out.shape
            np.testing.assert_allclose(out, session.run(None, inputs)[0], atol=2e-3,
                                       rtol=2e-3)
        try:
            lib(**_inputs(1, 65))
        except ValueError as err:
            assert "outside" in str(err), err
        else:
            raise AssertionError("no error outside the bounds")
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


# -- size buckets ----------------------------------------------------------------------------

BUCKETS = [8, 32, 64]


def _dense_graph() -> tg.Graph:
    g = tg.Graph()
    x = g.input("x", ("n", 32))
    w = g.constant(np.random.default_rng(2).standard_normal((48, 32)).astype("float32"), "w")
    g.output(g.gelu(g.dense(x, w)))
    return g


def _bucket_log(path, pattern=False) -> dict[int, int]:
    """A log with one record per bucket of dense (n, 32) x (48, 32), each a different register
    block (rows 2, 3, 5): bucket size -> config index."""
    import autotune
    from autotune.record import encode

    if pattern:
        tasks = list(autotune.create_task("dense.x86", ((dim_var("n"), 32), (48, 32), "float32"),
                                          buckets={"n": BUCKETS}))
    else:
        tasks = [autotune.create_task("dense.x86", ((n, 32), (48, 32), "float32"))
                 for n in BUCKETS]
    chosen = {}
    with open(path, "w") as f:
        for n, task, rows in zip(BUCKETS, tasks, (2, 3, 5)):
            if not pattern:
                task.bucket = {"values": {"n": n}}
            config = next(c for c in (task.config_space.get(i)
                                      for i in range(len(task.config_space)))
                          if c is not None and c["tile_y"].size[-1] == rows
                          and c["col_group"].val == 1 and c["tile_k"].size[-1] == 1
                          and not c["pack_rows"].val)
            result = autotune.MeasureResult((1e-6,), autotune.MeasureErrorNo.NO_ERROR)
            f.write(encode(autotune.MeasureInput(task, config), result) + "\n")
            chosen[n] = config.index
    return chosen


def test_bucket_dispatch_picks_each_buckets_config(tmp_path):
    g = _dense_graph()
    log = str(tmp_path / "buckets.jsonl")
    chosen = _bucket_log(log)
    m = tg.build(g, log_file=log, bounds={"n": 100})
    assert len(set(chosen.values())) == 3
    expected = {1: 8, 8: 8, 9: 32, 31: 32, 32: 32, 33: 64, 64: 64, 100: 64}  # above all: the last
    for n, bucket in expected.items():
        ((step, sizes, task, index),) = m.dispatch(n=n)
        assert (sizes, task, index) == ({"n": bucket}, "dense.x86", chosen[bucket]), n
    # below the largest bucket an output under the L2 size runs serial, as its static build
    (bucketed,) = [v for v in m.variants if v]
    assert {s["n"]: "@tl_parallel_for" in k.ll() for s, k, _, _ in bucketed} == \
        {8: False, 32: False, 64: True}
    rng = np.random.default_rng(3)
    for n in (1, 5, 8, 9, 31, 32, 33, 63, 64, 100):  # every bucket, its edges and the bounds
        xv = rng.standard_normal((n, 32)).astype("float32")
        np.testing.assert_allclose(m(x=xv)[0], run_reference(g, {"x": xv})[0], atol=1e-4,
                                   err_msg=f"n = {n}")
    m.export_library(str(tmp_path / "buckets.so"))  # the library dispatches alike
    lib = tg.load_module(str(tmp_path / "buckets.so"))
    for n in (1, 9, 64, 100):
        xv = rng.standard_normal((n, 32)).astype("float32")
        np.testing.assert_allclose(lib(x=xv)[0], m(x=xv)[0], atol=1e-5, err_msg=f"n = {n}")
    plain = tg.build(g, bounds={"n": 100})  # no log: one kernel, no buckets
    assert plain.dispatch(n=5) == []


def test_buckets_without_a_record_take_their_static_fallback(tmp_path):
    """A second dense that the budget did not reach runs, per bucket, the fallback config of
    its static workload at the bucket's size (adapted to small sizes)."""
    import autotune

    g = tg.Graph()
    x = g.input("x", ("n", 32))
    rng = np.random.default_rng(4)
    w1 = g.constant(rng.standard_normal((48, 32)).astype("float32"), "w1")
    w2 = g.constant(rng.standard_normal((16, 48)).astype("float32"), "w2")
    second = g.dense(g.gelu(g.dense(x, w1)), w2)
    g.output(second)
    log = str(tmp_path / "buckets.jsonl")
    _bucket_log(log)  # records of the first dense only
    m = tg.build(g, log_file=log, bounds={"n": 100})
    for n, bucket in {3: 8, 20: 32, 100: 64}.items():
        dispatched = [(sizes, task, index) for _, sizes, task, index in m.dispatch(n=n)]
        fallback = autotune.create_task("dense.x86", ((bucket, 48), (16, 48), "float32"))
        assert len(dispatched) == 2
        assert ({"n": bucket}, "dense.x86", fallback.fallback_config().index) in dispatched
        xv = rng.standard_normal((n, 32)).astype("float32")
        np.testing.assert_allclose(m(x=xv)[0], run_reference(g, {"x": xv})[0], atol=1e-4)


def test_apply_history_best_picks_the_bucket_of_a_size(tmp_path):
    import autotune

    log = str(tmp_path / "task.jsonl")
    chosen = _bucket_log(log, pattern=True)
    with autotune.apply_history_best(log):
        # (one row is a matrix-vector product, another schedule with other knobs)
        for n, bucket in {2: 8, 8: 8, 20: 32, 64: 64, 200: 64}.items():
            config = autotune.query_config("dense.x86", ((n, 32), (48, 32), "float32"))
            assert config.index == chosen[bucket], n
        # another static dim is another workload: no bucket of this one applies
        other = autotune.query_config("dense.x86", ((8, 16), (48, 16), "float32"))
        assert isinstance(other, autotune.FallbackConfig)
    with pytest.raises(ValueError, match="need buckets"):
        autotune.create_task("dense.x86", ((dim_var("n"), 32), (48, 32), "float32"))


def test_tune_by_bucket_then_build(tmp_path):
    g = _dense_graph()
    log = str(tmp_path / "tune.jsonl")
    result = tg.tune(g, trials=4, log_file=log, buckets={"n": [16, 64]}, per_round=2,
                     progress=False, remeasure_top=0)
    assert sorted(s.task.args[0][0] for s in result.states) == [16, 64]
    assert result.trials == 4
    m = tg.build(g, log_file=log, bounds={"n": 64})
    assert [d[1] for d in (m.dispatch(n=n)[0] for n in (1, 16, 17, 64))] == \
        [{"n": 16}, {"n": 16}, {"n": 64}, {"n": 64}]
    for n in (1, 16, 17, 64):
        xv = np.random.default_rng(n).standard_normal((n, 32)).astype("float32")
        np.testing.assert_allclose(m(x=xv)[0], run_reference(g, {"x": xv})[0], atol=1e-4)
    with pytest.raises(ValueError, match="no shape variable"):
        tg.tune(g, 4, buckets={"seq": [16]})


def test_profile_at_a_size(encoder_module):
    inputs = _inputs(2, 7)
    (expected,) = encoder_module(**inputs)
    table = encoder_module.profile(2, inputs)
    assert "softmax" in table and table.splitlines()[-1].startswith("total")
    # Each profiled run reads the inputs, whose buffers the arena reuses for later values: the
    # last run's output is the call's.
    prepared = encoder_module._prepare(encoder_module.bind(list(inputs.values())))
    np.testing.assert_array_equal(prepared.output_buffers[0], expected)


def test_shape_arithmetic_mixes_symbolic_sizes_with_int64_constants():
    """A symbolic size times an int64 constant (SqueezeBERT's and ConvBERT's reshapes): the
    shape value with a symbolic entry is an int64 operand like the constant."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["rows"], axis=0),
             helper.make_node("Mul", ["rows", "two"], ["rows2"]),
             helper.make_node("Concat", ["rows2", "three"], ["new_shape"], axis=0),
             helper.make_node("Reshape", ["x", "new_shape"], ["y"])]
    consts = {"zero": np.array([0], "int64"), "two": np.array([2], "int64"),
              "three": np.array([3], "int64")}
    graph = helper.make_graph(
        nodes, "shape_arithmetic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    module = tg.build(tg.from_onnx(model), bounds={"batch": (1, 8)})
    for batch in (1, 3, 8):
        x = np.arange(batch * 6, dtype="float32").reshape(batch, 6)
        np.testing.assert_array_equal(module(x=x)[0], x.reshape(2 * batch, 3))


def test_gather_from_a_table_of_symbolic_length():
    """Gather along a symbolic axis (a table as long as the sequence): negative indices count
    from its actual end."""
    from onnx import TensorProto, helper, numpy_helper

    indices = np.array([[0, -1], [2, -3]], "int64")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["x", "indices"], ["y"], axis=0)], "gather",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(indices, "indices")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    module = tg.build(tg.from_onnx(model), bounds={"seq": (3, 17)})
    for seq in (3, 7, 17):
        x = np.random.default_rng(seq).standard_normal((seq, 5)).astype("float32")
        np.testing.assert_array_equal(module(x=x)[0], np.take(x, indices, axis=0))


def test_indexing_reductions_and_joins_along_symbolic_axes():
    """gather_elements, gather_nd, concatenate, mean and a sizes tensor (`dims_tensor`) on
    symbolic dims, built once and matched against numpy at 1, primes and the bound."""
    g = tg.Graph()
    x = g.input("x", ("n", "m"))
    idx = g.input("idx", ("n", 3), "int64")
    pairs = g.input("pairs", (4, 2), "int64")
    gathered = g.apply("gather_elements", x, idx, axis=1)
    joined = g.apply("concatenate", x, x, axis=1)
    mean = g.apply("mean", joined, axis=(0, 1), keepdims=False)
    picked = g.apply("gather_nd", x, pairs)
    sizes = g.apply("dims_tensor", x, values=(dim_var("n"), dim_var("m") * 2 + 1), shape=(2,))
    for out in (gathered, joined, mean, picked, sizes):
        g.output(out)
    m = tg.build(g, bounds={"n": (1, 13), "m": (1, 13)})
    rng = np.random.default_rng(5)
    for n, k in [(1, 1), (2, 7), (13, 5), (13, 13)]:
        xv = rng.standard_normal((n, k)).astype("float32")
        iv = rng.integers(-k, k, (n, 3)).astype("int64")  # negative indices count from the end
        pv = np.stack([rng.integers(0, n, 4), rng.integers(-k, k, 4)], 1).astype("int64")
        got = m(x=xv, idx=iv, pairs=pv)
        both = np.concatenate([xv, xv], 1)
        want = [np.take_along_axis(xv, iv % k, 1), both, both.mean(), xv[pv[:, 0], pv[:, 1]],
                np.array([n, 2 * k + 1])]
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"{n} x {k}")
        for a, b in zip(run_reference(g, {"x": xv, "idx": iv, "pairs": pv}), want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_contiguous_inputs_are_read_where_they_lie():
    """A C-contiguous input is read in the caller's memory (its arena buffer is left as it
    was), a strided one is copied there; both give the same result, at two sizes."""
    g = tg.Graph()
    x = g.input("x", ("n", 8))
    g.output(g.relu(g.add(x, 1.0)))
    m = tg.build(g, bounds={"n": (1, 64)})
    rng = np.random.default_rng(0)
    for n in (5, 37):
        data = rng.standard_normal((n, 16)).astype(np.float32)
        contiguous, strided = np.ascontiguousarray(data[:, :8]), data[:, 8:]
        m(x=contiguous)
        buffer = m._prepare({"n": n}).input_buffers[0]
        buffer[:] = np.nan
        np.testing.assert_array_equal(m(x=contiguous)[0], np.maximum(contiguous + 1, 0))
        assert np.isnan(buffer).all()
        np.testing.assert_array_equal(m(x=strided)[0], np.maximum(strided + 1, 0))
        np.testing.assert_array_equal(buffer, strided)
