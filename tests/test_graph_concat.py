"""Concatenation without copies: DenseNet- and Inception-like graphs whose producers write into
their slices of the concatenated buffer (checked on the memory plan and by counting the copy
kernels), in the blocked layout where every slice fills blocks, against PyTorch and onnxruntime
on awkward channel counts, batch 1 and 3, AVX-512 and AVX2."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
import topi.graph as tg
from topi.graph.graph import op_label
from topi.graph.passes import fuse_ops, plan_memory
from topi.graph.reference import run_reference

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
from torch import nn

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                                        "ignore::DeprecationWarning")

TARGETS = ["llvm", "llvm -mcpu=haswell"]


def _bn(channels: int) -> nn.BatchNorm2d:
    """A batch norm with running statistics far from the identity."""
    bn = nn.BatchNorm2d(channels)
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    return bn


class DenseBlock(nn.Module):
    """torchvision's DenseNet in small: pre-activation layers over the growing concatenation,
    then a transition (batch norm, relu, 1x1 conv, average pool)."""

    def __init__(self, init: int, growth: int, layers: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, init, 3, padding=1)
        self.layers = nn.ModuleList()
        for k in range(layers):
            channels = init + k * growth
            self.layers.append(nn.Sequential(
                _bn(channels), nn.ReLU(), nn.Conv2d(channels, 2 * growth, 1, bias=False),
                _bn(2 * growth), nn.ReLU(), nn.Conv2d(2 * growth, growth, 3, padding=1,
                                                      bias=False)))
        channels = init + layers * growth
        self.transition = nn.Sequential(_bn(channels), nn.ReLU(), nn.Conv2d(channels, 8, 1),
                                        nn.AvgPool2d(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [self.stem(x)]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        return self.transition(torch.cat(features, 1))


class Inception(nn.Module):
    """Two Inception modules: 1x1, 1x1 -> 3x3, 1x1 -> 5x5 and pool -> 1x1 branches, the
    second module reading the first one's concatenation."""

    def __init__(self, widths: tuple[int, int, int, int]) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.modules_ = nn.ModuleList()
        channels = 16
        for _ in range(2):
            a, b, c, d = widths
            self.modules_.append(nn.ModuleList([
                nn.Sequential(nn.Conv2d(channels, a, 1), nn.ReLU()),
                nn.Sequential(nn.Conv2d(channels, 8, 1), nn.ReLU(), nn.Conv2d(8, b, 3, padding=1),
                              nn.ReLU()),
                nn.Sequential(nn.Conv2d(channels, 8, 1), nn.ReLU(), nn.Conv2d(8, c, 5, padding=2),
                              nn.ReLU()),
                nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(channels, d, 1), nn.ReLU())]))
            channels = sum(widths)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for branches in self.modules_:
            x = torch.cat([branch(x) for branch in branches], 1)
        return x


def _inputs(batch: int, size: int = 11) -> torch.Tensor:
    return torch.rand((batch, 3, size, size), generator=torch.Generator().manual_seed(0)) * 2 - 1


def _concats(m: tg.Module) -> list[tg.Node]:
    return [n for n in m.graph.ops if n.op == "concatenate"]


def _nchw_round_trips(m: tg.Module) -> int:
    """How many layout transforms of `m` (fused or not) go to or from plain NCHW."""
    ops = [b for n in m.graph.ops for b in (n.body.ops if n.body is not None else [n])]
    return sum("NCHW" in (op.attrs["src_layout"], op.attrs["dst_layout"]) for op in ops
               if op.op == "layout_transform")


def _check_in_place(m: tg.Module) -> None:
    """Every concatenation of `m` needs no kernel, and its inputs lie end to end in its buffer
    (or in the buffer of the concatenation it is itself a slice of)."""
    plan = m.plan
    concats = _concats(m)
    assert concats and plan.in_place == {c.name for c in concats}
    assert not [s for s in m.steps if "concatenate" in s.op]
    for c in concats:
        offset = plan.buffers[c.name].offset
        root = plan.buffers[c.name].inside or c.name
        for i in c.inputs:
            assert plan.buffers[i.name].offset == offset and plan.buffers[i.name].inside == root
            offset += i.nbytes


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("growth", [8, 5, 1])
@pytest.mark.parametrize("batch", [1, 3])
def test_dense_block_writes_the_feature_map_once(target: str, growth: int, batch: int) -> None:
    torch.manual_seed(growth)
    module = DenseBlock(16 if growth == 8 else 7, growth, 3).eval()
    x = _inputs(batch)
    with torch.no_grad():
        expected = module(x).numpy()
    m = tg.build(tg.from_torch(module, (x,)), target=target)
    np.testing.assert_allclose(m(**{m.inputs[0].name: x.numpy()})[0], expected, rtol=1e-4,
                               atol=1e-4)
    concats = _concats(m)
    if batch == 1:
        assert len(concats) == 3  # the second and third layers' and the transition's
        _check_in_place(m)
        assert m.plan.buffers[concats[0].name].inside == concats[-1].name  # one feature map
    else:  # the slices are strided: one copy kernel per concatenation (fused with its reader)
        assert not m.plan.in_place
        assert sum("concatenate" in s.op for s in m.steps) == 3
    if growth == 8:  # blocked throughout: only the output leaves NCHW[x]c
        assert all(c.shape[-1] in (8, 16) and len(c.shape) == 5 for c in concats)
        assert _nchw_round_trips(m) == 1


