"""`torch.compile(model, backend="tensorlang")`: Dynamo's FX graphs built as tensorlang Modules.

Dynamo captures each piece of a model between graph breaks as a `torch.fx.GraphModule` and hands
it to `backend` with example inputs; the code around the breaks (data-dependent control flow)
stays eager PyTorch. Each graph is exported with `torch.export`, translated by `from_torch` and
built by `topi.graph.build` (with the tuned records of `options["log_file"]`, for
`options["target"]`). Parameters and buffers, which Dynamo passes as graph inputs, become the
model's constants (so weights are folded and pre-packed).

A graph that Dynamo traced with symbolic sizes (`dynamic=True`, `torch._dynamo.mark_dynamic`, or
automatic dynamic after a call at other sizes) is built once, as a Module with symbolic dims
bounded by Dynamo's ranges (`torch_dynamic.py`): its integer inputs are computed from the
tensors' sizes at run time, and every size within the bounds runs the same Module. A static
graph gets one Module per distinct set of input shapes (and integer inputs).

A graph that writes into its input tensors (a key/value cache's `index_copy_` or `index_put_`
at positions computed at run time) is exported returning their new values after its outputs;
each call copies them into the caller's tensors. The model's own state updated in place (a
batch norm's running statistics in training) runs eagerly.

A graph that cannot be translated or built runs eagerly, with one warning naming what is
missing: the backend never gives a result other than eager PyTorch's. So do calls whose inputs
the Module cannot take (a tensor on another device), and constants that changed since the build
(new weights) trigger a rebuild. Under autograd, the forward runs compiled and the backward
re-runs the graph eagerly (recomputation), so gradients are PyTorch's own.

The backend is registered through the `torch_dynamo_backends` entry point (setup.py), so
`torch.compile(m, backend="tensorlang")` needs no import of topi.

Example:
    fast = torch.compile(model, backend="tensorlang",
                         options={"log_file": "model.jsonl", "target": "llvm -mcpu=skylake"})
    with torch.no_grad():
        y = fast(x)
"""

from __future__ import annotations

import operator
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

try:
    import torch
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("the tensorlang torch.compile backend needs PyTorch: "
                      "pip install -e .[torch]") from err

from .build import as_target, build
from .importer import UnsupportedError
from .model_io import ModelBase
from .module import Module
from .torch import _functional as functional
from .torch import from_torch, sympy_size
from .torch_dynamic import DynamicSizes, bake_scalars, dynamic_sizes, scalar_slots

OPTIONS = ("log_file", "target", "cache_dir")
MAX_SPECIALIZATIONS = 8
"""The most input-shape variants of one graph that are built; further ones run eagerly."""
MAX_REBUILDS = 3
"""How often a graph is rebuilt for constants changed in place before it stays eager."""
MAX_WEIGHT_SETS = 64
"""The most sets of constant tensors (the layers that call one graph) built for one graph."""


class TensorlangCompileWarning(UserWarning):
    """A captured graph runs in eager PyTorch (it could not be translated or built)."""


def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
            options: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """The Dynamo backend: `gm` as a callable that runs a tensorlang Module.

    Args:
        gm: the captured graph; it returns a tuple of tensors.
        example_inputs: its arguments for one call (tensors, parameters, buffers, ints).
        options: `log_file` (a tuning log), `target` (a target string or `tl.Target`, default
            "llvm") and `cache_dir` (the kernel cache), as `topi.graph.build` takes them.

    Returns:
        A function of the same arguments as `gm`, returning the same outputs.

    Raises:
        TypeError: an unknown option, or a target that is not a string or `tl.Target`.
        FileNotFoundError: `log_file` does not exist.
    """
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(f"tensorlang backend: unknown option(s) {unknown}; it takes {OPTIONS}")
    # a wrong option is the user's error, not the graph's: raise it rather than run eagerly
    log_file = options.get("log_file")
    if log_file is not None and not os.path.exists(log_file):
        raise FileNotFoundError(f"tensorlang backend: tuning log {str(log_file)!r} does not exist")
    options["target"] = as_target(options.get("target", "llvm"))
    try:
        return CompiledGraph(gm, example_inputs, options)
    except Exception as err:  # noqa: BLE001 - a graph the backend cannot even read runs eagerly
        warnings.warn(f"tensorlang: a torch.compile graph runs in eager PyTorch: "
                      f"{type(err).__name__}: {err}", TensorlangCompileWarning, stacklevel=2)
        return gm


