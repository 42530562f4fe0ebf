"""The 2-D register blocks of the x86 conv2d schedules (tile_oh x tile_ow x tile_oc), their
fallback choice, the L1-sized channel step and the materialised padded input, under the host
(AVX-512) and `-mcpu=haswell` (AVX2) targets."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from topi_check import assert_close, shape_of, uniform

import autotune
import tensorlang as tl
from topi import nn, x86
from topi import testing as ref
from topi.x86 import conv2d as conv2d_x86
from topi.x86.common import accumulator_budget, traverse

HOST, HASWELL = "llvm", "llvm -mcpu=haswell"

#: (task, args, output height, numpy reference, reduction length): a 7x7 plane, a 5x13 one
#: (neither divides by most blocks), stride 2 with asymmetric padding, a dilated kernel, NHWC.
CASES = {
    "7x7": ("conv2d_nchw.x86", ((1, 5, 7, 7), (19, 5, 3, 3), 1, 1, 1, "float32"), 7,
            lambda a, b: ref.conv2d_nchw_python(a, b, 1, 1, 1), 45),
    "5x13": ("conv2d_nchw.x86", ((1, 3, 5, 13), (33, 3, 3, 3), 1, 1, 1, "float32"), 5,
             lambda a, b: ref.conv2d_nchw_python(a, b, 1, 1, 1), 27),
    "stride2": ("conv2d_nchw.x86", ((2, 6, 12, 9), (10, 6, 3, 3), 2, (1, 0, 0, 1), 1,
                                    "float32"), 6,
                lambda a, b: ref.conv2d_nchw_python(a, b, 2, (1, 0, 0, 1), 1), 54),
    "dilated": ("conv2d_nchw.x86", ((1, 4, 11, 10), (17, 4, 3, 2), 1, 2, 2, "float32"), 11,
                lambda a, b: ref.conv2d_nchw_python(a, b, 1, 2, 2), 24),
    "nhwc": ("conv2d_nhwc.x86", ((1, 9, 6, 5), (3, 3, 5, 21), 1, 1, 1, "float32"), 9,
             lambda a, b: ref.conv2d_nhwc_python(a, b, 1, 1, 1), 45),
}


def _run(task, config, reference, reduction, rng):
    s, tensors = task.instantiate(config)
    f = tl.build(s, tensors)
    arrays = [uniform(rng, *shape_of(t)) for t in tensors[:-1]]
    out = np.zeros(shape_of(tensors[-1]), "float32")
    f(*arrays, out)
    assert_close(out, reference(*arrays), reduction)


@pytest.mark.parametrize("target", [HOST, HASWELL])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_block_height_is_correct(case, target, rng):
    """Each tile_oh the space offers, dividing the output height or not, with block widths,
    channel vectors and kernel-column unrolling varied across them."""
    name, args, out_h, reference, reduction = CASES[case]
    with tl.Target(target):
        task = autotune.create_task(name, args, target=target)
        space = task.config_space
        heights = [e.size[-1] for e in space.knobs["tile_oh"].entities]
        assert heights == list(range(1, min(out_h, accumulator_budget(1)) + 1))
        configs = [space.get(int(i)) for i in space.valid_indices()]
        for k, height in enumerate(heights):
            with_height = [c for c in configs if c["tile_oh"].size[-1] == height]
            assert with_height, f"no valid config with tile_oh={height}"
            _run(task, with_height[(7 * k) % len(with_height)], reference, reduction, rng)


@pytest.mark.parametrize("target", [HOST, HASWELL])
def test_space_holds_only_blocks_that_fit_the_registers(target):
    with tl.Target(target):
        task = autotune.create_task(*CASES["5x13"][:2], target=target)
        space = task.config_space
        fits = [c["tile_oh"].size[-1] * c["tile_ow"].size[-1] * c["tile_oc"].val
                <= accumulator_budget(c["tile_oc"].val) for c in map(space.get, range(
                    space.range_length))]
        assert sum(fits) == len(space) < space.range_length
        assert all(fits[int(i)] for i in space.valid_indices())


@pytest.mark.parametrize("target, lanes, registers", [(HOST, 16, 32), (HASWELL, 8, 16)])
@pytest.mark.parametrize("shape", [(56, 56), (28, 28), (14, 14), (7, 7), (5, 13), (1, 3)])
def test_fallback_block_fits_and_is_in_the_space(target, lanes, registers, shape):
    """The fallback's block uses two channel vectors, fills at least half of the accumulator
    budget where the plane is large enough, and is a config of the tuning space (the NCHW
    template's, whose output prefers whole columns)."""
    with tl.Target(target):
        for whole_columns in (False, True):
            oc, rows, cols = conv2d_x86.fallback_block(shape, 4, whole_columns=whole_columns)
            assert oc == 2
            assert rows <= shape[0] and cols <= shape[1]
            assert rows * cols * oc <= registers - oc - 2
            if shape[0] * shape[1] >= registers:
                assert rows * cols * oc >= (registers - oc - 2) // 2
        args = ((1, 8, *shape), (4 * lanes, 8, 3, 3), 1, 1, 1, "float32")
        task = autotune.create_task("conv2d_nchw.x86", args, target=target)
        fallback = autotune.FallbackConfig()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            task.template.run(fallback, task.args)
        assert (fallback["tile_oc"].val, fallback["tile_oh"].size[-1],
                fallback["tile_ow"].size[-1]) == (oc, rows, cols)
        assert task.config_space.find(fallback.knob_values()) is not None


def test_fallback_blocks_of_resnet_layers():
    """AVX2 has 12 accumulators for two vectors: 2 x 3 points where 3 columns tile the row
    (56, 14), a full row of 6 or 4 where rows do not pair up as well; AVX-512's 28 hold whole
    14-column rows and, on 7x7 planes, 7 rows of 2 columns (2 rows of 7 would leave a partial
    last row)."""
    with tl.Target(HASWELL):
        assert conv2d_x86.fallback_block((56, 56), 8) == (2, 2, 3)
        assert conv2d_x86.fallback_block((14, 14), 32) == (2, 2, 3)
        assert conv2d_x86.fallback_block((7, 7), 64) == (2, 1, 4)
        assert conv2d_x86.fallback_block((7, 7), 1) == (1, 1, 7)
    with tl.Target(HOST):
        assert conv2d_x86.fallback_block((14, 14), 16) == (2, 1, 14)
        assert conv2d_x86.fallback_block((7, 7), 32) == (2, 7, 2)


def test_nchw_outputs_prefer_blocks_that_tile_the_row():
    """Of equally cheap blocks, an NCHW output takes one whose columns tile the row: a partial
    last block would compile a second unrolled copy of the block and of its strided write-back
    (a 512 -> 512 3x3 conv at 7x7 took 108 ms to compile). NCHW[x]c keeps the larger block."""
    with tl.Target(HOST):
        assert conv2d_x86.fallback_block((7, 7), 32) == (2, 7, 2)
        assert conv2d_x86.fallback_block((7, 7), 32, whole_columns=True) == (2, 1, 7)
        assert conv2d_x86.fallback_block((35, 35), 4, whole_columns=True) == (2, 1, 7)
        assert conv2d_x86.fallback_block((112, 112), 2, 2, whole_columns=True) == (1, 1, 28)
        # No block tiles a prime row as cheaply: the least unrolled code of the cheapest
        # (1 x 15 + 1 x 14 at 149 columns, not 1 x 27 + 1 x 14; 1 x 8 + 1 x 7 at 31 columns,
        # not 1 x 12 + 1 x 7).
        assert conv2d_x86.fallback_block((149, 149), 2, 2, whole_columns=True) == (1, 1, 15)
        assert conv2d_x86.fallback_block((149, 149), 2, 2) == (1, 1, 27)
        assert conv2d_x86.fallback_block((29, 31), 2, whole_columns=True) == (2, 1, 8)
        for shape in ((56, 56), (14, 14), (17, 17)):  # already tiled, or no tiling is as cheap
            assert (conv2d_x86.fallback_block(shape, 4, whole_columns=True)
                    == conv2d_x86.fallback_block(shape, 4))
        data = tl.placeholder((1, 64, 7, 7), name="data")
        kernel = tl.placeholder((64, 64, 3, 3), name="kernel")
        lowered = _lowered(nn.conv2d_nchw(data, kernel, 1, 1), [data, kernel],
                           x86.schedule_conv2d_nchw)
        assert lowered.count("for rc.outer in") == 1  # one copy of the reduction, no tail


def test_hand_schedules_are_in_the_space():
    """Blocks the tuner must reach: 2 x 3 x 2 vectors, the fastest by hand on AVX2 at 14x14,
    and the one-row blocks of the former schedule (7 x 1 vector on AVX2, 14 x 1 on AVX-512)."""
    for target, shape, knobs in [
        (HASWELL, (14, 14), {"tile_oc": 2, "tile_oh": [-1, 2], "tile_ow": [-1, 3]}),
        (HASWELL, (7, 7), {"tile_oc": 1, "tile_oh": [-1, 1], "tile_ow": [-1, 7]}),
        (HOST, (14, 14), {"tile_oc": 1, "tile_oh": [-1, 1], "tile_ow": [-1, 14]}),
    ]:
        with tl.Target(target):
            args = ((1, 64, *shape), (64, 64, 3, 3), 1, 1, 1, "float32")
            space = autotune.create_task("conv2d_nchw.x86", args, target=target).config_space
            for unroll in (False, True):
                found = space.find({"tile_ic": [-1, 8], **knobs, "unroll_kw": unroll})
                assert found is not None, (target, shape, knobs)


def test_channel_step_follows_the_l1_cache():
    """The fallback's tile_ic keeps a step's kernel block and input window within half of L1:
    48 KiB (Ice Lake server) allows more channels per step than 32 KiB (Haswell), and a kernel
    block of two 16-lane vectors (AVX-512) fewer than one of two 8-lane vectors."""
    window = (3, 3, 1, 1)
    with tl.Target(HASWELL):
        assert tl.Target.current().caches.l1d == 32 * 1024
        haswell = conv2d_x86.fallback_tile_ic(256, 16, (2, 3), window)
        # 16 KiB / (3*3*16 + 4*5 values) / 4 bytes = 24 -> the largest divisor of 256 below.
        assert haswell == 16
        assert conv2d_x86.fallback_tile_ic(36, 16, (2, 3), window) == 18
        assert conv2d_x86.fallback_tile_ic(7, 16, (2, 3), window) == 7
    with tl.Target("llvm -mcpu=icelake-server"):
        assert tl.Target.current().caches.l1d == 48 * 1024
        assert conv2d_x86.fallback_tile_ic(36, 16, (2, 3), window) == 36
        assert conv2d_x86.fallback_tile_ic(48, 32, (1, 14), window) == 16
    with tl.Target("llvm -mcpu=skylake-avx512"):
        assert conv2d_x86.fallback_tile_ic(256, 32, (1, 14), window) == 8
        # A large window (11x11 kernel, stride 4) leaves room for one channel.
        assert conv2d_x86.fallback_tile_ic(3, 32, (2, 14), (11, 11, 4, 4)) == 1
        # 512 x 3x3 x 32 kernel values (576 KiB) stay in its 1 MiB L2: the L1 step.
        assert conv2d_x86.fallback_tile_ic(512, 32, (2, 7), window) == 8


def test_kernel_streamed_past_l2_is_read_in_address_order():
    """Where the kernel of one block of output channels exceeds L2 (512 x 3x3 x 16 values =
    288 KiB against Haswell's 256 KiB), one channel per step."""
    with tl.Target(HASWELL):
        assert conv2d_x86.fallback_tile_ic(512, 16, (1, 4), (3, 3, 1, 1)) == 1
        assert conv2d_x86.fallback_tile_ic(256, 16, (1, 4), (3, 3, 1, 1)) == 16
        args = ((1, 512, 7, 7), (512, 512, 3, 3), 1, 1, 1, "float32")
        task = autotune.create_task("conv2d_nchw.x86", args, target=HASWELL)
        fallback = autotune.FallbackConfig()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            task.template.run(fallback, task.args)
        assert fallback["tile_ic"].size[-1] == 1


def _lowered(out, inputs, schedule):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return str(tl.lower(schedule([out]), [*inputs, out]))


@pytest.mark.parametrize("op", ["nchw", "nhwc"])
def test_padded_input_is_materialised(op):
    """The pad stage is computed once at the top (one call of the runtime's box copy, its
    bounds in the call's descriptor) and the convolution reads it without any check; without
    padding the convolution reads its input directly."""
    if op == "nchw":
        data, kernel = tl.placeholder((1, 6, 9, 9), name="data"), tl.placeholder((16, 6, 3, 3))
        make, schedule = nn.conv2d_nchw, x86.schedule_conv2d_nchw
    else:
        data, kernel = tl.placeholder((1, 9, 9, 6), name="data"), tl.placeholder((3, 3, 6, 16))
        make, schedule = nn.conv2d_nhwc, x86.schedule_conv2d_nhwc
    padded = _lowered(make(data, kernel, 1, 1), [data, kernel], schedule)
    assert "data_pad = allocate" in padded
    assert padded.count('call("tl_copy_box", &data_pad[0], &data[0]') == 1
    assert "if_then_else" not in padded
    unpadded = _lowered(make(data, kernel, 1, 0), [data, kernel], schedule)
    assert "data_pad" not in unpadded and "if_then_else" not in unpadded


def test_depthwise_padding_stays_inlined():
    """A depthwise step is one FMA per input value read: the pad's selects on row vectors cost
    no more than a stored copy, so the pad is not materialised."""
    data, kernel = tl.placeholder((1, 6, 9, 9), name="data"), tl.placeholder((6, 1, 3, 3))
    out = nn.depthwise_conv2d_nchw(data, kernel, 1, 1)
    lowered = _lowered(out, [data, kernel], x86.schedule_depthwise_conv2d_nchw)
    assert "data_pad" not in lowered and "if_then_else" in lowered


def test_blocked_stage_schedule_takes_a_prepacked_kernel(rng):
    """`schedule_conv2d_nchw_with` schedules any (N, K/w, OH, OW, w) blocked convolution that
    carries its window in attrs, also one whose kernel arrives packed (a placeholder), as a
    conv2d over an NCHW[x]c layout will."""
    with tl.Target(HASWELL):
        w = 8
        data = tl.placeholder((1, 5, 7, 7), name="data")
        packed = tl.placeholder((2, 5, 3, 3, w), name="kernel_vec")
        padded = nn.pad(data, [0, 0, 1, 1], [0, 0, 1, 1], name="data_pad")
        rc, ry, rx = (tl.reduce_axis((0, n), name=a) for n, a in ((5, "rc"), (3, "ry"), (3, "rx")))
        blocked = tl.compute(
            (1, 2, 7, 7, w),
            lambda b, ko, y, x, ki: tl.sum(padded[b, rc, y + ry, x + rx] * packed[ko, rc, ry, rx, ki],
                                           axis=[rc, ry, rx]),
            name="blocked", tag="conv2d_nchw_blocked", attrs={"window": ((1, 1), (1, 1))})
        out = tl.compute((1, 13, 7, 7), lambda b, k, y, x: blocked[b, k // w, y, x, k % w],
                         name="out", tag="conv2d_nchw")
        s = tl.create_schedule(out.op)
        traverse(s, [out], lambda op: None)
        conv2d_x86.schedule_conv2d_nchw_with(autotune.FallbackConfig(), s, out, out)
        f = tl.build(s, [data, packed, out])
    a, k = uniform(rng, 1, 5, 7, 7), uniform(rng, 2, 5, 3, 3, w)
    result = np.zeros((1, 13, 7, 7), "float32")
    f(a, k, result)
    kernel = k.transpose(0, 4, 1, 2, 3).reshape(16, 5, 3, 3)[:13]
    assert_close(result, ref.conv2d_nchw_python(a, kernel, 1, 1, 1), 45)


def _scheduled_conv2d_nchw(target: str, data_shape: tuple, kernel_shape: tuple, stride: int,
                           padding: int):
    """(lowered loop IR, built function) of conv2d_nchw under the x86 schedule for `target`."""
    with tl.Target(target):
        data = tl.placeholder(data_shape, name="data")
        kernel = tl.placeholder(kernel_shape, name="kernel")
        out = nn.conv2d_nchw(data, kernel, stride, padding)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = x86.schedule_conv2d_nchw([out])
        return str(tl.lower(s, [data, kernel, out])), tl.build(s, [data, kernel, out])


@pytest.mark.parametrize("target", [HOST, HASWELL])
@pytest.mark.parametrize("batch,channels", [(1, 64), (1, 40), (2, 64)])
def test_kernel_is_packed_per_block_of_output_channels_for_one_image(batch, channels, target,
                                                                     rng):
    """With one image each block of output channels packs its own filters inside the parallel
    loop over the blocks, just before its convolution (with 40 channels the last block is
    partial); with a batch the blocks repeat per image, so the kernel is packed once, at the
    top, in parallel."""
    lowered, f = _scheduled_conv2d_nchw(target, (batch, 5, 7, 7), (channels, 5, 3, 3), 1, 1)
    if channels == 64:  # whole blocks of output channels on both targets
        blocks_loop = re.search(r"b\.ko\.outer\.fused\S* in range\(\d+\):  # parallel",
                                lowered).start()
        packing = lowered.index("kernel_vec = allocate")
        assert (packing > blocks_loop) == (batch == 1)
    a, k = uniform(rng, batch, 5, 7, 7), uniform(rng, channels, 5, 3, 3)
    result = np.zeros((batch, channels, 7, 7), "float32")
    f(a, k, result)
    assert_close(result, ref.conv2d_nchw_python(a, k, 1, 1, 1), 45)


@pytest.mark.parametrize("target", [HOST, HASWELL])
def test_nchw_write_back_keeps_its_channel_loop(target, rng):
    """An NCHW output is written back one channel's row of the block at a time, a gather of
    the block's columns; the loop over the channels stays a loop in the machine code (pragma
    `scalar_loop`), whatever the width of the block (here a partial one too): unrolled, the
    gathers of odd widths became hundreds of instructions each."""
    lowered, f = _scheduled_conv2d_nchw(target, (1, 3, 31, 61), (35, 3, 3, 3), 2, 0)
    write_backs = [line for line in lowered.splitlines() if "for ko.inner in range" in line]
    assert write_backs and all(line.endswith("# pragma(scalar_loop=True)") for line in write_backs)
    # A gather instruction or two per row (AVX-512; LLVM scalarises them for AVX2), not per
    # channel and row.
    gathers = len(re.findall(r"\tvp?gather\w+", f.get_source("asm")))
    assert gathers <= 2 * len(write_backs)
    a, k = uniform(rng, 1, 3, 31, 61), uniform(rng, 35, 3, 3, 3)
    result = np.zeros((1, 35, 15, 30), "float32")
    f(a, k, result)
    assert_close(result, ref.conv2d_nchw_python(a, k, 2, 0, 1), 27)


@pytest.mark.parametrize("target", [HOST, HASWELL])
def test_one_column_block_writes_back_in_a_scalar_loop(target, rng):
    """A register block one column wide (on Zen 4 the fallback's 14 x 1 for 14 rows of 31
    columns) writes each channel's column back row by row in a loop that LLVM leaves scalar
    (pragma `scalar_loop`): its loop vectorizer spent 10-15 ms making scatters of it. The
    result matches the reference on odd channel counts."""
    for height in range(2, 17):  # the first plane whose fallback block is one column wide
        lowered, f = _scheduled_conv2d_nchw(target, (1, 13, height, 31), (20, 13, 3, 3), 1, 1)
        lines = lowered.splitlines()
        rows = [(line, lines[i + 1]) for i, line in enumerate(lines) if "for y.inner in" in line]
        if rows and not any("ramp(" in store for _, store in rows):  # a scalar row each
            break
    else:
        pytest.fail(f"no plane of 2-16 rows x 31 columns gets a one-column block on {target}")
    assert all(loop.endswith("# pragma(scalar_loop=True)") for loop, _ in rows)
    a, k = uniform(rng, 1, 13, height, 31), uniform(rng, 20, 13, 3, 3)
    result = np.zeros((1, 20, height, 31), "float32")
    f(a, k, result)
    assert_close(result, ref.conv2d_nchw_python(a, k, 1, 1, 1), 117)
