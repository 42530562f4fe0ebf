"""torch.compile(backend="tensorlang"): small models compiled and matched against eager PyTorch,
graph breaks, the eager fallback (one warning naming the op), the entry point, the options; and
model inputs given as PyTorch tensors, DLPack objects and array-interface objects."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import topi.graph as tg

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
from torch import nn

from topi.graph.torch_compile import CompiledGraph, TensorlangCompileWarning, backend

from compile_fixtures import builds, fresh_dynamo  # noqa: F401  (fixtures)

# build's note on fallback configs is not what these tests look at
pytestmark = pytest.mark.filterwarnings("ignore:.*fallback config", "ignore::FutureWarning")


def spy_compile(fn, **options) -> tuple[object, list[CompiledGraph]]:
    """`fn` compiled with the tensorlang backend, and the list of graphs Dynamo hands over."""
    graphs = []

    def spy(gm, example_inputs, **kw):
        graphs.append(backend(gm, example_inputs, **kw))
        return graphs[-1]

    return torch.compile(fn, backend=spy, options=options or None), graphs


def compiled_graphs(fn, *args, **options) -> tuple[list[CompiledGraph], object]:
    """`fn` compiled and called on `args` under no_grad: the graphs and the result."""
    fast, graphs = spy_compile(fn, **options)
    with torch.no_grad():
        return graphs, fast(*args)


def assert_compiled(fn, *args, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """`fn` compiled matches eager, and every graph Dynamo captured ran as a tensorlang Module."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", TensorlangCompileWarning)
        graphs, out = compiled_graphs(fn, *args)
    with torch.no_grad():
        want = fn(*args)
    torch.testing.assert_close(out, want, rtol=rtol, atol=atol)
    assert graphs and all(g.failure is None and g.built for g in graphs)


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
            nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