def _is_constant(value: Any) -> bool:
    """A parameter or buffer of the model (Dynamo marks the module state it lifts to inputs)."""
    return isinstance(value, torch.nn.Parameter) or \
        getattr(value, "_dynamo_static_input_type", None) is not None


class _Bound(torch.nn.Module):
    """`gm` with its constants held as buffers and its integer arguments fixed, or computed from
    the tensors' sizes (`dynamic`): a module whose arguments are the graph's other tensors, for
    `torch.export`."""

    def __init__(self, gm: torch.fx.GraphModule, args: Sequence[Any], slots: Sequence[int],
                 names: Sequence[str], dynamic: DynamicSizes | None = None,
                 writes: Sequence[int] = ()) -> None:
        super().__init__()
        self.gm = gm
        self.args = list(args)
        self.slots = list(slots)
        self.dynamic = dynamic
        self.writes = list(writes)
        for i, name in enumerate(names):
            if i not in self.slots and isinstance(args[i], torch.Tensor):
                self.register_buffer(name, args[i].detach(), persistent=False)
                self.args[i] = name

    def forward(self, *tensors: torch.Tensor) -> Any:
        args = [getattr(self, a) if isinstance(a, str) else a for a in self.args]
        for slot, tensor in zip(self.slots, tensors):
            args[slot] = tensor
        if self.dynamic is not None:
            for slot, value in self.dynamic.int_values(tensors).items():
                args[slot] = value
            self.dynamic.check_equal(tensors)
        out = self.gm(*args)
        # the tensors it writes into, returned after its outputs: their new values
        return (out, tuple(tensors[k] for k in self.writes)) if self.writes else out


