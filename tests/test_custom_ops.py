"""Custom ops: DSL kernels as PyTorch ops (eager, torch.compile, torch.export) and ONNX ops.

Each op is checked against plain PyTorch or numpy: eagerly on awkward shapes and several
dtypes, as a graph op fused with its neighbours under `torch.compile(backend="tensorlang")`,
opaque under inductor, through `torch.export` + `from_torch` (static and symbolic dims), and as
the kernel of a custom-domain ONNX node. Bad inputs raise errors that name the op and input.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import tensorlang as tl
import topi.graph as tg
from topi.graph.ops import OpPattern

torch = pytest.importorskip("torch", reason="custom ops register with torch.library")
onnx = pytest.importorskip("onnx", reason="the ONNX tests need the onnx extra")

EPS = 1e-6


@tg.custom_op("tl_test::rms_norm")
def rms_norm(x, w):
    """x * rsqrt(mean(x * x over the last axis) + eps) * w: the sum of squares is its own stage."""
    d = x.shape[-1]
    k = tl.reduce_axis((0, d), name="k")
    ss = tl.compute(x.shape[:-1], lambda *i: tl.sum(x[(*i, k)] * x[(*i, k)], axis=k), name="ss")
    return tl.compute(x.shape, lambda *i: x[i] * tl.rsqrt(ss[i[:-1]] / d + EPS) * w[i[-1]],
                      name="y")


def rms_norm_torch(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w


@tg.custom_op("tl_test::axpy")
def axpy(x, y):
    """3 * x + y, elementwise."""
    return tl.compute(x.shape, lambda *i: x[i] * 3 + y[i], name="axpy")


@tg.custom_op("tl_test::sum_diff", outputs=2)
def sum_diff(a, b):
    """(a + b, a - b) of two matrices."""
    return (tl.compute(a.shape, lambda i, j: a[i, j] + b[i, j], name="s"),
            tl.compute(a.shape, lambda i, j: a[i, j] - b[i, j], name="d"))


def _rows_split(outs):
    s = tl.create_schedule([t.op for t in outs])
    (y,) = outs
    s[y].parallel(y.op.axis[0])
    return s


@tg.custom_op("tl_test::scaled", schedule=_rows_split)
def scaled(x):
    """x * 0.5 under its author's schedule."""
    return tl.compute(x.shape, lambda i, j: x[i, j] * 0.5, name="scaled")


