"""The `tensorlang` commands: tune, best, plot, lower, merge and model, on click.

Each command is a thin layer: `ops` resolves OP into a workload, `autotune` tunes it, `kernels`
checks and times the result, `logs` reads logs back. Every error a user can cause is turned into
a one-line message and a non-zero exit code by `tensorlang.cli.main`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

import autotune
import tensorlang as tl
import topi.graph as tg
from autotune import FallbackConfig, InstantiationError
from autotune.result import gflops
from tensorlang.benchmark import compare
from tensorlang.runtime.toolchain import build_runner
from topi.graph.model_io import random_inputs

from .generation import load_gguf_model, parse_ids
from .kernels import WrongResult, check_close, instantiate, judge
from .logs import (
    LogError,
    best_per_workload,
    curves,
    import_templates,
    logged_best,
    plot_curves,
    read_log,
)
from .models import (
    ModelError,
    check_log,
    checksum,
    load_graph,
    max_error,
    onnxruntime_runner,
    parse_shape,
)
from .ops import OpError, Window, Workload, op_table, resolve
from .table import format_table

TUNERS = ("xgb", "evolutionary", "ga", "random", "grid")


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn the errors a user's input causes into a one-line ClickException."""
    try:
        yield
    except (OpError, LogError, WrongResult, ModelError) as err:
        raise click.ClickException(str(err)) from None
    except (ValueError, TypeError, tl.ScheduleError, InstantiationError) as err:
        raise click.ClickException(f"{type(err).__name__}: {err}") from None


def _window_value(ctx: click.Context, param: click.Parameter, text: str) -> Any:
    """`--stride 2`, `--padding 1,1` or `--padding SAME`: an int, a tuple or SAME/VALID."""
    if text.upper() in ("SAME", "VALID"):
        return text.upper()
    try:
        values = tuple(int(p) for p in text.split(","))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not an int or a comma-separated list") from None
    return values[0] if len(values) == 1 else values


def workload_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options that say which kernel: OP, its size, dtype, window and target."""
    options = [
        click.argument("op"),
        click.option("--shape", help="the op's sizes, e.g. 64,64,64 (see the op table)"),
        click.option("--args", "args_", metavar="LITERAL",
                     help="the template's arguments as a Python literal, instead of --shape"),
        click.option("--dtype", default="float32", show_default=True),
        click.option("--stride", default="1", show_default=True, callback=_window_value,
                     help="convolutions: an int or h,w"),
        click.option("--padding", default="0", show_default=True, callback=_window_value,
                     help="convolutions: int, h,w, top,left,bottom,right, SAME or VALID"),
        click.option("--dilation", default="1", show_default=True, callback=_window_value,
                     help="convolutions: an int or h,w"),
        click.option("--target", default="llvm", show_default=True,
                     help="e.g. 'llvm -mcpu=haswell' for AVX2 code"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def search_options(budget: str, default_log: str) -> Callable[[Callable[..., Any]],
                                                              Callable[..., Any]]:
    """--trials (measurements `budget`), --log, --tuner and --seed: what every tuning command
    takes."""
    options = [
        click.option("--trials", "-n", type=click.IntRange(min=1), default=200,
                     show_default=True,
                     help=f"measurements {budget}, counting those already in the log"),
        click.option("--log", type=click.Path(dir_okay=False),
                     help=f"JSON-lines log to append to and resume from  [default: {default_log}]"),
        click.option("--tuner", type=click.Choice(TUNERS),
                     help="the search [default: each task's own: xgb for templates, evolutionary "
                          "for auto-scheduled tasks]"),
        click.option("--seed", type=int, help="makes the search reproducible (up to timing noise)"),
    ]

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def _task(op: str, shape: str | None, args_: str | None, dtype: str, stride: Any,
          padding: Any, dilation: Any, target: str) -> tuple[Workload, autotune.Task]:
    with user_errors():
        tl.Target(target)  # a bad target fails here, not in every measurement
        workload = resolve(op, shape, args_, dtype, Window(stride, padding, dilation))
        task = autotune.create_task(workload.template, workload.args, target)
    return workload, task


OPS_HELP = ("\b\nOps (or a template of your own as module:function or file.py:function):\n"
            + op_table())


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(tl.__version__, prog_name="tensorlang")
def cli() -> None:
    """tensorlang: tune, inspect and plot tensor kernels.

    \b
    tensorlang tune matmul --shape 512,512,512 --trials 200 --log matmul.jsonl
    tensorlang best matmul.jsonl
    tensorlang plot matmul.jsonl -o curve.png
    tensorlang lower matmul --shape 512,512,512 --log matmul.jsonl --asm
    tensorlang merge farm.jsonl laptop.jsonl -o best.jsonl
    tensorlang model tune resnet18.onnx --trials 2000 --log resnet18.jsonl
    """


@cli.command(epilog=OPS_HELP + """

