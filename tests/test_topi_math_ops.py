"""The math ops of topi.nn.logical and topi.nn.activation against their numpy references, on
awkward shapes, several dtypes and the awkward values (NaN, inf, exact halves, negative
operands), alone and as graph ops; plus the sin/cos intrinsics of the core they rely on."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from topi_check import run_op

import tensorlang as tl
import topi
import topi.graph as tg

nn, T = topi.nn, topi.testing
INJ, RED = topi.x86.schedule_injective, topi.x86.schedule_reduce
HASWELL = "llvm -mcpu=haswell"


def run(name: str, arrays: list[np.ndarray], schedule=INJ, target: str | None = None,
        **attrs) -> tuple[np.ndarray, np.ndarray]:
    """topi.nn.<name> built with `schedule` and run on `arrays`, and its numpy reference."""
    ins = [tl.placeholder(a.shape, str(a.dtype), f"in{k}") for k, a in enumerate(arrays)]
    out = getattr(nn, name)(*ins, **attrs)
    if target is None:
        got = run_op(out, ins, arrays, schedule)
    else:
        with tl.Target(target):
            got = run_op(out, ins, arrays, schedule)
    return got, getattr(T, f"{name}_python")(*arrays, **attrs)


def check_exact(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want, err_msg=what)


def check_close(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    tight = got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12 if tight else 2e-6,
                               atol=1e-300 if tight else 1e-37, err_msg=what)


def numbers(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    """Small values with many ties (integers and halves), negatives, and for floats NaN/inf."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-4, 5, shape).astype(dtype)
    v = (rng.integers(-8, 9, shape) / 2).astype(dtype)
    flat = v.reshape(-1)
    flat[::7] = np.nan
    flat[3::11] = np.inf
    flat[5::13] = -np.inf
    return v


SPECIALS = np.array([-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, 3.5, -3.7, 2.2, 0.49999997,
                     1e-30, -1e-30, np.nan, np.inf, -np.inf, 8388609.0, -8388607.5,
                     4503599627370497.0, 1e20, -1e20])


# -- comparisons and logic ------------------------------------------------------------------------

COMPARISONS = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
LOGIC = ["logical_and", "logical_or", "logical_xor"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_comparisons_broadcast_over_ranks(dtype: str) -> None:
    rng = np.random.default_rng(1)
    a, b = numbers(rng, (7, 1, 3), dtype), numbers(rng, (5, 1), dtype)
    for name in COMPARISONS:
        check_exact(*run(name, [a, b]), f"{name} {dtype}")
    check_exact(*run("less", [b, a]), "less swapped")


@pytest.mark.parametrize("dtype", ["bool", "int32", "float32"])
def test_logic_takes_nonzero_as_true(dtype: str) -> None:
    rng = np.random.default_rng(2)
    a, b = numbers(rng, (1,), dtype), numbers(rng, (4, 13), dtype)
    a2 = numbers(rng, (4, 1), dtype)
    for name in LOGIC:
        check_exact(*run(name, [a, b]), f"{name} {dtype}")
        check_exact(*run(name, [b, a2]), f"{name} {dtype} swapped")
    check_exact(*run("logical_not", [b]), f"logical_not {dtype}")


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_where_broadcasts_all_three(dtype: str) -> None:
    rng = np.random.default_rng(3)
    cond = rng.random((3, 1, 5)) < 0.5
    x, y = numbers(rng, (1, 4, 1), dtype), numbers(rng, (5,), dtype)
    check_exact(*run("where", [cond, x, y]))
    check_exact(*run("where", [np.array(True), y, x]), "0-d cond")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_isnan_isinf_on_specials(dtype: str) -> None:
    x = np.tile(SPECIALS.astype(dtype), (3, 1))
    for name in ("isnan", "isinf"):
        got, want = run(name, [x])
        check_exact(got, want, name)
        assert got.any() and not got.all()


def test_isnan_isinf_of_integers_are_false() -> None:
    x = np.arange(-5, 6, dtype="int32")
    for name in ("isnan", "isinf"):
        check_exact(*run(name, [x]), name)


# -- rounding ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rounding_halves_to_even_and_keeps_specials(dtype: str) -> None:
    rng = np.random.default_rng(4)
    x = np.concatenate([SPECIALS, rng.uniform(-50, 50, 17)]).astype(dtype)
    for name in ("round", "trunc", "floor", "ceil", "sign"):
        got, want = run(name, [x])
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want, err_msg=f"{name} {dtype}")
    assert list(run("round", [np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], dtype)])[0]) == [
        -2, -2, 0, 0, 2, 2]


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_rounding_of_integers_is_the_identity_and_sign_is_exact(dtype: str) -> None:
    x = np.arange(-7, 6, dtype=dtype)
    for name in ("round", "trunc", "floor", "ceil", "sign"):
        check_exact(*run(name, [x]), name)
    check_exact(*run("sign", [np.array([0, 1, 200], "uint8")]), "sign uint8")


