"""Core speed benchmarks: GEMM ladder, compile time, call overhead, threads, SIMD, reductions.

    python benchmarks/bench_core.py [--size 1024] [--compile | --cold-build resnet50]

Every ratio is measured side by side in this process (tensorlang.benchmark.compare alternates
the two sides and takes the median of pairwise ratios; the call overhead alternates steady-state
blocks, each after a discarded warm-up). Exits non-zero if any result is wrong.
To compare with a current numpy, unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for this command.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np

import tensorlang as tl
import topi
from tensorlang.benchmark import compare
from tensorlang.codegen import codegen
from tensorlang.codegen.target import as_target
from tensorlang.runtime.jit import parse_and_optimize

ROOT = Path(__file__).resolve().parent.parent


def load_ladder():
    path = ROOT / "tutorials" / "03_optimize_gemm.py"
    spec = importlib.util.spec_from_file_location("optimize_gemm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gemm_ladder(size: int) -> list[tuple[str, float, float]]:
    ladder = load_ladder()
    rng = np.random.default_rng(0)
    a = rng.random((size, size), dtype=np.float32)
    b = rng.random((size, size), dtype=np.float32)
    expected = a @ b
    rows = []
    for name, step in ladder.STEPS:
        s, args = step(size, size, size)
        f = tl.build(s, args)
        c = np.zeros((size, size), "float32")
        f(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-3)
        slow = name in ("naive", "blocking", "vectorize")
        result = compare(lambda: f(a, b, c), lambda: a @ b, repeat=1 if slow else 7)
        rows.append((name, result.gflops(2.0 * size**3)[0], result.speedup))
    return rows


def tutorial_gemm():
    """The hand-scheduled 1024^3 GEMM of tutorials/03_optimize_gemm.py (its last step)."""
    return load_ladder().parallel(1024, 1024, 1024)


def fallback_matmul_gemm():
    """topi's matmul at 1024^3 with the fallback config of the matmul.x86 template."""
    A = tl.placeholder((1024, 1024), name="A")
    B = tl.placeholder((1024, 1024), name="B")
    C = topi.nn.matmul(A, B)
    return topi.x86.schedule_matmul(C), [A, B, C]


