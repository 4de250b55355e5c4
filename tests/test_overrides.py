"""custom_gradient, RegisterGradient, the built-in gradients and gradient_override_map."""

import threading

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import funcgrad as fg

TRANSFORMS = [pytest.param(lambda f: f, id="eager"), pytest.param(jax.jit, id="jit")]


def _grad(f):
    return jax.grad(lambda *a: jnp.sum(f(*a)))


def _fg_grad(f, x):
    return fg.gradients(f, x)


def _jax_grad(f, xs):
    """``fg.gradients``'s calling convention over ``jax.grad``: a list is the arguments."""
    if isinstance(xs, list):
        return jax.grad(lambda v: f(*v))(xs)
    return jax.grad(f)(xs)


# --- the TF1 tutorial examples: TensorFlow's numbers --------------------------------------------


def _binarize(x):
    return jnp.sign(x / jax.lax.stop_gradient(jnp.mean(jnp.abs(x))))


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_tutorial_sign_identity_gradient_is_one_over_mean_abs(transform) -> None:
    x = jnp.array([2.0, 2.1, 3.2, 4.1])
    g = fg.gradient_override_map(_binarize, {"Sign": "Identity"})
    np.testing.assert_allclose(transform(_grad(g))(x), np.full(4, 4 / 11.4), rtol=1e-6)
    np.testing.assert_array_equal(transform(_grad(_binarize))(x), np.zeros(4))


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_tutorial_relu_identity_passes_gradient_through(transform) -> None:
    x = jnp.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    g = fg.gradient_override_map(jax.nn.relu, {"Relu": "Identity"})
    np.testing.assert_array_equal(transform(_grad(g))(x), np.ones(5))
    np.testing.assert_array_equal(_grad(jax.nn.relu)(x), [0.0, 0.0, 0.0, 1.0, 1.0])


def test_fg_gradients_sees_the_override() -> None:
    x = jnp.array([2.0, 2.1, 3.2, 4.1])
    g = fg.gradient_override_map(_binarize, {"Sign": "Identity"})
    np.testing.assert_allclose(fg.gradients(g, x), np.full(4, 4 / 11.4), rtol=1e-6)


# --- the built-in gradients --------------------------------------------------------------

X = jnp.array([-2.0, -0.5, 0.25, 1.0, 3.0])


@pytest.mark.parametrize(
    ("gradient", "expected"),
    [
        pytest.param("Identity", [1.0, 1.0, 1.0, 1.0, 1.0], id="identity"),
        pytest.param("StopGradient", [0.0, 0.0, 0.0, 0.0, 0.0], id="stop_gradient"),
        pytest.param("ReverseGradient", [-1.0, -1.0, -1.0, -1.0, -1.0], id="reverse"),
        pytest.param("ClippedIdentity", [0.0, 1.0, 1.0, 1.0, 0.0], id="clipped_identity"),
    ],
)
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_builtin_gradients_on_sign(gradient, expected, transform) -> None:
    g = fg.gradient_override_map(lambda x: 3.0 * jnp.sign(x), {"Sign": gradient})
    np.testing.assert_array_equal(transform(_grad(g))(X), 3.0 * np.array(expected))


@pytest.mark.parametrize(
    ("gradient", "expected_x", "expected_y"),
    [
        pytest.param("Identity", 1.0, 0.0, id="identity"),
        pytest.param("ReverseGradient", -1.0, 0.0, id="reverse"),
        pytest.param("StopGradient", 0.0, 0.0, id="stop_gradient"),
    ],
)
def test_builtin_gradients_on_a_binary_op_use_the_first_input(
    gradient, expected_x, expected_y
) -> None:
    g = fg.gradient_override_map(jnp.maximum, {"Maximum": gradient})
    y = jnp.zeros_like(X)
    gx, gy = jax.grad(lambda x, y: g(x, y).sum(), argnums=(0, 1))(X, y)
    np.testing.assert_array_equal(gx, np.full(5, expected_x))
    np.testing.assert_array_equal(gy, np.full(5, expected_y))


def test_gradient_reversal_layer_on_identity() -> None:
    # The domain-adaptation layer: identity forward, negated gradient backward.
    flip = fg.gradient_override_map(jnp.copy, {"Identity": "ReverseGradient"})
    np.testing.assert_array_equal(flip(X), X)
    np.testing.assert_array_equal(_grad(lambda x: 2.0 * flip(x) ** 2)(X), -4.0 * X)


def test_cast_override_casts_the_cotangent_back() -> None:
    g = fg.gradient_override_map(
        lambda x: jnp.round(x.astype(jnp.float16)), {"Cast": "Identity", "Round": "Identity"}
    )
    grad = _grad(g)(X)
    assert grad.dtype == jnp.float32
    np.testing.assert_array_equal(grad, np.ones(5))


# --- RegisterGradient and Op ---------------------------------------------------------------


