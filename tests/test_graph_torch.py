"""from_torch: the ATen ops the frontend translates (after the decomposition to core ATen), each
group in a small module against PyTorch's own output (built and run with the fallback configs),
attention with every kind of mask, and errors for what is not supported."""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

import topi.graph as tg

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
from torch import nn

from topi.graph.importer import UnsupportedError
from topi.graph.ops import registered_ops
from topi.symbolic import dim_var

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


class Lambda(nn.Module):
    def __init__(self, fn, *params: torch.Tensor) -> None:
        super().__init__()
        self.fn = fn
        self.params = nn.ParameterList([nn.Parameter(p, requires_grad=False) for p in params])

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.fn(*xs, *self.params)


def needs(*ops: str) -> None:
    """Skip a test whose graph ops are not registered (yet)."""
    missing = sorted(set(ops) - set(registered_ops()))
    if missing:
        pytest.skip(f"graph ops {missing} are not registered")


def check(module: nn.Module, *shapes: tuple[int, ...] | torch.Tensor, rtol: float = 1e-5,
          atol: float = 1e-5) -> tg.Graph:
    """`module` imported, built and run against PyTorch on inputs of `shapes` (uniform in
    [-2, 2)) or on the tensors given."""
    gen = torch.Generator().manual_seed(0)
    inputs = tuple(s if isinstance(s, torch.Tensor) else torch.rand(s, generator=gen) * 4 - 2
                   for s in shapes)
    module = module.eval()
    with torch.no_grad():
        expected = module(*inputs)
    g = tg.from_torch(module, inputs)
    feeds = {n.name: t.numpy() for n, t in zip(g.inputs, inputs)}
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = tg.build(g)(**feeds)
    for a, e in zip(actual, expected, strict=True):
        assert a.dtype == e.numpy().dtype
        np.testing.assert_allclose(a, e.numpy(), rtol=rtol, atol=atol)
    return g


@pytest.mark.parametrize("conv", [
    lambda: nn.Conv2d(3, 5, 3, stride=2, padding=1),
    lambda: nn.Conv2d(3, 4, (2, 3), padding="same", dilation=(2, 1), bias=False),
    lambda: nn.Conv2d(3, 6, 3, groups=3, padding="valid"),
    lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
    lambda: nn.ConvTranspose2d(3, 6, (3, 2), stride=(1, 2), groups=3, dilation=(2, 1)),
])
def test_convolutions(conv):
    torch.manual_seed(0)
    check(conv(), (1, 3, 7, 6))


def test_batch_norm_and_linear():
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(3)
    bn.running_mean.uniform_(-0.5, 0.5)
    bn.running_var.uniform_(0.5, 2)
    check(nn.Sequential(bn, nn.Flatten(), nn.Linear(3 * 25, 7)), (2, 3, 5, 5))
    check(nn.Sequential(nn.Linear(5, 3), nn.GELU(approximate="tanh"), nn.Linear(3, 2)),
          (2, 4, 5))


@pytest.mark.parametrize("act", [nn.ReLU(), nn.ReLU6(), nn.Hardswish(), nn.Hardsigmoid(),
                                 nn.Sigmoid(), nn.Tanh(), nn.GELU(), nn.LeakyReLU(0.2),
                                 nn.Hardtanh(-0.5, 1.5)])
def test_activations(act):
    check(act, (3, 17))


@pytest.mark.parametrize("fn", [
    lambda x, y: x + y * 2, lambda x, y: x - y, lambda x, y: x / (y.abs() + 1),
    lambda x, y: torch.maximum(x, y), lambda x, y: (x.abs() + 0.5) ** 1.5 + torch.erf(y),
    lambda x, y: torch.clamp(x, min=-0.5) * torch.rsqrt(y.abs() + 1),
    lambda x, y: torch.exp(x) - torch.sqrt(y.abs()) + torch.neg(x) - 1.0,
])
def test_arithmetic(fn):
    check(Lambda(fn), (2, 3, 5), (3, 1))