class _Built:
    """One Module of the graph, for one set of input shapes: its inputs by the exported
    program's names, the structure of the program's outputs (with the numbers among them, which
    are returned as they are), and the inputs (by position among the tensors) that the graph
    writes into, whose new values follow its outputs.

    A static Module whose inputs are the example tensors' shapes and dtypes reads contiguous
    tensors in place and writes its outputs into new tensors (`Module.run_at`): no copies."""

    def __init__(self, module: ModelBase, program: torch.export.ExportedProgram,
                 example: Sequence[torch.Tensor], writes: Sequence[int] = ()) -> None:
        sig = program.graph_signature
        self.module = module
        self.writes = list(writes)
        self.input_names = list(sig.user_inputs)
        self.treespec = program.call_spec.out_spec
        outputs = next(n for n in program.graph.nodes if n.op == "output").args[0]
        users = [o for o, spec in zip(outputs, sig.output_specs)
                 if spec.kind is torch.export.graph_signature.OutputKind.USER_OUTPUT]
        # numbers the export found constant (a sliding window's size) and sizes it computes
        # (the count of tokens a sliding-window cache has seen) are no Module outputs
        self.numbers = {i: o for i, o in enumerate(users) if isinstance(o, (int, float))}
        self.sizes = {i: o.meta["val"].node.expr for i, o in enumerate(users)
                      if isinstance(o, torch.fx.Node) and
                      isinstance(o.meta.get("val"), torch.SymInt)}
        # where the program's own size symbols are read: (input position, axis)
        placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
        self.symbols = {str(d.node.expr): (k, axis) for k, name in enumerate(self.input_names)
                        for axis, d in enumerate(getattr(placeholders[name].meta.get("val"),
                                                         "shape", ()))
                        if isinstance(d, torch.SymInt) and d.node.expr.is_Symbol}
        names = sorted(n.name for n in module.inputs)
        if names != sorted(self.input_names):
            raise ValueError(f"the module's inputs {names} are not the program's "
                             f"{self.input_names}")
        # the tensor (by position) of each Module input
        self.order = [self.input_names.index(i.name) for i in module.inputs]
        self.in_place = isinstance(module, Module) and all(
            _same_layout(example[k], info) for k, info in zip(self.order, module.inputs)) and \
            all(isinstance(getattr(torch, o.dtype, None), torch.dtype) for o in module.outputs)
        flat = self.treespec.type in (tuple, list) and \
            all(c.is_leaf() for c in self.treespec.children())
        self.flat = self.treespec.type if flat else None

    def _run_in_place(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        module = self.module
        inputs = []
        for k, sites in zip(self.order, module.bindings.inputs):
            tensor = tensors[k]
            inputs.append(tensor.data_ptr() if sites is not None and tensor.is_contiguous()
                          else tensor.detach().numpy())
        fresh = [None if sites is None else
                 torch.empty(info.shape, dtype=getattr(torch, info.dtype))
                 for sites, info in zip(module.bindings.outputs, module.outputs)]
        copies = module.run_at(inputs, [None if t is None else t.data_ptr() for t in fresh])
        return [torch.from_numpy(c) if t is None else t for t, c in zip(fresh, copies)]

    def __call__(self, tensors: Sequence[torch.Tensor]) -> Any:
        if self.in_place:
            leaves = self._run_in_place(tensors)
        else:
            arrays = self.module(**{n: t.detach() for n, t in zip(self.input_names, tensors)})
            # each call returns arrays of its own (the Module copies out of its buffers), so
            # the tensors viewing them are never overwritten by a later call
            leaves = [torch.from_numpy(a) for a in arrays]
        numbers = self.numbers
        if self.sizes:
            symbols = {name: tensors[k].shape[axis] for name, (k, axis) in self.symbols.items()}
            numbers = {**numbers, **{i: int(sympy_size(expr, symbols.__getitem__))
                                     for i, expr in self.sizes.items()}}
        for i, number in sorted(numbers.items()):
            leaves.insert(i, number)
        out = self.flat(leaves) if self.flat is not None else \
            torch.utils._pytree.tree_unflatten(leaves, self.treespec)
        if not self.writes:
            return out
        out, written = out
        for k, value in zip(self.writes, written):
            tensors[k].copy_(value)
        return out


_VERSION = operator.attrgetter("_version")
"""A tensor's version counter, which each in-place update increments."""


def _same_layout(tensor: Any, info: Any) -> bool:
    """Whether `tensor` has the shape and dtype of the Module input `info`."""
    return isinstance(tensor, torch.Tensor) and tuple(tensor.shape) == tuple(info.shape) and \
        str(tensor.dtype).removeprefix("torch.") == info.dtype


class CompiledGraph:
    """A captured graph as one Module of symbolic sizes, or Modules built per input shapes, or
    eager when it cannot be built.

    Attributes:
        gm: the graph.
        failure: why the graph runs eagerly (None while it is compiled).
        built: the Modules of the current constants by input shapes and integer arguments
            (one, keyed "dynamic", for a graph of symbolic sizes).
        weight_sets: the constants' states and Modules by the constant tensors' identities.
        dynamic: the graph's symbolic sizes, or None for a static graph.
    """

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                 options: dict[str, Any]) -> None:
        self.gm = gm
        self.options = options
        self.failure: str | None = None
        self.built: dict[tuple, _Built] = {}
        self.rebuilds = 0
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.names = [n.name for n in placeholders]
        self.constants = [i for i, v in enumerate(example_inputs) if _is_constant(v)]
        self.scalars = scalar_slots(gm, example_inputs)
        self.tensors = [i for i, v in enumerate(example_inputs) if isinstance(v, torch.Tensor)
                        and i not in self.constants and i not in self.scalars]
        self.ints = [i for i, v in enumerate(example_inputs)
                     if not isinstance(v, torch.Tensor)]
        self._held = self._constant_state(example_inputs)
        # per set of constant tensors (by identity): [their state, their Modules]
        self.weight_sets: dict[tuple, list] = {self._held[0]: [self._held, self.built]}
        self._warned: set[str] = set()
        if not all(isinstance(example_inputs[i], (int, torch.SymInt)) for i in self.ints):
            kinds = sorted({type(example_inputs[i]).__name__ for i in self.ints})
            self._give_up(f"inputs of type {kinds}")
        self.dynamic: DynamicSizes | None = None
        try:
            self.dynamic = dynamic_sizes(gm, self.tensors, self.ints)
        except UnsupportedError as err:
            warnings.warn(f"tensorlang: a torch.compile graph of symbolic sizes is built per "
                          f"input shape: {err}", TensorlangCompileWarning, stacklevel=3)

    def _constant_state(self, args: Sequence[Any]) -> tuple:
        """What identifies the constants' values: the tensors' identities and the sum of their
        versions (a version only grows: an in-place update of any of them changes the sum),
        each scalar's value."""
        constants = [args[i] for i in self.constants]
        return (tuple(map(id, constants)), sum(map(_VERSION, constants)),
                tuple(args[i].item() for i in self.scalars))

    def _select_weights(self, state: tuple) -> bool:
        """Make the Modules of the constants `state` current (False: run this call eagerly).
        Dynamo calls one graph with other tensors as its constants when layers share code
        between graph breaks: each set of tensors gets Modules of its own. The same tensors
        updated in place (training) are rebuilt, a few times."""
        ids = state[0]
        held = self.weight_sets.get(ids)
        if held is None:
            if len(self.weight_sets) >= MAX_WEIGHT_SETS:
                self._warn_once(f"more than {MAX_WEIGHT_SETS} sets of parameters of one "
                                f"torch.compile graph: the others run in eager PyTorch")
                return False
            held = self.weight_sets[ids] = [state, {}]
        elif held[0] != state:  # new values in the same tensors: what was built holds the old
            self.rebuilds += 1
            if self.rebuilds > MAX_REBUILDS:
                self._give_up(f"its parameters changed more than {MAX_REBUILDS} times")
                return False
            held[:] = [state, {}]
        self._held, self.built = held
        return True

    def _give_up(self, why: str) -> None:
        self.failure = why
        self.built.clear()
        self.weight_sets.clear()
        warnings.warn(f"tensorlang: a torch.compile graph runs in eager PyTorch: {why}",
                      TensorlangCompileWarning, stacklevel=3)

    def _build(self, args: Sequence[Any], tensors: Sequence[Any]) -> _Built:
        gm = bake_scalars(self.gm, {i: args[i].item() for i in self.scalars}) \
            if self.scalars else self.gm
        example = tuple(t.detach() for t in tensors)
        shapes = tuple(self.dynamic.dims) if self.dynamic is not None else None
        writes: list[int] = []
        with torch.no_grad(), warnings.catch_warnings():
            # torch's own deprecation noise from copying the program's call graph
            warnings.filterwarnings("ignore", message=".*LeafSpec.* is deprecated",
                                    category=FutureWarning)
            for _ in range(2):  # once more with the inputs written returned
                bound = _Bound(gm, args, self.tensors, self.names, self.dynamic, writes)
                # (the specs of `forward(*tensors)` nest in one tuple)
                program = functional(torch.export.export(bound, example,
                                                         dynamic_shapes=shapes and (shapes,)))
                # the functional program returns new values of what the graph updates in place
                # (an input's `x.add_(1)`, a key/value cache's `index_copy_`, a batch norm's
                # running statistics) before its outputs: the inputs written return them as
                # outputs too, copied back after each call
                sig = program.graph_signature
                if sig.buffers_to_mutate:
                    raise UnsupportedError("the graph updates the model's state in place")
                users = list(sig.user_inputs)
                written = sorted(users.index(n) for n in sig.user_inputs_to_mutate.values())
                if written == writes:
                    break
                writes = written
            else:
                raise UnsupportedError("the inputs the graph writes into change with the export")
            graph = from_torch(program, example)
        bounds = None
        if self.dynamic is not None:
            self.dynamic.pin(graph)
            bounds = self.dynamic.graph_bounds(graph)
        return _Built(build(graph, bounds=bounds, **self.options), program, example, writes)

    def _module(self, args: Sequence[Any]) -> tuple[_Built | None, list[Any]]:
        """The Module for `args` (built on first use), or None to run eagerly, and the tensors
        it takes (`_tensors`)."""
        if self.failure is not None:
            return None, []
        state = self._constant_state(args)
        if state != self._held and not self._select_weights(state):
            return None, []
        if not all(args[i].is_cpu for i in self.tensors):
            # Dynamo guards on devices: this graph always runs there
            devices = sorted({args[i].device.type for i in self.tensors} - {"cpu"})
            self._give_up(f"tensors on {devices} (tensorlang runs on the CPU)")
            return None, []
        tensors = self._tensors(args)
        if self.dynamic is not None:
            if not self.dynamic.within(tensors):
                self._warn_once(f"sizes beyond the bounds {self.dynamic.bounds} of a "
                                f"torch.compile graph run in eager PyTorch")
                return None, []
        built = self.built.get(self._key(args, tensors))
        if built is None:
            if len(self.built) >= MAX_SPECIALIZATIONS:
                self._warn_once(f"more than {MAX_SPECIALIZATIONS} input shapes of a "
                                f"torch.compile graph: the others run in eager PyTorch")
                return None, []
            try:
                built = self._build(args, tensors)
                self.built[self._key(args, tensors)] = built  # (keyed after its pins)
            except Exception as err:  # noqa: BLE001 - any failure means: run eagerly
                if self.dynamic is not None:  # as symbols it did not build: build per shape
                    self.dynamic = None
                    return self._module(args)
                self._give_up(f"{type(err).__name__}: {err}")
                return None, []
        return built, tensors

    def _warn_once(self, what: str) -> None:
        """One warning per kind of call that runs eagerly while the graph stays compiled."""
        if what not in self._warned:
            self._warned.add(what)
            warnings.warn(f"tensorlang: {what}", TensorlangCompileWarning, stacklevel=4)

    def __call__(self, *args: Any) -> Any:
        built, tensors = self._module(args)
        if built is None:
            return self.gm(*args)
        if torch.is_grad_enabled() and any(a.requires_grad for a in args
                                          if isinstance(a, torch.Tensor)):
            return _with_grad(self.gm, built, args, [t.detach() for t in tensors])
        return built(tensors)

    def _key(self, args: Sequence[Any], tensors: Sequence[Any]) -> tuple:
        """What tells the Modules of a call apart: the input shapes (and integer inputs) of a
        static graph; the values of the pinned symbols of a graph of symbolic sizes."""
        if self.dynamic is not None:
            if not self.dynamic.pinned:
                return ("dynamic",)
            return ("dynamic", *self.dynamic.pinned_sizes(tensors))
        return tuple([(args[i].shape, args[i].dtype) for i in self.tensors] +
                     [int(args[i]) for i in self.ints])

    def _tensors(self, args: Sequence[Any]) -> list[Any]:
        """The Module's tensors of a call: the graph's tensors, and for a graph of symbolic
        sizes the tensors that carry its integer inputs that are no tensor's size."""
        tensors = [args[i] for i in self.tensors]
        if self.dynamic is not None and self.dynamic.values:
            return self.dynamic.with_carriers(args, tensors)
        return tensors