\b
Examples:
  tensorlang tune matmul --shape 1024,1024,1024 --trials 1000 --log matmul.jsonl
  tensorlang tune conv2d_nchw --shape 1,64,56,56,64,3,3 --padding 1 --trials 300
  tensorlang tune my_templates.py:matmul --shape 512,512,512 --trials 100""")
@workload_options
@search_options("of this workload in all", "OP.jsonl")
@click.option("--early-stopping", type=click.IntRange(min=1), metavar="N",
              help="stop after N trials without a new best")
@click.option("--rounds", type=click.IntRange(min=1), default=5, show_default=True,
              help="rounds of side-by-side timing for the final table")
@click.option("--no-compare", is_flag=True, help="skip the final side-by-side table")
@click.option("--quiet", "-q", is_flag=True, help="no progress bar")
def tune(op: str, shape: str | None, args_: str | None, dtype: str, stride: Any, padding: Any,
         dilation: Any, target: str, trials: int, log: str | None, tuner: str | None,
         seed: int | None, early_stopping: int | None, rounds: int, no_compare: bool,
         quiet: bool) -> None:
    """Tune OP for a shape, then compare the best kernel with the fallback and with numpy or
    PyTorch, timed side by side."""
    workload, task = _task(op, shape, args_, dtype, stride, padding, dilation, target)
    log = log or f"{op.rpartition(':')[2].removesuffix('.py')}.jsonl"
    click.echo(f"tuning {workload.label} ({task.name}, {len(task.config_space)} configs, "
               f"{task.flop / 1e9:.3g} GFLOP per run) on {target}, {tl.get_num_threads()} "
               f"threads: {tuner or getattr(task, 'default_tuner', 'xgb')} tuner, {trials} trials, log {log}")
    with user_errors():
        result = autotune.tune(task, trials=trials, tuner=tuner, log_file=log, seed=seed,
                               early_stopping=early_stopping, progress=not quiet)
    if result.config is None:
        raise click.ClickException(f"no config compiled and ran: see the errors in {log}")
    fallback_config = task.fallback_config()
    kept = fallback_config is not None and result.config.index == fallback_config.index
    click.echo(f"best config: {result.config}"
               + (" (the fallback config; no other config beat it)" if kept else ""))
    click.echo(_tuned_speed(result))
    if not no_compare:
        if not quiet and sys.stderr.isatty():  # progress, like the tuning bar
            click.echo("timing the best kernel side by side with the alternatives ...", err=True)
        with user_errors():
            rows = judge(task, workload, result.config, result.n_results, rounds)
        table = [(r.name, f"{r.gflops:.1f}", "" if r.tuned_speedup is None
                  else f"{r.tuned_speedup:.2f}x") for r in rows]
        click.echo(f"\n{workload.label}, timed side by side (median of {rounds} "
                   f"round{'s' if rounds > 1 else ''}):")
        click.echo(format_table(["kernel", "GFLOP/s", "tuned speed-up"], table, "lrr"))
        fallback = next(r for r in rows if r.name == "fallback")
        if kept:
            click.echo("(the tuned and fallback rows run the same kernel: their ratio is the "
                       "timing noise of this machine)")
        elif fallback.tuned_speedup is not None and fallback.tuned_speedup < 0.95:
            click.echo("note: the fallback config was faster here than the log's best (what "
                       "apply_history_best uses), although the tuner re-measured both side by "
                       "side: the machine's load changed; settle it again on a quiet machine "
                       "(autotune.remeasure)")
    click.echo(f"\nlog: {os.path.abspath(log)} ({result.n_results} trials of this workload)")


def _tuned_speed(result: autotune.Result) -> str:
    """What the tuner measured of its best: the re-measured verdict when it made one."""
    verdict = result.verdict
    if verdict is None:
        return f"best measured while tuning: {result.gflops:.1f} GFLOP/s"
    config = result.task.fallback_config()
    fallback = next((k for k, i in enumerate(verdict.inputs)
                     if config is not None and i.config.index == config.index), None)
    text = (f"best re-measured: {result.gflops:.1f} GFLOP/s, median of "
            f"{len(verdict.rounds[0])} rounds side by side with {len(verdict.inputs) - 1} other "
            "configs")
    if fallback is not None and verdict.results[fallback].ok:
        speedup = verdict.ratios[fallback] / verdict.ratios[verdict.chosen]
        text += (f" (fallback {gflops(result.task.flop, verdict.results[fallback]):.1f} "
                 f"GFLOP/s; best/fallback speed-up, median of the rounds: {speedup:.2f}x)")
    return text


@cli.command(epilog="""\b
Example:
  tensorlang best matmul.jsonl
  tensorlang best --import my_templates.py mine.jsonl""")
@click.argument("logs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--import", "imports", multiple=True, metavar="MODULE",
              help="a module or .py file registering the logged templates (for GFLOP/s)")
def best(logs: tuple[str, ...], imports: tuple[str, ...]) -> None:
    """The best record of every workload and target in LOGS, as a table."""
    with user_errors():
        import_templates(imports)
        records = [r for path in logs for r in read_log(path)]
        rows = best_per_workload(records)
    if not rows:
        raise click.ClickException(f"no successful measurement in {', '.join(logs)}")
    table = [(f"{b.record.template_name} {b.record.workload[1]}", b.record.target,
              str(b.trials), f"{b.record.result.mean * 1e3:.4f}",
              "-" if b.gflops is None else f"{b.gflops:.1f}",
              f"median of {len(b.record.rounds)}" if b.record.remeasured else "one trial",
              f"#{b.record.config_index} {b.record.knobs}") for b in rows]
    click.echo(format_table(["workload", "target", "trials", "best ms", "GFLOP/s", "timed",
                             "config"], table, "llrrrll"))


@cli.command(epilog="""\b
Example (compare two tuners at a glance):
  tensorlang tune matmul --shape 256,256,256 --trials 100 --tuner xgb --log xgb.jsonl
  tensorlang tune matmul --shape 256,256,256 --trials 100 --tuner random --log random.jsonl
  tensorlang plot xgb.jsonl random.jsonl -o curve.png""")
@click.argument("logs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--output", "-o", default="curve.png", show_default=True, type=click.Path(),
              help="image file (.png, .svg, .pdf)")
@click.option("--title", help="the plot's title")
@click.option("--import", "imports", multiple=True, metavar="MODULE",
              help="a module or .py file registering the logged templates")
def plot(logs: tuple[str, ...], output: str, title: str | None,
         imports: tuple[str, ...]) -> None:
    """Plot best GFLOP/s against trials, one line per log (legend: the file names)."""
    with user_errors():
        import_templates(imports)
        lines = [c for path in logs for c in curves(path)]
        plot_curves(lines, output, title)
    for c in lines:
        click.echo(f"{c.label}: {len(c.trial_gflops)} trials, best {max(c.best_so_far):.1f} "
                   "GFLOP/s")
    click.echo(f"wrote {output}")


@cli.command(epilog=OPS_HELP + """

