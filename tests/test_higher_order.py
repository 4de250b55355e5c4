"""Higher order: nested fg.gradients, fg.hessians, fg.hvp and fg.nth_derivative.

References are independent computations: closed forms, ``jax.hessian`` / nested
``jax.jacrev``, and nested ``jax.grad`` vmapped over the elements.

Tolerances.  float32 comparisons between two different derivative algorithms (Taylor
series against nested reverse mode) accumulate rounding differently; each order adds a
few roundings per term, so the bound is ``8 * n`` float32 epsilons of the derivative's
own scale (``1 + max |reference|``); the largest difference seen is 10 epsilons at n = 8.
float64 closed-form checks use ``1e-12`` relative.
"""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

EPS32 = float(jnp.finfo(jnp.float32).eps)
X = jnp.linspace(-1.2, 1.3, 6, dtype=jnp.float32)


def _nested_grad(f, n):
    for _ in range(n):
        f = jax.grad(f)
    return jax.vmap(f)


def _assert_close_scaled(got, want, n):
    scale = float(jnp.max(jnp.abs(want))) + 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=8 * n * EPS32 * scale)


@jax.custom_vjp
def _cube_with_square_gradient(x):
    """x**3, but its gradient rule calls another custom_vjp: forward mode cannot enter it."""
    return x**3


@jax.custom_vjp
def _square(x):
    return x**2


_square.defvjp(lambda x: (x**2, x), lambda x, g: (2.0 * x * g,))
_cube_with_square_gradient.defvjp(lambda x: (x**3, x), lambda x, g: (3.0 * _square(x) * g,))


@jax.custom_vjp
def _cube_with_wrong_gradient(x):
    """x**3 whose rule says 2x: only nested differentiation honours the rule."""
    return x**3


_cube_with_wrong_gradient.defvjp(lambda x: (x**3, x), lambda x, g: (2.0 * x * g,))


# --- nesting fg.gradients ---------------------------------------------------------------


def test_nested_gradients_of_a_squared_are_2_then_2_then_none() -> None:
    a = jnp.float32(1.0)

    def d1(a):
        return fg.gradients(lambda a: a**2, a)

    def d2(a):
        return fg.gradients(d1, a)

    assert float(d1(a)) == 2.0
    assert float(d2(a)) == 2.0
    assert fg.gradients(d2, a) is None
    assert float(fg.gradients(d2, a, unconnected_gradients="zero")) == 0.0


@pytest.mark.parametrize(
    ("f", "fourth"),
    [
        pytest.param(lambda x: x**5 + 2.0 * x**3 - x, lambda x: 120.0 * x, id="polynomial"),
        pytest.param(jnp.sin, jnp.sin, id="sin"),
        pytest.param(lambda x: jnp.exp(2.0 * x), lambda x: 16.0 * jnp.exp(2.0 * x), id="exp"),
    ],
)
def test_nested_gradients_to_order_four_match_closed_form(f, fourth) -> None:
    d = f
    for _ in range(4):
        d = (lambda g: lambda x: fg.gradients(g, x))(d)
    x = jnp.float32(0.7)
    np.testing.assert_allclose(jax.jit(d)(x), fourth(x), rtol=1e-5)


def test_nested_gradients_order_five_of_a_quartic_is_none() -> None:
    d = lambda x: x**4  # noqa: E731
    for _ in range(4):
        d = (lambda g: lambda x: fg.gradients(g, x))(d)
    assert float(d(jnp.float32(3.0))) == 24.0
    assert fg.gradients(d, jnp.float32(3.0)) is None


def test_nested_gradients_give_mixed_partials() -> None:
    f = lambda a, b: a**2 * jnp.sin(b)  # noqa: E731
    a, b = jnp.float32(1.5), jnp.float32(0.3)
    d_ab = fg.gradients(lambda a, b: fg.gradients(f, [a, b])[0], [a, b])
    np.testing.assert_allclose(d_ab, [2.0 * jnp.sin(b), 2.0 * a * jnp.cos(b)], rtol=1e-6)


# --- hessians ---------------------------------------------------------------------------


def _loss(w, b):
    return jnp.sum(jnp.tanh(w * b) ** 2) + jnp.sum(w**3) * b


W = jnp.array([0.5, -1.0, 2.0], jnp.float32)
B = jnp.float32(0.7)


def test_hessians_equal_jax_hessian_blocks_under_jit() -> None:
    reference = jax.hessian(_loss, argnums=(0, 1))(W, B)
    hw, hb = jax.jit(lambda w, b: fg.hessians(_loss, [w, b]))(W, B)
    assert hw.shape == (3, 3) and hb.shape == ()
    np.testing.assert_allclose(hw, reference[0][0], rtol=1e-5)
    np.testing.assert_allclose(hb, reference[1][1], rtol=1e-5)