def test_registered_gradient_sees_the_op() -> None:
    seen = {}

    @fg.RegisterGradient("test_overrides/record")
    def _record(op, grad):
        seen.update(type=op.type, n_in=len(op.inputs), n_out=len(op.outputs), params=op.params)
        return grad * (op.inputs[0] + 10.0 * op.outputs[0])

    f = lambda x: jnp.round(x)  # noqa: E731
    for key in ("Round", "round"):
        g = fg.gradient_override_map(f, {key: "test_overrides/record"})
        np.testing.assert_array_equal(_grad(g)(X), X + 10.0 * jnp.round(X))
        assert (seen["type"], seen["n_in"], seen["n_out"]) == (key, 1, 1)
        assert "rounding_method" in seen["params"]


def test_registered_gradient_second_order() -> None:
    @fg.RegisterGradient("test_overrides/tanh_twice")
    def _tanh_twice(op, grad):
        return 2.0 * grad * (1 - op.outputs[0] ** 2)

    g = fg.gradient_override_map(jnp.tanh, {"Tanh": "test_overrides/tanh_twice"})
    x = jnp.array([0.3, -1.2])
    # As in TensorFlow, op.outputs[0] = y differentiates with the override too:
    # g' = 2 (1 - y^2), so g'' = -4 y g' = -8 y (1 - y^2).
    t = np.tanh(np.array([0.3, -1.2]))
    second = jax.grad(lambda x: _grad(g)(x).sum())(x)
    np.testing.assert_allclose(second, -8 * t * (1 - t**2), rtol=1e-5)
    with pytest.raises(TypeError, match=r"Take second derivatives with fg.hessians or fg.hvp"):
        jax.hessian(lambda x: g(x).sum())(x)  # reverse mode only, as jax.custom_vjp


def test_register_twice_is_a_key_error() -> None:
    fg.RegisterGradient("test_overrides/twice")(lambda op, grad: grad)
    with pytest.raises(KeyError, match="already registered"):
        fg.RegisterGradient("test_overrides/twice")(lambda op, grad: grad)
    with pytest.raises(KeyError, match="already registered"):
        fg.RegisterGradient("Identity")(lambda op, grad: grad)