class Attention(nn.Module):
    """A pre-norm self-attention block with its MLP, as in a small transformer encoder."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


def test_conv_net_matches_eager():
    torch.manual_seed(0)
    model = ConvNet().eval()
    assert_compiled(model, torch.randn(2, 3, 16, 16))


def test_mlp_matches_eager_and_new_shapes_build_again():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 5), nn.Softmax(-1)).eval()
    assert_compiled(model, torch.randn(3, 12))
    # by name, through the entry point
    fast = torch.compile(model, backend="tensorlang")
    with torch.no_grad():
        x = torch.randn(2, 12)
        torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-5)
    # a new batch size: Dynamo recompiles with a symbolic dim, the backend builds per shape
    fast, graphs = spy_compile(model)
    with torch.no_grad():
        for batch in (1, 4, 4):
            x = torch.randn(batch, 12)
            torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-5)
    dynamic = graphs[-1]
    assert dynamic.ints and dynamic.built and dynamic.failure is None


def test_attention_block_matches_eager():
    torch.manual_seed(0)
    assert_compiled(Attention().eval(), torch.randn(2, 6, 32), atol=1e-4)


def test_graph_break_runs_the_branch_in_eager():
    def f(x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x) * 3
        if y.sum() > 0:  # data-dependent: Dynamo breaks the graph here
            return torch.relu(y) + 1
        return torch.sigmoid(y) - 1

    fast, graphs = spy_compile(f)
    with torch.no_grad():
        for sign in (1.0, -1.0):
            x = sign * (torch.rand(4, 5) + 0.1)
            torch.testing.assert_close(fast(x), f(x))
    # the graph up to the break and one per branch; both branches run as Modules
    assert len(graphs) == 3 and all(g.built for g in graphs[1:])


def test_unknown_op_falls_back_with_one_warning():
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.special.bessel_j0(x * 2) + 1

    x = torch.rand(3, 4)
    with pytest.warns(TensorlangCompileWarning) as record:
        graphs, out = compiled_graphs(f, x)
        graphs[0](x)  # later calls run eagerly without warning again
    torch.testing.assert_close(out, f(x))
    ours = [w for w in record if issubclass(w.category, TensorlangCompileWarning)]
    assert len(ours) == 1
    assert "bessel_j0" in str(ours[0].message)
    assert graphs[0].failure is not None and not graphs[0].built


def test_a_graph_the_backend_cannot_read_runs_eagerly_with_one_warning(monkeypatch):
    from topi.graph import torch_compile

    def unreadable(*args):
        raise RuntimeError("cannot read this graph")

    monkeypatch.setattr(torch_compile, "scalar_slots", unreadable)
    model = nn.Linear(4, 3).eval()
    x = torch.randn(2, 4)
    with pytest.warns(TensorlangCompileWarning, match="cannot read this graph"), \
            torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="tensorlang")(x), model(x))


def test_changed_weights_are_rebuilt():
    torch.manual_seed(0)
    model = nn.Linear(4, 3).eval()
    fast = torch.compile(model, backend="tensorlang")
    x = torch.randn(2, 4)
    with torch.no_grad():
        first = fast(x)
        model.weight.mul_(2)
        torch.testing.assert_close(fast(x), model(x))
    assert not torch.equal(first, model(x))


def test_gradients_are_pytorch_ones():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh())
    x = torch.randn(2, 4, requires_grad=True)
    fast = torch.compile(model, backend="tensorlang")
    out = fast(x)
    assert "Recompute" in type(out.grad_fn).__name__  # the forward ran compiled
    out.sum().backward()
    got = x.grad.clone(), model[0].weight.grad.clone()
    x.grad = None
    model.zero_grad()
    model(x).sum().backward()
    torch.testing.assert_close(got, (x.grad, model[0].weight.grad))


def test_outputs_are_not_overwritten_by_the_next_call():
    graphs, first = compiled_graphs(lambda x: x * 2 + 1, torch.ones(3))
    kept = first.clone()
    graphs[0](torch.zeros(3))
    torch.testing.assert_close(first, kept)


def test_options_reach_build(tmp_path):
    gm = torch.fx.symbolic_trace(nn.ReLU())
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        backend(gm, [torch.ones(2)], options={"log_file": str(tmp_path / "missing.jsonl")})
    with pytest.raises(TypeError, match="unknown option"):
        backend(gm, [torch.ones(2)], options={"mode": 1})
    with pytest.raises(TypeError, match="target must be a string"):
        backend(gm, [torch.ones(2)], options={"target": 3})
    log = tmp_path / "empty.jsonl"
    log.write_text("")
    graphs, out = compiled_graphs(torch.relu, torch.tensor([-1.0, 2.0]), log_file=str(log),
                                  target="llvm -mcpu=haswell")
    torch.testing.assert_close(out, torch.tensor([0.0, 2.0]))
    (built,) = graphs[0].built.values()
    assert "haswell" in str(built.module.target)


def test_entry_point_registers_the_backend_without_an_import():
    # a fresh process, where nothing imported topi (the string lookup itself runs in
    # test_mlp_matches_eager_and_new_shapes_build_again)
    code = ("import sys, torch._dynamo; assert 'tensorlang' in torch._dynamo.list_backends(); "
            "assert 'topi' not in sys.modules; print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


# Model inputs as users hold them


@pytest.fixture(scope="module")
def scale_module() -> tg.Module:
    g = tg.Graph()
    x = g.input("x", (2, 3), "float32")
    g.output(g.multiply(x, g.constant(np.float32(2), "two")))
    return tg.build(g)


class ArrayInterface:
    def __init__(self, array: np.ndarray) -> None:
        self.__array_interface__ = array.__array_interface__
        self.base = array


class DLPackOnly:
    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_module_takes_tensors_dlpack_and_array_interface(scale_module):
    x = np.arange(6, dtype="float32").reshape(2, 3)
    for value in (torch.from_numpy(x), torch.from_numpy(x.T.copy()).T.contiguous(),
                  torch.from_numpy(x.T.copy()).T, DLPackOnly(x), ArrayInterface(x)):
        (out,) = scale_module(x=value)
        np.testing.assert_array_equal(out, 2 * x)


def test_module_input_errors_name_the_input(scale_module):
    with pytest.raises(TypeError, match="input 'x' must have dtype float32, got float64"):
        scale_module(x=torch.zeros(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"input 'x' must have shape \(2, 3\), got \(3, 2\)"):
        scale_module(x=torch.zeros(3, 2))
    with pytest.raises(TypeError, match="input 'x' must be a numpy array or an object with "
                                        "DLPack or the array interface"):
        scale_module(x="not an array")
    with pytest.raises(TypeError, match="input 'x': cannot view Tensor"):
        scale_module(x=torch.zeros(2, 3, requires_grad=True))
    with pytest.raises(TypeError, match="input 'x' must have dtype float32, got int32"):
        scale_module(x=ArrayInterface(np.zeros((2, 3), "int32")))


def test_loaded_module_takes_tensors(scale_module, tmp_path):
    path = tmp_path / "scale.so"
    scale_module.export_library(str(path))
    loaded = tg.load_module(path)
    x = torch.arange(6, dtype=torch.float32).reshape(3, 2).T  # not contiguous
    (out,) = loaded(x=x)
    np.testing.assert_array_equal(out, 2 * x.numpy())


class _BrokenLayer(nn.Module):
    """A layer with a graph break inside: Dynamo calls the graph before the break once per
    layer, each time with that layer's weights."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.lin(x))
        torch._dynamo.graph_break()
        return x * 2


def test_a_graph_that_layers_share_gets_modules_per_layer(builds):
    torch.manual_seed(0)
    model = nn.Sequential(*[_BrokenLayer() for _ in range(6)]).eval()
    fast = torch.compile(model, backend="tensorlang")
    x = torch.randn(3, 8)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", TensorlangCompileWarning)
        for _ in range(2):
            torch.testing.assert_close(fast(x), model(x))
    # the graph before the break once per layer's weights, the one after it (no weights) once;
    # none again on the second call
    assert len(builds) == 6 + 1
