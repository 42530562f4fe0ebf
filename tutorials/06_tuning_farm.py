"""Tuning on a Dask cluster: builds on one worker, timings on another, logs merged.

    python tutorials/06_tuning_farm.py                     # 256^3, 64 trials on the cluster
    python tutorials/06_tuning_farm.py --size 512 --trials 200
    TL_TUTORIAL_SMALL=1 python tutorials/06_tuning_farm.py    # 64^3, 8 trials (CI)

Needs the distributed extra: `pip install -e ".[distributed]"`. Lesson 04 tuned on this machine
alone. A farm spreads the same work over machines (docs/tuning_farm.md); here all of it runs on
this one, in separate processes, so that every piece is visible:
1. A template, defined in this script. It travels to the workers by value: nothing on them
   imports this file.
2. A `distributed.LocalCluster` stands in for the farm: one *measuring* worker, which declares
   the resource `measure=1` (on a real farm: `dask worker ADDRESS --resources "measure=1"`, one
   per measuring machine), and one *build* worker with `build=1`, which compiles configs.
3. `DaskBuilder(client, resource="build")` compiles each config once, on the build worker, into
   object code; `DaskRunner(client)` links and times it on the measuring worker, one run at a
   time, only where the worker's CPU is the target's. `tune` takes them through
   `measure_option` exactly as it takes `LocalBuilder` / `LocalRunner`.
4. A few trials tuned locally stand for a laptop's log. `autotune.record.merge` keeps the best
   record per workload and target of both logs (the command line: `tensorlang merge farm.jsonl
   laptop.jsonl -o best.jsonl`).
5. `apply_history_best` on the merged log builds the best kernel; it and the untuned fallback
   are checked against numpy and timed side by side.
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import sys
import tempfile

import numpy as np

import autotune
import tensorlang as tl
import topi
from tensorlang.benchmark import compare

try:
    import distributed
except ImportError:
    distributed = None

SMALL = os.environ.get("TL_TUTORIAL_SMALL") == "1"  # CI runs every tutorial at small sizes


# 1. The template: topi's matmul compute; tiles of C (the inner one vectorised) and of k.
@autotune.template("tutorial/farm_matmul")
def matmul(n: int):
    A = tl.placeholder((n, n), "float32", name="A")
    B = tl.placeholder((n, n), "float32", name="B")
    C = topi.nn.matmul(A, B)
    s = tl.create_schedule(C.op)
    y, x = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    cfg = autotune.get_config()
    cfg.define_split("tile_y", y, num_outputs=2, filter=lambda e: e.size[-1] <= 16)
    cfg.define_split("tile_x", x, num_outputs=2, filter=lambda e: e.size[-1] in (16, 32, 64))
    cfg.define_split("tile_k", k, num_outputs=2, filter=lambda e: e.size[-1] <= 16)
    if cfg.is_fallback:
        cfg.fallback_split("tile_y", [-1, 1])
        cfg.fallback_split("tile_x", [-1, 16])
        cfg.fallback_split("tile_k", [-1, 1])
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    ko, ki = cfg["tile_k"].apply(s, C, k)
    s[C].reorder(yo, xo, ko, ki, yi, xi)
    s[C].vectorize(xi)
    s[C].parallel(yo)
    cfg.add_flop(2 * n * n * n)
    return s, [A, B, C]


def start_cluster() -> tuple[distributed.LocalCluster, distributed.Client]:
    """2. One measuring worker and one build worker, each a process with one thread."""
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                       resources={"measure": 1}, dashboard_address=":0")
    cluster.new_spec = copy.deepcopy(cluster.new_spec)  # workers added from now on build
    cluster.new_spec["options"]["resources"] = {"build": 1}
    cluster.scale(2)
    client = distributed.Client(cluster)
    client.wait_for_workers(2)
    for address, info in client.scheduler_info()["workers"].items():
        print(f"worker {address}: resources {info['resources']}")
    return cluster, client


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64 if SMALL else 256)
    parser.add_argument("--trials", type=int, default=8 if SMALL else 64)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the logs go")
    opts = parser.parse_args()
    if distributed is None:
        sys.exit("this tutorial needs dask.distributed: pip install -e '.[distributed]'")
    n = opts.size
    farm_log, laptop_log, best_log = (os.path.join(opts.dir, f"tutorial_{name}.jsonl")
                                      for name in ("farm", "laptop", "best"))
    for log in (farm_log, laptop_log):
        if os.path.exists(log):
            os.remove(log)  # a fresh run (tune would otherwise resume from it)

    # "llvm" is this machine's CPU, which is the measuring worker's here. On a farm, name the
    # measuring machines' CPU: "llvm -mcpu=skylake-avx512".
    task = autotune.create_task("tutorial/farm_matmul", args=(n,), target="llvm")
    print(f"task {task.workload}: {len(task.config_space)} configs, {task.flop / 1e9:.3g} GFLOP")

    cluster, client = start_cluster()
    try:
        # 3. Builds on the build worker, timings on the measuring worker.
        runner = autotune.DaskRunner(client, number=4, repeat=3)
        for address, cpu in runner.measuring_hosts().items():
            print(f"measuring worker {address}: {cpu.describe()}")
        farm = autotune.measure_option(autotune.DaskBuilder(client, resource="build"), runner)
        result = autotune.tune(task, trials=opts.trials, log_file=farm_log, measure_option=farm,
                               tuner="random", seed=0, progress=not SMALL)
        print(f"on the cluster: best of {result.n_results} trials {result.config}, "
              f"{result.gflops:.1f} GFLOP/s")
    finally:
        client.close()
        cluster.close()

    # 4. A local log, then the merge: one line per workload and target, the fastest.
    local = autotune.tune(task, trials=max(2, opts.trials // 4), log_file=laptop_log,
                          tuner="random", seed=1, progress=not SMALL)
    print(f"locally: best of {local.n_results} trials {local.config}, {local.gflops:.1f} GFLOP/s")
    summary = autotune.record.merge([farm_log, laptop_log], best_log)
    print(f"merged: read {summary.lines} lines, kept {summary.written}, skipped "
          f"{summary.broken} broken -> {best_log}")
    (best,) = autotune.load_records(best_log)
    print(f"the best record: config {best.config_index} {best.knobs}, measured on "
          f"{best.machine}")

    # 5. The template inside apply_history_best builds the best config of the merged log;
    #    outside, its fallback. Both are checked against numpy, then timed side by side.
    rng = np.random.default_rng(0)
    a, b = (rng.random((n, n), dtype=np.float32) for _ in range(2))
    kernels = {}
    for name in ("fallback", "tuned"):
        if name == "fallback":  # what the template builds when nothing is tuned
            s, args = task.template.run(autotune.FallbackConfig(), task.args, task.target)
        else:
            with autotune.apply_history_best(best_log):
                s, args = matmul(n)
            print("\n=== the tuned config's loops")
            print(tl.lower(s, args, name="matmul"))
        kernel, out = tl.build(s, args, name="matmul"), np.empty((n, n), "float32")
        kernel(a, b, out)
        np.testing.assert_allclose(out, a @ b, rtol=1e-3, err_msg=f"the {name} kernel")
        kernels[name] = functools.partial(kernel, a, b, out)
    side_by_side = compare(kernels["tuned"], kernels["fallback"], repeat=1 if SMALL else 7)
    tuned, fallback = side_by_side.gflops(task.flop)
    print(f"tuned kernel: {tuned:.1f} GFLOP/s, fallback: {fallback:.1f} GFLOP/s, "
          f"speed-up {side_by_side.speedup:.2f}x (side by side, {tl.get_num_threads()} threads)")
    print("the tuned and fallback kernels match numpy")


if __name__ == "__main__":
    main()