def test_registry_is_thread_safe() -> None:
    outcomes = []

    def register() -> None:
        try:
            fg.RegisterGradient("test_overrides/race")(lambda op, grad: grad)
            outcomes.append("ok")
        except KeyError:
            outcomes.append("key_error")

    threads = [threading.Thread(target=register) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["key_error"] * 7 + ["ok"]


@pytest.mark.parametrize(
    ("name", "fn", "match"),
    [
        pytest.param("", lambda op, g: g, "non-empty string", id="empty_name"),
        pytest.param(3, lambda op, g: g, "non-empty string", id="name_not_str"),
        pytest.param("test_overrides/not_callable", 3, "decorate a function", id="not_callable"),
    ],
)
def test_register_gradient_bad_input(name, fn, match) -> None:
    with pytest.raises(TypeError, match=match):
        fg.RegisterGradient(name)(fn)


def test_gradient_returning_wrong_count_or_shape() -> None:
    fg.RegisterGradient("test_overrides/three")(lambda op, grad: (grad, grad, grad))
    fg.RegisterGradient("test_overrides/scalar")(lambda op, grad: jnp.sum(grad))
    three = fg.gradient_override_map(jnp.sign, {"Sign": "test_overrides/three"})
    with pytest.raises(ValueError, match=r"returned 3 cotangents for 1 inputs"):
        _grad(three)(X)
    scalar = fg.gradient_override_map(jnp.sign, {"Sign": "test_overrides/scalar"})
    with pytest.raises(ValueError, match=r"cotangent\[0\] has shape \(\), the input \(5,\)"):
        _grad(scalar)(X)


def test_gradient_returning_fewer_cotangents_than_the_op_has_inputs() -> None:
    """TensorFlow raises "Num gradients 1 generated for op Maximum ... num inputs 2"."""
    fg.RegisterGradient("test_overrides/one")(lambda op, grad: grad)
    one = fg.gradient_override_map(jnp.maximum, {"Maximum": "test_overrides/one"})
    with pytest.raises(
        ValueError,
        match=r"'Maximum'.*returned one cotangent for 2 inputs; return a list or tuple with one "
        r"cotangent per input \(None for zero\)",
    ):
        jax.grad(lambda x, y: one(x, y).sum())(X, X)


@pytest.mark.parametrize(
    ("op", "target", "match"),
    [
        pytest.param(
            jnp.maximum,
            {"Maximum": "Elu"},
            r"the gradient 'Elu' for 'Maximum': TensorFlow's Elu gradient takes an op with 1 "
            r"input\(s\) \(x\), but 'Maximum' has 2; map 'Maximum' to a gradient for 2",
            id="Elu_on_Maximum",
        ),
        pytest.param(
            jnp.maximum,
            {"Maximum": "LeakyRelu"},
            r"the gradient 'LeakyRelu' for 'Maximum': TensorFlow's LeakyRelu gradient reads the "
            r"op's alpha attribute, which 'Maximum' does not have; map jax.nn.leaky_relu",
            id="LeakyRelu_on_Maximum",
        ),
        pytest.param(
            lambda x, y: jnp.sign(x) * y,
            {"Sign": "LeakyRelu"},
            r"LeakyRelu gradient reads the op's alpha attribute, which 'Sign' does not have",
            id="LeakyRelu_on_Sign",
        ),
    ],
)
def test_tensorflow_gradient_of_a_jax_call_is_tensorflows_on_other_ops(op, target, match) -> None:
    """jax.nn.elu's and leaky_relu's slope input is theirs alone: on another op, the second
    input is not taken for a slope (it was, silently)."""
    f = fg.gradient_override_map(op, target)
    with pytest.raises(ValueError, match=match):
        jax.grad(lambda x, y: f(x, y).sum())(X, X + 1)


# --- gradient_override_map: the wrapper ------------------------------------------------------


def test_decorator_form_keeps_name_doc_and_wrapped() -> None:
    def binarize(x):
        """Binarize x."""
        return jnp.sign(x)

    g = fg.gradient_override_map({"Sign": "Identity"})(binarize)
    assert (g.__name__, g.__doc__, g.__wrapped__) == ("binarize", "Binarize x.", binarize)
    np.testing.assert_array_equal(_grad(g)(X), np.ones(5))


def test_decorator_on_a_method_with_static_arguments() -> None:
    class Layer:
        def __init__(self, scale: float) -> None:
            self.scale = scale

        @fg.gradient_override_map({"Sign": "Identity"})
        def __call__(self, x, n: int):
            return self.scale * jnp.sign(x) * jnp.ones(n)

    layer = Layer(2.0)
    np.testing.assert_array_equal(layer(X, 5), 2.0 * jnp.sign(X))
    np.testing.assert_array_equal(_grad(lambda x: layer(x, 5))(X), np.full(5, 2.0))


def test_pytree_arguments_and_outputs() -> None:
    f = lambda p, *, scale: {"y": jnp.sign(p["a"]) * scale, "z": p["b"]}  # noqa: E731
    g = fg.gradient_override_map(f, {"Sign": "Identity"})
    p = {"a": X, "b": jnp.float32(2.0)}
    grads = jax.grad(lambda p: g(p, scale=jnp.float32(3.0))["y"].sum())(p)
    np.testing.assert_array_equal(grads["a"], np.full(5, 3.0))


def test_jit_vmap_and_a_single_trace() -> None:
    g = fg.gradient_override_map(lambda x: jnp.sign(x) * x, {"Sign": "Identity"})

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(xs):
        return jax.vmap(_grad(g))(xs)

    xs = jnp.stack([X, 2 * X])
    for _ in range(3):
        np.testing.assert_array_equal(step(xs), jnp.sign(xs) + xs)


def test_values_bit_identical_to_f() -> None:
    def f(x):
        h = jnp.tanh(x @ jnp.ones((5, 4)) * 0.37)
        return jnp.round(jax.nn.sigmoid(h) * 7.3) + jnp.floor(h) + jnp.ceil(h) + jnp.abs(h)

    g = fg.gradient_override_map(
        f,
        {
            "Tanh": "Identity",
            "Round": "Identity",
            "Sigmoid": "ClippedIdentity",
            "Floor": "Identity",
            "ceil": "StopGradient",
            "Abs": "ReverseGradient",
        },
    )
    xs = jax.random.normal(jax.random.key(0), (16, 5))
    np.testing.assert_array_equal(jax.jit(jax.vmap(g))(xs), jax.jit(jax.vmap(f))(xs))
    np.testing.assert_array_equal(g(xs), f(xs))


def test_unmatched_key_warns_at_trace_time() -> None:
    g = fg.gradient_override_map(jnp.tanh, {"Sign": "Identity", "Tanh": "Identity"})
    with pytest.warns(fg.UnusedOverrideWarning, match=r"\['Sign'\] matched no op"):
        jax.jit(g)(X)


@pytest.mark.parametrize(
    ("f", "mapping", "error", "match"),
    [
        pytest.param(
            jnp.sign,
            {"Tanhh": "Identity"},
            ValueError,
            r"unknown op 'Tanhh' \(did you mean 'Tanh'\?\)",
            id="unknown_op",
        ),
        pytest.param(
            jnp.sign,
            {"Sign": "Identiy"},
            ValueError,
            r"no gradient registered as 'Identiy'.*'ClippedIdentity'",
            id="unknown_gradient",
        ),
        pytest.param(
            jnp.sign,
            {"Sign": "Identity", "sign": "Identity"},
            ValueError,
            "'Sign' and 'sign' name the same op",
            id="same_op_twice",
        ),
        pytest.param(
            jnp.sign,
            {"Sign": 1},
            TypeError,
            "dict from op names to gradient names",
            id="value_not_str",
        ),
        pytest.param(jnp.sign, ["Sign"], TypeError, "dict from op names", id="mapping_not_dict"),
        pytest.param(3, {"Sign": "Identity"}, TypeError, "f must be callable", id="f_not_callable"),
    ],
)
def test_gradient_override_map_bad_input(f, mapping, error, match) -> None:
    with pytest.raises(error, match=match):
        fg.gradient_override_map(f, mapping)


def test_bad_mapping_in_decorator_form_fails_at_decoration() -> None:
    with pytest.raises(ValueError, match="op names are TensorFlow's"):
        fg.gradient_override_map({"NotAnOp": "Identity"})


# --- custom_gradient ---------------------------------------------------------------------


@fg.custom_gradient
def _log1pexp(x):
    e = jnp.exp(x)
    return jnp.log1p(e), lambda dy: dy * (1 - 1 / (1 + e))


def test_custom_gradient_numerical_to_second_order() -> None:
    check_grads(_log1pexp, (jnp.array([0.3, -1.1, 2.0]),), order=2, modes=["rev"])
    assert float(jax.grad(_log1pexp)(jnp.float32(100.0))) == 1.0  # stable where autodiff is not
    x = jnp.array([0.3, -1.1])
    s = jax.nn.sigmoid(x)
    hessian = fg.hessians(lambda x: _log1pexp(x).sum(), x)  # reverse over reverse
    np.testing.assert_allclose(jnp.diag(hessian), s * (1 - s), rtol=1e-5)


@pytest.mark.parametrize("grad", [_fg_grad, _jax_grad], ids=["fg.gradients", "jax.grad"])
def test_custom_gradient_output_is_differentiated_by_the_rule_at_every_order(grad) -> None:
    """TensorFlow differentiates a custom gradient's output with its rule at every order.

    f(x) = x**2 with the rule 3x dy (not the true 2x dy), and L = f(x)**2.  First order:
    3x * 2f = 6x**3.  Second: d/dx of 3x * dy with dy = 2f(x) is 3 * 2f + 3x * 2 * (the
    rule's df/dx = 3x) = 24x**2 (the true derivative of f there would give 18x**2).
    """

    @fg.custom_gradient
    def f(x):
        return x**2, lambda dy: 3 * x * dy

    x = jnp.float32(1.5)
    assert float(grad(lambda x: f(x) ** 2, x)) == pytest.approx(6 * 1.5**3)
    second = grad(lambda x: grad(lambda x: f(x) ** 2, x), x)
    assert float(second) == pytest.approx(24 * 1.5**2)


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_custom_gradient_jit_vmap(transform) -> None:
    xs = jnp.array([0.3, -1.1, 2.0])
    grads = transform(jax.vmap(jax.grad(_log1pexp)))(xs)
    np.testing.assert_allclose(grads, jax.nn.sigmoid(xs), rtol=1e-6)


def test_custom_gradient_several_arguments_and_none() -> None:
    @fg.custom_gradient
    def mul(a, b, n):
        return a * b * jnp.asarray(n, a.dtype), lambda dy: (
            dy * b * jnp.asarray(n, dy.dtype),
            None,
            None,
        )

    a, b = jnp.float32(2.0), jnp.float32(3.0)
    ga, gb = jax.grad(mul, argnums=(0, 1))(a, b, jnp.float32(4.0))
    assert (float(ga), float(gb)) == (12.0, 0.0)
    grads = jax.grad(lambda a: mul(a, b, jnp.int32(4)).astype(jnp.float32))(a)
    assert float(grads) == 12.0


def test_custom_gradient_bare_cotangent_for_one_pytree_argument() -> None:
    @fg.custom_gradient
    def f(p):
        return p["w"] * p["b"], lambda dy: {"w": dy * p["b"], "b": None}

    grads = jax.grad(f)({"w": jnp.float32(2.0), "b": jnp.float32(5.0)})
    assert {k: float(v) for k, v in grads.items()} == {"w": 5.0, "b": 0.0}


def test_custom_gradient_keeps_name() -> None:
    assert _log1pexp.__name__ == "_log1pexp"


@pytest.mark.parametrize(
    ("f", "error", "match"),
    [
        pytest.param(lambda x: x, TypeError, r"must return a pair \(y, grad_fn\)", id="not_a_pair"),
        pytest.param(
            lambda x: (x, lambda dy: (dy, dy)),
            ValueError,
            "structure does not match",
            id="tuple_for_one",
        ),
        pytest.param(
            lambda x: (x, lambda dy: jnp.sum(dy)),
            ValueError,
            r"cotangent\[0\] has shape \(\), the input \(3,\)",
            id="wrong_shape",
        ),
    ],
)
def test_custom_gradient_bad_function(f, error, match) -> None:
    with pytest.raises(error, match=match):
        jax.grad(lambda x: fg.custom_gradient(f)(x).sum())(jnp.ones(3))


def test_custom_gradient_wrong_count_and_kwargs() -> None:
    two = fg.custom_gradient(lambda a, b: (a * b, lambda dy: dy))
    with pytest.raises(ValueError, match="returned one cotangent for 2 inputs"):
        jax.grad(two)(jnp.float32(1.0), jnp.float32(2.0))
    with pytest.raises(TypeError, match="keyword arguments"):
        _log1pexp(x=jnp.float32(1.0))
    with pytest.raises(TypeError, match="f must be callable"):
        fg.custom_gradient(3)


def _bias_act(x, b):
    """TensorFlow's fused bias-and-activation habit: nested custom gradients, the inner one
    taking the outer's output as an argument (its second derivative through ``y``)."""

    @fg.custom_gradient
    def func(x, b):
        y = jax.nn.leaky_relu(x + b, 0.2)

        @fg.custom_gradient
        def grad(dy, y):
            def grad2(d_dx):
                return jnp.where(y >= 0, d_dx, d_dx * 0.2), None

            return jnp.where(y >= 0, dy, dy * 0.2), grad2

        return y, lambda dy: (grad(dy, y), jnp.sum(grad(dy, y), 0, keepdims=True))

    return func(x, b)


def _filter(x, k):
    """TensorFlow's ``upfirdn_2d`` habit: a kernel made outside the custom-gradient
    function, whose gradient is a custom gradient that returns the function itself."""
    k = jnp.asarray(k, x.dtype)

    def conv(v):  # k is symmetric and odd: conv is its own transpose
        return jax.vmap(lambda row: jnp.convolve(row, k, mode="same"))(v)

    def _func(v):
        return conv(v), fg.custom_gradient(lambda dy: (conv(dy), func))

    func = fg.custom_gradient(_func)
    return func(x)


def _plain_filter(x, k):
    k = jnp.asarray(k, x.dtype)
    return jax.vmap(lambda row: jnp.convolve(row, k, mode="same"))(x)


def _leaky(x, b):
    return jax.nn.leaky_relu(x + b, 0.2)


def _discriminator(filt, bias_act):
    def d(p, x):
        h = filt(x @ p["w1"], [1.0, 2.0, 1.0])
        return jnp.sum(jnp.tanh(bias_act(h, p["b1"])) @ p["w2"])

    return d


def _r1_step(d, grad):
    """A discriminator step with an R1 penalty: the gradient of a gradient."""

    def step(p, x):
        def loss(p):
            r1 = grad(lambda x: d(p, x), x)
            return d(p, x) + 10.0 * jnp.sum(r1**2)

        names = sorted(p)
        g = grad(lambda *v: loss(dict(zip(names, v, strict=True))), [p[n] for n in names])
        return {n: p[n] - 0.01 * gn for n, gn in zip(names, g, strict=True)}

    return step


def test_nested_custom_gradients_in_a_jitted_second_order_step() -> None:
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    p = {
        "w1": jax.random.normal(keys[0], (5, 8)),
        "b1": jnp.zeros((1, 8)),
        "w2": jax.random.normal(keys[1], (8, 1)),
    }
    x = jax.random.normal(keys[2], (4, 5))
    step = _r1_step(_discriminator(_filter, _bias_act), _fg_grad)
    # The same step by JAX's autodiff of the functions written without custom gradients.
    reference = _r1_step(_discriminator(_plain_filter, _leaky), _jax_grad)
    jitted = jax.jit(chex.assert_max_traces(step, n=1))
    plain = expected = p
    for _ in range(3):
        p, plain, expected = jitted(p, x), step(plain, x), reference(expected, x)
        # jit fuses what runs op by op unjitted, and the custom gradients round otherwise
        # than JAX's rules: a few float32 roundings per step of the largest term of each
        # parameter (the R1 penalty's steps take b1's entries from 0 to about 100)
        _assert_close_to_scale(p, plain)
        _assert_close_to_scale(plain, expected)


def _assert_close_to_scale(got: dict, want: dict) -> None:
    """Each parameter within 1e-5 of its own largest entry (about 80 float32 ulps)."""
    for name in want:
        scale = float(np.abs(want[name]).max())
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5 * scale)