# -- remainders and divisions ------------------------------------------------------------------------

DIVISIONS = ["mod", "fmod", "floor_divide", "trunc_divide"]


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_divisions_of_negative_operands(dtype: str) -> None:
    rng = np.random.default_rng(5)
    a = rng.integers(-23, 24, (6, 1)).astype(dtype)
    b = np.array([3, -3, 7, -7, 1, -1, 5, -2, 11])
    if dtype.startswith("int"):
        b = np.append(b, 0)  # an integer division by zero gives 0, as numpy does
    else:
        a = a + rng.uniform(-1, 1, a.shape).astype(dtype)
        b = b * 0.75
    b = b.astype(dtype)
    for name in DIVISIONS:
        got, want = run(name, [a, b])
        if dtype.startswith("int"):
            check_exact(got, want, f"{name} {dtype}")
        else:
            check_close(got, want, f"{name} {dtype}")


def test_float_floor_divide_is_numpys_not_floor_of_the_quotient() -> None:
    a = np.array([1.0, -1.0, 5.3, 7.0, -0.0, 3.0], "float64")
    b = np.array([0.1, 0.1, -0.2, 0.0, 2.0, np.inf], "float64")
    got, want = run("floor_divide", [a, b])
    np.testing.assert_array_equal(got, want)
    assert got[0] == 9.0
    got, want = run("fmod", [np.array([5.5, -5.5, 1.0, np.inf]), np.array([2.0, 2.0, -np.inf, 1.0])])
    np.testing.assert_array_equal(got, want)


# -- activations and float math ----------------------------------------------------------------------

FLOAT_UNARY = [("elu", {}), ("elu", {"alpha": 0.3}), ("selu", {}), ("celu", {"alpha": 1.7}),
               ("softplus", {}), ("softplus", {"beta": 2.0, "threshold": 5.0}), ("mish", {}),
               ("silu", {}), ("softsign", {}), ("sin", {}), ("cos", {}), ("log1p", {}),
               ("expm1", {})]


def float_values(dtype: str) -> np.ndarray:
    rng = np.random.default_rng(6)
    tiny = np.array([1e-3, -1e-3, 1e-6, -1e-6, 1e-9, -1e-9, 1e-20, 0.0, -0.5, 0.5, 30.0, -30.0,
                     19.99, 20.01, 80.0, -80.0, 3.0, -3.0, 2.5, -0.9999])
    return np.concatenate([tiny, rng.uniform(-6, 6, 13)]).astype(dtype).reshape(3, 11)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,attrs", FLOAT_UNARY, ids=lambda v: str(v))
def test_float_unary_ops(name: str, attrs: dict, dtype: str) -> None:
    x = float_values(dtype)
    if name == "log1p":
        x = np.where(x > -1, x, -x)  # log1p's domain
    check_close(*run(name, [x], **attrs), f"{name} {dtype}")


