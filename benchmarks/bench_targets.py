"""Target sweep: the same schedule source on both vector widths, fallback and tuned, against
numpy's GEMM and PyTorch's conv measured side by side in the same process.

Workloads: GEMM 1024^3 through matmul.x86 and dense.x86, ResNet-18's 3x3 convolutions
(64x56x56, 128x28x28, 256x14x14, 512x7x7) and MobileNet-style depthwise 144x56x56 3x3. Each
target runs in its own process, because the reference libraries pick their kernels at start-up:
- `-mcpu=haswell` (AVX2) rows compare with numpy pinned to OpenBLAS's AVX2 kernel
  (OPENBLAS_CORETYPE=Haswell) and PyTorch's oneDNN limited to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2);
- host rows run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (numpy's own best kernel)
  and PyTorch's default ISA.
Each process prints which OpenBLAS kernel ran (threadpoolctl). Ratios are medians of pairwise
ratios, ours and the reference alternating (tensorlang.benchmark.compare); > 1 means faster.
The last column times the tuned kernel against the fallback side by side: tuning must never end
below the fallback, and the two reference columns, taken at different moments, cannot tell.
Bars (the issue's): fallback GEMM >= 0.7x numpy (0.8x on the host), tuned GEMM >= 1.0x numpy,
fallback conv >= 0.7x PyTorch, tuned conv >= 1.0x PyTorch.

    python benchmarks/bench_targets.py                   # both targets, 300 trials per workload
    python benchmarks/bench_targets.py --trials 0        # fallback configs only
    python benchmarks/bench_targets.py --targets haswell --only conv --trials 50
    python benchmarks/bench_targets.py --targets haswell --only matmul,dense
    python benchmarks/bench_targets.py --mix            # inner-loop instruction mix per target
    python benchmarks/bench_targets.py --stack          # inner loops touching the stack
    python benchmarks/bench_targets.py --stack --only dense,conv2d_nchw --targets neon,sve

`--mix` compiles the fallback kernels (no timing) for x86 (AVX2, this host) and for aarch64 NEON,
SVE (neoverse-v1) and riscv64 RVV, and reads from the assembly of each kernel's hottest inner
loop its vector FMAs, the bytes it loads, FMAs per loaded byte (the reuse of the register block)
and its stack references (spills), with the kernel's stack references in all (tensorlang/
codegen/loop_mix.py). Speed on those devices is measured there (docs/targets.md).

`--stack` compiles, for the same targets, topi's GEMMs (dense, matmul, batch_matmul), conv2d
(NCHW and NHWC, 1x1 and 3x3, strided), depthwise and the auto-scheduler's GEMM sketch at dividing
and awkward sizes (primes, 1: topi/testing/register_blocks.py) and lists every innermost loop
that reads or writes the stack: spilled registers, or a register block left in a stack buffer.
It exits with status 1 when it finds one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import autotune
import tensorlang as tl
from bench_ops import Workload, _conv, _dense, _depthwise, _matmul, _ours
from tensorlang.benchmark import compare
from tensorlang.codegen.loop_mix import inner_loop_mix, inner_loops, spills
from topi.testing.register_blocks import blocked_kernels

TARGETS = {"haswell": "llvm -mcpu=haswell", "host": "llvm"}
#: Environment of each target's process: which reference kernels are comparable.
ENV_SET = {"haswell": {"OPENBLAS_CORETYPE": "Haswell", "ONEDNN_MAX_CPU_ISA": "AVX2"}, "host": {}}
ENV_UNSET = {"haswell": (), "host": ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "ONEDNN_MAX_CPU_ISA")}
#: (fallback, tuned) bars per kind of workload and target.
BARS = {("gemm", "haswell"): (0.7, 1.0), ("gemm", "host"): (0.8, 1.0),
        ("conv", "haswell"): (0.7, 1.0), ("conv", "host"): (0.7, 1.0)}


def workloads() -> list[Workload]:
    return [
        _matmul(1024),
        _dense(1024, 1024, 1024),
        *(_conv(c, h, c, 3, 1, 1) for c, h in ((64, 56), (128, 28), (256, 14), (512, 7))),
        _depthwise(144, 56),
    ]


def _kind(w: Workload) -> str:
    return "gemm" if w.numpy_fn is not None else "conv"


def _reference(w: Workload, arrays: list) -> tuple[str, object]:
    return ("numpy", w.numpy_fn(arrays)) if w.numpy_fn is not None else ("torch",
                                                                          w.torch_fn(arrays))


def _blas_kernels() -> str:
    from threadpoolctl import threadpool_info

    found = [f"{i.get('internal_api')} {i.get('version')} kernel={i.get('architecture')} "
             f"threads={i.get('num_threads')}" for i in threadpool_info()
             if i.get("internal_api") == "openblas"]
    return "; ".join(found) or "no OpenBLAS found"


def run_target(name: str, trials: int, only: str, rounds: int, log_dir: Path) -> list[dict]:
    """Measure every workload on one target (in this process); returns one row per workload."""
    import numpy as np  # after the parent set the environment of this process
    import torch

    torch.set_num_threads(2)
    target = TARGETS[name]
    np.ones((64, 64), "float32") @ np.ones((64, 64), "float32")  # load OpenBLAS's kernel
    print(f"== target {target!r} ({tl.Target(target).cpu_signature}); numpy: {_blas_kernels()}; "
          f"torch {torch.__version__} threads={torch.get_num_threads()} "
          f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', 'default')}", flush=True)
    log = log_dir / f"bench_targets_{name}.jsonl"
    rows = []
    for w in workloads():
        if not any(part in w.label for part in only.split(",")):
            continue
        row: dict = {"label": w.label, "target": name, "kind": _kind(w)}
        kernels = {}
        for mode in ("fallback", "tuned"):
            if mode == "tuned":
                if trials <= 0:
                    break
                task = autotune.create_task(w.task_name, w.task_args, target=target)
                autotune.tune(task, trials=trials, log_file=log, progress=False)
            with warnings.catch_warnings(), tl.Target(target):
                warnings.simplefilter("ignore")
                kernels[mode], arrays = _ours(w, str(log) if mode == "tuned" else None)
            ref_name, ref = _reference(w, arrays)
            result = compare(kernels[mode], ref, repeat=rounds)
            ours, theirs = result.gflops(w.flop)
            row["ref"] = ref_name
            row[mode] = {"gflops": ours, "ref_gflops": theirs, "ratio": result.speedup}
        if "tuned" in kernels:
            # The two rows above meet the reference at different moments of a noisy machine;
            # whether tuning ended at or above the fallback is judged side by side.
            row["tuned_vs_fallback"] = compare(kernels["tuned"], kernels["fallback"],
                                               repeat=rounds).speedup
        rows.append(row)
        print(_format(row), flush=True)
    return rows


def _mark(ratio: float, bar: float) -> str:
    return f"x{ratio:5.3f} {'ok ' if ratio >= bar else 'LOW'}"


def _format(row: dict) -> str:
    fallback_bar, tuned_bar = BARS[(row["kind"], row["target"])]
    cells = [f"{row['target']:<8}", f"{row['label']:<30}", f"{row['ref']:<5}"]
    for mode, bar in (("fallback", fallback_bar), ("tuned", tuned_bar)):
        m = row.get(mode)
        if m is None:
            cells.append(f"{'-':>35}")
        else:
            cells.append(f"{m['gflops']:6.1f} vs {m['ref_gflops']:6.1f} GFLOP/s "
                         f"{_mark(m['ratio'], bar)}")
    if "tuned_vs_fallback" in row:
        cells.append(f"x{row['tuned_vs_fallback']:5.3f}")
    return " | ".join(cells)


def _header() -> str:
    return (f"{'target':<8} | {'workload':<30} | {'ref':<5} | {'fallback: ours vs ref, ratio':<35}"
            f" | {'tuned: ours vs ref, ratio':<35} | tuned vs fallback")


#: Targets of the instruction-mix table (compiled here, run elsewhere).
MIX_TARGETS = {
    "haswell": "llvm -mcpu=haswell",
    "host": "llvm",
    "neon": "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod",
    "sve": "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1",
    "rvv": "llvm -mtriple=riscv64-linux-gnu -mattr=+v,+f,+d",
}


def mix_table(only: str) -> None:
    """Print the inner-loop instruction mix of each workload's fallback kernel per target."""
    print(f"{'target':<8} | {'workload':<30} | {'insns':>5} | {'FMAs':>4} | {'bytes':>5} | "
          f"{'FMA/byte':>8} | {'loop spills':>11} | {'kernel spills':>13}")
    for name, spec in MIX_TARGETS.items():
        target = tl.Target(spec)
        for w in workloads():
            if not any(part in w.label for part in only.split(",")):
                continue
            with warnings.catch_warnings(), target:
                warnings.simplefilter("ignore")
                inputs, out, schedule = w.build()
                asm = tl.build(schedule([out]), [*inputs, out], name="kernel").get_source("asm")
            mix = inner_loop_mix(asm, target)
            if mix is None:
                print(f"{name:<8} | {w.label:<30} | no loop found")
                continue
            print(f"{name:<8} | {w.label:<30} | {mix.instructions:>5} | {mix.fmas:>4} | "
                  f"{mix.loaded_bytes:>5} | {mix.fmas_per_byte:>8.3f} | {mix.stack_refs:>11} | "
                  f"{spills(asm, target):>13}", flush=True)


