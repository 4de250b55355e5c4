"""fg.tensorflow_conventions: where it reaches, what it composes with, what it leaves alone.

TensorFlow's own numbers are checked in tests/parity/test_conventions_parity.py.  Here
the references are closed forms (TensorFlow's rule written out by hand for one case) and
plain ``jax.grad`` where both conventions agree (no ties, no zeros).
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import funcgrad as fg

F32 = np.float32
tfc = fg.tensorflow_conventions


def _min1abs(x):
    return jnp.minimum(1.0, jnp.abs(x))


# TensorFlow: abs' = sign (0 at 0); minimum(1, |x|) gives a tie to its first argument, 1.
X = jnp.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
TF_MIN1ABS = jnp.array([0.0, 0.0, -1.0, 0.0, 1.0, 0.0, 0.0])


def _grad(f):
    return jax.grad(lambda x: jnp.sum(f(x)))


def test_gradient_is_tensorflows_and_value_bit_identical(variant) -> None:
    f = tfc(_min1abs)
    np.testing.assert_array_equal(variant(_grad(f))(X), TF_MIN1ABS)
    np.testing.assert_array_equal(variant(f)(X), _min1abs(X))
    assert float(_grad(_min1abs)(jnp.float32(0.0))) == 1.0  # JAX's own: |x|' = 1 at 0


@pytest.mark.parametrize(
    "f",
    [
        pytest.param(jax.nn.elu, id="elu"),
        pytest.param(jax.nn.selu, id="selu"),
        pytest.param(lambda x: jax.nn.leaky_relu(x, 0.3), id="leaky_relu"),
        pytest.param(lambda x: jnp.clip(x, -1.0, 1.0), id="clip"),
        pytest.param(lambda x: jnp.where(x > 0, jnp.sqrt(x), 0.0), id="where_sqrt"),
        pytest.param(lambda x: x**3 + jnp.log1p(x * x), id="powers"),
        pytest.param(lambda x: jax.scipy.special.xlogy(x, x * x + 1.0), id="xlogy"),
        pytest.param(lambda x: jnp.prod(x) + jnp.max(x), id="reductions"),
    ],
)
def test_values_are_bit_identical(f) -> None:
    x = jnp.array([-1.5, -0.0, 0.0, 0.25, 1.0, 3.0])
    np.testing.assert_array_equal(tfc(f)(x), f(x))


@pytest.mark.parametrize(
    ("f", "x", "expected"),
    [
        # TensorFlow's EluGrad at y = 0: the incoming gradient (JAX: the same, 1); its
        # second derivative at 0 is 0 (EluGradGrad), JAX's 1.
        pytest.param(jax.nn.elu, 0.0, (1.0, 0.0), id="elu_at_0"),
        # SeluGrad at y = 0: scale (JAX: scale * alpha).
        pytest.param(jax.nn.selu, 0.0, (1.0507009873554805, 0.0), id="selu_at_0"),
        # LeakyReluGrad: x > 0 ? g : alpha * g, so alpha at 0 (JAX: 1).
        pytest.param(lambda x: jax.nn.leaky_relu(x, 0.2), 0.0, (0.2, 0.0), id="leaky_at_0"),
        # With the default slope, the call has no slope input: read off its body.
        pytest.param(jax.nn.leaky_relu, 0.0, (0.01, 0.0), id="leaky_default_at_0"),
        # clip_by_value passes the gradient at a bound (JAX: half).
        pytest.param(lambda x: jnp.clip(x, 0.0, 1.0), 1.0, (1.0, None), id="clip_at_hi"),
        # Pow's gradient of x**2 is 2 * pow(x, 1): the third derivative is 0 * pow(x, -1).
        pytest.param(lambda x: x**2, 1.0, (2.0, 2.0), id="square_pow"),
    ],
)
def test_first_and_second_derivatives(f, x, expected) -> None:
    first = fg.gradients(tfc(f), F32(x))
    second = fg.gradients(lambda v: fg.gradients(tfc(f), v), F32(x))
    np.testing.assert_allclose(float(first), expected[0], rtol=1e-6)
    if expected[1] is None:
        assert second is None
    else:
        np.testing.assert_allclose(float(second), expected[1], rtol=1e-6)


@pytest.mark.parametrize("slope", [0.2, 0.01], ids=["alpha_0.2", "default_slope"])
def test_leaky_relu_slope_is_a_float32_attribute_in_every_dtype(slope) -> None:
    """TensorFlow's LeakyReluGrad kernel reads alpha, a float32 attribute, cast to the
    dtype: float64(float32(0.2)) = 0.20000000298023224; bfloat16 rounds that once more."""
    leaky = (lambda v: jax.nn.leaky_relu(v, slope)) if slope != 0.01 else jax.nn.leaky_relu
    with jax.enable_x64(True):
        x = jnp.array([-2.0, 0.0, 3.0], jnp.float64)
        first = fg.gradients(lambda v: jnp.sum(tfc(leaky)(v)), x)
        second_order = fg.gradients(lambda v: jnp.sum(fg.gradients(tfc(leaky), v) * v), x)
    rounded = float(np.float32(slope))
    assert first.dtype == jnp.float64 and first.tolist() == [rounded, rounded, 1.0]
    assert second_order.tolist() == [rounded, rounded, 1.0]  # LeakyReluGradGrad: the same
    low = fg.gradients(lambda v: jnp.sum(tfc(leaky)(v)), x.astype(jnp.bfloat16))
    assert low.tolist() == [float(jnp.bfloat16(np.float32(slope)))] * 2 + [1.0]


def test_third_derivative_of_x_squared_is_connected() -> None:
    def third(f):
        return fg.gradients(lambda a: fg.gradients(lambda b: fg.gradients(f, b), a), F32(1.0))

    assert third(lambda a: a**2) is None  # JAX: the second derivative is the constant 2
    assert float(third(tfc(lambda a: a**2))) == 0.0  # TensorFlow: 2 * 1 * 0 * pow(a, -1)


def test_jit_and_op_by_op_agree_to_third_order() -> None:
    f = tfc(lambda x: jnp.where(x > 0, jnp.sqrt(x), 0.0) + jax.nn.elu(x) * jnp.abs(x))
    g = _grad(_grad(_grad(f)))
    x = jnp.array([-1.0, 0.0, 0.25, 2.0])
    np.testing.assert_array_equal(jax.jit(g)(x), g(x))


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda f: jax.jit(f), id="jit"),
        pytest.param(lambda f: jax.checkpoint(f), id="checkpoint"),
        pytest.param(lambda f: lambda x: lax.scan(lambda c, v: (c, f(v)), 0.0, x)[1], id="scan"),
        pytest.param(lambda f: lambda x: lax.cond(True, f, jnp.zeros_like, x), id="cond"),
        pytest.param(lambda f: lambda x: jax.vmap(f)(x), id="vmap_inside"),
    ],
)
def test_reaches_inside_transformations(wrap) -> None:
    np.testing.assert_array_equal(_grad(tfc(wrap(_min1abs)))(X), TF_MIN1ABS)


def test_works_under_vmap_and_grad_outside() -> None:
    f = tfc(_min1abs)
    per_row = jax.vmap(jax.grad(lambda x: jnp.sum(f(x))))(jnp.stack([X, -X]))
    np.testing.assert_array_equal(per_row, jnp.stack([TF_MIN1ABS, -TF_MIN1ABS]))


def test_vmap_of_second_derivatives_equals_the_rows() -> None:
    def f(x):
        parts = [jax.nn.relu(x), jax.nn.elu(x), jnp.sqrt(jnp.abs(x)), jax.nn.leaky_relu(x)]
        return sum(parts) + jnp.prod(x)

    g = _grad(_grad(tfc(f)))
    xs = jnp.array([[0.0, 1.0, -2.0], [3.0, 0.0, 0.5]])
    rows = jnp.stack([g(x) for x in xs])
    np.testing.assert_array_equal(jax.vmap(g)(xs), rows)
    np.testing.assert_array_equal(jax.jit(jax.vmap(g))(xs), rows)


def test_hessians_and_nth_derivative() -> None:
    x = jnp.array([0.0, 0.5, 2.0])
    (h,) = fg.hessians(tfc(lambda x: jnp.sum(jax.nn.elu(x - 0.5) ** 2)), [x])
    # d2/dx2 elu(u)^2 = 2 elu'(u)^2 + 2 elu(u) elu''(u); TensorFlow: elu'' = 0 for u >= 0.
    u = x - 0.5
    elu, d1 = jax.nn.elu(u), jnp.where(u < 0, jnp.exp(u), 1.0)
    d2 = jnp.where(u < 0, jnp.exp(u), 0.0)
    np.testing.assert_allclose(jnp.diag(h), 2 * d1**2 + 2 * elu * d2, rtol=1e-6)
    third = fg.nth_derivative(tfc(lambda v: v**2), 3)(F32(0.0))
    assert np.isnan(third)  # TensorFlow: 2 * 1 * 0 * pow(0, -1) = 0 * inf


def test_reductions_along_axes_agree_with_jax_away_from_ties_and_zeros() -> None:
    x = jax.random.uniform(jax.random.key(0), (3, 4, 5), minval=0.5, maxval=2.0)

    def f(x):
        return (
            jnp.sum(jnp.prod(x, axis=(0, 2)))
            + jnp.sum(jnp.max(x, axis=1) ** 2)
            + jnp.sum(jnp.min(x, axis=(0, 1)))
            + jnp.sum(jnp.cumprod(x, axis=1) * x)
        )

    chex.assert_trees_all_close(jax.grad(tfc(f))(x), jax.grad(f)(x), rtol=1e-5)
    hess = lambda g: jax.grad(lambda v: jnp.sum(jax.grad(g)(v) ** 2))  # noqa: E731
    chex.assert_trees_all_close(hess(tfc(f))(x), hess(f)(x), rtol=1e-4)


def test_prod_with_a_zero_follows_tensorflow() -> None:
    # TensorFlow's ProdGrad: exclusive cumprods, exact with one zero; its CumprodGrad
    # divides with div_no_nan, so d/dx of the cumprod's gradient at a zero entry is 0.
    x = jnp.array([0.0, 2.0, 3.0])
    np.testing.assert_array_equal(jax.grad(tfc(jnp.prod))(x), [6.0, 0.0, 0.0])
    cross = jax.grad(lambda v: jax.grad(tfc(jnp.prod))(v)[1])(x)
    np.testing.assert_array_equal(cross, [0.0, 0.0, 0.0])
    assert float(jax.grad(lambda v: jax.grad(jnp.prod)(v)[1])(x)[0]) == 3.0  # JAX's


# Every optimizer class (LossScaleOptimizer and MovingAverageOptimizer wrap one: their own
# tests; TF1Optimizer is the base of one), with the arguments each requires besides the
# learning rate.
_NOT_RULES = ("Optimizer", "LossScaleOptimizer", "MovingAverageOptimizer", "TF1Optimizer")
OPTIMIZERS = [n for n in fg.train.__all__ if n.endswith("Optimizer") and n not in _NOT_RULES]
_ARGUMENTS = {
    "MomentumOptimizer": {"momentum": 0.9},
    "MomentumWOptimizer": {"weight_decay": 0.01, "momentum": 0.9},
    "AdamWOptimizer": {"weight_decay": 0.01},
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_every_optimizer_takes_it(name) -> None:
    opt = getattr(fg.train, name)(learning_rate=0.1, **_ARGUMENTS.get(name, {}))
    loss = tfc(lambda p, x: jnp.sum(jnp.minimum(1.0, jnp.abs(p["w"] * x))))
    state = opt.init({"w": jnp.array([0.0, 1.0, 0.5])})
    grads = opt.compute_gradients(loss, state.params, jnp.float32(1.0))
    np.testing.assert_array_equal(grads[0][0], [0.0, 0.0, 1.0])
    stepped, _ = jax.jit(lambda s: opt.minimize(loss, s, jnp.float32(1.0)))(state)
    expected = opt.apply_gradients(grads, state)
    chex.assert_trees_all_close(stepped.params, expected.params)


# --- composition with gradient_override_map --------------------------------------------


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda f, m: fg.gradient_override_map(tfc(f), m), id="map_outside"),
        pytest.param(lambda f, m: tfc(fg.gradient_override_map(f, m)), id="conventions_outside"),
        pytest.param(
            lambda f, m: fg.gradient_override_map(m)(tfc(f)), id="map_as_decorator_outside"
        ),
    ],
)
def test_the_mapping_wins_for_the_ops_it_names(wrap) -> None:
    # Abs straight through (the mapping), Minimum's tie to its first argument (TensorFlow).
    f = wrap(_min1abs, {"Abs": "Identity"})
    expected = jnp.array([0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0])
    np.testing.assert_array_equal(_grad(f)(X), expected)


def test_the_mapping_wins_for_a_named_function() -> None:
    f = fg.gradient_override_map(tfc(jax.nn.elu), {"Elu": "ReverseGradient"})
    np.testing.assert_array_equal(_grad(f)(jnp.array([-1.0, 0.0, 2.0])), [-1.0, -1.0, -1.0])


def test_an_override_and_the_conventions_on_different_ops() -> None:
    def quantized(x):
        return jnp.round(jnp.minimum(1.0, jnp.abs(x)) * 3.0) / 3.0

    for f in (
        fg.gradient_override_map(tfc(quantized), {"Round": "Identity"}),
        tfc(fg.gradient_override_map(quantized, {"Round": "Identity"})),
    ):
        np.testing.assert_array_equal(_grad(f)(X), TF_MIN1ABS)


def test_no_unused_warning_when_the_conventions_wrapped_the_op() -> None:
    f = fg.gradient_override_map(tfc(lambda x: jnp.maximum(x, 0.0)), {"Maximum": "Identity"})
    np.testing.assert_array_equal(_grad(f)(X), jnp.ones_like(X))


def test_applying_it_twice_changes_nothing() -> None:
    g = _grad(_grad(tfc(tfc(lambda x: jnp.sqrt(jnp.abs(x)) * jax.nn.elu(x)))))
    h = _grad(_grad(tfc(lambda x: jnp.sqrt(jnp.abs(x)) * jax.nn.elu(x))))
    np.testing.assert_array_equal(g(X), h(X))


def test_custom_rules_inside_keep_their_own_gradient() -> None:
    @fg.custom_gradient
    def doubled_abs(x):
        return jnp.abs(x), lambda dy: 2.0 * dy

    assert float(jax.grad(tfc(doubled_abs))(F32(0.0))) == 2.0


# --- the wrapper ---------------------------------------------------------------------------


def test_decorator_keeps_name_doc_and_wrapped() -> None:
    @fg.tensorflow_conventions
    def layer(x, scale=2.0):
        """A layer."""
        return scale * jnp.abs(x)

    assert layer.__name__ == "layer" and layer.__doc__ == "A layer."
    assert layer.__wrapped__(F32(-1.0)) == 2.0
    assert float(jax.grad(layer)(F32(0.0), scale=3.0)) == 0.0


def test_pytrees_integers_and_static_arguments() -> None:
    def f(params, n, *, mode):
        out = jnp.abs(params["w"]) * n + jnp.abs(params["k"]).astype(jnp.float32)
        return jnp.sum(out) if mode == "sum" else out

    params = {"w": jnp.array([0.0, -2.0]), "k": jnp.array([-3, 4])}
    g = jax.grad(lambda p: tfc(f)(p, 2.0, mode="sum"), allow_int=True)(params)
    np.testing.assert_array_equal(g["w"], [0.0, -2.0])


def test_not_callable_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"fg.tensorflow_conventions\(f\): f must be callable"):
        fg.tensorflow_conventions({"Sign": "Identity"})


def test_clip_with_broadcast_bounds_is_clip_by_value() -> None:
    # fg.clip_by_value is TensorFlow's clip_by_value written out: an independent reference.
    x = jnp.array([[0.0, 0.5, 1.0], [2.0, -1.0, 0.25]])
    lo, hi = jnp.array([[0.0, 0.5, 0.25]]), jnp.float32(1.0)
    got = jax.grad(tfc(lambda *a: jnp.clip(*a).sum()), argnums=(0, 1, 2))(x, lo, hi)
    want = jax.grad(lambda *a: fg.clip_by_value(*a).sum(), argnums=(0, 1, 2))(x, lo, hi)
    chex.assert_trees_all_equal(got, want)


# --- the zero guard of SqrtGrad, RsqrtGrad and ReciprocalGrad ----------------------------

MASKED = jnp.array([0.0, -1.0, 4.0])  # the first two are masked out by the where


@pytest.mark.parametrize(
    ("f", "want"),
    [
        # SqrtGrad(y, dy) = dy == 0 ? 0 : 0.5 * dy / y, at y = sqrt(0) = 0 and sqrt(-1) = NaN.
        pytest.param(lambda x: jnp.where(x > 0, jnp.sqrt(x), 0.0), [0.0, 0.0, 0.25], id="sqrt"),
        # RsqrtGrad(y, dy) = dy == 0 ? 0 : -0.5 * dy * y ** 3, at y = inf and NaN.
        pytest.param(
            lambda x: jnp.where(x > 0, lax.rsqrt(x), 0.0), [0.0, 0.0, -0.0625], id="rsqrt"
        ),
    ],
)
def test_a_zero_incoming_gradient_gives_zero_where_the_kernel_would_divide_by_zero(f, want):
    """The masked branch's incoming gradient is exactly 0, so TensorFlow's kernel returns
    0 there, where JAX's rule gives 0 * inf = NaN."""
    np.testing.assert_array_equal(fg.gradients(fg.tensorflow_conventions(f), MASKED), want)
    assert np.isnan(fg.gradients(f, MASKED)[:2]).all()  # what the guard prevents


