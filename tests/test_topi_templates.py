"""The topi tuning templates: task creation, correctness of random configs, fallback configs,
and schedule_<op> picking the tuned config inside apply_history_best."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from topi_check import assert_close, shape_of, uniform

import autotune
import tensorlang as tl
import topi
from autotune.record import encode
from topi import nn, x86
from topi import testing as ref
from topi.x86 import conv2d as conv2d_x86

CASES = {
    "conv2d_nchw.x86": (((1, 19, 9, 9), (20, 19, 3, 3), 1, 1, 1, "float32"),
                        lambda a, b: ref.conv2d_nchw_python(a, b, 1, 1, 1), 19 * 9),
    "conv2d_nhwc.x86": (((2, 7, 7, 5), (3, 3, 5, 18), 2, "SAME", 1, "float32"),
                        lambda a, b: ref.conv2d_nhwc_python(a, b, 2, "SAME", 1), 45),
    "depthwise_conv2d_nchw.x86": (((1, 6, 11, 11), (6, 2, 3, 3), 1, (1, 2), 1, "float32"),
                                  lambda a, b: ref.depthwise_conv2d_nchw_python(a, b, 1, (1, 2)),
                                  9),
    "dense.x86": (((10, 40), (35, 40), "float32"), ref.dense_python, 40),
    "matmul.x86": (((10, 40), (40, 35), "float32"), ref.matmul_python, 40),
    "batch_matmul.x86": (((3, 10, 24), (1, 20, 24), "float32"), ref.batch_matmul_python, 24),
    "conv2d_NCHWc.x86": (((1, 3, 9, 9, 8), (2, 24, 3, 3, 8), 2, 1, 1, "float32"),
                         lambda a, b: ref.conv2d_NCHWc_python(a, b, 2, 1, 1), 24 * 9),
    "depthwise_conv2d_NCHWc.x86": (((1, 3, 13, 11, 4), (3, 3, 3, 4), 2, (1, 2), 1, "float32"),
                                   lambda a, b: ref.depthwise_conv2d_NCHWc_python(a, b, 2, (1, 2)),
                                   9),
}


def _check(task, config, rng):
    _, reference, reduction = CASES[task.name]
    s, tensors = task.instantiate(config)
    f = tl.build(s, tensors, target=task.compile_target)
    arrays = [uniform(rng, *shape_of(t)) for t in tensors[:-1]]
    out = np.zeros(shape_of(tensors[-1]), "float32")
    f(*arrays, out)
    assert_close(out, reference(*arrays), reduction)


def test_all_templates_registered():
    for name in x86.TEMPLATES:
        assert name in CASES


@pytest.mark.parametrize("name", sorted(CASES))
def test_random_configs_are_correct(name, rng):
    task = autotune.create_task(name, CASES[name][0])
    assert len(task.config_space) > 1
    assert task.flop > 0
    valid = task.config_space.valid_indices()
    for index in rng.choice(valid, size=min(3, len(valid)), replace=False):
        try:
            _check(task, int(index), rng)
        except autotune.InstantiationError:
            continue  # a config the template rejects (too many registers) is never measured


def test_every_config_of_the_batch_one_dense_space_is_correct(rng):
    """Batch-1 dense has its own space (vector lanes over K, outputs per step)."""
    task = autotune.create_task("dense.x86", ((1, 45), (37, 45), "float32"))
    assert set(task.config_space.knobs) == {"gemv_lanes", "gemv_rows"}
    for index in range(len(task.config_space)):
        _check(task, index, rng)


def test_documented_task_arguments():
    """The task forms of shared/API.md."""
    m, k, n = 64, 48, 32
    assert autotune.create_task("matmul.x86", args=((m, k), (k, n), "float32")).flop == 2 * m * n * k
    assert autotune.create_task("dense.x86", args=((m, k), (n, k), "float32")).flop == 2 * m * n * k
    task = autotune.create_task("conv2d_nchw.x86",
                                args=((1, 16, 8, 8), (32, 16, 3, 3), 1, 1, 1, "float32"))
    assert task.flop == 2 * 32 * 16 * 8 * 8 * 9
    assert set(task.config_space.knobs) >= {"tile_ic", "tile_oc", "tile_ow", "unroll_kw"}


def _conv_graph():
    data = tl.placeholder((1, 19, 9, 9), name="data")
    kernel = tl.placeholder((20, 19, 3, 3), name="kernel")
    return data, kernel, nn.conv2d_nchw(data, kernel, 1, 1, 1)


def _lowered(out, inputs):
    return str(tl.lower(x86.schedule_conv2d_nchw(out), [*inputs, out]))


def test_schedule_uses_tuned_config(tmp_path, rng):
    task = autotune.create_task("conv2d_nchw.x86", CASES["conv2d_nchw.x86"][0])
    data, kernel, out = _conv_graph()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fallback_ir = _lowered(out, [data, kernel])
    # A config unlike the fallback: no kw unrolling and the smallest channel split.
    chosen = next(
        i for i in task.config_space.valid_indices()
        if not task.config_space.get(int(i))["unroll_kw"].val
        and task.config_space.get(int(i))["tile_ic"].size[-1] == 1
    )
    config = task.config_space.get(int(chosen))
    log = tmp_path / "conv.jsonl"
    result = autotune.MeasureResult(costs=(1e-4,), error_no=autotune.MeasureErrorNo.NO_ERROR)
    log.write_text(encode(autotune.MeasureInput(task, config), result) + "\n")
    with autotune.apply_history_best(str(log)):
        tuned_ir = _lowered(out, [data, kernel])
        tuned_s, tuned_args = task.instantiate(config)
    assert tuned_ir != fallback_ir
    assert tuned_ir == str(tl.lower(tuned_s, tuned_args))
    # And the tuned schedule still computes the convolution.
    f = tl.build(x86.schedule_conv2d_nchw(out), [data, kernel, out])
    a, b = uniform(rng, 1, 19, 9, 9), uniform(rng, 20, 19, 3, 3)
    result_array = np.zeros((1, 20, 9, 9), "float32")
    f(a, b, result_array)
    assert_close(result_array, ref.conv2d_nchw_python(a, b, 1, 1, 1), 19 * 9)


def test_fallback_config_is_explicit():
    """Without records the conv schedule uses the block and channel step its fallback helpers
    derive from the target: on this AVX-512 host two vectors of output channels x one row of 14
    columns (28 of the 29 accumulators), 8 input channels per step (1.2 KiB each of L1)."""
    task = autotune.create_task("conv2d_nchw.x86", ((1, 32, 14, 14), (64, 32, 3, 3), 1, 1, 1,
                                                    "float32"))
    fallback = autotune.FallbackConfig()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        task.template.run(fallback, task.args)
    oc, rows, cols = conv2d_x86.fallback_block((14, 14), 64 // 16)
    assert (fallback["tile_oc"].val, fallback["tile_oh"].size[-1],
            fallback["tile_ow"].size[-1]) == (oc, rows, cols) == (2, 1, 14)
    assert fallback["tile_ic"].size[-1] == conv2d_x86.fallback_tile_ic(
        32, 2 * 16, (1, 14), (3, 3, 1, 1)) == 8
    assert fallback["unroll_kw"].val is False
    assert task.config_space.find(fallback.knob_values()) is not None
    assert topi.x86.schedule_conv2d_nchw is x86.schedule_conv2d_nchw


@pytest.mark.parametrize("target, height, packs_by_default", [
    ("llvm -mcpu=haswell", 6, True), ("llvm -mcpu=skylake-avx512", 4, False),
])
@pytest.mark.parametrize("name", ["dense.x86", "matmul.x86", "batch_matmul.x86"])
def test_gemm_left_operand_row_panels_are_one_register_block_high(name, target, height,
                                                                  packs_by_default):
    """The fallback copies the left operand into its row panels on AVX2 (6-row blocks) and
    reads it in place on AVX-512 (4-row blocks); the tuner may choose either."""
    task = autotune.create_task(name, CASES[name][0], target=target)
    assert [e.val for e in task.config_space.knobs["pack_rows"].entities] == [True, False]
    fallback = task.fallback_config()
    assert fallback["pack_rows"].val is packs_by_default
    for pack in (True, False):
        s, _ = task.instantiate(_with_knob(task, fallback, "pack_rows", pack))
        rows = [st for st in s.stages if getattr(st.op, "tag", "") == "injective,row_pack"]
        assert [shape_of(st.op.output(0))[-1] for st in rows] == [height]
        assert (rows[0].attach.name == "INLINE") is not pack


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm"])
@pytest.mark.parametrize("name", ["dense.x86", "matmul.x86", "batch_matmul.x86"])
def test_gemm_is_correct_with_and_without_row_panels(name, target, rng):
    """10 rows fill no whole panel of 6 or 4: the copy's last panel is partly zero padding."""
    task = autotune.create_task(name, CASES[name][0], target=target)
    fallback = task.fallback_config()
    for pack in (True, False):
        _check(task, _with_knob(task, fallback, "pack_rows", pack), rng)