def stack_table(only: str, targets: str) -> int:
    """Print each register-blocked kernel's innermost loops that touch the stack, per target;
    returns how many kernels have one."""
    names = targets.split(",") if targets else list(MIX_TARGETS)
    unknown = [n for n in names if n not in MIX_TARGETS]
    if unknown:
        raise SystemExit(f"unknown targets {unknown}: use {', '.join(MIX_TARGETS)}")
    print(f"{'target':<8} | {'kernel':<26} | {'loops':>5} | {'FMA loops':>9} | "
          "loops touching the stack: FMAs, stack references, instructions")
    found = 0
    for name in names:
        target = tl.Target(MIX_TARGETS[name])
        for kernel in blocked_kernels(only):
            with warnings.catch_warnings(), target:
                warnings.simplefilter("ignore")
                s, tensors = kernel.build()
                asm = tl.build(s, tensors, name="kernel").get_source("asm")
            loops = inner_loops(asm, target)
            touching = [f"({m.fmas}, {m.stack_refs}, {m.instructions})"
                        for m in loops if m.stack_refs]
            found += bool(touching)
            print(f"{name:<8} | {kernel.label:<26} | {len(loops):>5} | "
                  f"{sum(m.fmas > 0 for m in loops):>9} | {' '.join(touching) or '-'}",
                  flush=True)
    print(f"{found} kernels with an inner loop touching the stack")
    return found