def test_log1p_expm1_at_their_ends() -> None:
    x = np.array([-1.0, np.inf, 0.0, 1e30, -np.inf, 1e-40], "float32")
    check_close(*run("log1p", [x[:4]]))
    check_close(*run("expm1", [x[1:]]))


def test_prelu_broadcasts_the_slope() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 5, 7)).astype("float32")
    for slope in (rng.standard_normal((3, 1, 1)), rng.standard_normal((7,)), np.array(0.25)):
        check_exact(*run("prelu", [x, slope.astype("float32")]))


def test_sin_cos_in_the_core_scalar_vector_and_exported(tmp_path) -> None:
    a = tl.placeholder((37,), "float64", "a")
    b = tl.compute(a.shape, lambda i: tl.sin(a[i]) * tl.cos(a[i] * 3), name="b")
    value = np.linspace(-100, 100, 37)
    want = np.sin(value) * np.cos(value * 3)
    for s in (tl.create_schedule(b.op), INJ([b])):
        np.testing.assert_allclose(run_op(b, [a], [value], s=s), want, rtol=1e-12, atol=1e-14)
    f = tl.build(tl.create_schedule(b.op), [a, b])
    f.export_library(tmp_path / "sincos.so")
    out = np.zeros(37)
    tl.load_module(tmp_path / "sincos.so")(value, out)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-14)


# -- reductions ----------------------------------------------------------------------------------------

AXES = [(None, False), (1, False), ((0, 2), True), (-1, True), ((), False)]