class Block(torch.nn.Module):
    """Elementwise neighbours around an RMSNorm: the scale before it and the tail after it fuse
    into its kernel."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(d) + 0.5)

    def forward(self, x):
        return torch.relu(rms_norm(x * 2.0, self.w) - 0.1)


def _block_torch(block, x):
    return torch.relu(rms_norm_torch(x * 2.0, block.w) - 0.1)


# -- eager -------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 1), (3, 7, 13), (2, 5, 17), (31,)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_eager_rms_norm_matches_torch(shape, dtype):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen, dtype=dtype)
    w = torch.randn(shape[-1], generator=gen, dtype=dtype)
    got = torch.ops.tl_test.rms_norm(x, w)
    assert got.dtype == dtype and got.shape == x.shape
    torch.testing.assert_close(got, rms_norm_torch(x, w), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rms_norm(x, w), got)  # the decorated function calls the op


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64, torch.int8,
                                   torch.int32, torch.int64])
@pytest.mark.parametrize("shape", [(1,), (5, 3), (2, 3, 7)])
def test_eager_elementwise_dtypes(dtype, shape):
    x = (torch.arange(math.prod(shape)) % 11 - 5).reshape(shape).to(dtype)
    y = (torch.arange(math.prod(shape)) % 7).reshape(shape).to(dtype)
    got = axpy(x, y)
    assert got.dtype == dtype
    torch.testing.assert_close(got, 3 * x + y)


def test_eager_on_numpy_arrays_and_several_outputs():
    a, b = np.random.rand(3, 5).astype("float32"), np.random.rand(3, 5).astype("float32")
    s, d = sum_diff(a, b)
    np.testing.assert_allclose(s, a + b, rtol=1e-6)
    np.testing.assert_allclose(d, a - b, rtol=1e-6)
    ts, td = torch.ops.tl_test.sum_diff(torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_allclose(ts.numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose(td.numpy(), a - b, rtol=1e-6)


def test_eager_writes_the_output_in_place_without_copying_inputs():
    x = torch.randn(4, 9)
    w = torch.randn(9)
    before = (x.clone(), w.clone())
    y = torch.ops.tl_test.rms_norm(x, w)
    assert y.data_ptr() not in (x.data_ptr(), w.data_ptr())
    torch.testing.assert_close((x, w), before)  # inputs untouched


def test_user_schedule_is_used_and_opaque():
    x = torch.randn(6, 11)
    torch.testing.assert_close(scaled(x), x * 0.5)
    g = tg.from_torch(_Lambda(lambda t: torch.relu(scaled(t))), (x,))
    (node,) = [n for n in g.ops if n.op.startswith("tl_test_scaled")]
    assert node.pattern is OpPattern.OPAQUE
    tasks = [t.name for t, _ in tg.extract_tasks(g)]
    assert not any("tl_test_scaled" in t for t in tasks), tasks  # its author's schedule
    out = tg.build(g)(**{g.inputs[0].name: x.numpy()})[0]
    np.testing.assert_allclose(out, torch.relu(x * 0.5).numpy(), rtol=1e-6)


@tg.custom_op("tl_test::scale_rows_grad", outputs=2)
def scale_rows_grad(x, w, g):
    """The gradients of x * w (w broadcast over the rows): g * w, and g * x summed over rows."""
    r = tl.reduce_axis((0, x.shape[0]), name="r")
    return (tl.compute(x.shape, lambda i, j: g[i, j] * w[j], name="dx"),
            tl.compute(w.shape, lambda j: tl.sum(g[r, j] * x[r, j], axis=r), name="dw"))


@tg.custom_op("tl_test::scale_rows", grad=scale_rows_grad)
def scale_rows(x, w):
    """x * w, w broadcast over the rows."""
    return tl.compute(x.shape, lambda i, j: x[i, j] * w[j], name="scaled_rows")


@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (3, 17)])
def test_backward_runs_the_gradient_kernel(shape):
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    w = torch.randn(shape[1], dtype=torch.float64, requires_grad=True)
    g = torch.randn(shape, dtype=torch.float64)
    torch.ops.tl_test.scale_rows(x, w).backward(g)
    expected = torch.autograd.grad((x * w), (x, w), g)
    torch.testing.assert_close((x.grad, w.grad), expected)
    assert torch.autograd.gradcheck(torch.ops.tl_test.scale_rows, (x.detach().requires_grad_(),
                                                                   w.detach().requires_grad_()))


def test_backward_without_a_gradient_raises_naming_the_op():
    x = torch.randn(3, 4, requires_grad=True)
    y = torch.ops.tl_test.rms_norm(x, torch.randn(4))
    with pytest.raises(RuntimeError, match=r"tl_test::rms_norm has no gradient"):
        y.sum().backward()
    with pytest.raises(TypeError, match="grad must be a custom_op of 3 tensors"):
        tg.custom_op("tl_test::bad_grad", grad=axpy)(lambda x, y: x)


def _template():
    """A template defined in a function: it reaches the measurement workers by value (one at
    module level would make them import this test module, torch and all, within the build
    timeout)."""

    def split_columns(cfg, outs):
        (y,) = outs
        s = tl.create_schedule(y.op)
        _, j = y.op.axis
        cfg.define_split("tile_j", j, num_outputs=2)
        cfg.define_knob("vectorize", [0, 1])
        _, inner = cfg["tile_j"].apply(s, y, j)
        if cfg["vectorize"].val:
            s[y].vectorize(inner)
        return s

    return split_columns


_split_columns = _template()


@tg.custom_op("tl_test::shifted", template=_split_columns)
def shifted(x):
    """x + 1 under a template of its author."""
    return tl.compute(x.shape, lambda i, j: x[i, j] + 1.0, name="shifted")


def test_template_op_is_tuned_as_its_template(tmp_path):
    x = torch.randn(6, 37)
    torch.testing.assert_close(shifted(x), x + 1.0)  # eager: the fallback config
    g = tg.from_torch(_Lambda(lambda t: torch.relu(shifted(t))), (x,))
    names = [t.name for t, _ in tg.extract_tasks(g)]
    assert "custom/tl_test::shifted" in names, names
    log = tmp_path / "template.jsonl"
    tg.tune(g, trials=6, log_file=str(log), progress=False)
    records = [r for r in log.read_text().splitlines() if "custom/tl_test::shifted" in r]
    assert records and all('"error_no":0' in r for r in records)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # tuned: no fallback warning
        module = tg.build(g, log_file=str(log))
    np.testing.assert_allclose(module(**{g.inputs[0].name: x.numpy()})[0],
                               torch.relu(x + 1.0).numpy(), rtol=1e-6)


def test_template_needs_one_output_and_no_schedule():
    with pytest.raises(TypeError, match="template must be a function"):
        tg.custom_op("tl_test::bad_template", template=_split_columns,
                     schedule=_rows_split)(lambda x: x)


# -- bad inputs ------------------------------------------------------------------------------


def test_bad_inputs_raise_clear_errors():
    x, w = torch.randn(4, 9), torch.randn(9)
    with pytest.raises(ValueError, match=r"tl_test::rms_norm.*'x'.*not contiguous"):
        torch.ops.tl_test.rms_norm(x.t(), torch.randn(4))
    with pytest.raises(ValueError, match=r"reads 'w'.*sizes disagree"):
        torch.ops.tl_test.rms_norm(x, torch.randn(5))
    with pytest.raises(TypeError, match=r"'w'\) has the dtype complex64"):
        torch.ops.tl_test.rms_norm(x, w.to(torch.complex64))
    with pytest.raises(TypeError, match=r"'x'\) has the dtype bfloat16"):
        torch.ops.tl_test.rms_norm(x.to(torch.bfloat16), w)
    with pytest.raises(TypeError, match=r"tl_test::sum_diff\(a: float32\[9\].*2 index"):
        sum_diff(w, w)  # rank 1 where the compute indexes two axes
    with pytest.raises(TypeError, match=r"takes 2 tensor\(s\) \(x, w\), got 1"):
        rms_norm(x.numpy())
    from topi.graph.custom.eager import run

    with pytest.raises(ValueError, match=r"'x'\) is on meta"):
        run(rms_norm.op, [x.to("meta"), w], {})


def test_bad_definitions_raise():
    with pytest.raises(ValueError, match="namespace::name"):
        tg.custom_op("no_namespace")(lambda x: x)
    with pytest.raises(ValueError, match="already registered"):
        tg.custom_op("tl_test::axpy")(lambda x, y: x)
    with pytest.raises(TypeError, match="no tensor inputs"):
        tg.custom_op("tl_test::nothing")(lambda: None)


# -- torch.compile, torch.export ------------------------------------------------------------------


class _Lambda(torch.nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def test_torch_compile_tensorlang_fuses_and_matches():
    block = Block(13).eval()
    x = torch.randn(3, 7, 13)
    g = tg.from_torch(block, (x,))
    fused = [n for n in tg.optimize(g).ops if "tl_test_rms_norm" in _label(n)]
    assert len(fused) == 1 and _label(fused[0]).count("+") >= 2, _label(fused[0])
    assert any("tl_test_rms_norm" in t.name for t, _ in tg.extract_tasks(g))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to eager PyTorch, no other warning
        compiled = torch.compile(block, backend="tensorlang")
        with torch.no_grad():
            got = compiled(x)
    torch.testing.assert_close(got, _block_torch(block, x).detach(), rtol=1e-5, atol=1e-5)


def _label(node) -> str:
    from topi.graph.graph import op_label

    return op_label(node)


def test_torch_compile_inductor_runs_the_op_opaque():
    block = Block(17).eval()
    x = torch.randn(5, 17)
    with torch.no_grad():
        got = torch.compile(block, backend="inductor")(x)
    torch.testing.assert_close(got, _block_torch(block, x).detach(), rtol=1e-5, atol=1e-5)


@tg.custom_op("tl_test::add_channel_bias")
def add_channel_bias(x, b):
    """x + b per channel, written for NCHW only."""
    return tl.compute(x.shape, lambda n, c, h, w: x[n, c, h, w] + b[c, 0, 0], name="bias")


@tg.custom_op("tl_test::swish", pattern=OpPattern.ELEMWISE)
def swish(x):
    """x * sigmoid(x), rank-generic: declared ELEMWISE, it may join a conv's output stage."""
    return tl.compute(x.shape, lambda *i: x[i] * tl.sigmoid(x[i]), name="swish")


