"""Edge blocks of register-blocked kernels: sizes that do not divide the register block (primes,
1) leave a partial block, which lowering computes without guards or masks (lower/partition.py
unswitches a fused parallel loop on its digits; simplify narrows a loop guarded through inner
loops), so that its accumulators can stay in registers; the auto-scheduler's untuned GEMM keeps
whole vectors and a long reduction at prime sizes; and the kernels compute what numpy does, on
the host and with AVX2. The assembly of every target is checked in test_cross_edge_blocks.py.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from topi_check import shape_of

import tensorlang as tl
from autotune.auto_schedule import generate
from autotune.space import FallbackConfig
from tensorlang.lower import lower_structure
from topi.testing.register_blocks import BlockedKernel, blocked_kernels

HOST, HASWELL = "llvm", "llvm -mcpu=haswell"
FOREIGN = ["llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod",
           "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1",
           "llvm -mtriple=riscv64-linux-gnu -mattr=+v,+f,+d"]


def _fused_blocks() -> tuple[tl.Schedule, list[tl.Tensor]]:
    """A 29 x 97 elementwise stage in blocks of 4 rows x 4 vectors of 4, the column and row
    block loops fused into one parallel loop (7 x 8 blocks, the last row and column partial)."""
    a = tl.placeholder((29, 97), name="A")
    b = tl.compute((29, 97), lambda i, j: a[i, j] * 2.0, name="B")
    s = tl.create_schedule(b.op)
    i_outer, i_inner = s[b].split(b.op.axis[0], factor=4)
    j_outer, j_inner = s[b].split(b.op.axis[1], factor=16)
    s[b].reorder(j_outer, i_outer, i_inner, j_inner)
    s[b].parallel(s[b].fuse(j_outer, i_outer))
    s[b].unroll(i_inner)
    vectors, lanes = s[b].split(j_inner, factor=4)
    s[b].unroll(vectors)
    s[b].vectorize(lanes)
    return s, [a, b]


def test_a_fused_parallel_loop_is_unswitched_on_its_block_digits(rng):
    s, tensors = _fused_blocks()
    structure = str(lower_structure(s, tensors, "blocks"))
    assert "# likely" not in structure, structure  # every guard decided in its copy
    assert "fused // 8 < 6:" in structure and "fused % 8 < 7:" in structure
    assert structure.count("# parallel") == 1, "the one parallel loop stays one"
    code = str(tl.lower(s, tensors, "blocks"))
    assert "mask=" not in code and "B[2812] = A[2812] * 2.0" in code  # the corner: one element
    a = rng.standard_normal((29, 97)).astype("float32")
    out = np.zeros_like(a)
    tl.build(s, tensors, name="blocks")(a, out)
    np.testing.assert_array_equal(out, a * 2.0)


def _lowered(kernel: BlockedKernel, spec: str) -> str:
    with warnings.catch_warnings(), tl.Target(spec):
        warnings.simplefilter("ignore")
        s, tensors = kernel.build()
        return str(tl.lower(s, tensors, name="kernel"))


@pytest.mark.parametrize("spec", [HOST, HASWELL, *FOREIGN])
@pytest.mark.parametrize("kernel", [BlockedKernel(f, (29, 97, 13))
                                    for f in ("dense", "matmul", "batch_matmul")],
                         ids=lambda k: k.label)
def test_edge_blocks_read_their_accumulators_without_masks(kernel, spec):
    """29 x 97 leaves partial blocks of rows and columns in a parallel loop that fuses both
    (few column blocks): no access to the accumulator buffer is masked."""
    code = _lowered(kernel, spec)
    masked = [line for line in code.splitlines() if re.search(r"\.local\[[^\]]*mask=", line)]
    assert not masked, masked[:3]


AWKWARD = [k for k in blocked_kernels() if k.sizes not in ((64, 64, 64), (16, 14, 32, 3, 1),
                                                             (16, 14, 3, 1))]


def _assert_matches_numpy(kernel: BlockedKernel, spec: str, rng: np.random.Generator,
                          tolerance: float = 1e-5) -> None:
    with warnings.catch_warnings(), tl.Target(spec):
        warnings.simplefilter("ignore")
        s, tensors = kernel.build()
        f = tl.build(s, tensors, name="kernel")
    inputs = [rng.uniform(-1, 1, shape_of(t)).astype("float32") for t in tensors[:-1]]
    out = np.zeros(shape_of(tensors[-1]), "float32")
    f(*inputs, out)
    np.testing.assert_allclose(out, kernel.reference(inputs), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("spec", [HOST, HASWELL])
@pytest.mark.parametrize("kernel", AWKWARD, ids=lambda k: k.label)
def test_awkward_blocks_match_numpy(kernel, spec, rng):
    _assert_matches_numpy(kernel, spec, rng)


def _auto_gemm_trace(m: int, n: int, k: int, spec: str) -> str:
    with tl.Target(spec):
        _, tensors = BlockedKernel("auto_gemm", (m, n, k)).build()
        _, trace = generate(tensors, FallbackConfig())
    return str(trace)


@pytest.mark.parametrize("spec", [*FOREIGN, HASWELL, HOST])
@pytest.mark.parametrize("n", [13, 97, 7])
def test_auto_gemm_blocks_are_whole_vectors(spec, n):
    """A row of 13 on 4-lane NEON is whole vectors with a partial last block, not one vector of
    13 lanes (which LLVM splits in pieces: it spilled 80 times in NEON's hot loop)."""
    trace = _auto_gemm_trace(29, n, 13, spec)
    lanes = tl.Target(spec).vector_lanes("float32")
    (width,) = map(int, re.findall(r"C\.local\.split\(j, factor=(\d+)\)", trace))
    assert width % lanes == 0 or width == n < lanes, trace


@pytest.mark.parametrize("k, step", [(257, 257), (1031, 128), (768, 128), (13, 13)])
def test_auto_gemm_reduction_steps_at_prime_lengths(k, step):
    """The untuned inner reduction: the largest divisor up to 128, unless that is 1 (a prime
    length): then the whole reduction up to 512, else 128 steps with a partial last one."""
    assert f"C.local.split(k, factor={step})" in _auto_gemm_trace(7, 29, k, HASWELL)


@pytest.mark.parametrize("k", [1031, 257])
def test_auto_gemm_with_a_partial_reduction_step_matches_numpy(k, rng):
    _assert_matches_numpy(BlockedKernel("auto_gemm", (5, 19, k)), HASWELL, rng, 1e-4)
