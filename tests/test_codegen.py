"""Codegen + JIT on hand-built PrimFuncs, compared with numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ir_builders import buf, load, loop

from tensorlang import intrin
from tensorlang.codegen import Target, codegen
from tensorlang.dtype import INT32, INT64, as_dtype
from tensorlang.expr import BinaryOp, Const, Var, binary, cast, const, select
from tensorlang.ir import (
    Allocate,
    BufferLoad,
    BufferStore,
    ForKind,
    IfThenElse,
    LetStmt,
    PrimFunc,
    Scope,
    seq,
)
from tensorlang.lower.vectorize import vectorize_loops
from tensorlang.runtime import build_module

ALL_DTYPES = [
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
]


def elementwise(name: str, fn, dtypes: list[str], out_dtype: str, kind=ForKind.SERIAL) -> PrimFunc:  # noqa: ANN001
    """out[i] = fn(in0[i], in1[i], ...) over a symbolic length n."""
    n = Var("n", INT32)
    ins = [buf(f"x{k}", d, (n,)) for k, d in enumerate(dtypes)]
    out = buf("out", out_dtype, (n,))
    i = Var("i", INT32)
    body = loop(i, n, BufferStore(out, i, fn(*[load(b, i) for b in ins])), kind)
    return PrimFunc(name, (*ins, out), (n,), body)


def random(shape, dtype: str, rng: np.random.Generator) -> np.ndarray:  # noqa: ANN001
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith(("int", "uint")):
        lo = 0 if dtype.startswith("uint") else -50
        return rng.integers(lo, 50, size=shape).astype(dtype)
    return rng.uniform(-2, 2, size=shape).astype(dtype)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_add_every_dtype(dtype: str, rng: np.random.Generator) -> None:
    m = build_module(elementwise("add", lambda a, b: a + b, [dtype, dtype], dtype))
    a, b = random(37, dtype, rng), random(37, dtype, rng)
    out = np.zeros(37, dtype)
    m(a, b, out)
    np.testing.assert_array_equal(out, a + b)


def test_bool_logic_and_compare(rng: np.random.Generator) -> None:
    m = build_module(
        elementwise(
            "logic", lambda a, b, x: (a & ~b) | (x > 0), ["bool", "bool", "float32"], "bool"
        )
    )
    a, b, x = random(50, "bool", rng), random(50, "bool", rng), random(50, "float32", rng)
    out = np.zeros(50, bool)
    m(a, b, x, out)
    np.testing.assert_array_equal(out, (a & ~b) | (x > 0))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint32"])
def test_floordiv_mod_by_data_with_zero(dtype: str, rng: np.random.Generator) -> None:
    a = random(200, dtype, rng)
    b = random(200, dtype, rng)
    b[::7] = 0
    if dtype.startswith("int"):
        a[0], b[0] = np.iinfo(dtype).min, -1  # the one quotient that traps in hardware
    for op, ref in ((BinaryOp.FLOORDIV, np.floor_divide), (BinaryOp.FLOORMOD, np.remainder)):
        m = build_module(
            elementwise("divmod", lambda x, y, op=op: binary(op, x, y), [dtype, dtype], dtype)
        )
        out = np.zeros(200, dtype)
        m(a, b, out)
        with np.errstate(divide="ignore", over="ignore"):
            want = ref(a, b)
        np.testing.assert_array_equal(out, want, err_msg=f"{op} {dtype}")


@pytest.mark.parametrize("divisor", [3, 4, 1, -3, -1, 0, 7])
def test_floordiv_mod_by_constant(divisor: int) -> None:
    a = np.arange(-40, 40, dtype="int32")
    for op, ref in ((BinaryOp.FLOORDIV, np.floor_divide), (BinaryOp.FLOORMOD, np.remainder)):
        fn = lambda x, op=op: binary(op, x, Const(divisor, INT32))  # noqa: E731
        m = build_module(elementwise("cdiv", fn, ["int32"], "int32"))
        out = np.zeros_like(a)
        m(a, out)
        with np.errstate(divide="ignore"):
            want = ref(a, np.int32(divisor))
        np.testing.assert_array_equal(out, want, err_msg=f"{op} {divisor}")


def test_float_floordiv_mod(rng: np.random.Generator) -> None:
    a, b = random(64, "float64", rng), random(64, "float64", rng) + 0.1
    for op, ref in ((BinaryOp.FLOORDIV, np.floor_divide), (BinaryOp.FLOORMOD, np.remainder)):
        m = build_module(
            elementwise("fdivmod", lambda x, y, op=op: binary(op, x, y), ["float64"] * 2, "float64")
        )
        out = np.zeros(64)
        m(a, b, out)
        np.testing.assert_allclose(out, ref(a, b), rtol=1e-12, atol=1e-12)


def test_min_max_and_nan() -> None:
    a = np.array([1.0, np.nan, -2.0, 3.0], "float32")
    b = np.array([2.0, 0.0, np.nan, -3.0], "float32")
    for op, ref in ((BinaryOp.MIN, np.minimum), (BinaryOp.MAX, np.maximum)):
        m = build_module(
            elementwise("mm", lambda x, y, op=op: binary(op, x, y), ["float32"] * 2, "float32")
        )
        out = np.zeros(4, "float32")
        m(a, b, out)
        np.testing.assert_array_equal(out, ref(a, b))
        mi = build_module(
            elementwise("mmi", lambda x, y, op=op: binary(op, x, y), ["int16"] * 2, "int16")
        )
        x, y = np.array([-5, 7, 0], "int16"), np.array([3, -9, 0], "int16")
        oi = np.zeros(3, "int16")
        mi(x, y, oi)
        np.testing.assert_array_equal(oi, ref(x, y))


@pytest.mark.parametrize(
    "src,dst",
    [
        ("float32", "int32"),
        ("int32", "float64"),
        ("float64", "float16"),
        ("float16", "float32"),
        ("int64", "int8"),
        ("uint8", "int32"),
        ("int8", "uint16"),
        ("float32", "bool"),
        ("bool", "float32"),
        ("int32", "bool"),
        ("float32", "uint8"),
    ],
)
def test_cast(src: str, dst: str, rng: np.random.Generator) -> None:
    a = random(40, src, rng)
    if src.startswith("float") and dst == "uint8":
        a = np.abs(a) * 50
    m = build_module(elementwise("cast", lambda x: cast(x, dst), [src], dst))
    out = np.zeros(40, dst)
    m(a, out)
    np.testing.assert_array_equal(out, a.astype(dst))


_MATH = [
    ("exp", intrin.exp, np.exp),
    ("log", lambda x: intrin.log(intrin.abs(x) + 0.5), lambda x: np.log(np.abs(x) + 0.5)),
    ("sqrt", lambda x: intrin.sqrt(intrin.abs(x)), lambda x: np.sqrt(np.abs(x))),
    ("rsqrt", lambda x: intrin.rsqrt(intrin.abs(x) + 0.5), lambda x: 1 / np.sqrt(np.abs(x) + 0.5)),
    ("tanh", intrin.tanh, np.tanh),
    ("sigmoid", intrin.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    ("erf", intrin.erf, np.vectorize(math.erf)),
    ("abs", intrin.abs, np.abs),
    ("floor", intrin.floor, np.floor),
    ("ceil", intrin.ceil, np.ceil),
    ("pow", lambda x: intrin.power(intrin.abs(x), 1.5), lambda x: np.abs(x) ** 1.5),
    ("fma", lambda x: intrin.fma(x, x, 1.0), lambda x: x * x + 1),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.VECTORIZED])
def test_math(dtype: str, kind: ForKind, rng: np.random.Generator) -> None:
    x = random(16, dtype, rng)
    for name, fn, ref in _MATH:
        func = elementwise(name, fn, [dtype], dtype)
        if kind is ForKind.VECTORIZED:  # a constant extent so that the loop becomes vector code
            i = Var("i", INT32)
            a, out = buf("x", dtype, (16,)), buf("out", dtype, (16,))
            body = loop(i, 16, BufferStore(out, i, fn(load(a, i))), kind)
            func = vectorize_loops(PrimFunc(name, (a, out), (), body))
        m = build_module(func)
        out = np.zeros(16, dtype)
        m(x, out)
        want = ref(x.astype("float64")).astype(dtype)
        tol = 2e-3 if dtype == "float16" else 1e-5
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol, err_msg=f"{name} {dtype} {kind}")


def test_lazy_select_guards_out_of_bounds_read() -> None:
    n = Var("n", INT32)
    a, out = buf("A", "float32", (n,)), buf("out", "float32", (n,))
    i = Var("i", INT32)
    far = cast(i, "int64") * Const(1 << 40, INT64)  # reading there would crash
    guarded = select(i < 1, BufferLoad(a, far, a.dtype), load(a, i) * 2.0)
    m = build_module(PrimFunc("lazy", (a, out), (n,), loop(i, n, BufferStore(out, i, guarded))))
    x = np.arange(10, dtype="float32")
    y = np.zeros(10, "float32")
    m(x, y)
    np.testing.assert_array_equal(y, np.where(np.arange(10) < 1, x[0], 2 * x))


def test_vectorized_select_masks_loads() -> None:
    """A padded read: lanes outside [0, n) must not be loaded (vector lazy select)."""
    a, out = buf("A", "float32", (32,)), buf("out", "float32", (48,))
    i = Var("i", INT32)
    src = select(
        (i >= 8) & (i < 40), BufferLoad(a, i - 8, a.dtype), Const(0.0, as_dtype("float32"))
    )
    body = loop(i, 48, BufferStore(out, i, src), ForKind.VECTORIZED)
    func = vectorize_loops(PrimFunc("pad", (a, out), (), body))
    m = build_module(func)
    x = np.arange(1, 33, dtype="float32")
    y = np.full(48, -1, "float32")
    m(x, y)
    np.testing.assert_array_equal(
        y, np.concatenate([np.zeros(8), x, np.zeros(8)]).astype("float32")
    )
    assert "masked.load" in m.get_source("ll")


def test_vector_loads_use_zmm(rng: np.random.Generator) -> None:
    n = Var("n", INT32)
    a, b, c = (buf(x, "float32", (n * 16,)) for x in "ABC")
    io, ii = Var("io", INT32), Var("ii", INT32)
    idx = io * 16 + ii
    body = loop(
        io,
        n,
        loop(ii, 16, BufferStore(c, idx, load(a, idx) * load(b, idx) + 1.0), ForKind.VECTORIZED),
    )
    func = vectorize_loops(PrimFunc("vmul", (a, b, c), (n,), body))
    m = build_module(func, Target("llvm -mcpu=skylake-avx512"))
    x, y = random(64, "float32", rng), random(64, "float32", rng)
    z = np.zeros(64, "float32")
    m(x, y, z)
    np.testing.assert_allclose(z, x * y + 1, rtol=1e-5, atol=1e-6)  # fused multiply-add
    asm = m.get_source("asm")
    assert "zmm" in asm and "vfmadd" in asm


def test_masked_tail_writes_only_valid_lanes(rng: np.random.Generator) -> None:
    n = Var("n", INT32)
    a, c = buf("A", "float32", (n,)), buf("C", "float32", (n,))
    io, ii = Var("io", INT32), Var("ii", INT32)
    idx = io * 16 + ii
    store = IfThenElse(idx < n, BufferStore(c, idx, load(a, idx) + 1.0), None, likely=True)
    body = loop(io, (n + 15) // 16, loop(ii, 16, store, ForKind.VECTORIZED))
    func = vectorize_loops(PrimFunc("tail", (a, c), (n,), body))
    m = build_module(func)
    assert "masked.store" in m.get_source("ll")
    big = np.full(64, -7.0, "float32")
    x = random(37, "float32", rng)
    m(x, big[:37])
    np.testing.assert_allclose(big[:37], x + 1)
    assert (big[37:] == -7.0).all()


def test_gather_and_scatter(rng: np.random.Generator) -> None:
    a, idx, c = buf("A", "float64", (100,)), buf("idx", "int32", (16,)), buf("C", "float64", (48,))
    i = Var("i", INT32)
    body = seq(
        loop(i, 16, BufferStore(c, i, BufferLoad(a, load(idx, i), a.dtype)), ForKind.VECTORIZED),
        loop(i, 16, BufferStore(c, i * 2 + 16, load(a, i * 3)), ForKind.VECTORIZED),
    )
    func = vectorize_loops(PrimFunc("gather", (a, idx, c), (), body))
    m = build_module(func)
    assert "masked.gather" in m.get_source("ll") and "masked.scatter" in m.get_source("ll")
    x = random(100, "float64", rng)
    ids = rng.integers(0, 100, 16).astype("int32")
    out = np.zeros(48)
    m(x, ids, out)
    want = np.zeros(48)
    want[:16] = x[ids]
    want[16:48:2] = x[0:48:3]
    np.testing.assert_array_equal(out, want)


def _parallel_sum_rows(kind: ForKind) -> PrimFunc:
    """out[r] = sum_k A[r, k] * scale, the row loop of the given kind."""
    n, m_ = Var("n", INT32), Var("m", INT32)
    a, out = buf("A", "float32", (n, m_)), buf("out", "float32", (n,))
    scale = buf("scale", "float32", (1,))
    r, k = Var("r", INT32), Var("k", INT32)
    acc = buf("acc", "float32", (1,), Scope.LOCAL)
    zero = Const(0, INT32)
    body = Allocate(
        acc,
        seq(
            BufferStore(acc, zero, Const(0.0, as_dtype("float32"))),
            loop(
                k,
                m_,
                BufferStore(acc, zero, load(acc, zero) + load(a, r * m_ + k) * load(scale, zero)),
            ),
            BufferStore(out, r, load(acc, zero)),
        ),
    )
    return PrimFunc("rows", (a, scale, out), (n, m_), loop(r, n, body, kind))


@pytest.mark.parametrize("rows", [0, 1, 3, 64, 1001])
def test_parallel_equals_serial(rows: int, rng: np.random.Generator) -> None:
    par = build_module(_parallel_sum_rows(ForKind.PARALLEL))
    ser = build_module(_parallel_sum_rows(ForKind.SERIAL))
    assert "tl_parallel_for" in par.get_source("ll")
    x = random((rows, 33), "float32", rng)
    s = np.array([0.5], "float32")
    o1, o2 = np.zeros(rows, "float32"), np.ones(rows, "float32")
    par(x, s, o1)
    ser(x, s, o2)
    np.testing.assert_array_equal(o1, o2)
    np.testing.assert_allclose(o1, x.sum(axis=1) * 0.5, rtol=1e-4, atol=1e-5)


def test_nested_parallel_runs_serially(rng: np.random.Generator) -> None:
    a, c = buf("A", "int32", (40, 30)), buf("C", "int32", (40, 30))
    i, j = Var("i", INT32), Var("j", INT32)
    body = loop(
        i,
        40,
        loop(j, 30, BufferStore(c, i * 30 + j, load(a, i * 30 + j) * 3), ForKind.PARALLEL),
        ForKind.PARALLEL,
    )
    m = build_module(PrimFunc("nested", (a, c), (), body))
    x = random((40, 30), "int32", rng)
    out = np.zeros_like(x)
    m(x, out)
    np.testing.assert_array_equal(out, x * 3)


@pytest.mark.parametrize("size", [16, 40000, None])
def test_allocate_stack_and_heap(size: int | None, rng: np.random.Generator) -> None:
    """tmp = A * 2; C = tmp + 1 through a LOCAL buffer (stack when small and constant)."""
    n = Var("n", INT32)
    extent = n if size is None else const(size)
    a, c = buf("A", "float32", (extent,)), buf("C", "float32", (extent,))
    shape_vars = (n,) if size is None else ()
    tmp = buf("tmp", "float32", (extent,), Scope.LOCAL)
    i = Var("i", INT32)
    body = Allocate(
        tmp,
        seq(
            loop(i, extent, BufferStore(tmp, i, load(a, i) * 2.0)),
            loop(i, extent, BufferStore(c, i, load(tmp, i) + 1.0)),
        ),
    )
    m = build_module(PrimFunc("alloc", (a, c), shape_vars, body))
    ll = m.get_source("ll")
    on_heap = size is None or size * 4 > 64 * 1024
    assert ("tl_aligned_alloc" in ll) == on_heap and ("tl_free" in ll) == on_heap
    if not on_heap:
        assert "align 64" in ll
    count = size or 123
    x = random(count, "float32", rng)
    out = np.zeros(count, "float32")
    m(x, out)
    np.testing.assert_allclose(out, x * 2 + 1)


def test_allocate_in_loop_does_not_grow_stack() -> None:
    """A stack buffer allocated inside a long loop is hoisted to the function entry."""
    a = buf("A", "float32", (1,))
    tmp = buf("tmp", "float32", (4096,), Scope.LOCAL)
    i = Var("i", INT32)
    zero = Const(0, INT32)
    body = loop(
        i,
        200000,
        Allocate(
            tmp,
            seq(
                BufferStore(tmp, zero, load(a, zero) + 1.0),
                BufferStore(a, zero, load(tmp, zero)),
            ),
        ),
    )
    m = build_module(PrimFunc("stack", (a,), (), body))
    x = np.zeros(1, "float32")
    m(x)
    assert x[0] == 200000


def test_let_and_if_statements() -> None:
    n = Var("n", INT32)
    a, c = buf("A", "int32", (n,)), buf("C", "int32", (n,))
    i, t = Var("i", INT32), Var("t", INT32)
    body = loop(
        i,
        n,
        LetStmt(t, load(a, i) * 2, IfThenElse(t > 4, BufferStore(c, i, t), BufferStore(c, i, -t))),
    )
    m = build_module(PrimFunc("letif", (a, c), (n,), body))
    x = np.arange(-5, 6, dtype="int32")
    y = np.zeros_like(x)
    m(x, y)
    np.testing.assert_array_equal(y, np.where(2 * x > 4, 2 * x, -2 * x))


def test_codegen_is_text_with_c_signature() -> None:
    func = elementwise("sig", lambda a, b: a * b, ["float32", "int64"], "float64")
    ll = codegen(func, "llvm")
    assert (
        'define void @"sig"(ptr noalias %arg0, ptr noalias %arg1, ptr noalias %arg2, i64 %arg3)'
        in ll
    )
    assert '@"sig_packed"' in ll


def test_gemm_compiles_fast() -> None:
    """A register-blocked GEMM body compiles well under 100 ms."""
    import time

    size = 256
    a, b, c = (buf(x, "float32", (size, size)) for x in "ABC")
    i, k = Var("i", INT32), Var("k", INT32)
    zero = Const(0.0, as_dtype("float32"))
    jo, ji = Var("jo", INT32), Var("ji", INT32)
    col = jo * 16 + ji
    body = loop(
        i,
        size,
        loop(
            jo,
            size // 16,
            seq(
                loop(ji, 16, BufferStore(c, i * size + col, zero), ForKind.VECTORIZED),
                loop(
                    k,
                    size,
                    loop(
                        ji,
                        16,
                        BufferStore(
                            c,
                            i * size + col,
                            load(c, i * size + col)
                            + load(a, i * size + k) * load(b, k * size + col),
                        ),
                        ForKind.VECTORIZED,
                    ),
                ),
            ),
        ),
        ForKind.PARALLEL,
    )
    func = vectorize_loops(PrimFunc("gemm", (a, b, c), (), body))
    start = time.perf_counter()
    m = build_module(func)
    elapsed = time.perf_counter() - start
    assert elapsed < 0.5  # generous for a loaded machine; typically ~30 ms
    rng = np.random.default_rng(1)
    x, y = random((size, size), "float32", rng), random((size, size), "float32", rng)
    z = np.zeros((size, size), "float32")
    m(x, y, z)
    np.testing.assert_allclose(z, x @ y, rtol=1e-4, atol=1e-4)


def test_a_block_loads_an_address_once_and_reads_back_what_it_stored(rng) -> None:
    """Within one basic block an address is loaded once and a stored value is read back
    without a load, while a store to a buffer makes every later read of that buffer load
    again (another address of it may overlap the stored one)."""
    x, acc, out = (buf(name, "float32", (4,)) for name in ("x", "acc", "out"))
    body = seq(
        BufferStore(acc, const(0), load(x, const(0)) * load(x, const(0))),  # x[0] loaded once
        BufferStore(acc, const(1), load(acc, const(0)) + load(x, const(1))),  # acc[0]: stored
        BufferStore(x, const(2), load(acc, const(1))),
        BufferStore(out, const(0), load(x, const(0)) + load(x, const(2))),  # x[0] loaded again
    )
    func = PrimFunc("block", (x, acc, out), (), body)
    ll = codegen(func, "llvm")
    assert ll.count("load float") == 3, ll
    xs = random(4, "float32", rng)
    expected = xs[0] + (xs[0] * xs[0] + xs[1])
    results = [np.zeros(4, "float32"), np.zeros(4, "float32")]
    build_module(func)(xs, *results)
    np.testing.assert_allclose(results[1][0], expected, rtol=1e-6)
    np.testing.assert_allclose(xs[2], xs[0] * xs[0] + xs[1], rtol=1e-6)


def test_local_names_stay_apart_when_a_prefix_ends_in_a_digit() -> None:
    """Names are a prefix (a loop variable's name) and a counter: "i1" at 26 and "i" at 126
    must not both be %i126, whatever the counts."""
    from tensorlang.codegen.irtext import FunctionWriter

    writer = FunctionWriter("")
    names = [writer.fresh("i"), writer.fresh("i1")]  # "i1" at count 2
    names += [writer.fresh("i") for _ in range(10)]  # "i" at counts 3 to 12
    names += [writer.fresh(prefix) for _ in range(150) for prefix in ("i", "i1", "i12", "x_", "")]
    assert len(set(names)) == len(names)


def test_staged_copy_at_an_unrolled_loop_compiles_with_distinct_loop_names() -> None:
    """A cache of B computed at an unrolled reduction loop: each copy has loops over `i1` and
    `i`, which once collided in the LLVM IR ("multiple definition of %i126")."""
    import tensorlang as tl

    a = tl.placeholder((2, 3), name="A")
    b = tl.placeholder((3, 2), name="B")
    k = tl.reduce_axis((0, 3), name="k")
    c = tl.compute((2, 2), lambda i, j: tl.sum(a[i, k] * b[k, j], axis=k), name="C")
    s = tl.create_schedule(c.op)
    cached = s.cache_read(b, "local", [c])
    i, j = c.op.axis
    s[c].unroll(k)
    s[c].reorder(k, j, i)
    s[cached].compute_at(s[c], k)
    rng = np.random.default_rng(0)
    x, y = rng.random((2, 3), dtype="float32"), rng.random((3, 2), dtype="float32")
    out = np.zeros((2, 2), "float32")
    tl.build(s, [a, b, c])(x, y, out)
    np.testing.assert_allclose(out, x @ y, rtol=1e-6)