\b
Examples:
  tensorlang lower matmul --shape 64,64,64                  # loop IR, fallback config
  tensorlang lower matmul --shape 64,64,64 --log x.jsonl --asm""")
@workload_options
@click.option("--log", type=click.Path(dir_okay=False),
              help="use the best config of this workload in the log (else the fallback)")
@click.option("--llvm", is_flag=True, help="print LLVM IR instead of loop IR")
@click.option("--asm", is_flag=True, help="print assembly instead of loop IR")
def lower(op: str, shape: str | None, args_: str | None, dtype: str, stride: Any,
          padding: Any, dilation: Any, target: str, log: str | None, llvm: bool,
          asm: bool) -> None:
    """Print the loop IR (or LLVM IR, or assembly) of OP's kernel for a shape."""
    if llvm and asm:
        raise click.UsageError("give at most one of --llvm and --asm")
    _, task = _task(op, shape, args_, dtype, stride, padding, dilation, target)
    with user_errors():
        config = logged_best(task, log) if log else None
        s, tensors = instantiate(task, config)
        where = f"config {config.index} from {log}" if config is not None else (
            f"the fallback config (no valid record of this workload in {log})" if log
            else "the fallback config")
        click.echo(f"# {task.name} {task.workload[1]} on {target}: {where}", err=True)
        trace_of = getattr(task, "trace", None)  # an auto-scheduled task: its schedule's steps
        if trace_of is not None:
            trace = trace_of(config if config is not None else FallbackConfig())
            click.echo("\n".join(f"#   {line}" for line in str(trace).splitlines()), err=True)
        if llvm or asm:
            module = tl.build(s, tensors, target=target, name="kernel")
            click.echo(module.get_source("asm" if asm else "ll"))
        else:
            click.echo(tl.lower(s, tensors, name="kernel"))


