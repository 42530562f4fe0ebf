"""Register blocks at awkward sizes (primes, 1, sizes the block does not divide) on every target:
no innermost loop of vector FMAs in topi's GEMMs (dense, matmul, batch_matmul), convolutions
(NCHW, NHWC, 1x1, 3x3, strided), depthwise and the auto-scheduler's GEMM reads or writes the
stack (a spill, or an edge block's accumulators kept in memory) on NEON, SVE, RVV, AVX2 and the
host (on NEON, SVE and RVV no loop of the GEMMs and of conv2d_nchw at all, their packing and
write-back included: SVE assembled each panel row through the stack), and the kernels built for
NEON, SVE and RVV match numpy under qemu (skipped without the cross compilers or qemu). Left
out: AVX2's stride-2 depthwise on a row narrower than a vector, whose strided-load shuffles
leave 16 registers too few for the window's weights (two reloads). The inner-loop check itself
is held to two layouts of RVV code: an outer loop whose latch LLVM places before its inner
loop, and a gather from a block on the stack.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_cross_targets import FOREIGN, _missing_tools, _run, runners  # noqa: F401 (fixture)
from topi_check import shape_of

import tensorlang as tl
from tensorlang.codegen.loop_mix import inner_loops, stack_loops
from topi.testing.register_blocks import BlockedKernel

HOST, HASWELL = "llvm", "llvm -mcpu=haswell"

GEMMS = [BlockedKernel(f, sizes) for f in ("dense", "batch_matmul", "auto_gemm")
         for sizes in ((29, 97, 13), (13, 29, 257))] + [BlockedKernel("matmul", (7, 13, 29))]
CONV2D_NCHW = [BlockedKernel("conv2d_nchw", sizes)
               for sizes in ((16, 14, 32, 3, 1), (3, 13, 17, 3, 1), (17, 13, 31, 3, 2))]
CONVS = [*CONV2D_NCHW, BlockedKernel("conv2d_nhwc", (31, 13, 17, 1, 1)),
         BlockedKernel("depthwise", (17, 13, 3, 1))]
#: kernels none of whose loops may touch the stack on NEON, SVE and RVV (their packing too)
WHOLE_KERNELS = [*GEMMS, *CONV2D_NCHW]
STRIDED_DEPTHWISE = BlockedKernel("depthwise", (31, 7, 3, 2))
#: the kernels also run under qemu (one per family, the fused parallel loop's edges first)
RUN = {"dense 29x97x13", "batch_matmul 13x29x257", "auto_gemm 29x97x13", "matmul 7x13x29",
       "conv2d_nchw 17x13x31x3x2", "conv2d_nhwc 31x13x17x1x1", "depthwise 31x7x3x2"}


def _cases():
    for spec in [*FOREIGN, HASWELL, HOST]:
        for kernel in [*GEMMS, *CONVS, STRIDED_DEPTHWISE]:
            if kernel is not STRIDED_DEPTHWISE or spec != HASWELL:
                yield pytest.param(spec, kernel, id=f"{kernel.label}-{spec}")


@pytest.mark.parametrize("spec, kernel", list(_cases()))
def test_awkward_register_blocks_touch_no_stack(spec, kernel, runners, tmp_path):
    target = tl.Target(spec)
    with warnings.catch_warnings(), target:
        warnings.simplefilter("ignore")
        s, tensors = kernel.build()
        f = tl.build(s, tensors, name="kernel")
    loops = inner_loops(f.get_source("asm"), target)
    assert any(m.fmas for m in loops), "no loop of vector FMAs"
    if not (spec in FOREIGN and kernel in WHOLE_KERNELS):
        loops = [m for m in loops if m.fmas]  # packing loops too, where those are checked
    touching = [m for m in loops if m.stack_refs]
    assert not touching, touching
    if target.runs_here:
        inputs = [np.random.default_rng(9).uniform(-1, 1, shape_of(t)).astype("float32")
                  for t in tensors[:-1]]
        out = np.zeros(shape_of(tensors[-1]), "float32")
        f(*inputs, out)
    elif kernel.label in RUN:
        reason = _missing_tools(spec)
        if reason:
            pytest.skip(reason)
        f.export_library(tmp_path / "kernel.so")
        named = {t.name: np.random.default_rng(9).uniform(-1, 1, shape_of(t)).astype("float32")
                 for t in tensors[:-1]}
        proc, (out,) = _run(spec, runners[spec], tmp_path / "kernel.so", named)
        assert proc.returncode == 0, proc.stderr
        inputs = list(named.values())
    else:
        return
    np.testing.assert_allclose(out, kernel.reference(inputs), rtol=1e-4, atol=1e-4)



RVV_TARGET = "llvm -mtriple=riscv64-linux-gnu -mattr=+v,+f,+d"


def _asm(*lines: str) -> str:
    """Assembly text from its lines, instructions indented by a tab as LLVM prints them."""
    return "".join(f"{line}\n" if line.endswith(":") else f"\t{line}\n" for line in lines)


def test_an_outer_loop_whose_latch_comes_first_is_not_innermost():
    """LLVM may place an outer loop's latch (here reloading a spilled pointer) before its body,
    and the inner loop's latch before the inner body: the branch back to the outer latch then
    spans the inner latch's label, and the inner loop is the innermost one."""
    asm = _asm("kernel:", "addi sp, sp, -64",
               ".LBB0_1:", "ld t0, 8(sp)", "addi a0, a0, 1", "beq a0, a1, .LBB0_5",
               ".LBB0_2:", "mv t1, t0", "j .LBB0_4",
               ".LBB0_3:", "addi t1, t1, 4", "beq t1, t2, .LBB0_1",
               ".LBB0_4:", "flw fa5, 0(t1)", "fsw fa5, 0(t3)", "j .LBB0_3",
               ".LBB0_5:", "ret")
    target = tl.Target(RVV_TARGET)
    assert [m.label for m in inner_loops(asm, target)] == [".LBB0_3"]
    assert not stack_loops(asm, target)


def test_a_gather_from_a_block_on_the_stack_is_no_spill():
    """RVV names a gather's index vector and a strided load's stride apart from their base
    (`vluxei64.v v8, (a4), v16`): from a block on the stack (a convolution's write-back) they
    read an array, not a fixed slot; a reload in the same loop still counts."""
    def loop(*reload: str) -> str:
        return _asm("kernel:", "addi sp, sp, -512", "addi a4, sp, 320",
                    ".LBB0_1:", "vluxei64.v v12, (a4), v16, v0.t", "vlse32.v v8, (a4), a5",
                    "vse32.v v12, (t0)", *reload, "addi t0, t0, 784", "bne t0, t1, .LBB0_1",
                    "ret")

    target = tl.Target(RVV_TARGET)
    assert not stack_loops(loop(), target)
    (touching,) = stack_loops(loop("ld t2, 16(sp)"), target)
    assert touching.stack_refs == 1