@pytest.mark.parametrize("pool", [
    nn.MaxPool2d(3, 2, 1), nn.MaxPool2d(2, ceil_mode=True), nn.AvgPool2d(3, 2, 1),
    nn.AvgPool2d(3, 2, 1, count_include_pad=False), nn.AdaptiveAvgPool2d((3, 2)),
    nn.AdaptiveAvgPool2d(1), nn.AdaptiveMaxPool2d((2, 3)),
    nn.AvgPool2d(5, 3, 2, ceil_mode=True, count_include_pad=False),
    # ceil_mode's last window would start in the bottom padding: PyTorch drops it
    nn.MaxPool2d(2, 3, 1, ceil_mode=True), nn.AvgPool2d(2, 3, 1, ceil_mode=True),
    nn.AvgPool2d(2560, ceil_mode=True),  # HF EfficientNet's head: a window past the whole map
])
def test_pooling(pool):
    check(pool, (1, 3, 7, 9))
    check(pool, (2, 2, 4, 4))


@pytest.mark.parametrize("layer, shape", [
    (nn.Conv3d(4, 6, 3, padding=1), (1, 4, 5, 6, 7)),
    (nn.Conv3d(4, 6, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0), bias=False), (2, 4, 6, 5, 5)),
    (nn.Conv3d(4, 8, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), groups=2), (1, 4, 3, 9, 9)),
    (nn.Conv3d(3, 5, (2, 3, 3), stride=(2, 2, 1), dilation=(2, 1, 2)), (1, 3, 7, 8, 9)),
    (nn.Conv3d(4, 4, 3, padding=1, groups=4), (1, 4, 5, 5, 5)),  # depthwise
    (nn.MaxPool3d(3, 2, 1), (1, 2, 7, 9, 8)),
    (nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1), ceil_mode=True), (2, 3, 4, 9, 9)),
    (nn.MaxPool3d(2, 3, 1, ceil_mode=True), (1, 2, 4, 4, 4)),
    (nn.AvgPool3d((2, 7, 7), 1), (1, 4, 3, 7, 8)),
    (nn.AvgPool3d(3, 2, 1, count_include_pad=False), (1, 2, 7, 8, 9)),
    (nn.AvgPool3d(3, 2, 1, ceil_mode=True), (1, 2, 6, 6, 6)),
])
def test_volumes(layer, shape):
    """3-D convolutions (one 2-D convolution per depth tap, frames folded into the batch) and
    3-D pooling, strides, padding and dilation on every axis."""
    check(layer, shape)


@pytest.mark.parametrize("fn", [
    lambda x: x.mean(dim=(1, 2), keepdim=True), lambda x: x.sum(-1), lambda x: x.amax(0),
    lambda x: x.amin(dim=(0, 2)), lambda x: torch.softmax(x, 1), lambda x: torch.log_softmax(x, -1),
])
def test_reductions_and_softmax(fn):
    check(Lambda(fn), (2, 5, 7), rtol=1e-4)


def test_layer_norm():
    torch.manual_seed(0)
    norm = nn.LayerNorm((3, 7), eps=1e-3)
    nn.init.uniform_(norm.weight)
    check(norm, (2, 3, 7), rtol=1e-4)


@pytest.mark.parametrize("fn", [
    lambda x: x.reshape(8, -1).t(), lambda x: torch.flatten(x, 1), lambda x: x.permute(2, 0, 1),
    lambda x: x.transpose(0, -1).unsqueeze(1), lambda x: x.unsqueeze(0).squeeze(0),
    lambda x: torch.cat([x, x * 2], dim=1), lambda x: torch.cat([torch.zeros(0), x], dim=2),
    lambda x: torch.cat([x, torch.zeros(0), x - 1], dim=-1), lambda x: x[:, 1:4:2, -3:],
    lambda x: x[1] + x.select(2, -1).sum(), lambda x: torch.split(x, [1, 3], dim=1)[1],
    lambda x: x.chunk(2, dim=2)[0],
    lambda x: torch.index_select(x, 1, torch.tensor([3, 0, 0])),
    lambda x: torch.matmul(x, x.transpose(1, 2)), lambda x: torch.bmm(x, x.transpose(1, 2)),
])
def test_data_movement_and_matmul(fn):
    check(Lambda(fn), (2, 4, 6))


def test_weights_and_embedding():
    torch.manual_seed(0)
    table = torch.rand(11, 4)
    ids = torch.tensor([[3, 10, 0]])
    g = check(Lambda(lambda x, w: x @ w + nn.functional.embedding(ids, table).sum(),
                     torch.rand(6, 3)), (2, 4, 6))
    assert any(n.op == "dense" for n in g.ops)  # a matmul with a weight is a dense