def _child_env(name: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_UNSET[name]}
    env.update(ENV_SET[name])
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300, help="tuning trials per workload")
    parser.add_argument("--targets", default="haswell,host", help="comma-separated: haswell,host")
    parser.add_argument("--only", default="", help="run workloads whose label contains one of these (comma-separated)")
    parser.add_argument("--rounds", type=int, default=7, help="alternating timing rounds")
    parser.add_argument("--log-dir", default=None, help="where tuning logs go (resumed)")
    parser.add_argument("--mix", action="store_true",
                        help="print the inner-loop instruction mix per target (no timing)")
    parser.add_argument("--stack", action="store_true",
                        help="list the register-blocked kernels' inner loops that touch the stack "
                             "(--only: kernel families, --targets: of " + ", ".join(MIX_TARGETS)
                             + ")")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mix:
        mix_table(args.only)
        return
    if args.stack:
        targets = "" if args.targets == parser.get_default("targets") else args.targets
        raise SystemExit(1 if stack_table(args.only, targets) else 0)
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="bench_targets_"))
    log_dir.mkdir(parents=True, exist_ok=True)
    if args.child:
        rows = run_target(args.child, args.trials, args.only, args.rounds, log_dir)
        Path(args.out).write_text(json.dumps(rows))
        return
    rows = []
    for name in args.targets.split(","):
        if name not in TARGETS:
            raise SystemExit(f"unknown target {name!r}: use {', '.join(TARGETS)}")
        out = log_dir / f"rows_{name}.json"
        cmd = [sys.executable, __file__, "--child", name, "--out", str(out),
               "--trials", str(args.trials), "--only", args.only, "--rounds", str(args.rounds),
               "--log-dir", str(log_dir)]
        subprocess.run(cmd, env=_child_env(name), check=True)
        rows += json.loads(out.read_text())
    print(f"\nSummary ({args.trials} trials per tuned row; logs in {log_dir}):")
    print(_header())
    for row in rows:
        print(_format(row))


if __name__ == "__main__":
    main()
