"""Squeeze-and-excitation blocks as one or two kernels (`passes.fuse_squeeze_excitation`, the
`se_gate` and `se_scaled_weight` ops): the fused kernels against the unfused graph and PyTorch
(and onnxruntime for an ONNX import), on inverted-residual blocks with SE as EfficientNet,
MobileNet-V3 and RegNet-Y build them, at channel counts off the vector (3, 17, 40, 72, 120),
batches of 1 and 3, ReLU / SiLU inside, sigmoid / hard sigmoid gates, on the host and AVX2; the
kernels are counted to show that the fusion happened, and patterns that are not an SE block are
left alone."""

from __future__ import annotations

import io

import numpy as np
import pytest

import tensorlang as tl
import topi.graph as tg
from topi.graph.graph import op_label
from topi.graph.ops import get_op
from topi.graph.passes import PIPELINE, fuse_squeeze_excitation, optimize
from wild_models import torchvision

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                                        "ignore::DeprecationWarning")

TARGETS = ["llvm", "llvm -mcpu=haswell"]
WITHOUT = [p for p in PIPELINE if p[0] != "fuse_squeeze_excitation"]


class _Block(torch.nn.Module):
    """1x1 expand, depthwise 3x3, SE, 1x1 project (+ batch norms), as MBConv blocks are."""

    def __init__(self, cin: int, channels: int, squeeze: int, act: type, gate: type,
                 cout: int, group_width: int = 1) -> None:
        super().__init__()
        se = torchvision().ops.SqueezeExcitation(channels, squeeze, activation=act,
                                                 scale_activation=gate)
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(cin, channels, 1, bias=False), torch.nn.BatchNorm2d(channels), act(),
            torch.nn.Conv2d(channels, channels, 3, padding=1, groups=channels // group_width,
                            bias=False),
            torch.nn.BatchNorm2d(channels), act(), se,
            torch.nn.Conv2d(channels, cout, 1, bias=False), torch.nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def _module(cin: int, channels: int, squeeze: int, act: type, gate: type, cout: int,
            seed: int, group_width: int = 1) -> torch.nn.Module:
    torch.manual_seed(seed)
    module = _Block(cin, channels, squeeze, act, gate, cout, group_width).eval()
    for m in module.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return module


def _ops(m: tg.Module) -> list[str]:
    """The ops of each kernel of `m`, "+"-joined (see `op_label`)."""
    return [op_label(n) for n in m.graph.ops]


def _pools(m: tg.Module) -> int:
    """The kernels that pool (a global average pool, or a mean as from_torch imports one)."""
    return sum(any(op in ("global_avg_pool2d", "mean") for op in ops.split("+"))
               for ops in _ops(m))


R, S = torch.nn.ReLU, torch.nn.SiLU
SIG, HARD = torch.nn.Sigmoid, torch.nn.Hardsigmoid
# (input channels, SE channels, squeezed, act, gate, output channels, batch, plane[, group
# width of the middle convolution, depthwise by default])
BLOCKS = [
    (16, 48, 12, R, SIG, 48, 1, 14, 8),  # RegNet-Y: x in half-vector blocks, the gate in whole
    (16, 48, 12, R, SIG, 48, 3, 14, 8),  # ones on AVX-512 (the multiply reads x in its blocks)
    (16, 72, 24, R, HARD, 24, 1, 14),   # MobileNet-V3: the gate folds into the projection
    (8, 40, 10, S, SIG, 16, 3, 9),      # EfficientNet, three images: gate and multiply
    (6, 120, 30, R, SIG, 40, 1, 3),     # RegNet-Y, a small plane: the weight would be larger
    (5, 17, 4, S, HARD, 3, 1, 7),       # channels that make no block on either target
    (3, 3, 1, R, SIG, 5, 3, 5),         # three channels, one squeezed
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"{b[1]}c{b[2]}s-{b[3].__name__}-"
                         f"{b[4].__name__}-n{b[6]}-{b[7]}px")
