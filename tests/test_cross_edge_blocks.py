"""Register blocks at awkward sizes (primes, 1, sizes the block does not divide) on every target:
no innermost loop of vector FMAs in topi's GEMMs (dense, matmul, batch_matmul), convolutions
(NCHW, NHWC, 1x1, 3x3, strided), depthwise and the auto-scheduler's GEMM reads or writes the
stack (a spill, or an edge block's accumulators kept in memory) on NEON, SVE, RVV, AVX2 and the
host (on NEON, SVE and RVV no loop of the GEMMs at all, their panel packing included: SVE
assembled each panel row through the stack), and the kernels built for NEON, SVE and RVV match
numpy under qemu (skipped without the cross compilers or qemu). Left out: AVX2's stride-2
depthwise on a row narrower than a vector, whose strided-load shuffles leave 16 registers too
few for the window's weights (two reloads).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_cross_targets import FOREIGN, _missing_tools, _run, runners  # noqa: F401 (fixture)
from topi_check import shape_of

import tensorlang as tl
from tensorlang.codegen.loop_mix import inner_loops
from topi.testing.register_blocks import BlockedKernel

HOST, HASWELL = "llvm", "llvm -mcpu=haswell"

GEMMS = [BlockedKernel(f, sizes) for f in ("dense", "batch_matmul", "auto_gemm")
         for sizes in ((29, 97, 13), (13, 29, 257))] + [BlockedKernel("matmul", (7, 13, 29))]
CONVS = [BlockedKernel("conv2d_nchw", (3, 13, 17, 3, 1)), BlockedKernel("conv2d_nchw",
                                                                        (17, 13, 31, 3, 2)),
         BlockedKernel("conv2d_nhwc", (31, 13, 17, 1, 1)), BlockedKernel("depthwise",
                                                                         (17, 13, 3, 1))]
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
    if not (spec in FOREIGN and kernel in GEMMS):
        loops = [m for m in loops if m.fmas]  # packing loops too, where the GEMMs' are checked
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
