"""Graph passes, each a function Graph -> Graph whose result prints like any graph.

`optimize` runs them in the order below; `plan_memory` is the analysis that the executor
allocates by. Layout: `alter_layout` puts the convolutions in the channel-blocked NCHW[x]c
layout and keeps activations in it from one convolution to the next, with layout transforms only
where a value enters or leaves the blocked world; the layouts depend on the current target
(`build` and `extract_tasks` run the passes inside it). Kernel packing that a compute still does
itself is hoisted to build time (pre-packed weights, see `topi.graph.kernel`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..graph import Graph
from .alter_layout import alter_layout
from .channel_shuffle import fold_channel_shuffles
from .dead_code import remove_dead_nodes
from .fold_activations import fold_activations
from .fold_batch_norm import fold_batch_norm
from .fold_constants import fold_constants
from .fold_gemm_permutes import fold_gemm_permutes
from .fuse_ops import fuse_ops
from .int8_layout import int8_layout
from .plan_memory import MemoryPlan, plan_memory
from .quantize_ops import quantize_ops
from .squeeze_excitation import fuse_squeeze_excitation
from .trim_taps import split_border_taps, trim_dead_taps

Pass = Callable[[Graph], Graph]

PIPELINE: tuple[tuple[str, Pass], ...] = (
    # Quantized (QDQ) convolutions and dense layers run as int8 kernels.
    ("quantize_ops", quantize_ops),
    # Weights that the graph reshapes or transposes become plain constants.
    ("fold_constants", fold_constants),
    # Batch norms after convolutions disappear into the weights and a bias.
    ("fold_batch_norm", fold_batch_norm),
    # Convolution taps that read only padding (atrous rates past the map) leave the weights.
    ("trim_dead_taps", trim_dead_taps),
    # Taps that read padding for part of the output: the convolution split into regions.
    ("split_border_taps", split_border_taps),
    # Activations spelt as products (x * sigmoid(x), GELU's erf form) become one op each.
    ("fold_activations", fold_activations),
    # Channel shuffles (reshape, transpose, reshape) and their slices become gathers of channels.
    ("fold_channel_shuffles", fold_channel_shuffles),
    # int8 convolutions in NCHW[x]c, their requantized uint8 activations kept so between them.
    ("int8_layout", int8_layout),
    # Convolutions in NCHW[x]c for the current target, the layout kept between them.
    ("alter_layout", alter_layout),
    # Squeeze-and-excitation blocks: pool, mat-vecs and gate in one kernel, the gate folded
    # into the next convolution's weight where that is cheaper than scaling the block.
    ("fuse_squeeze_excitation", fuse_squeeze_excitation),
    # What the folds and the layout change orphaned (the unfolded and unpacked weights, the
    # original convolutions) goes.
    ("remove_dead_nodes", remove_dead_nodes),
    # Elementwise tails join their producers' kernels: one kernel per remaining op node.
    ("fuse_ops", fuse_ops),
    # Kernels that only permute a matrix product's operand join its kernel, read in its index map.
    ("fold_gemm_permutes", fold_gemm_permutes),
)


def optimize(g: Graph, verbose: bool = False,
             pipeline: Sequence[tuple[str, Pass]] = PIPELINE) -> Graph:
    """Run the passes of `pipeline` (by default all of them) on `g`; `verbose` prints the graph
    after each pass."""
    for name, run in pipeline:
        g = run(g)
        if verbose:
            print(f"# after {name}\n{g}")
    return g


__all__ = [
    "PIPELINE", "MemoryPlan", "Pass", "alter_layout", "fold_batch_norm", "fold_constants",
    "fold_gemm_permutes", "fuse_ops", "int8_layout",
    "fuse_squeeze_excitation",
    "optimize",
    "plan_memory", "quantize_ops", "remove_dead_nodes",
]