def test_se_blocks_fused_match_unfused_and_pytorch(target: str, block: tuple) -> None:
    cin, channels, squeeze, act, gate, cout, batch, plane, *group_width = block
    module = _module(cin, channels, squeeze, act, gate, cout, channels, *group_width)
    x = torch.rand((batch, cin, plane, plane), generator=torch.Generator().manual_seed(cin)) - 0.5
    with torch.no_grad():
        expected = module(x).numpy()
    g = tg.from_torch(module, (x,))
    fused = tg.build(g, target=target)
    unfused = tg.build(g, target=target, pipeline=WITHOUT)
    feeds = {fused.inputs[0].name: x.numpy()}
    got = fused(**feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, unfused(**feeds)[0], rtol=1e-5, atol=1e-6)
    ops = _ops(fused)
    # Unfused, the block is 4 kernels (pool, squeeze conv, excite conv + gate, multiply), with
    # any layout transform between them; fused, 2 (se_gate, multiply), or 1 where the gate
    # folds into the projection's weight (se_scaled_weight) and the multiply goes too.
    assert ops.count("se_gate") + ops.count("se_scaled_weight") == 1
    assert _pools(fused) == 0 and _pools(unfused) == 1
    folded = ops.count("se_scaled_weight") == 1
    assert len(unfused.steps) - len(fused.steps) >= (3 if folded else 2)
    assert folded == (batch == 1 and 4 * cout * channels <= channels * plane * plane)


def test_se_block_from_onnx_matches_onnxruntime() -> None:
    ort = pytest.importorskip("onnxruntime")
    module = _module(16, 72, 24, R, HARD, 24, seed=3)
    x = torch.rand((1, 16, 14, 14), generator=torch.Generator().manual_seed(3)) - 0.5
    buffer = io.BytesIO()
    torch.onnx.export(module, (x,), buffer, dynamo=False, opset_version=17)
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    import onnx

    m = tg.build(tg.from_onnx(onnx.load_from_string(buffer.getvalue())))
    np.testing.assert_allclose(m(**{m.inputs[0].name: x.numpy()})[0], expected, rtol=1e-4,
                               atol=1e-5)
    assert "se_scaled_weight" in _ops(m) and "multiply" not in _ops(m)


def _se_graph(gate: str = "sigmoid", also_output: str | None = None) -> tg.Graph:
    """x -> SE -> 1x1 conv by hand, in NCHW; `also_output` ("pool" or "gate") is read by the
    graph's outputs as well."""
    channels, squeeze = 24, 6
    rng = np.random.default_rng(0)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.3).astype("float32")

    g = tg.Graph()
    x = g.input("x", (1, channels, 6, 6))
    pooled = g.global_avg_pool2d(x)
    hidden = g.relu(g.bias_add(g.conv2d(pooled, w(squeeze, channels, 1, 1)), w(squeeze)))
    excited = g.bias_add(g.conv2d(hidden, w(channels, squeeze, 1, 1)), w(channels))
    gated = g.apply(gate, excited)
    g.output(g.conv2d(g.multiply(x, gated), w(8, channels, 1, 1)))
    if also_output is not None:
        g.output({"pool": pooled, "gate": gated}[also_output])
    return g


@pytest.mark.parametrize("gate,also_output", [("tanh", None), ("sigmoid", "gate"),
                                              ("sigmoid", "pool")])