def _scaled_by_a_constant(x):
    k = jnp.array([1.0, 2.0, 3.0])  # a tracer once the caller is traced

    @fg.custom_gradient
    def g(v):
        return v**2 * k, lambda dy: dy * 2 * v * k

    return jnp.sum(g(x))


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_custom_gradient_capturing_an_outer_constant(transform) -> None:
    x = jnp.array([1.0, -2.0, 0.5])
    k = np.array([1.0, 2.0, 3.0])
    first = transform(lambda x: fg.gradients(_scaled_by_a_constant, x))
    np.testing.assert_allclose(first(x), 2 * x * k, rtol=1e-6)
    np.testing.assert_allclose(transform(jax.grad(_scaled_by_a_constant))(x), 2 * x * k)
    second = transform(lambda x: fg.gradients(lambda x: jnp.sum(first(x) ** 2), x))
    np.testing.assert_allclose(second(x), 8 * x * k**2, rtol=1e-6)
    batched = jax.vmap(lambda x: fg.gradients(_scaled_by_a_constant, x))(jnp.stack([x, 2 * x]))
    np.testing.assert_allclose(batched, [2 * x * k, 4 * x * k], rtol=1e-6)


def test_custom_gradient_capturing_an_integer() -> None:
    def f(x):
        top = jnp.argmax(x)

        @fg.custom_gradient
        def g(v):
            return v * 2, lambda dy: jnp.where(jnp.arange(3) == top, dy, 0.0)

        return jnp.sum(g(x))

    x = jnp.array([1.0, 5.0, 2.0])
    for grad in (jax.grad(f), lambda x: fg.gradients(f, x)):
        np.testing.assert_array_equal(jax.jit(grad)(x), [0.0, 1.0, 0.0])