class ConvHead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bias = torch.nn.Parameter(torch.randn(8, 1, 1))
        self.linear = torch.nn.Linear(13, 7)

    def forward(self, x, y):
        return (swish(add_channel_bias(self.conv(x), self.bias)), swish(self.conv(x) * 2.0),
                swish(self.linear(y)))

    def reference(self, x, y):
        silu = torch.nn.functional.silu
        return silu(self.conv(x) + self.bias), silu(self.conv(x) * 2.0), silu(self.linear(y))


def test_custom_ops_beside_blocked_convolutions():
    """A compute written for one rank is INJECTIVE: the layout pass gives it NCHW, never the
    blocked NCHW[x]c value; a rank-generic one declared ELEMWISE fuses into conv and dense."""
    head = ConvHead().eval()
    x, y = torch.randn(2, 3, 9, 11), torch.randn(5, 13)
    g = tg.from_torch(head, (x, y))
    labels = [_label(n) for n in tg.optimize(g).ops]
    assert tg.get_op("tl_test_add_channel_bias").pattern is OpPattern.INJECTIVE
    assert any(label.startswith("conv2d_NCHWc") and "tl_test_swish" in label for label in labels)
    assert any(label.startswith("dense") and "tl_test_swish" in label for label in labels)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*fallback")
        out = tg.build(g)(x=x.numpy(), y=y.numpy())
    for got, expected in zip(out, head.reference(x, y)):
        np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_export_and_from_torch_with_several_outputs():
    module = _Lambda(lambda a, b: torch.tanh(sum_diff(a, b)[0]) * sum_diff(a, b)[1])
    a, b = torch.randn(4, 6), torch.randn(4, 6)
    program = torch.export.export(module, (a, b))
    g = tg.from_torch(program, (a, b))
    out = tg.build(g)(xs_0=a.numpy(), xs_1=b.numpy())[0]
    np.testing.assert_allclose(out, (torch.tanh(a + b) * (a - b)).numpy(), rtol=1e-5, atol=1e-6)