@cli.command(epilog="""\b
Example (the best of a farm's log and a laptop's, for apply_history_best):
  tensorlang merge farm.jsonl laptop.jsonl -o best.jsonl""")
@click.argument("logs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False),
              help="the merged log (may be one of LOGS: it is replaced once all are read)")
def merge(logs: tuple[str, ...], output: str) -> None:
    """Merge LOGS into one log holding the best record per workload and target; broken lines
    are skipped and counted."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the broken lines are counted in the summary below
        try:
            summary = autotune.record.merge(logs, output)
        except OSError as err:
            culprit = err.filename if err.filename in logs else output  # not its temporary file
            raise click.ClickException(f"cannot merge: {culprit}: {err.strerror or err}") \
                from None
        except ValueError as err:
            raise click.ClickException(f"cannot merge: {err}") from None
    click.echo(f"read {summary.lines} lines from {len(logs)} log{'s' if len(logs) > 1 else ''}: "
               f"kept {summary.written} (the best per workload and target), skipped "
               f"{summary.broken} broken")
    click.echo(f"wrote {output}")


@cli.group(epilog="""\b
Example:
  tensorlang model tune net.onnx --trials 500 --log net.jsonl
  tensorlang model build net.onnx --log net.jsonl --export net.so
  tensorlang model run net.onnx --log net.jsonl
  tensorlang model bench net.onnx --log net.jsonl --repeat 10
  tensorlang model run dynamic.onnx --shape data=1,3,224,224
  tensorlang model generate llama.gguf --prompt-ids 1,2,3 --tokens 128""")
def model() -> None:
    """Tune, build, run and benchmark an ONNX model with topi.graph; generate with a GGUF
    language model."""


Shapes = dict[str, tuple[int, ...]]


def _input_shapes(ctx: click.Context, param: click.Parameter, texts: tuple[str, ...]) -> Shapes:
    """The `--shape NAME=D1,D2,...` options as input name -> shape (each name once)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for text in texts:
        try:
            name, shape = parse_shape(text)
        except ValueError as err:
            raise click.BadParameter(str(err)) from None
        if name in shapes:
            raise click.BadParameter(f"input {name!r} is given twice")
        shapes[name] = shape
    return shapes


def model_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """MODEL, --target and --shape, which every model command takes."""
    command = click.option("--shape", "shapes", multiple=True, callback=_input_shapes,
                           metavar="NAME=D1,D2,...",
                           help="fix an input's shape, for models whose inputs have symbolic "
                                "dimensions (repeatable), e.g. --shape data=1,3,224,224")(command)
    command = click.option("--target", default="llvm", show_default=True,
                           help="e.g. 'llvm -mcpu=haswell' for AVX2 code")(command)
    return click.argument("model_path", metavar="MODEL.onnx")(command)


def log_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--log", type=click.Path(dir_okay=False),
                        help="tuning log whose best configs to use (else fallback configs)")(
        command)


