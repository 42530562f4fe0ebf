"""What one child process of bench_compile_suites.py measures on one suite model.

Two children per model keep the memory figures apart: the eager child builds the model, runs it
once and saves its output as the reference; the compiled child builds it again, compiles it with
`backend="tensorlang"` and runs it twice (its peak RSS is read right then), then compiles it with
inductor and times eager, ours and inductor side by side. Each child appends its row so far as a
JSON line to its output file after every stage, so that a timeout or a crash keeps what was
measured before it.
"""

from __future__ import annotations

import json
import resource
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import suite_models

#: max |compiled - eager| / max |eager| below which an output is right.
TOLERANCE = 2e-3


def peak_rss_bytes() -> int:
    """The peak resident memory of this process so far (Linux counts ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Recorder:
    """The row of one child, appended to `path` as a JSON line after each stage."""

    def __init__(self, path: Path, **fields: Any) -> None:
        self.path = path
        self.row: dict[str, Any] = dict(fields)

    def stage(self, name: str, **fields: Any) -> None:
        self.row.update(fields, stage=name)
        with open(self.path, "a") as f:
            f.write(json.dumps(self.row) + "\n")


def relative_error(output: Any, reference: Any) -> tuple[float | None, str]:
    """max |output - reference| / max |reference| over the reference's finite values, or None
    and the reason where the output cannot be compared (shape, NaN where eager has none).

    It works through the values a chunk at a time, so that judging a large output (a language
    model's logits) adds little to the peak memory that the compiled side reports."""
    import torch

    if not isinstance(output, torch.Tensor):
        return None, f"the output is a {type(output).__name__}"
    if output.shape != reference.shape:
        return None, f"shape {tuple(output.shape)} instead of {tuple(reference.shape)}"
    ours, ref = output.detach().reshape(-1), reference.reshape(-1)
    largest, worst = 0.0, 0.0
    for start in range(0, ref.numel(), ERROR_CHUNK):
        o = ours[start:start + ERROR_CHUNK].double()
        r = ref[start:start + ERROR_CHUNK].double()
        finite = torch.isfinite(r)
        if bool((~torch.isfinite(o) & finite).any()):
            return None, "NaN or inf where eager has none"
        if bool(finite.any()):
            largest = max(largest, float(r[finite].abs().max()))
            worst = max(worst, float((o - r)[finite].abs().max()))
    return worst / max(largest, 1e-6), ""


#: values compared at once by `relative_error`
ERROR_CHUNK = 1 << 20


def _runner(fn: Callable[..., Any], built: suite_models.SuiteModel) -> Callable[[], Any]:
    """`fn` called on the model's inputs without autograd, returning the judged tensor."""
    import torch

    def run() -> Any:
        with torch.no_grad():
            return suite_models.logits(fn(*built.args, **built.kwargs))

    return run


def run_eager(built: suite_models.SuiteModel, reference: Path, out: Recorder) -> None:
    """Run the model once, save its output to `reference`; the first call's seconds and the
    peak RSS of building and running it."""
    import torch

    start = time.perf_counter()
    output = _runner(built.model, built)()
    seconds = time.perf_counter() - start
    torch.save(output.detach().clone(), reference)
    out.stage("eager", eager={"first_call_s": round(seconds, 3), "peak_rss": peak_rss_bytes()},
              weight_bytes=built.weight_bytes(), out_shape=list(output.shape))


def compile_and_check(built: suite_models.SuiteModel, backend: str,
                      reference: Any) -> tuple[Callable[[], Any] | None, dict[str, Any]]:
    """`torch.compile(model, backend=backend)` called twice: the first call's seconds (capture
    and a cold build), whether every graph ran compiled (`whole`, tensorlang's warnings), the
    error against `reference` and whether it is right on both calls; the compiled runner, or
    None where it failed or is wrong."""
    import torch
    from torch._dynamo.utils import counters

    from topi.graph.torch_compile import TensorlangCompileWarning

    counters.clear()
    run = _runner(torch.compile(built.model, backend=backend), built)
    result: dict[str, Any] = {}
    errors, fallbacks = [], []
    try:
        for call in ("first_call_s", "second_call_s"):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                start = time.perf_counter()
                output = run()
                result[call] = round(time.perf_counter() - start, 3)
            fallbacks += [str(w.message)[:200] for w in caught
                          if issubclass(w.category, TensorlangCompileWarning)]
            errors.append(relative_error(output, reference))
    except Exception as exc:  # noqa: BLE001 - a failure under the backend is this model's finding
        result["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        return None, result
    result["graphs"] = int(counters["stats"]["unique_graphs"])
    result["graph_breaks"] = int(sum(counters["graph_break"].values()))
    if backend == "tensorlang":
        result["whole"] = not fallbacks
        result["fallbacks"] = fallbacks[:3]
    values = [e for e, _ in errors]
    result["err"] = None if None in values else max(values)
    result["right"] = result["err"] is not None and result["err"] < TOLERANCE
    why = [w for _, w in errors if w]
    if why:
        result["why"] = why[0]
    return (run if result["right"] else None), result


def run_compiled(built: suite_models.SuiteModel, reference: Path, out: Recorder,
                 freezing: bool, rounds: int) -> None:
    """Ours (peak RSS read right after its two calls), then inductor, then, with `rounds`,
    the speed ratios inductor/ours and eager/ours timed side by side."""
    import torch

    ref = torch.load(reference)
    ours, result = compile_and_check(built, "tensorlang", ref)
    result["peak_rss"] = peak_rss_bytes()
    out.stage("tensorlang", tensorlang=result)
    if freezing:  # as PyTorch's CPU dashboard runs inductor: weights frozen and prepacked
        import torch._inductor.config

        torch._inductor.config.freezing = True
    inductor, result = compile_and_check(built, "inductor", ref)
    out.stage("inductor", inductor={**result, "freezing": freezing})
    if ours is not None and rounds:
        out.stage("speed", speed=_speed(ours, inductor, _runner(built.model, built), rounds))


def _speed(ours: Callable[[], Any], inductor: Callable[[], Any] | None,
           eager: Callable[[], Any], rounds: int) -> dict[str, float]:
    """Median per-round ratios of the others' time over ours, each pair timed alternately."""
    from tensorlang.benchmark import compare

    against_eager = compare(ours, eager, repeat=rounds)
    speed = {"ours_ms": against_eager.ours * 1e3, "eager_ms": against_eager.reference * 1e3,
             "eager/ours": against_eager.speedup}
    if inductor is not None:
        against_inductor = compare(ours, inductor, repeat=rounds)
        speed.update({"inductor_ms": against_inductor.reference * 1e3,
                      "inductor/ours": against_inductor.speedup})
    return {k: round(v, 4) for k, v in speed.items()}