def test_symbolic_rows_through_export_and_one_module():
    block = Block(13).eval()
    rows = torch.export.Dim("rows", min=1, max=64)
    x = torch.randn(5, 13)
    g = tg.from_torch(block, (x,), dynamic_shapes=({0: rows},))
    assert any(n.symbolic for n in g.ops)
    module = tg.build(g)
    for n in (1, 5, 37):
        x = torch.randn(n, 13)
        got = module(x=x.numpy())[0]
        np.testing.assert_allclose(got, _block_torch(block, x).detach().numpy(), rtol=1e-5,
                                   atol=1e-5)


def test_torch_compile_tensorlang_with_dynamic_sizes():
    """Dynamo's symbolic sizes reach the compute (a row length shared by x and w, unchecked
    where symbolic), and one module serves every row count."""
    block = Block(13).eval()
    compiled = torch.compile(block, backend="tensorlang", dynamic=True)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", category=UserWarning)  # no fallback to eager PyTorch
        for n in (3, 8, 21):
            x = torch.randn(n, 13)
            torch.testing.assert_close(compiled(x), _block_torch(block, x), rtol=1e-5,
                                       atol=1e-5)


def test_fake_kernel_keeps_dynamic_sizes_symbolic():
    fn = torch.compile(lambda x, w: rms_norm(x, w) + 1.0, backend="eager", dynamic=True)
    for n in (3, 8, 11):
        x, w = torch.randn(n, 2 * n + 1), torch.randn(2 * n + 1)
        torch.testing.assert_close(fn(x, w), rms_norm_torch(x, w) + 1.0, rtol=1e-5, atol=1e-5)


