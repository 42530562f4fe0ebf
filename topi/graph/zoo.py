"""A model zoo for tests and benchmarks, generated in code with random weights (no downloads).

Each model is a PyTorch `nn.Module` (in eval mode, batch norms with random statistics so that
folding them matters) and the same module exported to ONNX, so both frontends see the same
weights:

- "resnet18": ResNet-18 (basic blocks, batch norm, max pool, global average pool, classifier).
- "mobilenet_v2": a MobileNet-V2-style network (inverted residuals: 1x1 expand, 3x3 depthwise,
  1x1 project, ReLU6), global average pool, classifier.
- "mlp": a three-layer perceptron.
- "bert_layer": one BERT-base-sized transformer encoder layer (self-attention with 12 heads,
  residual + LayerNorm, a GELU feed-forward of 3072), on a sequence of 128.

Every builder takes size parameters; `REDUCED` holds small configurations that run in seconds,
for the test suite. Needs the `torch` extra (and `onnx` for `ZooModel.onnx`).

Example:
    model = zoo.get("resnet18", **zoo.REDUCED["resnet18"])
    g_torch = tg.from_torch(model.module, model.torch_inputs())
    g_onnx = tg.from_onnx(model.onnx())
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    import torch
    from torch import nn
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("topi.graph.zoo needs PyTorch: pip install -e .[torch]") from err


def _randomize_batch_norms(module: nn.Module, generator: torch.Generator) -> None:
    """Random running statistics and affine parameters, so that a batch norm is no identity."""
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                c = m.num_features
                m.running_mean.copy_(torch.rand(c, generator=generator) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(c, generator=generator) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(c, generator=generator) * 0.5 + 0.75)
                m.bias.copy_(torch.rand(c, generator=generator) * 0.2 - 0.1)


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> list:
    return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout)]


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 conv-bn, a projection shortcut when the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(*_conv_bn(cin, cout, 3, stride), nn.ReLU(),
                                  *_conv_bn(cout, cout, 3))
        self.shortcut = (nn.Sequential(*_conv_bn(cin, cout, 1, stride))
                         if stride != 1 or cin != cout else nn.Identity())
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 with base width `width` (64 in the original)."""

    def __init__(self, width: int = 64, num_classes: int = 1000) -> None:
        super().__init__()
        widths = [width, width * 2, width * 4, width * 8]
        layers: list[nn.Module] = [nn.Conv2d(3, width, 7, 2, 3, bias=False),
                                   nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
        cin = width
        for k, cout in enumerate(widths):
            stride = 1 if k == 0 else 2
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


class InvertedResidual(nn.Module):
    """MobileNet-V2's block: 1x1 expand, 3x3 depthwise, 1x1 linear projection (+ residual)."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [*_conv_bn(cin, hidden, 1), nn.ReLU6()]
        layers += [*_conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU6(),
                   *_conv_bn(hidden, cout, 1)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


#: MobileNet-V2's stages: (expansion, output channels, blocks, first stride).
MOBILENET_V2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


class MobileNetV2(nn.Module):
    """MobileNet-V2 with channel counts scaled by `width_mult`; `stages` limits the depth."""

    def __init__(self, width_mult: float = 1.0, num_classes: int = 1000,
                 stages: int = len(MOBILENET_V2_STAGES)) -> None:
        super().__init__()

        def ch(c: int) -> int:
            return max(8, round(c * width_mult / 8) * 8)

        cin = ch(32)
        layers: list[nn.Module] = [*_conv_bn(3, cin, 3, 2), nn.ReLU6()]
        for expand, c, blocks, stride in MOBILENET_V2_STAGES[:stages]:
            for b in range(blocks):
                layers.append(InvertedResidual(cin, ch(c), stride if b == 0 else 1, expand))
                cin = ch(c)
        last = max(1280, ch(1280)) if stages == len(MOBILENET_V2_STAGES) else ch(1280)
        layers += [*_conv_bn(cin, last, 1), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(last, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class MLP(nn.Module):
    """Linear + ReLU layers, a linear classifier."""

    def __init__(self, in_features: int = 784, hidden: tuple[int, ...] = (1024, 1024),
                 num_classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for h in hidden:
            layers += [nn.Linear(in_features, h), nn.ReLU()]
            in_features = h
        layers.append(nn.Linear(in_features, num_classes))
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class BertLayer(nn.Module):
    """One post-norm transformer encoder layer as in BERT: multi-head self-attention, residual +
    LayerNorm, a GELU feed-forward, residual + LayerNorm."""

    def __init__(self, hidden: int = 768, heads: int = 12, ffn: int = 3072) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"BertLayer: hidden {hidden} is not a multiple of heads {heads}")
        self.heads, self.head_dim = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ffn_in = nn.Linear(hidden, ffn)
        self.act = nn.GELU()
        self.ffn_out = nn.Linear(ffn, hidden)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        b, s, _ = t.shape
        return t.reshape(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / float(np.sqrt(self.head_dim))
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        context = context.permute(0, 2, 1, 3).reshape(b, s, h)
        x = self.norm1(x + self.out(context))
        return self.norm2(x + self.ffn_out(self.act(self.ffn_in(x))))


@dataclass
class ZooModel:
    """One zoo model: the PyTorch module and the shapes of its inputs (by name)."""

    name: str
    module: nn.Module
    input_shapes: Mapping[str, tuple[int, ...]]

    def inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Random float32 inputs by name."""
        rng = np.random.default_rng(seed)
        return {k: rng.standard_normal(s).astype("float32") for k, s in self.input_shapes.items()}

    def torch_inputs(self, seed: int = 0) -> tuple[torch.Tensor, ...]:
        """The inputs of `inputs(seed)` as a tuple of tensors, in the module's argument order."""
        return tuple(torch.from_numpy(a) for a in self.inputs(seed).values())

    def torch_outputs(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """PyTorch's outputs on `inputs`."""
        with torch.no_grad():
            out = self.module(*(torch.from_numpy(inputs[k]) for k in self.input_shapes))
        return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]

    def onnx(self, opset: int = 17) -> Any:
        """The module exported to an `onnx.ModelProto` (PyTorch's TorchScript-based exporter,
        which needs no extra dependency), constants folded, with the same weights."""
        import onnx

        buffer = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(self.module, self.torch_inputs(), buffer, dynamo=False,
                              opset_version=opset, input_names=list(self.input_shapes),
                              output_names=["output"], do_constant_folding=True)
        return onnx.load_from_string(buffer.getvalue())


def resnet18(image_size: int = 224, width: int = 64, num_classes: int = 1000,
             batch: int = 1, seed: int = 0) -> ZooModel:
    """ResNet-18 on (batch, 3, image_size, image_size)."""
    return _build("resnet18", lambda: ResNet18(width, num_classes),
                  {"data": (batch, 3, image_size, image_size)}, seed)


def mobilenet_v2(image_size: int = 224, width_mult: float = 1.0, num_classes: int = 1000,
                 stages: int = len(MOBILENET_V2_STAGES), batch: int = 1,
                 seed: int = 0) -> ZooModel:
    """A MobileNet-V2-style network on (batch, 3, image_size, image_size)."""
    return _build("mobilenet_v2", lambda: MobileNetV2(width_mult, num_classes, stages),
                  {"data": (batch, 3, image_size, image_size)}, seed)


def mlp(in_features: int = 784, hidden: tuple[int, ...] = (1024, 1024), num_classes: int = 10,
        batch: int = 1, seed: int = 0) -> ZooModel:
    """A multi-layer perceptron on (batch, in_features)."""
    return _build("mlp", lambda: MLP(in_features, tuple(hidden), num_classes),
                  {"data": (batch, in_features)}, seed)


def bert_layer(seq_len: int = 128, hidden: int = 768, heads: int = 12, ffn: int = 3072,
               batch: int = 1, seed: int = 0) -> ZooModel:
    """One BERT-base encoder layer on hidden states (batch, seq_len, hidden)."""
    return _build("bert_layer", lambda: BertLayer(hidden, heads, ffn),
                  {"hidden_states": (batch, seq_len, hidden)}, seed)


def _build(name: str, make: Callable[[], nn.Module], shapes: Mapping[str, tuple[int, ...]],
           seed: int) -> ZooModel:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        module = make()
    _randomize_batch_norms(module, torch.Generator().manual_seed(seed + 1))
    return ZooModel(name, module.eval(), dict(shapes))


MODELS: dict[str, Callable[..., ZooModel]] = {
    "resnet18": resnet18, "mobilenet_v2": mobilenet_v2, "mlp": mlp, "bert_layer": bert_layer,
}

#: Small configurations of every model, for tests: the same structure, seconds to run.
REDUCED: dict[str, dict[str, Any]] = {
    "resnet18": {"image_size": 32, "width": 8, "num_classes": 10},
    "mobilenet_v2": {"image_size": 32, "width_mult": 0.25, "num_classes": 10, "stages": 4},
    "mlp": {"in_features": 37, "hidden": (64, 29), "num_classes": 10},
    "bert_layer": {"seq_len": 16, "hidden": 48, "heads": 4, "ffn": 96},
}


def get(name: str, **sizes: Any) -> ZooModel:
    """The zoo model `name` (one of `MODELS`) built with `sizes` (its builder's parameters)."""
    if name not in MODELS:
        raise ValueError(f"zoo: unknown model {name!r} (known: {', '.join(MODELS)})")
    return MODELS[name](**sizes)