def test_hessians_single_x_gives_a_single_hessian_shaped_x_shape_twice() -> None:
    x = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3) / 4.0
    f = lambda x: jnp.sum(jnp.sin(x) * x[::-1])  # noqa: E731
    h = fg.hessians(f, x)
    assert h.shape == (2, 3, 2, 3)
    np.testing.assert_allclose(h, jax.hessian(f)(x), rtol=1e-5, atol=1e-6)


def test_hessians_under_vmap() -> None:
    ws = jnp.stack([W, 2.0 * W, -W])
    got = jax.vmap(lambda w: fg.hessians(_loss, [w, B])[0])(ws)
    want = jax.vmap(lambda w: jax.hessian(_loss)(w, B))(ws)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_hessians_jitted_traces_once() -> None:
    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(w):
        return fg.hessians(_loss, [w, B])[0]

    step(W)
    step(W + 1.0)


def test_hessians_of_a_sum_over_outputs() -> None:
    f = lambda x: [x**3, jnp.sin(x)]  # noqa: E731
    x = jnp.array([0.5, 1.5], jnp.float32)
    want = jnp.diag(6.0 * x - jnp.sin(x))
    np.testing.assert_allclose(fg.hessians(f, x), want, rtol=1e-6)


def test_hessians_unconnected_none_or_zeros() -> None:
    f = lambda x, y, k: jnp.sum(x**2) + 3.0 * y  # noqa: E731
    x, y, k = jnp.ones(2, jnp.float32), jnp.float32(1.0), jnp.int32(2)
    hx, hy, hk = fg.hessians(f, [x, y, k])
    np.testing.assert_allclose(hx, 2.0 * jnp.eye(2))
    assert hy is None and hk is None
    hx, hy, hk = fg.hessians(f, [x, y, k], unconnected_gradients="zero")
    assert hy.shape == () and float(hy) == 0.0
    assert hk.dtype == jnp.int32 and hk.shape == ()


def test_hessians_fall_back_to_reverse_mode_through_custom_vjp() -> None:
    f = lambda x: jnp.sum(jnp.sin(_cube_with_square_gradient(x)))  # noqa: E731
    x = jnp.array([0.3, 0.8, -0.6], jnp.float32)
    with pytest.raises(TypeError, match="forward-mode"):
        jax.hessian(f)(x)  # what forward-over-reverse does here
    want = jnp.diag(6.0 * x * jnp.cos(x**3) - 9.0 * x**4 * jnp.sin(x**3))
    np.testing.assert_allclose(jax.jit(lambda x: fg.hessians(f, x))(x), want, rtol=1e-5, atol=1e-6)
    got = jax.vmap(lambda x: fg.hessians(f, x))(jnp.stack([x, -x]))
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)


def test_hessians_honour_the_custom_rule() -> None:
    # d/dx of the rule 2x is 2 (the true x**3 would give 6x).
    x = jnp.array([1.0, 2.0], jnp.float32)
    h = fg.hessians(lambda x: jnp.sum(_cube_with_wrong_gradient(x)), x)
    np.testing.assert_allclose(h, 2.0 * jnp.eye(2))


@pytest.mark.parametrize(
    ("xs", "error", "match"),
    [
        pytest.param({"w": W}, TypeError, r"xs\[0\] is a dict", id="dict_x"),
        pytest.param([W, {"b": B}], TypeError, r"xs\[1\] is a dict", id="dict_in_list"),
        pytest.param([], ValueError, "xs is empty", id="empty"),
        pytest.param([W, "b"], TypeError, "must be an array", id="string_leaf"),
    ],
)
def test_hessians_bad_xs(xs, error, match) -> None:
    with pytest.raises(error, match=r"fg.hessians\(f, xs\): .*" + match):
        fg.hessians(lambda *a: jnp.sum(W), xs)


def test_hessians_bad_unconnected_gradients() -> None:
    with pytest.raises(ValueError, match="unconnected_gradients must be one of"):
        fg.hessians(_loss, [W, B], unconnected_gradients="zeros")


# --- hvp --------------------------------------------------------------------------------


def _flat_loss(z):
    return _loss(z[:3], z[3])


