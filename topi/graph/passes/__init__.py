"""Graph passes, each a function Graph -> Graph whose result prints like any graph.

`optimize` runs them in the order below; `plan_memory` is the analysis that the executor
allocates by. Layout: the topi conv2d computes keep activations in NCHW and block only the
kernel (NCHW[x]c lives in registers: each output block is computed in the blocked layout and
written to NCHW by the conv's own output stage), so there is no activation layout conversion
between convolutions to remove; the kernel's packing is hoisted to build time (pre-packed
weights, see `topi.graph.kernel`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..graph import Graph
from .dead_code import remove_dead_nodes
from .fold_batch_norm import fold_batch_norm
from .fold_constants import fold_constants
from .fuse_ops import fuse_ops
from .plan_memory import MemoryPlan, plan_memory

Pass = Callable[[Graph], Graph]

PIPELINE: tuple[tuple[str, Pass], ...] = (
    # Weights that the graph reshapes or transposes become plain constants.
    ("fold_constants", fold_constants),
    # Batch norms after convolutions disappear into the weights and a bias.
    ("fold_batch_norm", fold_batch_norm),
    # What the folds orphaned (the unfolded weights, the original convolutions) goes.
    ("remove_dead_nodes", remove_dead_nodes),
    # Elementwise tails join their producers' kernels: one kernel per remaining op node.
    ("fuse_ops", fuse_ops),
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
    "PIPELINE", "MemoryPlan", "Pass", "fold_batch_norm", "fold_constants", "fuse_ops", "optimize",
    "plan_memory", "remove_dead_nodes",
]