@pytest.mark.parametrize("kernel", [np.float32(3.0), "jnp"], ids=["numpy", "jnp"])
def test_custom_gradient_that_is_its_own_second_gradient_to_fourth_order(kernel) -> None:
    def f(x):
        k = jnp.float32(3.0) if kernel == "jnp" else kernel

        def _func(v):
            return v * k, fg.custom_gradient(lambda dy: (dy * k, func))

        func = fg.custom_gradient(_func)
        return func(x) ** 4

    g, x = f, jnp.float32(2.0)
    # d^n/dx^n (3x)^4 at 2 is 81 * 4!/(4-n)! * 2^(4-n): exact in float32.
    for expected in (2592.0, 3888.0, 3888.0, 1944.0):
        g = (lambda h: lambda x: fg.gradients(h, x))(g)
        assert float(g(x)) == expected


def test_custom_gradient_with_an_unused_output() -> None:
    @fg.custom_gradient
    def two(x):
        return (x * 2, x * 3), lambda dy: dy[0] * 2 + dy[1] * 3

    np.testing.assert_array_equal(fg.gradients(lambda x: two(x)[0], jnp.ones(2)), [2.0, 2.0])


@pytest.mark.parametrize("wrap", [list, tuple], ids=["list", "tuple"])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_custom_gradient_list_of_one_cotangent_is_the_bare_cotangent(wrap, transform) -> None:
    """TensorFlow flattens what grad_fn returns, so [dx] for one input is dx."""

    def make(box):
        @fg.custom_gradient
        def f(x):
            return jnp.sin(x["a"]), lambda dy: box({"a": dy * 3 * jnp.cos(x["a"])})

        return f

    x = {"a": jnp.array([0.3, -1.2])}
    bare = transform(jax.grad(lambda x: make(lambda g: g)(x).sum()))(x)
    listed = transform(jax.grad(lambda x: make(lambda g: wrap([g]))(x).sum()))(x)
    np.testing.assert_array_equal(listed["a"], bare["a"])
    np.testing.assert_allclose(bare["a"], 3 * jnp.cos(x["a"]), rtol=1e-6)
    one = fg.custom_gradient(lambda v: (v * 2, lambda dy: wrap([dy * 5])))
    assert float(jax.grad(one)(jnp.float32(1.0))) == 5.0