@pytest.mark.parametrize("axis,keepdims", AXES)
def test_prod_any_all(axis, keepdims: bool) -> None:
    rng = np.random.default_rng(8)
    floats = rng.uniform(0.5, 1.5, (3, 5, 7)).astype("float32")
    ints = rng.integers(-2, 3, (3, 5, 7)).astype("int32")
    got, want = run("prod", [floats], RED, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    check_exact(*run("prod", [ints], RED, axis=axis, keepdims=keepdims), "prod int32")
    sparse = rng.random((3, 5, 7)) < 0.1
    dense = rng.random((3, 5, 7)) < 0.9
    for name in ("any", "all"):
        for x in (sparse, dense, ints, floats - 1):
            check_exact(*run(name, [x], RED, axis=axis, keepdims=keepdims), f"{name} {x.dtype}")


# -- the AVX2 path -------------------------------------------------------------------------------------


def test_avx2_vector_code_with_tails() -> None:
    rng = np.random.default_rng(9)
    x = np.tile(SPECIALS.astype("float32"), (3, 1))
    check_exact(*run("round", [x], target=HASWELL))
    check_exact(*run("isnan", [x], target=HASWELL))
    a = rng.integers(-50, 50, (5, 13)).astype("int32")
    b = rng.choice(np.array([3, -4, 7, -9], "int32"), 13)
    check_exact(*run("mod", [a, b], target=HASWELL))
    check_exact(*run("fmod", [a, np.full((13,), -6, "int32")], target=HASWELL))
    y = float_values("float32")
    check_close(*run("expm1", [y], target=HASWELL))
    check_close(*run("sin", [y], target=HASWELL))
    cond = rng.random((5, 13)) < 0.5
    check_exact(*run("where", [cond, y[:1, :1], np.float32(2) * np.ones((13,), "float32")],
                     target=HASWELL))
    check_exact(*run("any", [cond], RED, target=HASWELL, axis=0))


# -- errors ------------------------------------------------------------------------------------------


def test_bad_arguments_name_the_culprit() -> None:
    f = tl.placeholder((3, 4), "float32", "f")
    i = tl.placeholder((3, 4), "int32", "i")
    m = tl.placeholder((3, 4), "bool", "m")
    with pytest.raises(TypeError, match="where: cond"):
        nn.where(f, f, f)
    with pytest.raises(TypeError, match="where: x and y"):
        nn.where(m, f, i)
    with pytest.raises(ValueError, match="do not broadcast"):
        nn.equal(f, tl.placeholder((5,), "float32"))
    with pytest.raises(TypeError, match="elu: x must be a float"):
        nn.elu(i)
    with pytest.raises(TypeError, match="elu: alpha"):
        nn.elu(f, alpha="1")
    with pytest.raises(ValueError, match="celu: alpha"):
        nn.celu(f, alpha=0)
    with pytest.raises(ValueError, match="softplus: beta"):
        nn.softplus(f, beta=0.0)
    with pytest.raises(TypeError, match="prelu: slope"):
        nn.prelu(f, i)
    with pytest.raises(TypeError, match="mod: a"):
        nn.mod(m, i)
    with pytest.raises(TypeError, match="sign: x"):
        nn.sign(m)
    with pytest.raises(TypeError, match="prod: x"):
        nn.prod(m)
    with pytest.raises(ValueError, match="any: axis"):
        nn.any(m, axis=2)
    with pytest.raises(TypeError, match="logical_not: x"):
        nn.logical_not([1, 2])


# -- graph ops ---------------------------------------------------------------------------------------


def _graph_cases(rng: np.random.Generator) -> list[tuple[str, list[np.ndarray], dict]]:
    f = rng.uniform(-3, 3, (2, 5, 3)).astype("float32")
    f2 = rng.uniform(-3, 3, (5, 1)).astype("float32")
    i = rng.integers(-9, 10, (2, 5, 3)).astype("int64")
    i2 = np.array([[3], [-2], [5], [-7], [1]], "int64")
    m = rng.random((2, 5, 3)) < 0.5
    m2 = rng.random((5, 1)) < 0.5
    cases = [(name, [f, f2], {}) for name in COMPARISONS]
    cases += [(name, [m, m2], {}) for name in LOGIC]
    cases += [(name, [i, i2], {}) for name in DIVISIONS]
    cases += [(name, [f, f2], {}) for name in DIVISIONS]
    cases += [(name, [f], attrs) for name, attrs in FLOAT_UNARY if name != "log1p"]
    cases += [(name, [f], {}) for name in ("isnan", "isinf", "sign", "floor", "ceil", "round",
                                           "trunc")]
    cases += [("log1p", [np.abs(f)], {}), ("logical_not", [m], {}), ("where", [m2, f, f2], {}),
              ("prelu", [f, f2[:, :1].reshape(5, 1)], {}),
              ("prod", [f], {"axis": (0, 2), "keepdims": True}), ("any", [m], {"axis": 1}),
              ("all", [m], {}), ("argmax", [f], {"axis": 1}), ("argmin", [f], {}),
              ("argmax", [f], {"axis": 2, "keepdims": True})]
    return cases


def test_every_math_op_builds_as_a_graph_op() -> None:
    rng = np.random.default_rng(10)
    cases = _graph_cases(rng)
    names = {name for name, _, _ in cases}
    assert names <= set(tg.registered_ops())
    g = tg.Graph()
    feeds: dict[str, np.ndarray] = {}
    for k, (name, arrays, attrs) in enumerate(cases):
        inputs = []
        for j, a in enumerate(arrays):
            feeds[f"x{k}_{j}"] = a
            inputs.append(g.input(f"x{k}_{j}", a.shape, str(a.dtype)))
        g.output(g.apply(name, *inputs, **attrs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = tg.build(g)(**feeds)
    for (name, arrays, attrs), node, out in zip(cases, g.outputs, outs):
        want = np.asarray(tg.get_op(name).reference(*arrays, **attrs))
        assert out.dtype == node.dtype == want.dtype and out.shape == want.shape, name
        if out.dtype.kind == "f":
            np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-7, err_msg=name)
        else:
            np.testing.assert_array_equal(out, want, err_msg=name)
    assert tg.get_op("argmax").reference(cases[-1][1][0], axis=1).dtype == np.int64
