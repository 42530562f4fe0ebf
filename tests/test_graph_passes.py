"""topi.graph passes: each Graph -> Graph, printable, and checked against the numpy reference."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import topi.graph as tg
from topi.graph import cache, ops
from topi.graph.graph import FUSED
from topi.graph.passes import (
    fold_batch_norm,
    fold_constants,
    fuse_ops,
    optimize,
    plan_memory,
    remove_dead_nodes,
)
from topi.graph.passes.common import rewrite
from topi.graph.reference import run_reference


def _w(rng: np.random.Generator, *shape: int, low: float = -1.0) -> np.ndarray:
    return rng.uniform(low, 1.0, size=shape).astype("float32")


def conv_bn_relu(rng: np.random.Generator, with_bias: bool = False) -> tg.Graph:
    g = tg.Graph()
    x = g.input("data", (1, 5, 11, 7))
    y = g.conv2d(x, g.constant(_w(rng, 17, 5, 3, 3)), stride=(2, 1), padding=(1, 0, 2, 1))
    if with_bias:
        y = g.bias_add(y, g.constant(_w(rng, 17)))
    stats = [g.constant(_w(rng, 17, low=0.5)) for _ in range(4)]
    g.output(g.relu(g.batch_norm(y, *stats, epsilon=1e-3)))
    return g


def _check_same(before: tg.Graph, after: tg.Graph, rng: np.random.Generator) -> None:
    inputs = {i.name: _w(rng, *i.shape) for i in before.inputs}
    for want, got in zip(run_reference(before, inputs), run_reference(after, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("with_bias", [False, True])
def test_conv_bn_relu_becomes_one_kernel(rng: np.random.Generator, with_bias: bool) -> None:
    g = conv_bn_relu(rng, with_bias)
    folded = fold_batch_norm(g)
    assert "batch_norm" not in {n.op for n in remove_dead_nodes(folded).ops}
    _check_same(g, folded, rng)
    opt = optimize(g)
    (kernel,) = opt.ops  # conv, bias and relu in one kernel
    assert kernel.op == FUSED and [n.op for n in kernel.body.ops] == ["conv2d", "bias_add", "relu"]
    head = ("fused[conv2d{stride=(2, 1), padding=(1, 0, 2, 1), dilation=1} > bias_add{axis=1} "
            "> relu]")
    assert head in str(opt)
    _check_same(g, opt, rng)


def test_depthwise_bn_folds_per_output_channel(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x = g.input("x", (2, 3, 9, 6))
    y = g.conv2d(x, g.constant(_w(rng, 6, 1, 3, 3)), groups=3, padding="SAME")
    g.output(g.batch_norm(y, *[g.constant(_w(rng, 6, low=0.5)) for _ in range(4)]))
    opt = optimize(g)
    assert [n.op for n in opt.ops[0].body.ops] == ["depthwise_conv2d", "bias_add"]
    _check_same(g, opt, rng)


def test_residual_add_relu_and_dense_bias_gelu_fuse(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x = g.input("x", (1, 4, 5, 5))
    a = g.relu(g.conv2d(x, g.constant(_w(rng, 4, 4, 3, 3)), padding=1))
    b = g.conv2d(a, g.constant(_w(rng, 4, 4, 3, 3)), padding=1)
    r = g.relu(g.add(b, a))
    flat = g.reshape(g.global_avg_pool2d(r), (1, 4))
    d = g.gelu(g.bias_add(g.dense(flat, g.constant(_w(rng, 3, 4))), g.constant(_w(rng, 3)),
                          axis=-1))
    g.output(d)
    opt = fuse_ops(g)
    bodies = [[n.op for n in k.body.ops] if k.op == FUSED else [k.op] for k in opt.ops]
    assert bodies == [["conv2d", "relu"], ["conv2d", "add", "relu"], ["global_avg_pool2d"],
                      ["reshape"], ["dense", "bias_add", "gelu"]]
    assert opt.outputs[0].name == d.name
    _check_same(g, opt, rng)


@pytest.mark.filterwarnings("ignore:.*no tuned config")  # fallback configs on purpose
@pytest.mark.parametrize("skip_first", [False, True])
def test_residual_adds_join_the_projection_conv_in_either_operand_order(
        rng: np.random.Generator, skip_first: bool) -> None:
    """MobileNet-V2's inverted residual: expand conv + clip, depthwise conv + clip, projection
    conv with no activation, then the residual add (ONNX may name either operand first), here
    followed by a clip. The add and clip run in the projection conv's kernel: three kernels."""
    g = tg.Graph()
    x = g.input("x", (1, 7, 11, 5))
    expand = g.clip(g.conv2d(x, g.constant(_w(rng, 13, 7, 1, 1))), 0.0, 6.0)
    dw = g.clip(g.conv2d(expand, g.constant(_w(rng, 13, 1, 3, 3)), groups=13, padding=1), 0, 6)
    project = g.bias_add(g.conv2d(dw, g.constant(_w(rng, 7, 13, 1, 1))), g.constant(_w(rng, 7)))
    g.output(g.clip(g.add(x, project) if skip_first else g.add(project, x), -1.0, 1.0))
    m = tg.build(g)
    assert [s.op for s in m.steps] == ["conv2d+clip", "depthwise_conv2d+clip",
                                       "conv2d+bias_add+add+clip"]
    inputs = {"x": _w(rng, 1, 7, 11, 5)}
    np.testing.assert_allclose(m(**inputs)[0], run_reference(g, inputs)[0], rtol=1e-4,
                               atol=1e-5)