# -- tuning ---------------------------------------------------------------------------------------


def test_tune_and_build_use_the_tuned_kernel(tmp_path):
    block = Block(24).eval()
    x = torch.randn(16, 24)
    g = tg.from_torch(block, (x,))
    log = tmp_path / "custom.jsonl"
    tg.tune(g, trials=4, log_file=str(log), progress=False)
    lines = log.read_text().splitlines()
    assert lines and all("tl_test_rms_norm" in line for line in lines)
    assert all('"error_no":0' in line for line in lines)  # the workers rebuilt the op
    module = tg.build(g, log_file=str(log))
    np.testing.assert_allclose(module(x=x.numpy())[0], _block_torch(block, x).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


# -- ONNX ------------------------------------------------------------------------------------


def _gelu_model(alpha: float):
    from onnx import TensorProto, helper, numpy_helper

    bias = numpy_helper.from_array(np.linspace(-1, 1, 7).astype("float32"), "b")
    nodes = [helper.make_node("FusedGelu", ["x", "b"], ["g"], domain="my.domain", alpha=alpha),
             helper.make_node("Relu", ["g"], ["y"])]
    graph = helper.make_graph(
        nodes, "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 7])], initializer=[bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("my.domain", 1)])


def fused_gelu(x, b, alpha=1.0):
    """alpha * gelu(x + b), with ONNX's attribute as a keyword argument."""
    def v(i, j):
        return x[i, j] + b[j]

    return tl.compute(x.shape, lambda i, j: 0.5 * v(i, j) * (1.0 + tl.erf(v(i, j) * math.sqrt(0.5)))
                      * alpha, name="gelu")


def _gelu_numpy(x, b, alpha):
    from scipy.special import erf

    v = x + b
    return np.maximum(0.5 * v * (1 + erf(v / np.sqrt(2))) * alpha, 0)


def test_onnx_custom_node_against_numpy(tmp_path):
    pytest.importorskip("scipy", reason="the reference uses scipy's erf")
    path = tmp_path / "gelu.onnx"
    onnx.save(_gelu_model(2.0), path)
    g = tg.from_onnx(path, custom_ops={("my.domain", "FusedGelu"): fused_gelu})
    x = np.random.default_rng(0).standard_normal((5, 7)).astype("float32")
    b = np.linspace(-1, 1, 7).astype("float32")
    np.testing.assert_allclose(tg.build(g)(x=x)[0], _gelu_numpy(x, b, 2.0), rtol=1e-5,
                               atol=1e-6)
    again = tg.from_onnx(path, custom_ops={("my.domain", "FusedGelu"): fused_gelu})
    assert [n.op for n in again.ops] == [n.op for n in g.ops]  # one graph op per function


def test_onnx_custom_node_to_a_decorated_op():
    from onnx import TensorProto, helper

    node = helper.make_node("Axpy", ["x", "y"], ["z"], domain="my.domain")
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 4]) for n in "xyz"]
    model = helper.make_model(helper.make_graph([node], "axpy", info[:2], info[2:]),
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid("my.domain", 1)])
    g = tg.from_onnx(model, custom_ops={("my.domain", "Axpy"): axpy})
    x, y = np.random.rand(3, 4).astype("float32"), np.random.rand(3, 4).astype("float32")
    np.testing.assert_allclose(tg.build(g)(x=x, y=y)[0], 3 * x + y, rtol=1e-6)


def test_unmapped_custom_node_is_reported_with_its_domain():
    from topi.graph.importer import UnsupportedError

    with pytest.raises(UnsupportedError, match=r"my\.domain:FusedGelu \(1 node.*custom_ops"):
        tg.from_onnx(_gelu_model(1.0))
    with pytest.raises(TypeError, match="custom_ops keys"):
        tg.from_onnx(_gelu_model(1.0), custom_ops={"FusedGelu": fused_gelu})
