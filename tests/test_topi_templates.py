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
from topi.x86.config import config_for

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
    "group_conv2d_NCHWc.x86": (((1, 6, 11, 7, 8), (3, 48, 3, 3, 16), 2, 1, 1, 2, "float32"),
                               lambda a, b: ref.group_conv2d_NCHWc_python(a, b, 2, 1, 1, 2),
                               24 * 9),
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


@pytest.mark.parametrize("n,k,streamed", [(37, 45, False), (97, 13, True)])
def test_every_config_of_the_batch_one_dense_space_is_correct(n, k, streamed, rng):
    """Batch-1 dense has its own space (vector lanes over K, outputs per step, rows read side
    by side or each whole in turn, the latter by default for a weight of many short rows)."""
    task = autotune.create_task("dense.x86", ((1, k), (n, k), "float32"))
    assert set(task.config_space.knobs) == {"gemv_lanes", "gemv_rows", "gemv_row_major"}
    assert task.fallback_config()["gemv_row_major"].val is streamed
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


GEMM_OPS = {  # op, its schedule, its template, operand shapes, the numpy result
    "dense": (nn.dense, x86.schedule_dense, "dense.x86", ((13, 20), (17, 20)), ref.dense_python),
    "matmul": (nn.matmul, x86.schedule_matmul, "matmul.x86", ((13, 20), (20, 17)),
               ref.matmul_python),
    "matmul transposed": (lambda a, b: nn.matmul(a, b, True, True), x86.schedule_matmul,
                          "matmul.x86", ((20, 13), (17, 20)),
                          lambda a, b: ref.matmul_python(a, b, True, True)),
    "matmul batched": (nn.matmul, x86.schedule_matmul, "matmul.x86", ((3, 13, 20), (1, 20, 17)),
                       ref.matmul_python),
    "batch_matmul": (nn.batch_matmul, x86.schedule_batch_matmul, "batch_matmul.x86",
                     ((2, 13, 20), (2, 17, 20)), ref.batch_matmul_python),
}


@pytest.mark.parametrize("op", sorted(GEMM_OPS))
def test_a_gemm_op_finds_the_record_tuned_for_its_task(op, tmp_path, rng):
    """The workload a GEMM op records is its task's arguments, so tuning the task tunes the op:
    its schedule picks the tuned config (not the fallback) and computes the product."""
    make, schedule, template, shapes, reference = GEMM_OPS[op]
    inputs = [tl.placeholder(shape, name=f"in{k}") for k, shape in enumerate(shapes)]
    out = make(*inputs)
    task = autotune.create_task(template, out.op.attrs["workload"])
    assert task.flop == 2 * np.prod(shape_of(out)) * 20
    fallback = task.fallback_config()
    config = next(task.config_space.get(int(i)) for i in task.config_space.valid_indices()
                  if task.config_space.get(int(i)).to_json() != fallback.to_json())
    log = tmp_path / "gemm.jsonl"
    result = autotune.MeasureResult(costs=(1e-4,), error_no=autotune.MeasureErrorNo.NO_ERROR)
    log.write_text(encode(autotune.MeasureInput(task, config), result) + "\n")
    with autotune.apply_history_best(str(log)), warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback here warns: the record was not found
        assert config_for(template, out.op).to_json() == config.to_json()
        f = tl.build(schedule(out), [*inputs, out])
    arrays = [uniform(rng, *shape) for shape in shapes]
    result_array = np.zeros(shape_of(out), "float32")
    f(*arrays, result_array)
    assert_close(result_array, reference(*arrays), 20)