def test_bfloat16_weights_fold_as_pytorch_rounds_them():
    """bfloat16 parameters and buffers (numpy has no bfloat16) read as the same bits, with
    arithmetic on them rounded to bfloat16 as PyTorch's is: sqrt(37) and its triple do not fit
    bfloat16's 8 bits of mantissa."""
    pytest.importorskip("ml_dtypes", reason="the bf16 extra is not installed")
    module = Lambda(lambda x, w, s: x * s.float() + (w * 3).to(x.dtype),
                    torch.rand(5, 7).to(torch.bfloat16),
                    torch.tensor(37.0 ** 0.5, dtype=torch.bfloat16))
    g = check(module, (2, 5, 7))
    assert sorted({n.op for n in g.ops}) == ["add", "multiply"]


def test_from_torch_of_a_zoo_block_is_the_same_graph_as_from_onnx():
    """Both frontends give the same convolutions for a residual block (PyTorch's ONNX exporter
    folds the batch norms into them; torch.export keeps them for the graph passes to fold)."""
    onnx = pytest.importorskip("onnx")  # noqa: F841
    from topi.graph import zoo

    block = zoo.BasicBlock(4, 8, 2).eval()
    x = torch.rand(1, 4, 9, 9)
    g_torch = tg.from_torch(block, (x,))
    model = zoo.ZooModel("block", block, {"data": (1, 4, 9, 9)})
    g_onnx = tg.from_onnx(model.onnx())
    convs = [[(n.inputs[1].shape, dict(n.attrs)) for n in g.ops if n.op == "conv2d"]
             for g in (g_torch, g_onnx)]
    assert len(convs[0]) == 3 and sorted(map(str, convs[0])) == sorted(map(str, convs[1]))
    assert g_torch.node("body_0_weight").shape == (8, 4, 3, 3)  # weights keep their names


def test_errors():
    with pytest.raises(TypeError, match="example_inputs must be a tuple of tensors"):
        tg.from_torch(nn.ReLU(), torch.rand(3))
    with pytest.raises(TypeError, match="nn.Module, a GraphModule or an ExportedProgram"):
        tg.from_torch("model", (torch.rand(3),))
    with pytest.raises(UnsupportedError, match=r"output 1 of aten.max_pool2d_with_indices"):
        pool = nn.MaxPool2d(2, return_indices=True)
        tg.from_torch(Lambda(lambda x: pool(x)[1].float()), (torch.rand(1, 1, 4, 4),))


def test_symbolic_dims_named_after_the_dims():
    """Dims stay symbolic (the model's own symbol names when no Dims are given) and their max
    becomes the graph's bounds."""
    n = torch.export.Dim("n", max=9)
    g = tg.from_torch(nn.ReLU(), (torch.rand(3, 4),), dynamic_shapes=({0: n},))
    assert g.inputs[0].shape == (dim_var("n"), 4) and g.bounds == {"n": (1, 9)}
    program = torch.export.export(nn.ReLU(), (torch.rand(3, 4),), dynamic_shapes=({0: n},))
    g = tg.from_torch(program, ())
    assert g.inputs[0].symbolic and g.inputs[0].shape[0].name != "n"
    x = np.random.default_rng(0).standard_normal((5, 4)).astype("float32")
    (out,) = tg.build(g)(input=x)
    np.testing.assert_array_equal(out, np.maximum(x, 0))


def test_every_unsupported_op_is_reported_at_once():
    def fn(x):
        top = torch.cummax(x, 1).values
        return torch.logcumsumexp(x, 1).sum() + torch.logcumsumexp(top * 2, 1).sum()

    with pytest.raises(UnsupportedError) as info:
        tg.from_torch(Lambda(fn), (torch.rand(3, 5),))
    message = str(info.value)
    assert "2 unsupported ATen op(s)" in message
    assert "aten.logcumsumexp.default: 2 (first node 'logcumsumexp')" in message
    assert "aten.cummax.default: 1 (first node 'cummax')" in message


INTS = torch.tensor([[-7, 3, 0, 5], [2, -1, 6, -4], [9, 4, -2, 1]])


@pytest.mark.parametrize("fn", [
    lambda x: x * 0.5 + x / 3, lambda x: x // 2 + torch.div(x, -3, rounding_mode="trunc"),
    lambda x: torch.remainder(x, 3) + torch.fmod(x, -3), lambda x: x.float() / 4,
])
def test_integer_arithmetic_promotes_as_pytorch(fn):
    needs("mod", "fmod", "floor_divide", "trunc_divide")
    check(Lambda(fn), INTS)