def test_custom_gradient_argument_that_is_a_list_keeps_its_structure() -> None:
    @fg.custom_gradient
    def f(p):
        return p[0] * p[1], lambda dy: [dy * p[1], dy * p[0]]

    assert [float(g) for g in jax.grad(f)([jnp.float32(2.0), jnp.float32(5.0)])] == [5.0, 2.0]


def _two_outputs(grad_fn):
    @fg.custom_gradient
    def f(x):
        return (x * 2, {"b": x * 3, "a": x * 4}), grad_fn

    return lambda x: (lambda y: y[0] + 10 * y[1]["a"] + 100 * y[1]["b"])(f(x))


@pytest.mark.parametrize(
    "grad_fn",
    [
        pytest.param(lambda dy: dy[0] * 2 + dy[1]["a"] * 4 + dy[1]["b"] * 3, id="like_y"),
        pytest.param(lambda dy1, da, db: dy1 * 2 + da * 4 + db * 3, id="tf_one_per_output"),
        pytest.param(lambda *dys: dys[0] * 2 + dys[1] * 4 + dys[2] * 3, id="tf_varargs"),
    ],
)
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_custom_gradient_grad_fn_takes_dy_like_y_or_one_per_output(grad_fn, transform) -> None:
    """TensorFlow calls grad_fn(dy1, dy2, ...), one per output in nest.flatten order."""
    f = _two_outputs(grad_fn)
    x = jnp.array([1.0, -2.0])
    expected = 2 + 10 * 4 + 100 * 3
    np.testing.assert_array_equal(transform(jax.grad(lambda x: f(x).sum()))(x), [expected] * 2)
    np.testing.assert_array_equal(transform(lambda x: fg.gradients(f, x))(x), [expected] * 2)


def test_custom_gradient_grad_fn_taking_neither_form_says_the_fix() -> None:
    f = _two_outputs(lambda dy1, dy2: dy1)
    with pytest.raises(
        TypeError,
        match=r"fg.custom_gradient\(f\): grad_fn\(dy1, dy2\) cannot take the cotangents of "
        r"f's 3 output\(s\); take one argument structured like f's output \(grad_fn\(dy\)\), "
        r"or one per output",
    ):
        jax.grad(lambda x: f(x).sum())(jnp.ones(2))