def _onnx(module: nn.Module, x: torch.Tensor) -> bytes:
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, (x,), buffer, dynamo=False, opset_version=17)
    return buffer.getvalue()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("widths", [(16, 24, 8, 8), (5, 16, 3, 1)])
@pytest.mark.parametrize("batch", [1, 3])
def test_inception_branches_write_their_slices(target: str, widths: tuple[int, ...],
                                               batch: int) -> None:
    onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
    ort = pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    torch.manual_seed(sum(widths))
    x = _inputs(batch, 9)
    proto = _onnx(Inception(widths).eval(), x)
    model = onnx.load_from_string(proto)
    expected = ort.InferenceSession(proto).run(None, {model.graph.input[0].name: x.numpy()})[0]
    m = tg.build(tg.from_onnx(model), target=target)
    np.testing.assert_allclose(m(**{m.inputs[0].name: x.numpy()})[0], expected, rtol=1e-4,
                               atol=1e-4)
    if batch == 1:
        _check_in_place(m)
    blocked = widths == (16, 24, 8, 8)
    assert all(len(c.shape) == (5 if blocked else 4) for c in _concats(m))
    if blocked:  # the branches meet in the blocked layout: only the output leaves it
        assert _nchw_round_trips(m) == 1


def _nested() -> tg.Graph:
    """a and b in two concatenations, in opposite orders; one nested in another."""
    g = tg.Graph()
    x = g.input("x", (1, 4, 5, 5))
    a, b, c = (g.relu(g.add(x, float(k)), name=n) for k, n in enumerate("abc"))
    first = g.concatenate([b, a], axis=1, name="first")
    inner = g.concatenate([a, b], axis=1, name="inner")
    g.output(first, g.concatenate([inner, g.exp(c, name="e")], axis=1, name="outer"))
    return g


def _nested_outputs(value: np.ndarray) -> list[np.ndarray]:
    a, b, c = (np.maximum(value + k, 0) for k in range(3))
    return [np.concatenate([b, a], 1), np.concatenate([a, b, np.exp(c)], 1)]


def test_values_wanted_in_two_places_keep_a_copy(rng: np.random.Generator) -> None:
    """A value in two unrelated concatenations lives in the later one's buffer; the other is a
    copy kernel. Nested concatenations share one buffer, and no two values alive together
    overlap unless one is a slice of the other."""
    g = _nested()
    fused = fuse_ops(g)
    plan = plan_memory(fused)
    assert plan.in_place == {"inner", "outer"}
    assert fused.node("first").op == "concatenate"  # a copy kernel
    assert [plan.buffers[n].inside for n in ("a", "b", "inner", "e")] == ["outer"] * 4
    size = 4 * 25 * 4
    assert [plan.buffers[n].offset - plan.buffers["outer"].offset
            for n in ("a", "b", "inner", "e")] == [0, size, 0, 2 * size]
    buffers = list(plan.buffers.values())
    for k, p in enumerate(buffers):
        for q in buffers[k + 1:]:
            related = {p.inside, p.name} & {q.inside, q.name}
            apart = p.offset + p.size <= q.offset or q.offset + q.size <= p.offset
            assert apart or related or not (p.start <= q.end and q.start <= p.end), (p, q)
    value = rng.uniform(-2, 2, (1, 4, 5, 5)).astype("float32")
    for got, want in zip(tg.build(g)(x=value), _nested_outputs(value), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_exported_library_runs_without_the_concatenation_kernels(
        rng: np.random.Generator, tmp_path: Path) -> None:
    m = tg.build(_nested())
    assert [s.name for s in m.steps if "concatenate" in s.op] == ["first"]
    m.export_library(tmp_path / "nested.so")
    value = rng.uniform(-2, 2, (1, 4, 5, 5)).astype("float32")
    for got, want in zip(tg.load_module(tmp_path / "nested.so")(x=value),
                         _nested_outputs(value), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_symbolic_plans_keep_every_kernel() -> None:
    """The symbolic executors run every kernel, so their plans place nothing in place."""
    g = tg.Graph()
    x = g.input("x", (1, 4, 6, 6))
    g.output(g.concatenate([g.relu(x), g.exp(x)], axis=1))
    fused = fuse_ops(g)
    assert plan_memory(fused).in_place and not plan_memory(fused, {}).in_place


@pytest.mark.parametrize("target", TARGETS)
def test_blocked_batch_norm_matches_reference(target: str, rng: np.random.Generator) -> None:
    """A pre-activation batch norm on a blocked value stays blocked (a multiply and an add)."""
    g = tg.Graph()
    x = g.input("x", (1, 3, 7, 7))
    y = g.conv2d(x, g.constant(rng.uniform(-1, 1, (24, 3, 3, 3)).astype("float32")), padding=1)
    stats = [g.constant(rng.uniform(0.5, 1.5, 24).astype("float32")) for _ in range(4)]
    g.output(g.relu(g.batch_norm(y, *stats, epsilon=1e-3)), y)
    with tl.Target(target):
        labels = [op_label(n) for n in tg.optimize(g).ops]
    assert "multiply+add+relu+layout_transform" in labels
    assert not any("batch_norm" in label for label in labels)
    m = tg.build(g, target=target)
    value = rng.uniform(-1, 1, (1, 3, 7, 7)).astype("float32")
    for got, want in zip(m(x=value), run_reference(g, {"x": value})):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