def _with_knob(task: autotune.Task, config: autotune.ConfigEntity, name: str,
               value: object) -> autotune.ConfigEntity:
    knobs = {n: config[n].to_json() for n in task.config_space.knobs}
    found = task.config_space.find({**knobs, name: value})
    assert found is not None, (config, name, value)
    return found


#: Products wide enough that the row blocks run as a serial loop of their own (61 rows: 10 blocks
#: of 6 or 15 of 4, and one row more).
WIDE_GEMMS = {"dense.x86": ((61, 32), (1024, 32), "float32"),
              "matmul.x86": ((61, 32), (32, 1024), "float32"),
              "batch_matmul.x86": ((2, 61, 32), (2, 1024, 32), "float32")}


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm"])
@pytest.mark.parametrize("name", sorted(WIDE_GEMMS))
def test_gemm_register_block_over_row_panels_has_one_copy(name, target):
    """Whether the row panels are copied or read in place, the rows of the last, partial panel
    read inside the left operand (a clamped row past the edge), so the last register block
    computes all its rows like the others: one copy of the block's loop over K, not a copy of
    its own that stops at the edge."""
    task = autotune.create_task(name, WIDE_GEMMS[name], target=target)
    fallback = task.fallback_config()
    for pack in (True, False):
        with tl.Target(target):
            s, tensors = task.instantiate(_with_knob(task, fallback, "pack_rows", pack))
            lowered = str(tl.lower(s, tensors))
        assert lowered.count("for k.outer in range(") == 1
