"""Tuning a convolution from topi: the operator library's compute, schedule and template.

    python tutorials/05_tune_conv2d.py            # ResNet-18's 64x56x56 3x3 layer, 200 trials
    python tutorials/05_tune_conv2d.py --trials 1000
    TL_TUTORIAL_SMALL=1 python tutorials/05_tune_conv2d.py   # 16x14x14 -> 32, 8 trials (CI)

Lesson 04 wrote a template. topi already has one for every heavy operator, so tuning a
convolution needs no schedule code at all:
1. `topi.nn.conv2d_nchw` is the compute: it packs the kernel into blocks of 16 output channels
   (one AVX-512 vector) and produces a channel-blocked result, read back as NCHW.
2. `topi.x86.schedule_conv2d_nchw` is its x86 schedule. Outside `apply_history_best` it uses
   the template's fallback config, a good schedule without tuning.
3. `"conv2d_nchw.x86"` is the tunable template behind it. Its task arguments are plain shapes
   and attributes, `((N, C, H, W), (K, C, R, S), stride, padding, dilation, dtype)`; its knobs
   split the input channels (tile_ic), block output channels, rows and columns in registers
   (tile_oc, tile_oh, tile_ow) and unroll the kernel width (unroll_kw).
4. Inside `apply_history_best(log)` the same schedule function picks the tuned config of this
   workload. The result is checked against topi's numpy reference and timed side by side
   with the fallback and, when it is installed, PyTorch.

The command line does all of this in one line:
`tensorlang tune conv2d_nchw --shape 1,64,56,56,64,3,3 --padding 1 --trials 200`.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import warnings

import numpy as np

import autotune
import tensorlang as tl
import topi
from tensorlang.benchmark import compare

SMALL = os.environ.get("TL_TUTORIAL_SMALL") == "1"  # CI runs every tutorial at small sizes
C, H, K = (16, 14, 32) if SMALL else (64, 56, 64)  # input channels, height = width, output channels
R, STRIDE, PADDING = 3, 1, 1


def conv_kernel() -> tuple[tl.Schedule, list[tl.Tensor]]:
    """The topi compute and its x86 schedule (tuned inside apply_history_best, else fallback)."""
    data = tl.placeholder((1, C, H, H), "float32", name="data")
    kernel = tl.placeholder((K, C, R, R), "float32", name="kernel")
    out = topi.nn.conv2d_nchw(data, kernel, STRIDE, PADDING)
    return topi.x86.schedule_conv2d_nchw([out]), [data, kernel, out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8 if SMALL else 200)
    parser.add_argument("--log", default=os.path.join(tempfile.gettempdir(), "tutorial_conv.jsonl"))
    parser.add_argument("--seed", type=int, default=0)
    opts = parser.parse_args()

    # 1-2. The fallback schedule: no tuning yet (the template warns that it falls back).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s, args = conv_kernel()
    print(f"=== conv2d 1x{C}x{H}x{H} -> {K}, {R}x{R}, fallback config")
    print(tl.lower(s, args, name="conv2d"))
    fallback = tl.build(s, args, name="conv2d")

    # 3. The task of this workload and its space.
    task = autotune.create_task("conv2d_nchw.x86", args=(
        (1, C, H, H), (K, C, R, R), STRIDE, PADDING, 1, "float32"))
    print(f"\ntask {task.workload}: {len(task.config_space)} configs, "
          f"{task.flop / 1e9:.3g} GFLOP")
    print(task.config_space)
    if os.path.exists(opts.log):
        os.remove(opts.log)  # a fresh run (tune would otherwise resume from it)
    result = autotune.tune(task, trials=opts.trials, log_file=opts.log, seed=opts.seed)
    print(f"\nbest of {result.n_results} measured configs: {result.config}")

    # 4. The same schedule function, now inside apply_history_best.
    with autotune.apply_history_best(opts.log):
        s, args = conv_kernel()
    print("\n=== the tuned config's loops")
    print(tl.lower(s, args, name="conv2d"))
    tuned = tl.build(s, args, name="conv2d")

    rng = np.random.default_rng(0)
    data = rng.uniform(-1, 1, (1, C, H, H)).astype("float32")
    weight = rng.uniform(-1, 1, (K, C, R, R)).astype("float32")
    out = np.zeros((1, K, H, H), "float32")
    expected = topi.testing.conv2d_nchw_python(data, weight, STRIDE, PADDING)
    for f in (fallback, tuned):
        out[:] = 0
        f(data, weight, out)
        np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)

    rounds = 1 if SMALL else 7
    references = {"fallback": lambda: fallback(data, weight, out)}
    try:
        import torch

        torch.set_num_threads(tl.get_num_threads())
        d, w = torch.from_numpy(data), torch.from_numpy(weight)
        references["PyTorch"] = lambda: torch.nn.functional.conv2d(d, w, padding=PADDING)
    except ImportError:
        print("(PyTorch is not installed: comparing with the fallback only)")
    print(f"\nmeasured side by side, {tl.get_num_threads()} threads:")
    for name, reference in references.items():
        side = compare(lambda: tuned(data, weight, out), reference, repeat=rounds)
        ours, ref = side.gflops(task.flop)
        print(f"  tuned {ours:7.1f} GFLOP/s, {name} {ref:7.1f} GFLOP/s: "
              f"ratio {side.speedup:.2f}x")
    print("the fallback and the tuned kernel match numpy")


if __name__ == "__main__":
    main()