def test_reciprocal_grads_zero_guard_in_logs_second_derivative():
    """Log's gradient is dy * Reciprocal(x); its second derivative runs ReciprocalGrad
    (y, dy) = dy == 0 ? 0 : -y * y * dy, at y = 1/0 = inf and 1/-1 with dy = 0."""
    f = fg.tensorflow_conventions(lambda x: jnp.where(x > 0, jnp.log(x), 0.0))
    second = jax.grad(lambda x: jax.grad(lambda x: f(x).sum())(x).sum())(MASKED)
    np.testing.assert_array_equal(second, [0.0, 0.0, -1.0 / 16.0])


def test_stop_gradients_on_a_tapped_input_keeps_the_input() -> None:
    """A tap of an input is that input (TensorFlow: d(a*a + 2a)/da with a stopped is 8),
    also when tensorflow_conventions traces the function again."""

    def f(a):
        a = fg.tap(a, "a")
        return a * a + 2.0 * a

    for g in (f, fg.tensorflow_conventions(f)):
        assert float(fg.gradients(g, jnp.float32(3.0), stop_gradients=["a"])) == 8.0
    # A tap of a value computed from the input is held: nothing reaches the input.
    wrapped = fg.tensorflow_conventions(f)
    assert fg.gradients(lambda a: wrapped(a * 1.0), jnp.float32(3.0), stop_gradients=["a"]) is None