def test_not_an_se_block_stays(gate: str, also_output: str | None) -> None:
    g = _se_graph(gate, also_output)
    with tl.Target("llvm"):
        ops = [n.op for n in optimize(g, pipeline=[p for p in PIPELINE
                                                   if p[0] != "fuse_ops"]).ops]
    assert "global_avg_pool2d" in ops
    assert not {"se_gate", "se_scaled_weight"} & set(ops)
    m = tg.build(g)
    x = np.random.default_rng(1).standard_normal((1, 24, 6, 6)).astype("float32")
    reference = tg.build(g, pipeline=WITHOUT)
    for got, want in zip(m(x=x), reference(x=x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_hand_built_se_in_nchw_folds() -> None:
    g = _se_graph()
    out = fuse_squeeze_excitation(g)
    assert [n.op for n in out.ops] == ["se_scaled_weight", "conv2d"]
    x = np.random.default_rng(2).standard_normal((1, 24, 6, 6)).astype("float32")
    np.testing.assert_allclose(tg.build(g)(x=x)[0], tg.build(g, pipeline=WITHOUT)(x=x)[0],
                               rtol=1e-5, atol=1e-6)


# -- the ops alone, against their numpy references ------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,squeeze,act,gate", [
    ((1, 2, 7, 9, 16), 5, "silu", "sigmoid"),
    ((3, 17, 5, 6), 4, "relu", "hard_sigmoid"),
    ((2, 9, 13, 1, 8), 18, "relu", "sigmoid"),
    ((1, 5, 1, 1, 8), 1, "silu", "hard_sigmoid"),
])
def test_se_ops_match_numpy(target: str, shape: tuple, squeeze: int, act: str,
                            gate: str) -> None:
    channels = shape[1] * (shape[4] if len(shape) == 5 else 1)
    rng = np.random.default_rng(channels)
    x = rng.standard_normal(shape).astype("float32")
    params = [(rng.standard_normal(s) * 0.3).astype("float32")
              for s in ((channels, squeeze), (squeeze,), (squeeze, channels), (channels,))]
    attrs = {"act": act, "gate": gate, "alpha": 1 / 6, "beta": 0.5}
    weights = [None] if shape[0] != 1 else [None, rng.standard_normal((3, channels, 1, 1, 8)),
                                            rng.standard_normal((7, channels, 3, 1))]
    for weight in weights:
        op = "se_gate" if weight is None else "se_scaled_weight"
        extra = [] if weight is None else [weight.astype("float32")]
        g = tg.Graph()
        g.output(g.apply(op, g.input("x", shape), *params, *extra, **attrs))
        want = get_op(op).reference(x, *params, *extra, **attrs)
        np.testing.assert_allclose(tg.build(g, target=target)(x=x)[0], want, rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("change,error", [
    ({"act": "tanh"}, "act must be one of"),
    ({"gate": "relu"}, "gate must be one of"),
    ({"squeeze": (20, 4)}, "squeeze has 20 input channels but x has 24"),
    ({"excite": (4, 20)}, r"excite must be \(4, 24\)"),
    ({"x": (3, 3, 5, 5, 8), "weight": (2, 24, 1, 1, 8)}, "one image"),
    ({"weight": (2, 20, 1, 1, 8)}, "weight must be"),
])
def test_se_ops_reject_bad_input(change: dict, error: str) -> None:
    shapes = {"x": (1, 3, 5, 5, 8), "squeeze": (24, 4), "excite": (4, 24), **change}
    attrs = {k: change[k] for k in ("act", "gate") if k in change}
    op = "se_scaled_weight" if "weight" in change else "se_gate"
    g = tg.Graph()
    inputs = [g.input(k, shapes[k]) for k in ("x", "squeeze")]
    inputs += [g.input("b1", (4,)), g.input("excite", shapes["excite"]), g.input("b2", (24,))]
    if "weight" in change:
        inputs.append(g.input("w", shapes["weight"]))
    with pytest.raises(ValueError, match=error):
        g.apply(op, *inputs, **attrs)


@pytest.mark.parametrize("shape", [(), (5,), (3, 5), (2, 3, 5), ("n", 2, 1, 1), (2, "c", 3, 4)])
def test_gated_products_of_other_ranks_or_symbolic_shapes_stay(shape: tuple) -> None:
    g = tg.Graph()
    x, y = g.input("x", shape), g.input("y", shape)
    g.output(g.multiply(x, g.sigmoid(y)))
    assert [n.op for n in fuse_squeeze_excitation(g).ops] == ["sigmoid", "multiply"]