def test_hvp_equals_full_hessian_times_v_with_cross_terms_under_jit() -> None:
    v = [jnp.array([1.0, -2.0, 0.5], jnp.float32), jnp.float32(3.0)]
    got = jax.jit(lambda w, b, vw, vb: fg.hvp(_loss, [w, b], [vw, vb]))(W, B, *v)
    h = jax.hessian(_flat_loss)(jnp.concatenate([W, B[None]]))
    want = h @ jnp.concatenate([v[0], v[1][None]])
    assert isinstance(got, list)
    np.testing.assert_allclose(jnp.concatenate([got[0], got[1][None]]), want, rtol=1e-5)


def test_hvp_under_vmap_over_vectors() -> None:
    vs = jnp.eye(3, dtype=jnp.float32)
    got = jax.vmap(lambda v: fg.hvp(lambda w: _loss(w, B), W, v))(vs)
    np.testing.assert_allclose(got, jax.hessian(_loss)(W, B), rtol=1e-5)


def test_hvp_on_a_pytree() -> None:
    params = {"w": W, "b": B}
    vecs = {"w": jnp.ones(3, jnp.float32), "b": jnp.float32(-1.0)}
    got = fg.hvp(lambda p: _loss(p["w"], p["b"]), params, vecs)
    want = jax.hessian(_flat_loss)(jnp.concatenate([W, B[None]])) @ jnp.array(
        [1.0, 1.0, 1.0, -1.0], jnp.float32
    )
    np.testing.assert_allclose(got["w"], want[:3], rtol=1e-5)
    np.testing.assert_allclose(got["b"], want[3], rtol=1e-5)


def test_hvp_falls_back_to_reverse_mode_through_custom_vjp() -> None:
    f = lambda x, y: jnp.sum(jnp.sin(_cube_with_square_gradient(x)) * y)  # noqa: E731
    x, y = jnp.array([0.3, 0.8], jnp.float32), jnp.array([1.0, 2.0], jnp.float32)
    vx, vy = jnp.array([1.0, -1.0], jnp.float32), jnp.array([0.5, 2.0], jnp.float32)
    h = jax.jacrev(jax.jacrev(lambda z: f(z[:2], z[2:])))(jnp.concatenate([x, y]))
    want = h @ jnp.concatenate([vx, vy])
    got = jax.jit(lambda *a: fg.hvp(f, list(a[:2]), list(a[2:])))(x, y, vx, vy)
    np.testing.assert_allclose(jnp.concatenate(got), want, rtol=1e-5, atol=1e-6)


def test_hvp_unconnected_none_or_zeros() -> None:
    f = lambda x, y: jnp.sum(x**2) + 3.0 * y  # noqa: E731
    x, y = jnp.ones(2, jnp.float32), jnp.float32(1.0)
    hx, hy = fg.hvp(f, [x, y], [x, y])
    np.testing.assert_allclose(hx, [2.0, 2.0])
    assert hy is None
    _, hy = fg.hvp(f, [x, y], [x, y], unconnected_gradients="zero")
    assert float(hy) == 0.0


@pytest.mark.parametrize(
    ("vs", "match"),
    [
        pytest.param([W], "vs has structure", id="too_few"),
        pytest.param(
            [jnp.ones(2, jnp.float32), jnp.ones(3, jnp.float32)],
            r"vs\[0\]: expected shape \(3,\) dtype float32, got shape \(2,\) dtype float32; "
            r"vs\[1\]",
            id="wrong_shapes_listed",
        ),
        pytest.param([W, jnp.int32(1)], r"vs\[1\]: .*dtype int32", id="wrong_dtype"),
    ],
)
def test_hvp_bad_vectors(vs, match) -> None:
    with pytest.raises(ValueError, match=r"fg.hvp\(f, xs, vs\): .*" + match):
        fg.hvp(_loss, [W, B], vs)


def test_hvp_vectors_not_a_list() -> None:
    with pytest.raises(TypeError, match=r"fg.hvp\(f, xs, vs\): .*vs must be a list too"):
        fg.hvp(_loss, [W, B], W)


# --- nth_derivative ---------------------------------------------------------------------

FUNCTIONS = [
    pytest.param(lambda x: jnp.sin(x) * jnp.exp(x), id="sin_exp"),
    pytest.param(lambda x: jnp.exp(jnp.sin(x)), id="exp_sin"),
    pytest.param(jnp.tanh, id="tanh"),
    pytest.param(jax.nn.sigmoid, id="logistic"),
    pytest.param(lambda x: 3.0 * x**7 - 2.0 * x**4 + x - 1.0, id="polynomial"),
    # primitives of their own on JAX 0.12 (log2, polynomial)
    pytest.param(lambda x: jnp.log2(x + 2.0), id="log2"),
    pytest.param(lambda x: jnp.polyval(jnp.array([3.0, -2.0, 1.0]), x), id="polyval"),
]