@pytest.mark.parametrize("fn", [
    lambda x, y: torch.where(x > y, x, y * 2), lambda x, y: ((x >= 0) & ~(y < 0.5)).float(),
    lambda x, y: ((x == x.round()) | (x != y)).float() + (x <= 1).float(),
    lambda x, y: torch.where(x < 0, 0.0, x) + (x > 0).any(dim=1, keepdim=True).float(),
    lambda x, y: x.masked_fill(y > 0, -1.0) + torch.remainder(x, 0.7) + torch.fmod(x, 0.7),
])
def test_comparisons_logic_and_where(fn):
    needs("greater", "greater_equal", "less", "less_equal", "equal", "not_equal", "where",
          "logical_and", "logical_or", "logical_not", "any", "mod", "fmod", "round")
    check(Lambda(fn), (3, 5, 7), (5, 1))


def test_lcm_and_gcd_of_integers_known_now():
    """Reformer's chunk length, numpy's lcm of two configuration values, folds to a constant."""
    sizes = torch.tensor([4, 6, 9])

    def fn(x):
        return x * torch.lcm(sizes, torch.tensor(6)) + torch.gcd(sizes, torch.tensor([8, 4, 3]))

    g = check(Lambda(fn), (2, 3))
    assert sorted({n.op for n in g.ops}) == ["add", "multiply"]


def test_lcm_of_tensors_computed_at_run_time_is_refused():
    with pytest.raises(UnsupportedError, match="computed at run time"):
        tg.from_torch(Lambda(lambda i: torch.lcm(i, i + 1)), (torch.tensor([2, 3]),))


def test_one_hot_of_classes_computed_at_run_time():
    """one_hot decomposes into a comparison with arange after two value checks (_assert_async)
    of its classes, which a run cannot raise; a check of values known now fails at import."""
    classes = torch.tensor([[4, 0, 2], [1, 1, 3]])
    check(Lambda(lambda x, i: x * nn.functional.one_hot(i, 5)), (2, 3, 5), classes)
    failing = Lambda(lambda x: torch.ops.aten._assert_async.msg(
        torch.tensor([True, False]).all(), "classes out of range") or x + 1)
    with pytest.raises(ValueError, match="classes out of range"):
        tg.from_torch(failing, (torch.rand(3),))


def test_values_made_at_import_fold_away():
    """arange, full, comparisons and where on them (masks, position ids) become constants."""
    needs("greater_equal", "where", "equal", "cumsum", "not_equal")

    def fn(x):
        n = x.shape[-1]
        causal = torch.arange(n)[:, None] >= torch.arange(0, 2 * n, 2)[None, :] // 2
        bias = torch.where(causal, 0.0, torch.full((n, n), -1e4))
        positions = torch.cumsum(torch.ones(n, dtype=torch.long).ne(0), 0) - 1
        scale = torch.arange(0.5, n / 2 + 0.5, 0.5)
        return (x + bias).softmax(-1) * positions.float() * scale + torch.scalar_tensor(1.5)

    g = check(Lambda(fn), (2, 6, 6))
    assert sorted({n.op for n in g.ops}) == ["add", "multiply", "softmax"]

def test_layers_masking_with_their_own_fill_values_share_one_folded_mask():
    """T5's layers each build `where(causal, bias, scalar_tensor(min))` from a scalar of their
    own: the folded masks are one constant, not one per layer (memory that grew with depth)."""

    def fn(x):
        n = x.shape[-1]
        causal = torch.arange(n)[:, None] >= torch.arange(n)[None, :]
        bias = torch.arange(n * n, dtype=torch.float32).reshape(n, n) / (n * n)
        for _ in range(3):
            x = (x + torch.where(causal, bias, torch.scalar_tensor(-1e4))).softmax(-1)
        return x

    g = check(Lambda(fn), (2, 7, 7))
    masks = [n for n in g.nodes if n.op == "constant" and n.shape[-2:] == (7, 7)]
    assert len(masks) == 1, [n.name for n in masks]


