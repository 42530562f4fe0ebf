"""Tuning a kernel with no template: a new op written as a plain compute, auto-scheduled.

    python tutorials/08_auto_schedule.py                       # 1024x1024 heat step, 150 trials
    python tutorials/08_auto_schedule.py --size 2048 --trials 300
    TL_TUTORIAL_SMALL=1 python tutorials/08_auto_schedule.py   # 64x64, 8 trials (CI)

Lesson 04 wrote a template: the schedule with a knob for each choice. Here we write only the
computation, one step of a heat-diffusion stencil with a source term, and let the
auto-scheduler find the schedule:
1. A *workload* is a function of shapes that returns its tensors, inputs first and outputs
   last; `@autotune.workload("name")` registers it under a name (optional).
2. `create_task(workload, args)` analyses the compute DAG and applies the *sketch rules*
   (inline elementwise stages, multi-level tiling of reductions with data reuse, rfactor of
   row reductions, parallel / vectorize / unroll): every open choice of the sketch becomes a
   knob, so the task has a config space like a template's.
3. `tune` is the same tuner loop, cost model and JSON-lines log as for templates; each record
   also holds the schedule as a *trace* of primitives, printed below. The default tuner of an
   auto-scheduled task is evolutionary search: a population of configs scored by the XGBoost
   model, bred by mutating tile sizes, annotations and compute locations.
4. `task.apply_best(log)` replays the best trace: build, verify against numpy, time it side by
   side with numpy and with a hand-written template of the same op.

From the command line: `tensorlang tune tutorials/08_auto_schedule.py:heat_step --args
1024,1024 --trials 150`, then `tensorlang lower ... --log heat_step.jsonl` shows its IR.

Models do this for you: `topi.graph.extract_tasks(g)` lists an auto-scheduled task for each
kernel without a template (softmax, layer norm, elementwise chains), `tune(g, ...)` tunes them
with the template tasks and `build(g, log_file=...)` applies their records.
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


# 1. The workload: only the computation. The source term is a separate elementwise stage;
#    the auto-scheduler inlines it into the stencil.
@autotune.workload("tutorial/heat_step")
def heat_step(H: int, W: int):
    U = tl.placeholder((H, W), name="U")
    Q = tl.placeholder((H - 2, W - 2), name="Q")
    source = tl.compute((H - 2, W - 2), lambda i, j: 0.01 * tl.tanh(Q[i, j]), name="source")
    V = tl.compute((H - 2, W - 2), lambda i, j: U[i + 1, j + 1] + 0.2 * (
        U[i, j + 1] + U[i + 2, j + 1] + U[i + 1, j] + U[i + 1, j + 2] - 4.0 * U[i + 1, j + 1])
        + source[i, j], name="V")
    return [U, Q, V]


def heat_step_numpy(u: np.ndarray, q: np.ndarray) -> np.ndarray:
    c = u[1:-1, 1:-1]
    return c + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c) \
        + 0.01 * np.tanh(q)


# The same op as a hand-written template (lesson 04's way), for comparison.
@autotune.template("tutorial/heat_step_template")
def heat_step_template(H: int, W: int):
    U, Q, V = heat_step(H, W)
    s = tl.create_schedule(V.op)
    s[V.op.input_tensors[-1]].compute_inline()
    cfg = autotune.get_config()
    cfg.define_knob("vector", [8, 16, 32])
    i, j = s[V].op.axis
    jo, ji = s[V].split(j, factor=cfg["vector"].val)
    s[V].vectorize(ji)
    s[V].parallel(i)
    return s, [U, Q, V]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64 if SMALL else 1024)
    parser.add_argument("--trials", type=int, default=8 if SMALL else 150)
    parser.add_argument("--log", default=os.path.join(tempfile.gettempdir(), "tutorial_heat.jsonl"))
    parser.add_argument("--seed", type=int, default=0)
    opts = parser.parse_args()
    n = opts.size

    # 2. The task: the sketch's knobs form its config space.
    task = autotune.create_task("tutorial/heat_step", args=(n, n), target="llvm")
    print(f"task {task.workload}: {len(task.config_space)} configs")
    print(task.config_space)
    print("\n=== the untuned sketch, as a trace of primitives")
    print(task.trace(autotune.FallbackConfig()))

    # 3. Tuning, with the tuner loop and log of templates.
    if os.path.exists(opts.log):
        os.remove(opts.log)  # a fresh run (tune would otherwise resume from it)
    result = autotune.tune(task, trials=opts.trials, log_file=opts.log, seed=opts.seed,
                           progress=not SMALL)
    print(f"\nbest of {result.n_results} measured configs: {result.config}")

    # 4. The best trace of the log, replayed.
    record = task.best_record(opts.log)
    print("\n=== the best schedule's trace (as logged)")
    print(task.trace(task.config_space.get(record.config_index)))
    s, tensors = task.apply_best(opts.log)
    print("\n=== its loops")
    print(tl.lower(s, tensors, name="heat_step"))
    f = tl.build(s, tensors, name="heat_step")
    rng = np.random.default_rng(0)
    u = rng.random((n, n), dtype=np.float32)
    q = rng.random((n - 2, n - 2), dtype=np.float32)
    v = np.zeros((n - 2, n - 2), "float32")
    f(u, q, v)
    np.testing.assert_allclose(v, heat_step_numpy(u, q), rtol=1e-5, atol=1e-6)

    repeat = 1 if SMALL else 7
    side = compare(lambda: f(u, q, v), lambda: heat_step_numpy(u, q), repeat=repeat)
    print(f"auto-scheduled vs numpy: {side.speedup:.2f}x ({side.ours * 1e6:.0f} us vs "
          f"{side.reference * 1e6:.0f} us, side by side, {tl.get_num_threads()} threads)")
    s_t, tensors_t = heat_step_template.run(autotune.FallbackConfig(), (n, n))  # untuned
    g = tl.build(s_t, tensors_t, name="heat_step_template")
    side = compare(lambda: f(u, q, v), lambda: g(u, q, v), repeat=repeat)
    print(f"auto-scheduled vs the hand-written template: {side.speedup:.2f}x")
    print("the auto-scheduled kernel matches numpy")


if __name__ == "__main__":
    main()