@pytest.mark.parametrize(
    ("f", "args", "match"),
    [
        pytest.param(
            lambda a: (a * 2, lambda dy: "dy"), [1.0], r"grad_fn\(dy\) is a str", id="str"
        ),
        pytest.param(
            lambda a, b: (a * b, lambda dy: [dy, object()]),
            [1.0, 2.0],
            r"grad_fn\(dy\)\[1\] is a object",
            id="object",
        ),
    ],
)
def test_custom_gradient_grad_fn_returning_no_array_says_the_fix(f, args, match) -> None:
    fix = r"; grad_fn must return one cotangent per argument of f: an array"
    with pytest.raises(TypeError, match=r"fg.custom_gradient\(<lambda>\): " + match + fix):
        jax.grad(fg.custom_gradient(f))(*map(jnp.float32, args))


@fg.custom_gradient
def _cube(x):
    return x**3, lambda dy: dy * 3 * x**2


@pytest.mark.parametrize(
    "forward",
    [
        pytest.param(lambda f: jax.jvp(f, (jnp.float32(2.0),), (jnp.float32(1.0),)), id="jvp"),
        pytest.param(lambda f: jax.jacfwd(f)(jnp.float32(2.0)), id="jacfwd"),
        pytest.param(lambda f: jax.hessian(f)(jnp.float32(2.0)), id="hessian"),
        pytest.param(lambda f: jax.jit(jax.hessian(f))(jnp.float32(2.0)), id="jit_hessian"),
    ],
)
@pytest.mark.parametrize(
    ("f", "caller"),
    [
        pytest.param(_cube, r"fg.custom_gradient\(_cube\)", id="custom_gradient"),
        pytest.param(
            fg.gradient_override_map(jnp.sign, {"Sign": "Identity"}),
            r"fg.gradient_override_map\(sign, mapping\)",
            id="override",
        ),
        pytest.param(
            fg.tensorflow_conventions(jnp.abs),
            r"fg.tensorflow_conventions\(abs\)",
            id="conventions",
        ),
    ],
)
def test_forward_mode_through_a_custom_gradient_points_at_fg_hessians(forward, f, caller) -> None:
    with pytest.raises(
        TypeError,
        match=caller + r": its gradient is a vector-Jacobian product.*Take second derivatives "
        r"with fg.hessians or fg.hvp \(reverse over reverse\)",
    ):
        forward(f)
    assert float(fg.hessians(_cube, jnp.float32(2.0))) == 12.0  # the fix the error names
    assert float(fg.hvp(_cube, jnp.float32(2.0), jnp.float32(1.0))) == 12.0


def test_custom_gradient_closing_over_a_differentiated_value_says_the_fix() -> None:
    def f(x, w):
        t = x * w

        @fg.custom_gradient
        def g(a):
            return a * t, lambda dy: dy * t  # t is captured, not an argument

        return jnp.sum(g(x))

    with pytest.raises(ValueError, match="pass that value to the custom-gradient function as"):
        fg.gradients(f, [jnp.ones(2), jnp.float32(3.0)])
    with pytest.raises(ValueError, match="closes over a value that is being differentiated"):
        jax.jit(lambda x: fg.gradients(lambda x: f(x, x[0]), x))(jnp.ones(2))
    with pytest.raises(ValueError, match=r"fg.custom_gradient\(g\): f or its grad_fn closes"):
        jax.grad(f, argnums=1)(jnp.ones(2), jnp.float32(3.0))


# --- TensorFlow's gradient functions as targets ----------------------------------------


@pytest.mark.parametrize("slope", [0.3, None], ids=["slope", "default_slope"])
def test_leaky_relu_alpha_is_an_attribute_of_the_op(slope) -> None:
    """TensorFlow's LeakyRelu has one input; alpha is in op.params, with no gradient."""
    seen = []

    name = f"LeakyReluAlphaSeen{'Default' if slope is None else ''}"

    @fg.RegisterGradient(name)
    def _seen(op, grad):
        seen.append((len(op.inputs), float(op.params["alpha"])))
        return grad

    args = () if slope is None else (slope,)
    f = fg.gradient_override_map(lambda x: jax.nn.leaky_relu(x, *args), {"LeakyRelu": name})
    assert jax.grad(lambda x: f(x).sum())(jnp.array([-1.0, 2.0])).tolist() == [1.0, 1.0]
    assert seen == [(1, pytest.approx(0.01 if slope is None else slope))]


def test_every_tensorflow_op_name_is_a_target() -> None:
    for op_type in fg.overrides.TF_OP_NAMES:
        fg.gradient_override_map(jnp.sign, {"Sign": op_type})  # registered: no error