def _with_grad(gm: torch.fx.GraphModule, built: _Built, args: Sequence[Any],
               tensors: Sequence[torch.Tensor]) -> Any:
    """The compiled outputs (of the Module's `tensors`, detached), differentiable: the backward
    re-runs `gm` eagerly."""
    grad_slots = [i for i, a in enumerate(args)
                  if isinstance(a, torch.Tensor) and a.requires_grad]

    class Recompute(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *inputs: torch.Tensor) -> Any:
            out = torch.utils._pytree.tree_leaves(built(tensors))
            ctx.mark_non_differentiable(*[o for o in out if isinstance(o, torch.Tensor)
                                            and not o.is_floating_point()])
            return tuple(out)

        @staticmethod
        def backward(ctx: Any, *grads: torch.Tensor) -> Any:
            with torch.enable_grad():
                inputs = [a.detach().requires_grad_(True) if i in grad_slots else a
                          for i, a in enumerate(args)]
                out = torch.utils._pytree.tree_leaves(gm(*inputs))
                pairs = [(o, g) for o, g in zip(out, grads)
                         if g is not None and o.requires_grad]
                found = torch.autograd.grad([o for o, _ in pairs], [inputs[i] for i in grad_slots],
                                            [g for _, g in pairs], allow_unused=True)
            return tuple(found)

    leaves = Recompute.apply(*[args[i] for i in grad_slots])
    return torch.utils._pytree.tree_unflatten(list(leaves), built.treespec)