@pytest.mark.parametrize("f", FUNCTIONS)
def test_nth_derivative_equals_nested_grad_for_orders_1_to_8_under_jit(f) -> None:
    got = jax.jit(lambda x: [fg.nth_derivative(f, n)(x) for n in range(1, 9)])(X)
    want = jax.jit(lambda x: [_nested_grad(f, n)(x) for n in range(1, 9)])(X)
    for n, (g, w) in enumerate(zip(got, want, strict=True), start=1):
        assert g.shape == X.shape and g.dtype == jnp.float32
        _assert_close_scaled(g, w, n)


def test_nth_derivative_matches_closed_forms_in_float64() -> None:
    with jax.enable_x64(True):
        x = jnp.linspace(-1.0, 1.0, 5, dtype=jnp.float64)
        for n in range(1, 9):
            got = jax.jit(fg.nth_derivative(lambda x: jnp.sin(x) * jnp.exp(x), n))(x)
            want = 2.0 ** (n / 2) * jnp.exp(x) * jnp.sin(x + n * math.pi / 4)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
            poly = fg.nth_derivative(lambda x: x**9, n)(x)
            want = math.factorial(9) / math.factorial(9 - n) * x ** (9 - n)
            np.testing.assert_allclose(poly, want, rtol=1e-12, atol=1e-12)


def test_nth_derivative_series_convention_is_derivatives_not_coefficients() -> None:
    # jet's terms are factorial-scaled; a missing or extra n! would show at n = 3.
    for n in (1, 2, 3, 4):
        got = fg.nth_derivative(jnp.sin, n)(X)
        np.testing.assert_allclose(got, jnp.sin(X + n * jnp.pi / 2), atol=16 * EPS32)


def test_nth_derivative_zero_is_f_itself() -> None:
    assert fg.nth_derivative(jnp.tanh, 0) is jnp.tanh


def test_nth_derivative_under_vmap_and_traces_once() -> None:
    d3 = jax.jit(chex.assert_max_traces(lambda x: fg.nth_derivative(jnp.tanh, 3)(x), n=1))
    xs = jnp.stack([X, X / 2.0])
    got = jax.vmap(d3)(xs)
    _assert_close_scaled(got[1], _nested_grad(jnp.tanh, 3)(X / 2.0), 3)
    jax.vmap(d3)(xs + 1.0)


def test_nth_derivative_of_a_scalar_function() -> None:
    got = fg.nth_derivative(lambda x: x**3 * jnp.sum(x), 2)(jnp.float32(2.0))
    np.testing.assert_allclose(got, 12.0 * 2.0**2, rtol=1e-6)


def _sin_loop(x):
    return jax.lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) * x, x)


def _sin_while(x):
    return jax.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.sin(c[1]) * x), (0, x))[
        1
    ]


def _sin_unrolled(x):
    return jnp.sin(jnp.sin(jnp.sin(x) * x) * x) * x


@pytest.mark.parametrize(
    ("f", "reference"),
    [
        pytest.param(_sin_loop, _sin_loop, id="fori_loop_scan"),
        # A while loop is not reverse-differentiable: its reference is the unrolled loop.
        pytest.param(_sin_while, _sin_unrolled, id="while_loop"),
        pytest.param(jnp.arctan, jnp.arctan, id="no_taylor_rule"),
        pytest.param(lambda x: jnp.clip(x, -0.5, 0.5) ** 3, None, id="clip_scalar_operand"),
        pytest.param(jax.nn.softplus, jax.nn.softplus, id="custom_jvp"),
        pytest.param(_cube_with_square_gradient, None, id="custom_vjp"),
        pytest.param(
            lambda x: jnp.where(jnp.all(x > -2.0), jnp.sin(x), x), jnp.sin, id="boolean_reduction"
        ),
    ],
)
def test_nth_derivative_fallback_equals_nested_grad(f, reference) -> None:
    for n in (1, 3):
        got = jax.jit(fg.nth_derivative(f, n))(X)
        _assert_close_scaled(got, _nested_grad(reference or f, n)(X), n)


def test_nth_derivative_fallback_honours_a_custom_rule_jet_would_ignore() -> None:
    # jet evaluates the primal x**3 (3x**2); the rule says 2x, and nested grad agrees.
    got = fg.nth_derivative(_cube_with_wrong_gradient, 1)(X)
    np.testing.assert_allclose(got, 2.0 * X)


