"""The alter_layout pass: convolutions in NCHW[x]c with the layout kept between them, checked
against the numpy reference of the original graph (awkward channel counts, both AVX-512 and
AVX2 blocks), its printed output, and the zoo models against onnxruntime with one layout
transform, before the classifier."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
import topi.graph as tg
from topi.graph.passes import PIPELINE, alter_layout
from topi.graph.reference import run_reference

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

TARGETS = ["llvm", "llvm -mcpu=haswell"]


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype("float32")


def _until_layout(g: tg.Graph) -> tg.Graph:
    """`g` after the passes up to and including alter_layout, and dead-node removal."""
    names = [name for name, _ in PIPELINE]
    keep = names[:names.index("alter_layout") + 1] + ["remove_dead_nodes"]
    return tg.optimize(g, pipeline=[p for p in PIPELINE if p[0] in keep])


def _mixed(rng: np.random.Generator) -> tg.Graph:
    """Channels 3 -> 24 -> 24 (depthwise, stride 2) -> 40 -> 5 -> 13 (concatenated), with
    constants of several broadcast shapes, pooling, a second input and a blocked output."""
    g = tg.Graph()
    x = g.input("x", (1, 3, 13, 13))
    skip = g.input("skip", (1, 24, 7, 7))
    y = g.conv2d(x, g.constant(_w(rng, 24, 3, 3, 3)), stride=1, padding=1)
    y = g.relu(g.bias_add(y, g.constant(_w(rng, 24))))
    y = g.max_pool2d(y, 3, stride=1, padding=1)
    y = g.conv2d(y, g.constant(_w(rng, 24, 1, 3, 3)), stride=2, padding=1, groups=24)
    y = g.multiply(g.add(y, g.constant(_w(rng, 24, 1, 1))), g.constant(np.float32(0.5)))
    y = g.apply("clip", g.add(y, skip), a_min=-1.0, a_max=1.0)
    wide = g.conv2d(y, g.constant(_w(rng, 40, 24, 1, 1)))
    pooled = g.avg_pool2d(wide, 2, stride=2, ceil_mode=True)
    narrow = g.conv2d(y, g.constant(_w(rng, 5, 24, 3, 3)), padding=1)  # too few: NCHW
    both = g.concatenate([g.conv2d(wide, g.constant(_w(rng, 8, 40, 1, 1))), narrow], axis=1)
    g.output(pooled, g.global_avg_pool2d(both), wide)
    return g


@pytest.mark.parametrize("target", TARGETS)
def test_mixed_graph_matches_reference(target: str, rng: np.random.Generator) -> None:
    g = _mixed(rng)
    inputs = {i.name: _w(rng, *i.shape) for i in g.inputs}
    module = tg.build(g, target=target)
    assert [o.shape for o in module.outputs] == [o.shape for o in g.outputs]
    for got, want in zip(module(**inputs), run_reference(g, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    with tl.Target(target):
        ops = [n.op for n in _until_layout(g).ops]
    assert {"conv2d_NCHWc", "depthwise_conv2d_NCHWc", "conv2d"} <= set(ops)
    assert "depthwise_conv2d" not in ops and "bias_add" not in ops


def test_pass_output_prints(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x = g.input("x", (1, 3, 7, 7))
    y = g.relu(g.bias_add(g.conv2d(x, g.constant(_w(rng, 16, 3, 3, 3), name="w1"), padding=1),
                          g.constant(_w(rng, 16), name="b1")), name="conv1")
    z = g.conv2d(y, g.constant(_w(rng, 16, 1, 3, 3), name="w2"), padding=1, groups=16)
    s = g.add(g.apply("clip", z, a_min=0.0, a_max=6.0, name="dw"), y, name="residual")
    flat = g.reshape(g.global_avg_pool2d(s, name="pool"), (1, 16), name="flatten")
    g.output(g.dense(flat, g.constant(_w(rng, 5, 16), name="fc"), name="logits"))
    with tl.Target("llvm -mcpu=haswell"):
        text = str(tg.passes.remove_dead_nodes(alter_layout(tg.passes.fold_constants(g))))
    assert text.splitlines() == [
        'graph(%x: float32[1, 3, 7, 7]) -> (%logits) {',
        '  %w1_NCHWc = constant : float32[2, 3, 3, 3, 8]',
        ('  %conv2d = conv2d_NCHWc{stride=1, padding=1, dilation=1}(%x, %w1_NCHWc)'
        ' : float32[1, 2, 7, 7, 8]'),
        '  %b1_NCHWc = constant : float32[1, 2, 1, 1, 8]',
        '  %bias_add = add(%conv2d, %b1_NCHWc) : float32[1, 2, 7, 7, 8]',
        '  %conv1 = relu(%bias_add) : float32[1, 2, 7, 7, 8]',
        '  %reshape_NCHWc = constant : float32[2, 3, 3, 8]',
        ('  %depthwise_conv2d = depthwise_conv2d_NCHWc{stride=1, padding=1, dilation=1}('
        '%conv1, %reshape_NCHWc) : float32[1, 2, 7, 7, 8]'),
        '  %dw = clip{a_min=0, a_max=6}(%depthwise_conv2d) : float32[1, 2, 7, 7, 8]',
        '  %residual = add(%dw, %conv1) : float32[1, 2, 7, 7, 8]',
        "  %pool = global_avg_pool2d{layout='NCHW8c'}(%residual) : float32[1, 2, 1, 1, 8]",
        ("  %pool_NCHW = layout_transform{src_layout='NCHW8c', dst_layout='NCHW'}(%pool)"
        ' : float32[1, 16, 1, 1]'),
        '  %flatten = reshape{newshape=(1, 16)}(%pool_NCHW) : float32[1, 16]',
        '  %fc = constant : float32[5, 16]',
        '  %logits = dense(%flatten, %fc) : float32[1, 5]',
        '}',
    ]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_zoo_models_keep_NCHWc_between_convs(name: str, target: str) -> None:
    zoo = pytest.importorskip("topi.graph.zoo", reason="the zoo needs the torch extra")
    pytest.importorskip("onnx", reason="the ONNX models need the onnx extra")
    ort = pytest.importorskip("onnxruntime", reason="the reference runtime is in the onnx extra")
    model = zoo.get(name, **zoo.REDUCED[name])
    proto = model.onnx()
    g = tg.from_onnx(proto)
    with tl.Target(target):
        altered = _until_layout(g)
    consumers = altered.consumers()
    transforms = [n for n in altered.ops if n.op == "layout_transform"]
    # Only between the global pool and the flatten + classifier: the first conv reads the
    # 3-channel image in NCHW.
    assert [(t.inputs[0].op, [c.op for c in consumers[t]]) for t in transforms] == [
        ("global_avg_pool2d", ["reshape"])]
    assert consumers[altered.inputs[0]][0].op == "conv2d_NCHWc"
    assert not {"conv2d", "depthwise_conv2d"} & {n.op for n in altered.ops}
    assert all(len(n.shape) == 2 for n in altered.ops if n.op == "bias_add")  # the classifier's
    inputs = model.inputs(seed=5)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, inputs)[0]
    actual = tg.build(g, target=target)(**inputs)[0]
    np.testing.assert_allclose(actual, expected, rtol=1e-3,
                               atol=1e-3 * float(np.abs(expected).max()))