@pytest.mark.parametrize(
    ("f", "mapping", "x", "expected"),
    [
        # TensorFlow's EluGrad reads the overridden op's output: relu(x) >= 0, so it passes
        # the gradient straight through.
        pytest.param(jax.nn.relu, {"Relu": "Elu"}, [-2.0, 0.0, 3.0], [1.0, 1.0, 1.0], id="Elu"),
        # TanhGrad with y = sign(x): 1 - y * y.
        pytest.param(jnp.sign, {"Sign": "Tanh"}, [-2.0, 0.0, 3.0], [0.0, 1.0, 0.0], id="Tanh"),
        # SqrtGrad with y = |x|: 0.5 / y, guarded: 0 where the gradient is 0.
        pytest.param(jnp.abs, {"Abs": "Sqrt"}, [-2.0, 0.5, 4.0], [0.25, 1.0, 0.125], id="Sqrt"),
        # Minimum's rule on a Maximum op: all to x where x <= y.
        pytest.param(
            lambda x: jnp.maximum(x, 0.5),
            {"Maximum": "Minimum"},
            [0.0, 0.5, 1.0],
            [1.0, 1.0, 0.0],
            id="Minimum",
        ),
        pytest.param(jnp.round, {"Round": "Cast"}, [0.4, 1.6], [1.0, 1.0], id="Cast"),
        pytest.param(jnp.floor, {"Floor": "Neg"}, [0.4, 1.6], [-1.0, -1.0], id="Neg"),
    ],
)
def test_tensorflow_gradient_targets(f, mapping, x, expected) -> None:
    got = _grad(fg.gradient_override_map(f, mapping))(jnp.array(x))
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_mul_as_add_sums_over_the_broadcast_scale() -> None:
    # TTQ: w * scale differentiated as an addition; the scalar scale gets the sum.
    f = fg.gradient_override_map(lambda w, s: jnp.sum((w * s) / 0.5), {"Mul": "Add"})
    dw, ds = fg.gradients(f, [jnp.array([-1.0, 0.0, 2.0]), jnp.float32(5.0)])
    np.testing.assert_array_equal(dw, [2.0, 2.0, 2.0])
    assert float(ds) == 6.0


def test_a_tensorflow_op_type_cannot_be_registered_again() -> None:
    with pytest.raises(KeyError, match=r"'Add'.*already registered"):
        fg.RegisterGradient("Add")(lambda op, grad: grad)


@pytest.mark.parametrize(
    ("f", "mapping", "match"),
    [
        pytest.param(
            jax.nn.relu,
            {"Relu": "Pow"},
            r"the gradient 'Pow' for 'Relu'.*op with 2 input\(s\) \(x, y\), but 'Relu' has 1",
            id="Pow_on_one_input",
        ),
        pytest.param(
            lambda x: x * 2.0,
            {"Mul": "Sqrt"},
            r"the gradient 'Sqrt' for 'Mul'.*1 input\(s\).*'Mul' has 2",
            id="Sqrt_on_two_inputs",
        ),
        pytest.param(
            jnp.tanh,
            {"Tanh": "Max"},
            r"the gradient 'Max' for 'Tanh'.*needs the op's axes",
            id="Max_on_elementwise",
        ),
        pytest.param(
            lambda x: x[None] * x[:, None],
            {"Mul": "MatMul"},
            r"the gradient 'MatMul' for 'Mul'.*two matrices",
            id="MatMul_on_broadcast_product",
        ),
    ],
)
def test_a_target_that_does_not_fit_the_op_is_a_value_error(f, mapping, match) -> None:
    g = fg.gradient_override_map(f, mapping)
    with pytest.raises(ValueError, match=match):
        jax.grad(lambda x: jnp.sum(g(x)))(jnp.array([1.0, 2.0]))


# --- fg.identity --------------------------------------------------------------------------


def test_identity_is_an_op_that_survives_jit() -> None:
    jaxpr = jax.make_jaxpr(jax.jit(fg.identity))(jnp.float32(1.0))
    assert "copy" in str(jaxpr)
    assert float(jax.grad(fg.identity)(jnp.float32(2.0))) == 1.0


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_flip_gradient_with_identity(transform) -> None:
    # DANN's gradient reversal: tf.identity with {"Identity": <negated gradient>}.
    flip = fg.gradient_override_map(fg.identity, {"Identity": "ReverseGradient"})
    assert float(transform(jax.grad(lambda x: 3.0 * flip(x)))(jnp.float32(2.0))) == -3.0
    batch = jax.vmap(jax.grad(lambda x: 3.0 * flip(x)))(jnp.arange(3.0))
    np.testing.assert_array_equal(batch, [-3.0, -3.0, -3.0])


def test_identity_of_a_pytree() -> None:
    tree = {"a": jnp.array([1.0, 2.0]), "b": (np.float32(3.0), 4)}
    out = fg.identity(tree)
    assert jax.tree.structure(out) == jax.tree.structure(tree)
    assert jax.tree.map(lambda a, b: bool(jnp.all(a == b)), out, tree) == {
        "a": True,
        "b": (True, True),
    }


def test_identity_bad_input_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"fg.identity\(x\): x\['b'\] is a str"):
        fg.identity({"a": 1.0, "b": "text"})


def test_identity_key_on_a_lambda_warns_and_points_to_fg_identity() -> None:
    flip = fg.gradient_override_map(lambda x: x, {"Identity": "ReverseGradient"})
    with pytest.warns(fg.UnusedOverrideWarning, match=r"\['Identity'\].*write fg.identity\(x\)"):
        assert float(jax.grad(lambda x: 3.0 * flip(x))(jnp.float32(2.0))) == 3.0