def fallback_conv(shape: tuple[int, ...], kernel: tuple[int, ...], stride: int, padding: int):
    """A maker of topi's conv2d_nchw with the fallback config of the conv2d_nchw.x86 template
    (its kernel packed on each call, as the tuner measures it)."""
    def make():
        data = tl.placeholder(shape, name="data")
        weight = tl.placeholder(kernel, name="kernel")
        out = topi.nn.conv2d_nchw(data, weight, stride, padding, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the fallback config's warning
            return topi.x86.schedule_conv2d_nchw(out), [data, weight, out]
    return make


def blocked_conv(channels: int, size: int, filters: int, kernel: int, depthwise: bool = False,
                 block: int = 16):
    """A maker of topi's conv2d_NCHWc (or depthwise_conv2d_NCHWc) on 16-channel blocks with its
    fallback config, stride 1 and same padding: the kernels a model build compiles, its weights
    packed once at build time."""
    def make():
        data = tl.placeholder((1, channels // block, size, size, block), name="data")
        if depthwise:
            weight = tl.placeholder((channels // block, kernel, kernel, block), name="kernel")
            out = topi.nn.depthwise_conv2d_NCHWc(data, weight, 1, kernel // 2)
            schedule = topi.x86.schedule_depthwise_conv2d_NCHWc
        else:
            weight = tl.placeholder((filters // block, channels, kernel, kernel, block),
                                    name="kernel")
            out = topi.nn.conv2d_NCHWc(data, weight, 1, kernel // 2)
            schedule = topi.x86.schedule_conv2d_NCHWc
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the fallback config's warning
            return schedule(out), [data, weight, out]
    return make


COMPILE_BUDGET_MS = 100.0
"""What lowering and compiling one kernel may cost (DESIGN.md: a GEMM well under 50 ms, a conv
under 100 ms), on a slow CPU too."""


def compile_split(make=tutorial_gemm, repeat: int = 7) -> dict[str, float]:
    """Median milliseconds of lower / LLVM IR generation / LLVM optimise / machine code of the
    schedule `make()` returns, in CPU time of this thread: compiling runs on the calling thread,
    and on a shared machine wall time would count the time spent waiting for a core. Built for
    the current target (the host unless a `tl.Target` scope is open)."""
    target = as_target(None)
    steps = ("lower", "codegen", "llvm opt", "machine code")
    samples: dict[str, list[float]] = {step: [] for step in steps}
    for _ in range(repeat):
        s, args = make()
        t0 = time.thread_time()
        func = tl.lower(s, args, name="gemm").main
        t1 = time.thread_time()
        ll = codegen(func, target)
        t2 = time.thread_time()
        mod = parse_and_optimize(ll, target)
        t3 = time.thread_time()
        target.target_machine().emit_object(mod)
        t4 = time.thread_time()
        for key, value in zip(samples, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            samples[key].append(value * 1e3)
    result = {key: statistics.median(v) for key, v in samples.items()}
    result["total"] = sum(result.values())
    return result


COLD_BUILD_TIMED = {
    "graph passes": ("topi.graph.build", "optimize"),
    "memory plan": ("topi.graph.build", "plan_memory"),
    "kernel lowering": ("topi.graph.cache", "_lower"),
    "lower": ("tensorlang", "lower"),
    "codegen": ("topi.graph.cache", "codegen"),
    "llvm": ("topi.graph.cache", "emit_object"),
    "llvm opt": ("tensorlang.runtime.jit", "parse_and_optimize"),
    "waiting for llvm": ("concurrent.futures", "Future.result"),
}
"""The functions whose wall seconds (summed over their calls) split a cold model build; the child
process wraps them. LLVM runs on a thread of its own while the next kernel is lowered
(topi/graph/cache.py): the build's wall time is the main thread's steps plus its waits for LLVM."""


def _wrap_timer(totals: dict[str, float], step: str, module_name: str, path: str,
                clock=time.perf_counter) -> None:
    owner = importlib.import_module(module_name)
    *outer, attr = path.split(".")
    for name in outer:
        owner = getattr(owner, name)
    inner = getattr(owner, attr)

    @functools.wraps(inner)
    def timed(*args, **kwargs):
        start = clock()
        try:
            return inner(*args, **kwargs)
        finally:
            totals[step] += clock() - start

    setattr(owner, attr, timed)


def _cold_build_child(model: str) -> None:
    """In a fresh process: import torchvision's `model` through ONNX and build it untuned into
    an empty kernel cache; print the seconds in each function of COLD_BUILD_TIMED as JSON."""
    start = time.perf_counter()
    totals = dict.fromkeys(COLD_BUILD_TIMED, 0.0)
    import torch
    from bench_wild import _export, _vision

    import topi.graph as tg
    totals["python imports"] = time.perf_counter() - start
    for step, where in COLD_BUILD_TIMED.items():
        _wrap_timer(totals, step, *where)
    totals["llvm thread cpu"] = 0.0
    _wrap_timer(totals, "llvm thread cpu", "topi.graph.cache", "_finish", time.thread_time)
    t0 = time.perf_counter()
    torch.manual_seed(0)
    module, inputs = _vision(model)
    proto, _ = _export(module.eval(), inputs)
    t1 = time.perf_counter()
    g = tg.from_onnx(proto)
    t2, cpu, main_cpu = time.perf_counter(), time.process_time(), time.thread_time()
    with tempfile.TemporaryDirectory() as cache, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the untuned build lists its fallback workloads
        tg.build(g, cache_dir=cache)
        t3 = time.perf_counter()
    totals.update({"onnx export (torch)": t1 - t0, "from_onnx": t2 - t1, "build": t3 - t2,
                   "build cpu": time.process_time() - cpu,
                   "main thread cpu": time.thread_time() - main_cpu,
                   "kernels": tg.cache.STATS["compiled"]})
    print(json.dumps(totals))


def cold_build(model: str = "resnet50") -> dict[str, float]:
    """Wall seconds of a cold untuned build of torchvision's `model` in a fresh Python process
    with an empty kernel cache, by step: the build's wall time is the sum of the steps on the
    main thread (all but the LLVM thread's). Its CPU time too, in all and on the main and the
    LLVM thread: on a shared machine the wall time counts the waits for a core; with two free
    cores the build takes about the larger of the two threads' CPU times, one after the other
    their sum."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--cold-build-child", model],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    t = json.loads(out.stdout.strip().splitlines()[-1])
    lowering = t["kernel lowering"]
    return {
        "python imports": t["python imports"],
        "onnx export (torch)": t["onnx export (torch)"],
        "from_onnx": t["from_onnx"],
        "graph passes": t["graph passes"],
        "memory plan": t["memory plan"],
        "schedules": lowering - t["lower"] - t["codegen"],
        "lowering": t["lower"],
        "codegen": t["codegen"],
        "llvm opt (LLVM thread)": t["llvm opt"],
        "machine code (LLVM thread)": t["llvm"] - t["llvm opt"],
        "waiting for LLVM": t["waiting for llvm"],
        "link, pre-pack, rest": (t["build"] - lowering - t["waiting for llvm"]
                                 - t["graph passes"] - t["memory plan"]),
        "build (wall)": t["build"],
        "build (CPU, all threads)": t["build cpu"],
        "  main thread (CPU)": t["main thread cpu"],
        "  LLVM thread (CPU)": t["llvm thread cpu"],
        "process (wall)": time.perf_counter() - start,
        "kernels compiled": t["kernels"],
    }


def print_cold_build(model: str) -> None:
    split = cold_build(model)
    print(f"\ncold build of {model} (fresh process, empty kernel cache; wall seconds; "
          f"bar: build <= 20 s)")
    for step, value in split.items():
        print(f"  {step:<28}{value:>8.2f}" if isinstance(value, float) else
              f"  {step:<28}{value:>8}")


def llvm_pass_times(make=tutorial_gemm, top: int = 6) -> list[tuple[str, float]]:
    """The `top` LLVM passes (the optimiser's and the machine code's) by CPU milliseconds of
    one compile of the schedule `make()` returns, from LLVM's own pass timers: where a kernel's
    compile time goes, e.g. the loop and SLP vectorizers' memory analyses on a block of 144
    scalar stores, or loop strength reduction on a 7x7 filter packing."""
    target = as_target(None)
    s, args = make()
    ll = codegen(tl.lower(s, args, name="k").main, target)
    llvm.set_time_passes(True)
    try:
        target.target_machine().emit_object(parse_and_optimize(ll, target))
        report = llvm.report_and_reset_timings()
    finally:
        llvm.set_time_passes(False)
    times: dict[str, float] = {}
    for line in report.splitlines():
        # "0.1064 ( 31.7%)  0.0000 (  0.0%)  0.1064 ( 31.4%)  0.2147 ( 31.9%)  SLPVectorizerPass":
        # user, system, user + system and wall seconds; the user seconds are kept.
        fields = re.match(r"\s*([\d.]+) \(\s*[\d.]+%\)(?:\s+[\d.]+ \(\s*[\d.]+%\)){3}\s+(.+)$",
                          line)
        if fields and fields.group(2) != "Total":
            name = re.sub(r" #\d+$", "", fields.group(2))  # the n-th instance of a pass
            times[name] = times.get(name, 0.0) + float(fields.group(1)) * 1e3
    return sorted(times.items(), key=lambda kv: -kv[1])[:top]


def _steady_block(call, args: tuple, kwargs: dict, warmup: float, number: int) -> float:
    """Seconds per call of `call(*args, **kwargs)` over `number` calls, after a discarded warm-up
    of `warmup` seconds (ANCHORS.md: time each side in steady-state blocks)."""
    end = time.perf_counter() + warmup
    while time.perf_counter() < end:
        call(*args, **kwargs)
    start = time.perf_counter()
    for _ in range(number):
        call(*args, **kwargs)
    return (time.perf_counter() - start) / number


def call_overhead(repeat: int = 7, warmup: float = 0.15, number: int = 100_000
                  ) -> tuple[float, float, float]:
    """Median microseconds per Python call of a tiny 3-array kernel (`Module.__call__`) and of
    numpy's np.add(a, b, out=c) on the same 4-float arrays, and the median of their per-round
    ratios (ours / numpy: the bar is <= 2.5). The two sides run in alternating blocks."""
    A = tl.placeholder((4,), "float32", name="A")
    B = tl.placeholder((4,), "float32", name="B")
    C = tl.compute((4,), lambda i: A[i] + B[i], name="C")
    f = tl.build(tl.create_schedule(C.op), [A, B, C])
    a, b, c = (np.ones(4, "float32") for _ in range(3))
    f(a, b, c)
    assert (c == 2).all(), "tiny kernel computed a wrong result"
    rounds = []
    for _ in range(repeat):
        ours = _steady_block(f, (a, b, c), {}, warmup, number)
        ref = _steady_block(np.add, (a, b), {"out": c}, warmup, number)
        rounds.append((ours, ref))
    return (statistics.median(r[0] for r in rounds) * 1e6,
            statistics.median(r[1] for r in rounds) * 1e6,
            statistics.median(r[0] / r[1] for r in rounds))


def elementwise_kernel(n: int, vectorize: bool, parallel: bool):
    A = tl.placeholder((n,), "float32", name="A")
    B = tl.compute((n,), lambda i: tl.sqrt(A[i] * A[i] + 1.0) * A[i] + 0.5, name="B")
    s = tl.create_schedule(B.op)
    outer, inner = s[B].split(B.op.axis[0], factor=16)
    if vectorize:
        s[B].vectorize(inner)
    if parallel:
        s[B].parallel(outer)
    return tl.build(s, [A, B])


def check_elementwise(f, a: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a)
    f(a, out)
    np.testing.assert_allclose(out, np.sqrt(a * a + 1) * a + 0.5, rtol=1e-5)
    return out


def thread_speedup(n: int = 1 << 18) -> float:
    """Time with 1 thread / time with all threads, for a parallel vectorized elementwise kernel.

    The arrays fit in the L2 caches, so the kernel is bound by arithmetic, not by the memory bus
    that both cores share.
    """
    f = elementwise_kernel(n, vectorize=True, parallel=True)
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    out = check_elementwise(f, a)
    threads = tl.get_num_threads()

    def run_with(k: int):
        def call() -> None:
            tl.set_num_threads(k)
            f(a, out)

        return call

    result = compare(run_with(threads), run_with(1), repeat=7)
    tl.set_num_threads(threads)
    return result.speedup


def simd_speedup(n: int = 1 << 20) -> float:
    """Scalar-loop time / vectorized time for the same elementwise kernel on one thread."""
    scalar = elementwise_kernel(n, vectorize=False, parallel=False)
    vector = elementwise_kernel(n, vectorize=True, parallel=False)
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    out = check_elementwise(scalar, a)
    check_elementwise(vector, a)
    return compare(lambda: vector(a, out), lambda: scalar(a, out), repeat=7).speedup


def dot_kernel(n: int, lanes: int = 64):
    """A dot product reduced by every thread and every vector lane at once, via two rfactors:
    one gives each thread a part of k, the other gives each lane of a 64-wide vector (four
    AVX-512 registers, so four independent FMA chains) its own partial sum."""
    A = tl.placeholder((n,), "float32", name="A")
    B = tl.placeholder((n,), "float32", name="B")
    k = tl.reduce_axis((0, n), name="k")
    C = tl.compute((1,), lambda i: tl.sum(A[k] * B[k], axis=k), name="C")
    s = tl.create_schedule(C.op)
    part, _ = s[C].split(k, nparts=tl.get_num_threads())
    per_thread = s.rfactor(C, part)
    (inner,) = s[per_thread].op.reduce_axis
    _, lane = s[per_thread].split(inner, factor=lanes)
    partial = s.rfactor(per_thread, lane, factor_axis=2)  # lanes last: contiguous vectors
    thread, _, vector = s[partial].op.axis
    (steps,) = s[partial].op.reduce_axis
    s[partial].reorder(thread, steps, vector)
    s[partial].parallel(thread)
    s[partial].vectorize(vector)
    return tl.build(s, [A, B, C])


def dot_product_ratios(sizes: tuple[int, ...] = (1 << 16, 1 << 20, 1 << 22)
                       ) -> list[tuple[int, float]]:
    """(n, numpy time / our time) for float32 dot products of n elements."""
    rows = []
    rng = np.random.default_rng(0)
    for n in sizes:
        f = dot_kernel(n)
        a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
        c = np.zeros(1, "float32")
        f(a, b, c)
        np.testing.assert_allclose(c[0], np.dot(a, b), rtol=1e-4)
        result = compare(functools.partial(f, a, b, c), functools.partial(np.dot, a, b), repeat=7)
        rows.append((n, result.speedup))
    return rows


def print_compile_times() -> None:
    """The compile table (compile_split) and LLVM's slowest passes of each kernel."""
    print(f"\ncompile time of one kernel (median CPU ms; budget {COMPILE_BUDGET_MS:.0f})")
    # The AVX2 shape (6-row register blocks) is what an AVX2-only CPU compiles. The conv2d_nchw
    # rows pack their kernels on each call (as the tuner measures them); the NCHWc rows are what
    # a model build compiles.
    conv3 = fallback_conv((1, 64, 56, 56), (64, 64, 3, 3), 1, 1)
    stem = fallback_conv((1, 3, 224, 224), (64, 3, 7, 7), 2, 3)
    kernels = {"tutorial GEMM": (tutorial_gemm, "llvm"),
               "matmul.x86 fallback": (fallback_matmul_gemm, "llvm"),
               "same, AVX2": (fallback_matmul_gemm, "llvm -mcpu=haswell"),
               "conv 3x3 64x56x56": (conv3, "llvm"),
               "conv 7x7/2 (stem)": (stem, "llvm"),
               "NCHWc 3x3 64x56x56": (blocked_conv(64, 56, 64, 3), "llvm"),
               "NCHWc 1x1 256->64": (blocked_conv(256, 56, 64, 1), "llvm"),
               "depthwise 3x3 144": (blocked_conv(144, 56, 144, 3, depthwise=True), "llvm")}
    splits = {}
    for name, (make, target) in kernels.items():
        with tl.Target(target):
            splits[name] = compile_split(make)
    print(f"  {'step':<14}" + "".join(f"{name:>21}" for name in splits))
    for key in next(iter(splits.values())):
        print(f"  {key:<14}" + "".join(f"{split[key]:>21.1f}" for split in splits.values()))
    print("LLVM's slowest passes (CPU ms of one compile):")
    for name, (make, target) in kernels.items():
        with tl.Target(target):
            passes = llvm_pass_times(make)
        print(f"  {name:<22}" + ", ".join(f"{p} {ms:.0f}" for p, ms in passes))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="GEMM size")
    parser.add_argument("--compile", action="store_true",
                        help="only the compile times of single kernels")
    parser.add_argument("--cold-build", metavar="MODEL",
                        help="only time a cold untuned build of this torchvision model")
    parser.add_argument("--cold-build-child", metavar="MODEL", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.cold_build_child:
        _cold_build_child(opts.cold_build_child)
        return 0
    if opts.cold_build:
        print_cold_build(opts.cold_build)
        return 0
    if opts.compile:
        print_compile_times()
        return 0
    try:
        print(f"threads: {tl.get_num_threads()}, target: {as_target('llvm')}")
        print(f"\nGEMM ladder {opts.size}^3 float32 (ratio = numpy time / our time)")
        print(f"{'step':<18}{'GFLOP/s':>10}{'vs numpy':>10}")
        for name, gflops, ratio in gemm_ladder(opts.size):
            print(f"{name:<18}{gflops:>10.1f}{ratio:>10.2f}")
        print_compile_times()
        ours, ref, ratio = call_overhead()
        print(f"\ncall overhead, 3 arrays of 4 floats: {ours:.2f} us, numpy np.add(out=) "
              f"{ref:.2f} us: {ratio:.2f}x numpy's call (bar <= 2.5x)")
        print(f"parallel elementwise, {tl.get_num_threads()} threads vs 1: {thread_speedup():.2f}x")
        print(f"vectorized vs scalar elementwise (1 thread): {simd_speedup():.2f}x")
        for n, ratio in dot_product_ratios():
            print(f"dot product of {n} floats (rfactor: threads x lanes): {ratio:.2f}x np.dot")
        print_cold_build("resnet50")
    except AssertionError as exc:
        print(f"WRONG RESULT: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