@pytest.mark.filterwarnings("ignore:.*no tuned config")  # fallback configs on purpose
def test_adds_stay_apart_where_fusing_them_is_illegal(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x = g.input("x", (1, 3, 5, 7))
    conv = g.conv2d(x, g.constant(_w(rng, 3, 3, 3, 3)), padding=1)
    # The other operand reads the conv itself: the conv's output must exist on its own.
    twice = g.add(conv, g.relu(conv))
    # The add broadcasts the conv's output to a larger shape: not an elementwise tail.
    conv2 = g.conv2d(twice, g.constant(_w(rng, 3, 3, 1, 1)))
    g.output(g.add(conv2, g.input("wide", (2, 3, 5, 7))))
    m = tg.build(g)
    assert [s.op for s in m.steps] == ["conv2d", "relu+add", "conv2d", "add"]
    inputs = {"x": _w(rng, 1, 3, 5, 7), "wide": _w(rng, 2, 3, 5, 7)}
    np.testing.assert_allclose(m(**inputs)[0], run_reference(g, inputs)[0], rtol=1e-4,
                               atol=1e-5)


def test_elementwise_producers_fuse_into_reductions(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x, r = g.input("x", (5, 3, 7)), g.input("r", (5, 3, 7))
    normed = g.layer_norm(g.add(x, r), g.constant(_w(rng, 7)), g.constant(_w(rng, 7)))
    probs = g.softmax(g.multiply(g.transpose(normed, (0, 2, 1)), 0.5), axis=1)
    g.output(g.relu(probs))
    opt = fuse_ops(g)
    bodies = [[n.op for n in k.body.ops] for k in opt.ops]
    assert bodies == [["add", "layer_norm"], ["transpose", "multiply", "softmax", "relu"]]
    assert [k.attrs["anchor"] for k in opt.ops] == ["layer_norm", "softmax"]
    _check_same(g, opt, rng)
    inputs = {"x": _w(rng, 5, 3, 7), "r": _w(rng, 5, 3, 7)}
    np.testing.assert_allclose(tg.build(g)(**inputs)[0], run_reference(g, inputs)[0],
                               rtol=1e-4, atol=1e-6)


def test_fusion_stops_at_values_read_twice_and_at_outputs(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x = g.input("x", (3, 4))
    m = g.dense(x, g.constant(_w(rng, 4, 4)))
    r = g.relu(m)
    g.output(g.add(r, m), r)  # m has two readers; r is an output
    opt = fuse_ops(g)
    assert [k.op for k in opt.ops] == ["dense", "relu", "add"]
    _check_same(g, opt, rng)


def _ops_on(g: tg.Graph, a: tg.Node, b: tg.Node, idx: tg.Node) -> list[tg.Node]:
    """Shape arithmetic and weight preparation as importers leave them, on awkward shapes."""
    return [
        g.transpose(g.reshape(a, (7, 3, 5)), (2, 0, 1)),
        g.divide(a, b),  # true division: a float result even for integers
        g.add(g.multiply(a, b), g.subtract(b, a)),
        g.sum(g.concatenate([a, b], axis=0), axis=1, keepdims=True),
        g.take(g.strided_slice(a, begin=(6,), end=(0,), strides=(-2,), axes=(0,)), idx, axis=1),
        g.cast(g.maximum(a, b), "int8" if a.dtype.startswith("int") else "float64"),
    ]


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_fold_constants_compiles_nothing_and_matches_the_kernels(
        rng: np.random.Generator, dtype: str) -> None:
    if dtype == "float32":
        a, b = _w(rng, 7, 15), _w(rng, 7, 15, low=0.5)
    else:  # int64 values beyond float64's 53 bits must fold exactly
        big = 2**50 if dtype == "int64" else 2**20
        a = rng.integers(-big, big, size=(7, 15)).astype(dtype)
        b = (rng.integers(1, 100, size=(7, 15)) * rng.choice([-1, 1], (7, 15))).astype(dtype)
    idx = np.array([[2, 0], [1, 14]], dtype="int64")
    # The same ops on constants (folded) and on inputs (compiled and run).
    consts = tg.Graph()
    consts.output(*_ops_on(consts, consts.constant(a, "a"), consts.constant(b, "b"),
                           consts.constant(idx, "idx")))
    inputs = tg.Graph()
    inputs.output(*_ops_on(inputs, inputs.input("a", a.shape, dtype),
                           inputs.input("b", b.shape, dtype), inputs.input("idx", (2, 2), "int64")))
    cache.clear_memory()
    cache.STATS.clear()
    folded = fold_constants(consts)
    assert not cache.STATS, cache.STATS  # no kernel looked up, let alone compiled
    assert not folded.ops and all(o.kind is tg.NodeKind.CONSTANT for o in folded.outputs)
    ran = tg.build(inputs)(a=a, b=b, idx=idx)
    for node, want, got in zip(inputs.outputs, ran, (o.value for o in folded.outputs)):
        assert got.dtype == want.dtype == node.dtype and got.shape == node.shape, node
        if dtype == "float32":
            np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=str(node))
        else:
            np.testing.assert_array_equal(got, want, err_msg=str(node))


def test_fold_constants_leaves_ops_without_a_reference(rng: np.random.Generator,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    g = tg.Graph()
    x = g.input("x", (2, 3))
    w = g.constant(_w(rng, 3, 5))
    scale = g.multiply(g.add(g.constant(_w(rng, 5)), 1.5), g.constant(_w(rng, 1)))
    wt = g.transpose(w, (1, 0))
    g.output(g.multiply(g.dense(x, g.relu(wt)), g.reshape(g.concatenate([scale, scale]), (2, 5))))
    folded = fold_constants(g)
    assert [n.op for n in folded.ops] == ["dense", "multiply"]
    _check_same(g, folded, rng)
    relu = ops.get_op("relu")
    monkeypatch.setitem(ops._REGISTRY, "relu", replace(relu, reference=None))
    assert [n.op for n in fold_constants(g).ops] == ["relu", "dense", "multiply"]


def test_dead_nodes_go_but_inputs_stay(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x = g.input("x", (2, 2))
    g.input("unused", (1,))
    g.relu(g.constant(_w(rng, 2, 2)))
    g.output(g.relu(x))
    pruned = remove_dead_nodes(g)
    assert [n.name for n in pruned.nodes] == ["x", "unused", "relu_0"] or \
        [n.op for n in pruned.nodes] == ["input", "input", "relu"]
    assert len(pruned.constants) == 0


def _random_graph(rng: np.random.Generator, n_ops: int) -> tg.Graph:
    g = tg.Graph()
    values = [g.input("x", (4, 8))]
    for _ in range(n_ops):
        a = values[rng.integers(len(values))]
        b = values[rng.integers(len(values))]
        kind = rng.integers(3)
        node = g.relu(a) if kind == 0 else g.add(a, b) if kind == 1 else g.transpose(a, (1, 0))
        values.append(g.reshape(node, (4, 8)) if node.shape != (4, 8) else node)
    g.output(values[-1], values[len(values) // 2])
    return g


@pytest.mark.parametrize("seed", range(5))
def test_memory_plan_never_shares_memory_between_live_buffers(seed: int) -> None:
    g = fuse_ops(_random_graph(np.random.default_rng(seed), 12))
    plan = plan_memory(g)
    buffers = list(plan.buffers.values())
    assert {b.name for b in buffers} == {n.name for n in g.nodes if n.kind is not
                                         tg.NodeKind.CONSTANT}
    for k, a in enumerate(buffers):
        assert a.offset % 64 == 0 and a.offset + a.size <= plan.arena_bytes
        for b in buffers[k + 1:]:
            live_together = a.start <= b.end and b.start <= a.end
            disjoint = a.offset + a.size <= b.offset or b.offset + b.size <= a.offset
            assert disjoint or not live_together, (a, b)
    assert plan.arena_bytes <= plan.unplanned_bytes


def test_memory_plan_of_a_chain_reuses_two_buffers() -> None:
    g = tg.Graph()
    y = g.input("x", (64, 64))
    for _ in range(10):
        y = g.multiply(g.relu(y), 2.0)  # not fused: every op is its own kernel
    g.output(y)
    plan = plan_memory(g)
    assert plan.unplanned_bytes == 21 * 64 * 64 * 4
    assert plan.arena_bytes == 2 * 64 * 64 * 4
    assert str(plan).startswith("memory plan: peak 0.03 MiB for 21 buffers")


@pytest.mark.filterwarnings("ignore:.*no tuned config")  # fallback configs on purpose
def test_fusion_keeps_values_named_like_its_own_inputs(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x = g.input("x", (1, 4, 5, 5))
    y = g.conv2d(x, g.constant(_w(rng, 4, 4, 3, 3)), padding=1, name="p0")
    z = g.apply("relu", g.add(y, g.constant(_w(rng, 4, 1, 1)), name="p1"), name="p2")
    g.output(z)
    opt = fuse_ops(g)
    (kernel,) = [k for k in opt.ops if k.op == FUSED]
    assert [n.op for n in kernel.body.ops] == ["conv2d", "add", "relu"]
    assert len({n.name for n in kernel.body.nodes}) == len(kernel.body.nodes)
    _check_same(g, opt, rng)
    x_in = _w(rng, 1, 4, 5, 5)
    (want,) = run_reference(g, {"x": x_in})
    np.testing.assert_allclose(tg.build(g)(x=x_in)[0], want, rtol=1e-4, atol=1e-5)


def test_a_rewrite_never_names_a_new_node_like_an_old_one_still_to_copy(
        rng: np.random.Generator) -> None:
    """A pass names what it makes after the node it replaces ("<name>_NCHW"); where an old node
    further on already holds that name, the old node keeps it when copied and the new one takes
    another (MixNet's squeeze-excitation once collided so with a layout transform)."""
    g = tg.Graph()
    x = g.input("x", (1, 3, 4, 5))
    g.output(g.apply("sigmoid", g.apply("relu", x, name="a"), name="a_NCHW"))

    def visit(out: tg.Graph, node: tg.Node, inputs: list) -> tg.Node | None:
        if node.name != "a":
            return None
        return out.apply("abs", out.apply("relu", *inputs, name=out.unique_name("a_NCHW")))

    new = rewrite(g, visit)
    names = [n.name for n in new.nodes]
    assert len(set(names)) == len(names)
    assert new.outputs[0].name == "a_NCHW" and new.outputs[0].op == "sigmoid"
    _check_same(g, new, rng)


def test_reserved_names_are_never_made_up_but_may_be_taken() -> None:
    g = tg.Graph(reserved=["relu", "relu_0", "x"])
    x = g.input("x", (2,))
    made = g.unique_name("relu")
    assert made not in ("relu", "relu_0", "x")
    assert g.apply("relu", x, name="relu").name == "relu"  # a pass keeping an old node's name
    assert g.apply("relu", x).name not in ("relu", "relu_0", "x")


def test_a_copied_node_whose_name_a_new_one_took_is_renamed(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x = g.input("x", (1, 3, 4, 5))
    g.output(g.apply("sigmoid", g.apply("relu", x, name="a"), name="b"))

    def visit(out: tg.Graph, node: tg.Node, inputs: list) -> tg.Node | None:
        return out.apply("relu", *inputs, name="b") if node.name == "a" else None

    new = rewrite(g, visit)
    assert [n.name for n in new.ops] == ["b", new.outputs[0].name]
    assert new.outputs[0].name != "b" and new.outputs[0].op == "sigmoid"
    _check_same(g, new, rng)
