"""Writing a tunable template and tuning it: a matrix multiplication against numpy.

    python tutorials/04_tuning_a_template.py                    # 512^3, up to 200 trials
    python tutorials/04_tuning_a_template.py --size 1024 --trials 1000
    TL_TUTORIAL_SMALL=1 python tutorials/04_tuning_a_template.py   # 64^3, 8 trials (CI)

Lesson 03 chose the tile sizes of a GEMM by hand. Here the schedule leaves them open:
1. A *template* is a function of the problem's shapes that builds a schedule whose choices
   (tile sizes, what to unroll, ...) come from `autotune.get_config()`: `define_split` and
   `define_knob` declare the choices, `cfg[name].apply` / `cfg[name].val` use them. A fallback
   config makes the template usable before anything is tuned.
2. `create_task` runs the template once to learn its *config space*: every combination of
   the knobs, numbered from 0 to len(space) - 1.
3. `tune` measures configs in isolated worker processes, fits an XGBoost cost model to the
   measurements and lets simulated annealing over that model propose the next configs. Every
   measurement is appended to a JSON-lines log (`tensorlang best LOG` and `tensorlang plot LOG`
   read it).
4. `apply_history_best(log)` makes the template pick the best config found: build, verify, time.

The loop IR is printed for the fallback config and for the tuned one: only the tile sizes and
the unrolling differ. The same tuning from the command line, for any template of your own:
`tensorlang tune tutorials/04_tuning_a_template.py:matmul --shape 512,512,512 --trials 200`.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

import autotune
import tensorlang as tl
from tensorlang.benchmark import compare

SMALL = os.environ.get("TL_TUTORIAL_SMALL") == "1"  # CI runs every tutorial at small sizes


# 1. The template: the computation is fixed, the schedule's choices are knobs.
@autotune.template("tutorial/matmul")
def matmul(N: int, L: int, M: int, dtype: str):
    A = tl.placeholder((N, L), dtype, name="A")
    B = tl.placeholder((L, M), dtype, name="B")
    k = tl.reduce_axis((0, L), name="k")
    C = tl.compute((N, M), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")

    s = tl.create_schedule(C.op)
    CC = s.cache_write(C, "local")  # a block of C accumulated in registers
    y, x = s[C].op.axis
    cfg = autotune.get_config()
    # Register block: up to 12 rows by 16..64 columns (one to four AVX-512 vectors).
    cfg.define_split("tile_y", y, num_outputs=2, filter=lambda e: e.size[-1] <= 12)
    cfg.define_split("tile_x", x, num_outputs=2, filter=lambda e: e.size[-1] in (16, 32, 48, 64))
    cfg.define_split("tile_k", L, num_outputs=2, filter=lambda e: e.size[-1] <= 16)
    cfg.define_knob("unroll_k", [0, 1])
    if cfg.is_fallback:  # a sensible schedule when nothing has been tuned yet
        cfg.fallback_split("tile_y", [-1, 8])
        cfg.fallback_split("tile_x", [-1, 32])
        cfg.fallback_split("tile_k", [-1, 4])

    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, yi, xi)
    s[C].vectorize(xi)
    s[C].parallel(yo)
    s[CC].compute_at(s[C], xo)

    yc, xc = s[CC].op.axis
    (kc,) = s[CC].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(s, CC, kc)
    s[CC].reorder(ko, ki, yc, xc)
    s[CC].vectorize(xc)
    s[CC].unroll(yc)
    if cfg["unroll_k"].val:
        s[CC].unroll(ki)
    cfg.add_flop(2 * N * L * M)
    return s, [A, B, C]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64 if SMALL else 512)
    parser.add_argument("--trials", type=int, default=8 if SMALL else 200)
    parser.add_argument("--log",
                        default=os.path.join(tempfile.gettempdir(), "tutorial_matmul.jsonl"))
    parser.add_argument("--seed", type=int, default=0)
    opts = parser.parse_args()
    n = opts.size

    # 2. The task and its space.
    task = autotune.create_task("tutorial/matmul", args=(n, n, n, "float32"), target="llvm")
    print(f"task {task.workload}: {len(task.config_space)} configs, {task.flop / 1e9:.3g} GFLOP")
    print(task.config_space)
    s, args = task.template.run(autotune.FallbackConfig(), task.args, task.target)
    print("\n=== the fallback config's loops")
    print(tl.lower(s, args, name="matmul"))

    # 3. Tuning.
    if os.path.exists(opts.log):
        os.remove(opts.log)  # a fresh run (tune would otherwise resume from it)
    result = autotune.tune(task, trials=opts.trials, log_file=opts.log, seed=opts.seed)
    print(f"\nbest of {result.n_results} measured configs: {result.config}")
    print(f"measured during tuning: {result.gflops:.1f} GFLOP/s")

    # 4. The template called inside apply_history_best builds the best config.
    with autotune.apply_history_best(opts.log):
        s, args = matmul(n, n, n, "float32")
    print("\n=== the tuned config's loops")
    print(tl.lower(s, args, name="matmul"))
    f = tl.build(s, args, name="matmul")
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    c = np.zeros((n, n), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3)
    side_by_side = compare(lambda: f(a, b, c), lambda: a @ b, repeat=1 if SMALL else 7)
    ours, ref = side_by_side.gflops(task.flop)
    print(f"tuned kernel: {ours:.1f} GFLOP/s, numpy: {ref:.1f} GFLOP/s, "
          f"ratio {side_by_side.speedup:.2f}x "
          f"(measured side by side, {tl.get_num_threads()} threads)")
    print("the tuned kernel matches numpy")


if __name__ == "__main__":
    main()