def test_layers_sharing_a_mask_with_empty_rows_share_one_folded_mask():
    """A padded batch's mask hides every key from some queries; the layers that share it share
    one mask made safe for those rows, not one per layer."""
    mask = torch.ones(2, 1, 7, 7, dtype=torch.bool).tril()
    mask[1, :, :2] = False

    def fn(x):
        for _ in range(3):
            x = torch.nn.functional.scaled_dot_product_attention(x, x, x, attn_mask=mask)
        return x

    g = check(Lambda(fn), (2, 2, 7, 7))
    masks = [n for n in g.nodes if n.op == "constant" and n.shape[-2:] == (7, 7)]
    assert len(masks) == 1, [n.name for n in masks]


@pytest.mark.parametrize("fn", [
    lambda x: torch.nn.functional.pad(x, (1, 2, 0, 3), value=0.5),
    lambda x: torch.nn.functional.pad(x, (-1, 2, 1, -2)),
    lambda x: x.expand(2, 4, 3, 5) + x.repeat(1, 2, 1)[:, 1:4],
    lambda x: torch.as_strided(x, (2, 3), (1, 4), 2),
    lambda x: torch.tril(x, -1) + torch.triu(x, 2),
])
def test_padding_broadcasting_and_views(fn):
    needs("broadcast_to", "tile", "trilu")
    check(Lambda(fn), (4, 3, 5))


@pytest.mark.parametrize("fn", [
    nn.GroupNorm(3, 6), nn.InstanceNorm2d(6, affine=True), nn.InstanceNorm2d(6),
    lambda x: torch.flip(x, [1, 3]) + torch.roll(x, (1, -2), (2, 3)),
    lambda x: torch.stack([x, -x], 2).sum(2) + x.clamp(min=x[:, :1], max=torch.tensor(0.5)),
    lambda x: nn.functional.interpolate(x, size=(7, 5), mode="nearest-exact"),
])
def test_norms_flips_and_rolls(fn):
    needs("group_norm", "take")
    torch.manual_seed(0)
    module = fn if isinstance(fn, nn.Module) else Lambda(fn)
    for p in module.parameters():
        nn.init.uniform_(p, 0.5, 1.5)
    check(module, (2, 6, 4, 5), rtol=1e-4, atol=1e-5)


def _overlapping_chunks(x: torch.Tensor) -> torch.Tensor:
    """Longformer's chunking: a head-major view of (sequence, heads, width) rows, which is not
    row-major in memory, cut into chunks of 4 rows overlapping by 2 with as_strided."""
    heads = x.transpose(0, 1)  # (2, 8, 3): strides (3, 6, 1)
    chunks = heads.reshape(2, 2, 4, 3)
    stride = list(chunks.stride())
    stride[1] //= 2
    return torch.as_strided(chunks, (2, 3, 4, 3), stride) * 2


@pytest.mark.parametrize("fn", [
    _overlapping_chunks,
    lambda x: torch.as_strided(x.transpose(1, 2)[:, 1:], (4, 2, 2), (12, 3, 1)) + 1,
    lambda x: torch.as_strided(x[1:, 1], (3, 2), (6, 2)) - 1,  # at the slice's own offset
    lambda x: torch.as_strided(x.permute(1, 0, 2), (8, 2, 3), (3, 24, 1)) * 3,  # x's own order
])
def test_as_strided_reads_memory_as_pytorch_lays_it_out(fn):
    """as_strided reads the memory the traced input views: its strides and storage offset."""
    needs("take")
    check(Lambda(fn), (8, 2, 3))


def test_as_strided_outside_its_input_is_refused():
    module = Lambda(lambda x: torch.as_strided(x[:, :1], (4, 3), (3, 1)) * 2)
    with pytest.raises(UnsupportedError, match="reads memory outside its input"):
        tg.from_torch(module, (torch.rand(4, 3),))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_padding_modes(mode):
    check(Lambda(lambda x: torch.nn.functional.pad(x, (2, 1, 1, 2), mode=mode)), (1, 2, 4, 5))


@pytest.mark.parametrize("fn", [
    lambda x: x[torch.tensor([2, 0, -1])],
    lambda x: x[:, torch.tensor([[1, 2], [0, 0]]), torch.tensor([4, -1])],
    lambda x: x[torch.tensor([0, 3]), :, torch.tensor([1, 2])],
    lambda x: torch.gather(x, 2, torch.tensor([[[0, 4, 2]] * 3] * 4)),
    lambda x: torch.cumsum(x, 1) + torch.cumsum(x > 0, -1),
])
def test_indexing_gathers_and_scans(fn):
    needs("gather_elements", "cumsum", "where", "less", "greater")
    check(Lambda(fn), (4, 3, 5))