@pytest.mark.parametrize(
    ("n", "error", "match"),
    [
        pytest.param(-1, ValueError, "n must be an integer >= 0, got -1", id="negative"),
        pytest.param(2.0, TypeError, "n must be an integer >= 0, got 2.0", id="float"),
        pytest.param(True, TypeError, "n must be an integer >= 0, got True", id="bool"),
        pytest.param("3", TypeError, "n must be an integer >= 0, got '3'", id="string"),
        pytest.param(None, TypeError, "n must be an integer >= 0, got None", id="none"),
    ],
)
def test_nth_derivative_bad_order(n, error, match) -> None:
    with pytest.raises(error, match=r"fg.nth_derivative\(f, n\): " + match):
        fg.nth_derivative(jnp.sin, n)


def test_nth_derivative_accepts_numpy_integers() -> None:
    got = fg.nth_derivative(jnp.sin, np.int64(2))(X)
    np.testing.assert_allclose(got, -jnp.sin(X), atol=4 * EPS32)


def test_nth_derivative_f_not_callable() -> None:
    with pytest.raises(TypeError, match="f must be a function, got int"):
        fg.nth_derivative(3, 1)


@pytest.mark.parametrize(
    ("f", "match"),
    [
        pytest.param(lambda x: x - jnp.mean(x), "not elementwise: reduce_sum", id="mean"),
        pytest.param(lambda x: x[::-1], "not elementwise: rev", id="reverse"),
        pytest.param(jnp.cumsum, "not elementwise: cumsum", id="cumsum"),
        pytest.param(lambda x: jnp.sin(jnp.outer(x, x)).sum(0), "broadcast_in_dim", id="outer"),
        pytest.param(jnp.sum, r"one floating array of x's shape \(6,\), got float32\[\]", id="sum"),
        pytest.param(lambda x: (x, x), r"got \('float32\[6\]', 'float32\[6\]'\)", id="tuple"),
        pytest.param(lambda x: jnp.round(x).astype(jnp.int32), r"got int32\[6\]", id="integer"),
    ],
)
def test_nth_derivative_rejects_functions_that_are_not_elementwise(f, match) -> None:
    with pytest.raises(ValueError, match=r"fg.nth_derivative\(f, n\): .*" + match):
        jax.jit(fg.nth_derivative(f, 2))(X)


@pytest.mark.parametrize(
    ("x", "error", "match"),
    [
        pytest.param(jnp.arange(3), TypeError, "x has dtype int32; .*astype", id="int"),
        pytest.param({"x": X}, TypeError, "x must be an array, got dict", id="dict"),
    ],
)
def test_nth_derivative_bad_point(x, error, match) -> None:
    with pytest.raises(error, match=r"fg.nth_derivative\(f, n\): " + match):
        fg.nth_derivative(jnp.sin, 2)(x)


def test_nth_derivative_keeps_the_function_name() -> None:
    def bump(x):
        return jnp.exp(-(x**2))

    assert fg.nth_derivative(bump, 2).__name__ == "bump"


def _custom_cube(x: jax.Array) -> jax.Array:
    @fg.custom_gradient
    def cube(x):
        return x**3, lambda dy: dy * 3.0 * x**2

    return cube(x)


def _py_func_cube(x: jax.Array) -> jax.Array:
    def grad(op, dy):
        return dy * 3.0 * op.inputs[0] ** 2

    return fg.py_func(lambda v: v**3, [x], jnp.float32, grad=grad)


def _overridden_cube(x: jax.Array) -> jax.Array:
    # "Identity" passes the gradient of sign straight through: d/dx sum(sign(x) * x**3).
    return fg.gradient_override_map(jnp.sign, {"Sign": "Identity"})(x) + x**3


@pytest.mark.parametrize(
    ("f", "hessian_of_sum"),
    [
        pytest.param(_custom_cube, lambda x: jnp.diag(6.0 * x), id="custom_gradient"),
        pytest.param(_py_func_cube, lambda x: jnp.diag(6.0 * x), id="py_func_with_grad"),
        pytest.param(_overridden_cube, lambda x: jnp.diag(6.0 * x), id="override_map"),
    ],
)
def test_hessians_and_hvp_through_funcgrads_own_custom_rules(f, hessian_of_sum) -> None:
    x = jnp.array([0.5, -1.5, 2.0])
    v = jnp.array([1.0, 2.0, -1.0])
    expected = hessian_of_sum(x)
    chex.assert_trees_all_close(
        jax.jit(lambda x: fg.hessians(lambda x: jnp.sum(f(x)), x))(x), expected, rtol=1e-6
    )
    chex.assert_trees_all_close(
        jax.jit(lambda x: fg.hvp(lambda x: jnp.sum(f(x)), x, v))(x), expected @ v, rtol=1e-6
    )