def _built(model_path: str, shapes: Shapes, log: str | None,
           target: str) -> tuple[tg.Module, list[str]]:
    """The model (input shapes fixed by `shapes`) built with the best configs of `log`, and its
    output names in the file."""
    with user_errors():
        tl.Target(target)
        check_log(log)
        loaded = load_graph(model_path, shapes)
        return tg.build(loaded.graph, log_file=log, target=target), loaded.output_names


@model.command("tune", epilog="""\b
Example:
  tensorlang model tune net.onnx --trials 500 --log net.jsonl""")
@model_options
@search_options("over all the model's tasks", "MODEL.jsonl")
@click.option("--quiet", "-q", is_flag=True, help="no line per tuning round")
def model_tune(model_path: str, target: str, shapes: Shapes, trials: int, log: str | None,
               tuner: str | None, seed: int | None, quiet: bool) -> None:
    """Tune the model's tasks with one budget of TRIALS, spent where it gains the most."""
    log = log or f"{Path(model_path).stem}.jsonl"
    with user_errors():
        tl.Target(target)
        g = load_graph(model_path, shapes).graph
        tasks = tg.extract_tasks(g, target)
        search = tuner or "each task's default"
        click.echo(f"tuning {model_path}: {len(tasks)} tasks on {target}, {search} tuner, "
                   f"{trials} trials, log {log}")
        result = tg.tune(g, trials=trials, log_file=log, target=target, tuner=tuner, seed=seed,
                         progress=not quiet, stream=sys.stdout)
    if quiet:
        click.echo(str(result))
    click.echo(f"log: {os.path.abspath(log)}")


@model.command("build", epilog="""\b
Example:
  tensorlang model build net.onnx --log net.jsonl --export net.so""")
@model_options
@log_option
@click.option("--export", type=click.Path(dir_okay=False), metavar="FILE.so",
              help="write the model as one shared library (topi.graph.load_module loads it)")
def model_build(model_path: str, target: str, shapes: Shapes, log: str | None,
                export: str | None) -> None:
    """Build the model (tuned configs from --log), optionally exporting a shared library."""
    module, names = _built(model_path, shapes, log, target)
    click.echo(f"built {model_path} on {target}: {module.kernels} kernels")
    click.echo("inputs: " + ", ".join(str(i) for i in module.inputs))
    click.echo("outputs: " + ", ".join(f"{name}: {o.dtype}{list(o.shape)}"
                                       for name, o in zip(names, module.outputs)))
    if export:
        with user_errors():
            try:
                module.export_library(export)
            except (OSError, RuntimeError) as err:  # RuntimeError: the C compiler failed
                raise ModelError(f"cannot write {export}: {err}") from None
        click.echo(f"wrote {export}")


@model.command("run", epilog="""\b
Example:
  tensorlang model run net.onnx --log net.jsonl""")
@model_options
@log_option
@click.option("--seed", type=int, default=0, show_default=True, help="of the random inputs")
def model_run(model_path: str, target: str, shapes: Shapes, log: str | None, seed: int) -> None:
    """Run the model on random inputs of its shapes (as declared or fixed by --shape); print each output's shape and
    checksum, and its max error against onnxruntime when that is installed."""
    module, names = _built(model_path, shapes, log, target)
    inputs = random_inputs(module.inputs, seed)
    outputs = module(**inputs)
    reference = onnxruntime_runner(model_path)
    expected = reference(inputs) if reference is not None else [None] * len(outputs)
    rows = []
    for name, ours, theirs in zip(names, outputs, expected):
        error = "" if theirs is None else f"{max_error(ours, theirs):.3g}"
        rows.append((name, str(list(ours.shape)), str(ours.dtype), f"{checksum(ours):.6g}",
                     error))
    headers = ["output", "shape", "dtype", "checksum", "max error vs onnxruntime"]
    click.echo(format_table(headers, rows, "lllrr"))
    if reference is None:
        click.echo("onnxruntime is not installed: no reference to compare with")
        return
    with user_errors():
        for name, ours, theirs in zip(names, outputs, expected):
            check_close(ours, theirs, f"output {name!r} against onnxruntime")
    click.echo("outputs match onnxruntime")


@model.command("bench", epilog="""\b
Example:
  tensorlang model bench net.onnx --log net.jsonl --repeat 10""")