def test_index_with_tensor_computed_at_run_time():
    needs("where", "less")
    ids = torch.tensor([[3, 0], [-1, 1]])
    module = Lambda(lambda x, i: x[i, i] + x[:, i].sum())
    check(module, torch.rand(4, 4), ids)


@pytest.mark.parametrize("fn", [
    lambda x, y: torch.slice_scatter(x, y, 1, 1, 3),
    lambda x, y: torch.slice_scatter(x, y, 1, 0, 4, 2),
    lambda x, y: torch.select_scatter(x, y[:, 0], 1, -1),
    lambda x, y: x.clone().copy_(y[:, :1]) + x,
])
def test_scatters_and_copies(fn):
    needs("broadcast_to")
    check(Lambda(fn), (3, 4, 5), (3, 2, 5))


def _set_columns(x: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """x with x[:, [3, 1]] = values (an index_put at axis 1)."""
    x = x.clone()
    x[:, torch.tensor([3, 1])] = values
    return x


@pytest.mark.parametrize("stride,blocks", [((1, 2), 24), ((2, 3), 9)])
def test_fold_adds_up_its_patches(stride, blocks):
    """nn.Fold (col2im, MobileViT-v2's patch folding): 2 x 3 patches of 2 channels into a 7 x 9
    map (6 x 4 overlapping ones at stride (1, 2); 3 x 3 tiling ones at (2, 3), with a border
    nothing lands on)."""
    needs("take", "concatenate")
    fold = nn.Fold((7, 9), (2, 3), stride=stride)
    check(Lambda(lambda x: fold(x) * 2), (3, 12, blocks))


@pytest.mark.parametrize("fn", [
    lambda x, y: x.index_put((torch.tensor([0, 2, 2, -1]),), y[:, :1], accumulate=True),
    lambda x, y: x.index_put((torch.tensor([0, 2, 2, -1]),), y[:, :1]) + 1,
    lambda x, y: _set_columns(x, y[:3]),
    lambda x, y: x.masked_fill(torch.arange(5) % 3 == 0, 0.5),
    lambda x, y: x.index_put((torch.arange(3) % 2 == 1,), y[0, 0]),
])
def test_index_put_at_positions_known_now(fn):
    needs("take", "concatenate")
    check(Lambda(fn), (3, 4, 5), (4, 2, 5))


@pytest.mark.parametrize("axis", [0, 1])
def test_index_put_at_positions_computed_at_run_time(axis):
    """A key/value cache written at the positions of new tokens (`index_copy_`): one index
    tensor at one axis, negative positions counted from the end; += there (`index_add_`)
    adds every entry's values, a position named twice included."""
    def put(x, i, v):
        x = x.clone()
        x[(slice(None),) * axis + (i,)] = v
        return x

    values = torch.rand((2, 6) if axis == 0 else (7, 2)) * 4 - 2
    check(Lambda(put), (7, 6), torch.tensor([5, -1]), values)
    check(Lambda(lambda x, i: x.index_copy(axis, i, values)), (7, 6), torch.tensor([5, 0]))
    module = Lambda(lambda x, i: x.index_put((i,), torch.ones(3, 5), accumulate=True))
    check(module, (4, 5), torch.tensor([0, 2, -4]))


def _put_at_run_time_mask(x: torch.Tensor, y: torch.Tensor, accumulate: bool) -> torch.Tensor:
    """x with x[:, mask] = 2.5 and (+)= a row of y, the masks computed from the inputs."""
    x = x.clone()
    x[:, y[:, 0] > 0] = 2.5
    return torch.ops.aten.index_put(x, [None, x[0, :, 0] < 0.5], y[1], accumulate)


@pytest.mark.parametrize("fn", [
    lambda x, y: x.masked_fill(x > 0.5, 1.0).index_put((x < -1,), torch.tensor(-7.0)),
    lambda x, y: _put_at_run_time_mask(x, y, False),
    lambda x, y: _put_at_run_time_mask(x, y, True),
])
def test_index_put_at_a_bool_mask_computed_at_run_time(fn):
    """Longformer's `mask[attention_mask == 2] = max`: the same values at every position the
    mask selects, a `where`."""
    needs("where")
    check(Lambda(fn), (3, 4, 5), (4, 5))


def test_index_put_of_different_values_at_a_mask_computed_at_run_time_is_refused():
    module = Lambda(lambda x: x.index_put((x[:, 0] > 0,), torch.ones(2, 5)))
    with pytest.raises(UnsupportedError, match="at a bool index computed at run time"):
        tg.from_torch(module, (torch.rand(4, 5),))


def _window_labels(x: torch.Tensor) -> torch.Tensor:
    """x plus a label per shifted-window region, as video Swin builds its attention mask: a
    window as deep as the map makes the first depth piece empty, and it is sliced again."""
    mask = x.new_zeros(4, 6)
    count = 0
    for d in ((0, -4), (-4, -2), (-2, None)):
        for h in ((0, -3), (-3, -1), (-1, None)):
            mask[d[0]:d[1], h[0]:h[1]] = count
            count += 1
    return x + mask


def test_slices_of_empty_constants():
    check(Lambda(_window_labels), (2, 4, 6))


def test_index_put_of_no_position_is_the_input():
    check(Lambda(lambda x: x.index_put((torch.arange(4) > 5,), torch.tensor(1.0)) * 3), (4, 5))


@pytest.mark.parametrize("fn", [
    lambda x: torch.linalg.vector_norm(x, dim=-1, keepdim=True) + x.norm(p=1, dim=0),
    lambda x: torch.var(x, dim=1) + torch.std(x, dim=(0, 1), correction=0),
    lambda x: torch.argmax(x, 1).float() + x.max(dim=1).values
    + x.min(dim=-1).values[:, :1] + x.max(),
    lambda x: torch.prod(x, 1) + torch.sin(x).sum(1) + torch.cos(x).sum(1),
    lambda x: nn.functional.silu(x) * nn.functional.mish(x) + nn.functional.elu(x, 0.5),
    lambda x: nn.functional.softplus(x, 2.0) + nn.functional.selu(x) + torch.sign(x).floor(),
])
def test_reductions_and_math(fn):
    needs("argmax", "prod", "sin", "cos", "silu", "mish", "elu", "softplus", "selu", "sign",
          "floor")
    check(Lambda(fn), (3, 4, 5), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("resize", [
    nn.Upsample(scale_factor=2, mode="nearest"), nn.Upsample(size=(7, 5), mode="nearest"),
    nn.Upsample(scale_factor=2, mode="bilinear"), nn.Upsample((5, 9), mode="bilinear"),
    nn.Upsample((5, 9), mode="bilinear", align_corners=True),
    nn.Upsample((1, 9), mode="bilinear"), nn.Upsample((2, 1), mode="bilinear"),
    nn.Upsample((1, 1), mode="bicubic"), nn.Upsample((7, 2), mode="bicubic"),
    nn.Upsample(scale_factor=1.5, mode="nearest"),
])
def test_resizing(resize):
    needs("resize2d")
    check(resize, (1, 2, 3, 4), rtol=1e-4)


@pytest.mark.parametrize("size", [(4, 4), (5, 3), (14, 1)])
def test_nearest_downsampling_reads_pytorchs_pixels(size):
    """14 -> 4 reads rows 0, 3, 7, 10 in PyTorch (ONNX's asymmetric mode would read 6)."""
    check(nn.Upsample(size, mode="nearest"), (1, 2, 14, 13))


def sdpa_inputs(heads: int, kv_heads: int, length: int = 5, keys: int = 7,
                depth: int = 8) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(1)
    return (torch.randn(2, heads, length, depth, generator=gen),
            torch.randn(2, kv_heads, keys, depth, generator=gen),
            torch.randn(2, kv_heads, keys, depth + 2, generator=gen))


@pytest.mark.parametrize("kwargs", [
    {}, {"scale": 0.3}, {"is_causal": True},
    {"attn_mask": torch.rand(5, 7) > 0.3},
    {"attn_mask": torch.arange(7) < torch.tensor([[0], [3], [0], [7], [1]])},
    {"attn_mask": torch.where(torch.arange(7) < torch.tensor([[2], [0], [7], [0], [1]]), 0.5,
                              -torch.inf)},
    {"attn_mask": torch.randn(2, 1, 5, 7)},
    {"attn_mask": torch.randn(4, 5, 7), "enable_gqa": True},
    {"attn_mask": torch.rand(2, 1, 1, 7) > 0.5, "enable_gqa": True, "scale": 0.5},
    {"is_causal": True, "enable_gqa": True},
])
def test_scaled_dot_product_attention(kwargs):
    needs("where")
    heads, kv_heads = (4, 2) if kwargs.get("enable_gqa") else (4, 4)
    fn = Lambda(lambda q, k, v: nn.functional.scaled_dot_product_attention(q, k, v, **kwargs))
    g = check(fn, *sdpa_inputs(heads, kv_heads), rtol=1e-4, atol=1e-5)
    matmuls = [n for n in g.ops if n.op == "batch_matmul"]
    assert [n.shape for n in matmuls] == [(2 * kv_heads, 5 * heads // kv_heads, 7),
                                          (2 * kv_heads, 5 * heads // kv_heads, 10)]


def test_an_empty_slice_adds_nothing_to_a_concatenation():
    """x[..., 4:] of an axis of 4 is empty (Phi-3's rotary embedding over the whole head leaves
    no dimensions to pass through): the concatenation keeps the other pieces."""
    fn = Lambda(lambda x: torch.cat((torch.sin(x[..., :4]), x[..., 4:]), dim=-1))
    check(fn, (2, 3, 4))
    fn = Lambda(lambda x: torch.cat((x[:, 5:7], x[:, :2] * 3), dim=1))
    check(fn, (2, 5))


def test_one_key_value_head_serves_every_query_head_without_enable_gqa():
    """The head axes broadcast as PyTorch's batch axes do: multi-query attention (Falcon's)."""
    needs("where")
    fn = Lambda(lambda q, k, v: nn.functional.scaled_dot_product_attention(q, k, v))
    g = check(fn, *sdpa_inputs(4, 1), rtol=1e-4, atol=1e-5)
    assert [n.shape for n in g.ops if n.op == "batch_matmul"] == [(2, 20, 7), (2, 20, 10)]


def test_attention_reads_repeated_keys_and_values_once():
    """transformers' repeat_kv (expand + reshape) in front of attention is undone: grouped-query
    attention reads each key/value head for its group of query heads."""
    needs("broadcast_to", "where")

    def repeat(x, times):
        b, h, s, d = x.shape
        return x[:, :, None].expand(b, h, times, s, d).reshape(b, h * times, s, d)

    mask = torch.rand(1, 1, 5, 7) > 0.2
    fn = Lambda(lambda q, k, v: nn.functional.scaled_dot_product_attention(
        q, repeat(k, 3), repeat(v, 3), attn_mask=mask))
    g = check(fn, *sdpa_inputs(6, 2), rtol=1e-4, atol=1e-5)
    assert not any(n.op == "broadcast_to" for n in g.ops)
    assert [n.shape for n in g.ops if n.op == "batch_matmul"] == [(4, 15, 7), (4, 15, 10)]


class Counting(nn.Module):
    """A module that updates a buffer in place: the graph computes its output alone."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return torch.relu(x) * 2


def test_in_place_updates_become_functional():
    g = check(Counting(), (3, 4))
    assert len(g.outputs) == 1
    check(Lambda(lambda x: x.clone().mul_(2).relu_().add_(x[0])), (3, 4))


def test_graph_module_and_exported_program_inputs():
    module = nn.Sequential(nn.Linear(5, 3), nn.ReLU())
    x = torch.rand(2, 5)
    traced = torch.fx.symbolic_trace(module)
    for source in (traced, torch.export.export(traced, (x,))):
        g = tg.from_torch(source, (x,))
        out = tg.build(g)(**{g.inputs[0].name: x.numpy()})[0]
        np.testing.assert_allclose(out, module(x).detach().numpy(),
                                   rtol=1e-5, atol=1e-6)


class CachingModel(nn.Module):
    """A model in the manner of transformers: with `config.use_cache` it also returns a cache
    object, which torch.export cannot return."""

    class Cache:
        pass

    def __init__(self) -> None:
        super().__init__()
        self.config = types.SimpleNamespace(use_cache=True)
        self.proj = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> Any:
        y = self.proj(x)
        return (y, self.Cache()) if self.config.use_cache else (y,)


def test_transformers_models_export_with_the_cache_off():
    model = CachingModel()
    x = torch.rand(2, 4)
    with pytest.raises(Exception, match="Cache"):
        torch.export.export(model, (x,))
    g = tg.from_torch(model, (x,))
    assert model.config.use_cache  # restored
    out = tg.build(g)(**{g.inputs[0].name: x.numpy()})[0]
    np.testing.assert_allclose(out, model.proj(x).detach().numpy(), rtol=1e-5, atol=1e-6)