@pytest.mark.parametrize("mcpu, l1_channels", [("skylake-avx512", 8), ("icelake-server", 16)])
def test_fallback_config_is_explicit(mcpu, l1_channels):
    """Without records the conv schedule uses the block and channel step its fallback helpers
    derive from the target: with AVX-512, two vectors of output channels x one row of 14
    columns (28 of the 29 accumulators), and as many input channels per step as half of L1
    holds at 1.2 KiB each: 8 in a 32 KiB L1, 16 in a 48 KiB one."""
    target = f"llvm -mcpu={mcpu}"
    task = autotune.create_task("conv2d_nchw.x86", ((1, 32, 14, 14), (64, 32, 3, 3), 1, 1, 1,
                                                    "float32"), target=target)
    fallback = autotune.FallbackConfig()
    with warnings.catch_warnings(), tl.Target(target):
        warnings.simplefilter("ignore")
        task.template.run(fallback, task.args, target)
        oc, rows, cols = conv2d_x86.fallback_block((14, 14), 64 // 16)
        tile_ic = conv2d_x86.fallback_tile_ic(32, 2 * 16, (1, 14), (3, 3, 1, 1))
    assert (fallback["tile_oc"].val, fallback["tile_oh"].size[-1],
            fallback["tile_ow"].size[-1]) == (oc, rows, cols) == (2, 1, 14)
    assert fallback["tile_ic"].size[-1] == tile_ic == l1_channels
    assert fallback["unroll_kw"].val is False
    assert task.config_space.find(fallback.knob_values()) is not None
    assert topi.x86.schedule_conv2d_nchw is x86.schedule_conv2d_nchw


@pytest.mark.parametrize("target, height", [
    ("llvm -mcpu=haswell", 6), ("llvm -mcpu=skylake-avx512", 4),
])
@pytest.mark.parametrize("name", ["dense.x86", "matmul.x86", "batch_matmul.x86"])
def test_gemm_left_operand_row_panels_are_one_register_block_high(name, target, height):
    """The row panels are one register block high: 6 rows on AVX2, 4 on AVX-512. The fallback
    reads the left operand in place; the tuner may copy it into the panels."""
    task = autotune.create_task(name, CASES[name][0], target=target)
    assert [e.val for e in task.config_space.knobs["pack_rows"].entities] == [True, False]
    fallback = task.fallback_config()
    assert fallback["pack_rows"].val is False
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


#: 36 whole one-vector column blocks on AVX2 (293 columns), 18 on AVX-512.
GROUPED_GEMMS = {"dense.x86": (((13, 20), (293, 20), "float32"), ref.dense_python),
                 "matmul.x86": (((13, 20), (20, 293), "float32"), ref.matmul_python),
                 "batch_matmul.x86": (((2, 13, 20), (2, 150, 20), "float32"),
                                      ref.batch_matmul_python)}


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
@pytest.mark.parametrize("name", sorted(GROUPED_GEMMS))
def test_gemm_column_groups_are_correct_or_rejected(name, target, rng):
    """Every col_group with one-vector blocks: the chunks run their row blocks over groups of
    column blocks (a group that does not divide them leaves a partial last group), and a group
    that would leave fewer than 4 parallel chunks is rejected, never silently shrunk."""
    args, reference = GROUPED_GEMMS[name]
    task = autotune.create_task(name, args, target=target)
    lanes = tl.Target(target).vector_lanes("float32")
    one_vector = _with_knob(task, task.fallback_config(), "tile_x", [-1, lanes])
    out_shape = shape_of(task.instantiate(one_vector)[1][-1])
    blocks = int(np.prod(out_shape[:-2])) * out_shape[-1] // lanes
    arrays = [uniform(rng, *shape) for shape in args[:2]]
    irs = set()
    for group in [e.val for e in task.config_space.knobs["col_group"].entities]:
        config = _with_knob(task, one_vector, "col_group", group)
        if group > 1 and blocks < max(16, 4 * group):
            with pytest.raises(autotune.InstantiationError, match="too few parallel chunks"):
                task.instantiate(config)
            continue
        with tl.Target(target):
            s, tensors = task.instantiate(config)
            irs.add(str(tl.lower(s, tensors)))
            f = tl.build(s, tensors, target=target)
        out = np.zeros(shape_of(tensors[-1]), "float32")
        f(*arrays, out)
        assert_close(out, reference(*arrays), 20)
    assert len(irs) >= 3  # groups of 1, 2 and 4 at least, each its own loop nest