def _multiply_one_by_one(x, v, ids, axis):
    """``x.at[(:,) * axis + (ids,)].multiply(v)`` as one multiply per id."""
    xm, vm = jnp.moveaxis(x, axis, 0), jnp.moveaxis(v, axis, 0)
    for k, i in enumerate(ids):
        xm = xm.at[i].set(xm[i] * vm[k])
    return jnp.moveaxis(xm, 0, axis)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_scatter_mul_of_slices_with_repeated_ids(axis):
    """TensorFlow's segment-product gradient for a scatter-mul along any one axis, zeros
    included, where JAX raises: as differentiating one multiply per id."""
    rng = np.random.default_rng(axis)
    ids = [1, 1, 0, 1]
    x = jnp.asarray(rng.normal(size=(2, 3, 4)), jnp.float32)
    shape = list(x.shape)
    shape[axis] = len(ids)
    v = jnp.asarray(rng.normal(size=shape), jnp.float32)
    v = v.at[(slice(None),) * axis + (jnp.array([0, 3]),)].set(0.0)  # two zeros in id 1
    w = jnp.asarray(rng.normal(size=x.shape), jnp.float32)
    where = (slice(None),) * axis + (jnp.array(ids),)
    f = fg.tensorflow_conventions(lambda x, v: jnp.sum(w * x.at[where].multiply(v)))
    want = jax.grad(lambda x, v: jnp.sum(w * _multiply_one_by_one(x, v, ids, axis)), (0, 1))
    got = jax.jit(lambda x, v: fg.gradients(f, [x, v]))(x, v)
    for g, expected in zip(got, want(x, v), strict=True):
        np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-6)


def test_scatter_mul_of_elements_says_what_tensorflow_differentiates():
    rows, columns = jnp.array([0, 0]), jnp.array([1, 1])
    f = fg.tensorflow_conventions(lambda x: jnp.sum(x.at[rows, columns].multiply(2.0)))
    with pytest.raises(ValueError, match="one id per whole slice of one axis"):
        fg.gradients(f, jnp.ones((2, 2)))