@model_options
@log_option
@click.option("--repeat", type=click.IntRange(min=1), default=7, show_default=True,
              help="timed rounds (alternating with onnxruntime when installed)")
def model_bench(model_path: str, target: str, shapes: Shapes, log: str | None,
                repeat: int) -> None:
    """Latency of the model, timed alternately with onnxruntime when it is installed (its idle
    threads do not spin); the ratio is the median of the pairwise ratios."""
    module, _ = _built(model_path, shapes, log, target)
    inputs = random_inputs(module.inputs)
    reference = onnxruntime_runner(model_path)
    if reference is None:
        result = module.benchmark(repeat=repeat, inputs=inputs)
        click.echo(f"tensorlang: {result}")
        click.echo("onnxruntime is not installed: nothing to compare with")
        return
    timing = compare(lambda: module(**inputs), lambda: reference(inputs), repeat=repeat)
    rows = [("tensorlang", f"{timing.ours * 1e3:.4f}"),
            ("onnxruntime", f"{timing.reference * 1e3:.4f}")]
    click.echo(f"{model_path}, timed alternately (median of {repeat} rounds):")
    click.echo(format_table(["runtime", "ms"], rows, "lr"))
    click.echo(f"onnxruntime time / ours: {timing.speedup:.2f}x "
               f"({'we are faster' if timing.speedup > 1 else 'onnxruntime is faster'})")


@model.command("generate", epilog="""\b
Example:
  tensorlang model generate llama.gguf --prompt-ids 1,2,3 --tokens 128
  tensorlang model generate llama.gguf --prompt-ids 1,2,3 --temperature 0.8 --seed 1""")
@click.argument("model_path", metavar="MODEL.gguf")
@click.option("--prompt-ids", required=True, help="the prompt's token ids, e.g. 1,2,3")
@click.option("--tokens", type=click.IntRange(min=1), default=128, show_default=True,
              help="new tokens to generate")
@click.option("--temperature", type=float, default=0.0, show_default=True,
              help="0 is greedy; above 0 samples")
@click.option("--top-k", type=click.IntRange(min=1), help="sample among the K likeliest")
@click.option("--top-p", type=float, help="sample among the likeliest of total probability P")
@click.option("--seed", type=int, help="of the sampling")
@click.option("--target", default="llvm", show_default=True)
def model_generate(model_path: str, prompt_ids: str, tokens: int, temperature: float,
                   top_k: int | None, top_p: float | None, seed: int | None,
                   target: str) -> None:
    """Generate TOKENS token ids after the prompt with a llama-family GGUF model (prefill, then
    one decode step per token with the KV cache); print them and the tokens per second."""
    with user_errors():
        tl.Target(target)
        ids = parse_ids(prompt_ids)
        lm = load_gguf_model(model_path, len(ids) + tokens, target)
        out = tg.generate(lm, ids, tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                          seed=seed)
    click.echo(",".join(str(t) for t in out[len(ids):]))
    t = lm.timing
    click.echo(f"prefill: {t.prompt_tokens} tokens in {t.prefill_s:.3f} s "
               f"({t.prefill_tokens_per_s:.1f} tokens/s); decode: {t.decoded_tokens} tokens in "
               f"{t.decode_s:.3f} s ({t.decode_tokens_per_s:.1f} tokens/s)")


@cli.command(epilog="""\b
Examples:
  tensorlang runner --target "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod" -o run-arm
  # on the device, with a library from export_library for that target:
  ./run-arm model.so data=input.npy --out output.npy""")
@click.option("--target", required=True, help="the target the runner runs on")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False),
              help="the runner program to write")
def runner(target: str, output: str) -> None:
    """Write a native program for TARGET that runs an exported library (a kernel's or a
    model's) on .npy files: PATH LIB.so NAME=IN.npy ... --out OUT.npy (one --out per output,
    in order; --repeat N also times N calls, --number K makes that N rounds of K calls each;
    PATH --describe prints what the device says of its CPU). It needs no Python on the device."""
    with user_errors():
        t = tl.Target(target)
        try:
            path = build_runner(t, output)
        except RuntimeError as err:
            raise click.ClickException(str(err)) from None
    click.echo(f"wrote {path} (runs on {t.arch})")


__all__ = ["cli"]
