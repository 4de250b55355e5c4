"""gradient_override_map against TensorFlow 1.x's own: the TF1 tutorial programs, TensorFlow's
gradient functions as targets, fg.identity, and a quantized layer trained with overrides
and TensorFlow's conventions together."""

import functools
import types
import uuid

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

X_SIGN = np.array([2.0, 2.1, 3.2, 4.1], np.float32)
X_RELU = np.array([-1.0, -0.5, 0.0, 0.5, 1.0], np.float32)


def _tf_override(tf, run_tf1, op, mapping, x):
    def build():
        graph = tf.compat.v1.get_default_graph()
        xt = tf.constant(x)
        with graph.gradient_override_map(mapping):
            y = op(xt)
        return y, tf.compat.v1.gradients(y, xt)[0]

    return run_tf1(build)


@pytest.mark.parametrize(
    "override", [pytest.param(True, id="Sign->Identity"), pytest.param(False, id="no_override")]
)
def test_sign_straight_through_tutorial(tf, run_tf1, override):
    mapping = {"Sign": "Identity"} if override else {}

    def tf_binarize(x):
        return tf.sign(x / tf.stop_gradient(tf.reduce_mean(tf.abs(x))))

    def binarize(x):
        return jnp.sign(x / fg.stop_gradient(jnp.mean(jnp.abs(x))))

    tf_y, tf_grad = _tf_override(tf, run_tf1, tf_binarize, mapping, X_SIGN)
    f = fg.gradient_override_map(binarize, mapping) if override else binarize
    y, grad = fg.value_and_gradients(f, jnp.asarray(X_SIGN))
    np.testing.assert_array_equal(y, tf_y)
    np.testing.assert_allclose(grad, tf_grad, rtol=1e-6)


def test_relu_identity_tutorial(tf, run_tf1):
    tf_y, tf_grad = _tf_override(tf, run_tf1, tf.nn.relu, {"Relu": "Identity"}, X_RELU)
    f = fg.gradient_override_map(jax.nn.relu, {"Relu": "Identity"})
    y, grad = fg.value_and_gradients(f, jnp.asarray(X_RELU))
    np.testing.assert_array_equal(y, tf_y)
    np.testing.assert_array_equal(grad, tf_grad)


# --- TensorFlow's gradient functions as override targets --------------------------------

X_TARGET = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0], np.float32)

TARGETS = [
    pytest.param(lambda tf: tf.nn.relu, jax.nn.relu, {"Relu": "Elu"}, id="Relu->Elu"),
    pytest.param(lambda tf: tf.sign, jnp.sign, {"Sign": "Tanh"}, id="Sign->Tanh"),
    pytest.param(lambda tf: tf.abs, jnp.abs, {"Abs": "Sqrt"}, id="Abs->Sqrt"),
    pytest.param(lambda tf: tf.square, jnp.square, {"Square": "Relu"}, id="Square->Relu"),
    pytest.param(lambda tf: tf.exp, jnp.exp, {"Exp": "Sigmoid"}, id="Exp->Sigmoid"),
    pytest.param(lambda tf: tf.tanh, jnp.tanh, {"Tanh": "Softplus"}, id="Tanh->Softplus"),
    pytest.param(lambda tf: tf.round, jnp.round, {"Round": "Cast"}, id="Round->Cast"),
    pytest.param(lambda tf: tf.floor, jnp.floor, {"Floor": "Neg"}, id="Floor->Neg"),
    pytest.param(
        lambda tf: lambda x: tf.maximum(x, 0.5),
        lambda x: jnp.maximum(x, 0.5),
        {"Maximum": "Minimum"},
        id="Maximum->Minimum",
    ),
    pytest.param(lambda tf: lambda x: x * 3.0, lambda x: x * 3.0, {"Mul": "Sub"}, id="Mul->Sub"),
]


@pytest.mark.parametrize(("tf_op", "op", "mapping"), TARGETS)
def test_tensorflow_gradient_as_target(tf, run_tf1, tf_op, op, mapping):
    tf_y, tf_grad = _tf_override(tf, run_tf1, tf_op(tf), mapping, X_TARGET)
    y, grad = fg.value_and_gradients(fg.gradient_override_map(op, mapping), jnp.asarray(X_TARGET))
    np.testing.assert_allclose(y, tf_y, rtol=1e-6)  # tanh's value differs by an ulp
    np.testing.assert_allclose(grad, tf_grad, rtol=1e-6)


def test_mul_as_add_ternarization(tf, run_tf1):
    """TTQ's {"Mul": "Add"}: the scale gets the summed gradient, the weights pass it on."""
    w = np.array([-0.9, -0.1, 0.0, 0.2, 0.7], np.float32)
    scale = np.float32(1.5)

    def build():
        wt, st = tf.Variable(w), tf.Variable(scale)
        with tf.compat.v1.get_default_graph().gradient_override_map({"Mul": "Add"}):
            y = wt * st
        return tf.compat.v1.gradients(tf.reduce_sum(y * y), [wt, st])

    tf_dw, tf_ds = run_tf1(build)
    f = fg.gradient_override_map(lambda w, s: jnp.sum((w * s) ** 2), {"Mul": "Add"})
    dw, ds = fg.gradients(f, [jnp.asarray(w), jnp.asarray(scale)])
    np.testing.assert_allclose(dw, tf_dw, rtol=1e-6)
    np.testing.assert_allclose(ds, tf_ds, rtol=1e-6)


def test_flip_gradient_on_identity(tf, run_tf1):
    """DANN's flip_gradient: tf.identity under {"Identity": <negating gradient>}."""
    name = f"FlipGradientParity{uuid.uuid4().hex}"
    tf.RegisterGradient(name)(lambda op, grad: [tf.negative(grad)])

    def build():
        x = tf.Variable(2.0)
        with tf.compat.v1.get_default_graph().gradient_override_map({"Identity": name}):
            y = tf.identity(x)
        return tf.compat.v1.gradients(3.0 * y, x)[0]

    flip = fg.gradient_override_map(fg.identity, {"Identity": "ReverseGradient"})
    assert float(jax.grad(lambda x: 3.0 * flip(x))(jnp.float32(2.0))) == run_tf1(build) == -3.0


# --- a DoReFa-style quantized layer: overrides and TensorFlow's conventions together -----

_rng = np.random.default_rng(7)
XQ = _rng.integers(-1, 2, size=(16, 6)).astype(np.float32)
YQ = _rng.normal(size=(16, 2)).astype(np.float32)
WQ = _rng.normal(size=(6, 8)).astype(np.float32)
VQ = (0.5 * _rng.normal(size=(8, 2))).astype(np.float32)
QUANTIZE = {"Sign": "Identity", "Round": "Identity"}


def _dorefa_loss(ops, params, x, y):
    """Binary weights (sign), activations min(1, |h|) quantized to 2 bits (round)."""
    h = x @ ops.sign(params["W"])
    a = ops.minimum(1.0, ops.abs(h))
    return ops.mean((ops.round(a * 3.0) / 3.0 @ params["V"] - y) ** 2)


def _tf_dorefa_trajectory(tf, run_tf1_steps, steps):
    ops = types.SimpleNamespace(
        sign=tf.sign, minimum=tf.minimum, abs=tf.abs, round=tf.round, mean=tf.reduce_mean
    )

    def build():
        params = {"W": tf.Variable(WQ), "V": tf.Variable(VQ)}
        with tf.compat.v1.get_default_graph().gradient_override_map(QUANTIZE):
            loss = _dorefa_loss(ops, params, XQ, YQ)
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        return train, (params, loss)

    return run_tf1_steps(build, steps)


def _fg_dorefa_trajectory(loss, steps):
    opt = fg.train.GradientDescentOptimizer(0.1)
    state = opt.init({"W": jnp.asarray(WQ), "V": jnp.asarray(VQ)})
    step = jax.jit(lambda s: opt.minimize(loss, s, XQ, YQ)[0])
    trajectory = []
    for _ in range(steps):
        state = step(state)
        trajectory.append((state.params, float(loss(state.params, XQ, YQ))))
    return trajectory


JNP_OPS = types.SimpleNamespace(
    sign=jnp.sign, minimum=jnp.minimum, abs=jnp.abs, round=jnp.round, mean=jnp.mean
)


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(
            lambda f: fg.gradient_override_map(fg.tensorflow_conventions(f), QUANTIZE),
            id="override_map_outside",
        ),
        pytest.param(
            lambda f: fg.tensorflow_conventions(fg.gradient_override_map(f, QUANTIZE)),
            id="conventions_outside",
        ),
    ],
)
def test_dorefa_layer_trains_as_tensorflow(tf, run_tf1_steps, wrap):
    expected = _tf_dorefa_trajectory(tf, run_tf1_steps, 5)
    loss = functools.partial(_dorefa_loss, JNP_OPS)
    got = _fg_dorefa_trajectory(wrap(loss), 5)
    for step, ((params, value), (tf_params, tf_value)) in enumerate(
        zip(got, expected, strict=True)
    ):
        for name in ("W", "V"):
            np.testing.assert_allclose(
                params[name], tf_params[name], rtol=1e-5, atol=1e-6, err_msg=f"{name}, {step}"
            )
        np.testing.assert_allclose(value, tf_value, rtol=1e-5)
    # JAX's own conventions (ties halved, |x|' = 1 at 0) take another path.
    plain = _fg_dorefa_trajectory(fg.gradient_override_map(loss, QUANTIZE), 5)
    assert not np.allclose(plain[-1][0]["W"], expected[-1][0]["W"], rtol=1e-3)


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(
            lambda f, m: fg.gradient_override_map(fg.tensorflow_conventions(f), m),
            id="override_map_outside",
        ),
        pytest.param(
            lambda f, m: fg.tensorflow_conventions(fg.gradient_override_map(f, m)),
            id="conventions_outside",
        ),
    ],
)
def test_the_mapping_wins_over_the_conventions(tf, run_tf1, wrap):
    """An op the mapping names keeps the mapped gradient; the others follow TensorFlow."""
    mapping = {"Abs": "Identity"}
    x = np.array([-1.5, -1.0, 0.0, 0.5, 1.0, 2.0], np.float32)
    _, tf_grad = _tf_override(tf, run_tf1, lambda v: tf.minimum(1.0, tf.abs(v)), mapping, x)
    f = wrap(lambda v: jnp.minimum(1.0, jnp.abs(v)), mapping)
    np.testing.assert_array_equal(fg.gradients(f, jnp.asarray(x)), tf_grad)


def test_custom_gradient_with_a_captured_tensor_as_tensorflow(tf, run_tf1):
    """TensorFlow's graph treats a tensor a tf.custom_gradient function captures as a
    constant of it: no gradient reaches the tensor through the function.  funcgrad refuses
    the capture and says the fix (the tensor as an argument, its cotangent None), which
    gives TensorFlow's gradient."""
    x0, w0 = np.array([0.5, 2.0], np.float32), np.float32(3.0)
    tf_none = {}

    def build():
        x, w = tf.constant(x0), tf.constant(w0)
        t = x * w

        @tf.custom_gradient
        def g(a):
            return a * t, lambda dy: dy * t * 10.0

        gx, gw = tf.compat.v1.gradients(tf.reduce_sum(g(x)), [x, w])
        tf_none["w"] = gw is None  # w reaches the output only through the capture
        return gx

    tf_gx = run_tf1(build)

    def captured(x, w):
        t = x * w

        @fg.custom_gradient
        def g(a):
            return a * t, lambda dy: dy * t * 10.0

        return jnp.sum(g(x))

    with pytest.raises(ValueError, match="return None as its cotangent"):
        fg.gradients(captured, [x0, w0])

    def passed(x, w):
        @fg.custom_gradient
        def g(a, t):
            return a * t, lambda dy: (dy * t * 10.0, None)

        return jnp.sum(g(x, x * w))

    gx, gw = fg.gradients(passed, [jnp.asarray(x0), jnp.asarray(w0)])
    np.testing.assert_allclose(gx, tf_gx, rtol=1e-6)
    assert tf_none["w"] and float(gw) == 0.0  # zeros where TensorFlow says None


def test_recursive_custom_gradient_with_a_captured_kernel_as_tensorflow(tf, run_tf1):
    """StyleGAN's upfirdn_2d habit: a kernel made outside the tf.custom_gradient function,
    and a gradient that is itself a custom gradient returning the function again.  The
    rules are not the true derivatives (the gradient doubles), so each order shows whose
    rule ran; funcgrad gives TensorFlow's first, second and third derivatives."""
    x0 = np.array([0.5, -1.5, 2.0], np.float32)
    k0 = np.array([1.0, -2.0, 0.5], np.float32)

    def program(lib, k, func_of):
        def _func(v):
            def _grad(dy):
                return dy * k * 2.0, func_of()

            return v * k, lib(_grad)

        return lib(_func)

    def build():
        x = tf.constant(x0)
        func = program(tf.custom_gradient, tf.constant(k0), lambda: func)
        out = [tf.reduce_sum(func(x) ** 3)]
        for _ in range(3):
            out.append(tf.reduce_sum(tf.compat.v1.gradients(out[-1], x)[0] ** 2))
        return [tf.compat.v1.gradients(o, x)[0] for o in out[:3]]

    expected = run_tf1(build)

    def orders(x):
        func = program(fg.custom_gradient, jnp.asarray(k0), lambda: func)
        out = [lambda v: jnp.sum(func(v) ** 3)]
        for _ in range(2):
            out.append((lambda h: lambda v: jnp.sum(fg.gradients(h, v) ** 2))(out[-1]))
        return [fg.gradients(o, x) for o in out]

    for got in (orders(jnp.asarray(x0)), jax.jit(orders)(jnp.asarray(x0))):
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-5)


@pytest.mark.parametrize("target", ["Relu", "LeakyRelu", "Identity", "Elu"])
def test_leaky_relu_alpha_is_an_attribute(tf, run_tf1, target):
    """TensorFlow's LeakyRelu has one input, features, and alpha as an attribute: any
    one-input gradient applies to it."""
    x = np.array([-1.0, -0.0, 0.0, 0.5, 2.0], np.float32)
    mapping = {"LeakyRelu": target}
    tf_y, tf_grad = _tf_override(tf, run_tf1, lambda t: tf.nn.leaky_relu(t, 0.2), mapping, x)
    f = fg.gradient_override_map(lambda v: jax.nn.leaky_relu(v, 0.2), mapping)
    grad = fg.gradients(lambda v: jnp.sum(f(v)), jnp.asarray(x))
    np.testing.assert_allclose(f(jnp.asarray(x)), tf_y, rtol=1e-6)
    np.testing.assert_allclose(grad, tf_grad, rtol=1e-6)


# --- a gradient of the wrong arity: TensorFlow raises, so does funcgrad ------------------

X_MAX, Y_MAX = np.array([1.0, 3.0, -2.0], np.float32), np.array([2.0, 2.0, 2.0], np.float32)


def _tf_maximum_gradients(tf, run_tf1, name):
    def build():
        x, y = tf.constant(X_MAX), tf.constant(Y_MAX)
        with tf.compat.v1.get_default_graph().gradient_override_map({"Maximum": name}):
            z = tf.maximum(x, y)
        dx, dy = tf.compat.v1.gradients(tf.reduce_sum(z), [x, y])
        return dx, tf.constant(0.0) if dy is None else dy  # None as 0.0: a fetch cannot be None

    return run_tf1(build)


def _fg_maximum_gradients(name):
    f = fg.gradient_override_map(jnp.maximum, {"Maximum": name})
    return fg.gradients(lambda x, y: jnp.sum(f(x, y)), [jnp.asarray(X_MAX), jnp.asarray(Y_MAX)])


@pytest.mark.parametrize(
    ("target", "tf_error", "match"),
    [
        pytest.param(
            "one",
            r"(?s)Num gradients 1 generated for op.*Maximum.*do not match num inputs 2",
            r"'Maximum'.*returned one cotangent for 2 inputs; return a list or tuple with one "
            r"cotangent per input \(None for zero\)",
            id="own_function_one_gradient",
        ),
        pytest.param(
            "one_listed",
            r"(?s)Num gradients 1 generated for op.*Maximum.*do not match num inputs 2",
            r"'Maximum'.*returned 1 cotangents for 2 inputs; return a list or tuple",
            id="own_function_list_of_one",
        ),
        pytest.param(
            "Elu",
            r"(?s)Num gradients 1 generated for op.*Maximum.*do not match num inputs 2",
            r"TensorFlow's Elu gradient takes an op with 1 input\(s\) \(x\), but 'Maximum' has "
            r"2; map 'Maximum' to a gradient for 2 input\(s\)",
            id="Elu",
        ),
        pytest.param(
            "LeakyRelu",
            r"alpha",
            r"LeakyRelu gradient reads the op's alpha attribute, which 'Maximum' does not have; "
            r"map jax.nn.leaky_relu",
            id="LeakyRelu",
        ),
        pytest.param(
            "Floor",
            r"(?s)Num gradients 1 generated for op.*Maximum.*do not match num inputs 2",
            r"'Maximum'.*returned 1 cotangents for 2 inputs",
            id="Floor",
        ),
    ],
)
def test_a_gradient_for_fewer_inputs_than_the_op_has_raises_as_in_tensorflow(
    tf, run_tf1, target, tf_error, match
):
    """TensorFlow's _VerifyGeneratedGradients: one gradient per input of the op, or raise."""
    if target in ("one", "one_listed"):
        name = f"OneGradientParity{uuid.uuid4().hex}"
        box = (lambda g: [g]) if target == "one_listed" else (lambda g: g)
        tf.RegisterGradient(name)(lambda op, grad: box(grad))
        fg.RegisterGradient(name)(lambda op, grad: box(grad))
        target = name
    with pytest.raises(ValueError, match=tf_error):
        _tf_maximum_gradients(tf, run_tf1, target)
    with pytest.raises(ValueError, match=match):
        _fg_maximum_gradients(target)


def test_identity_on_a_two_input_op_is_straight_through_to_the_first(tf, run_tf1):
    """TensorFlow's own Identity gradient returns one gradient, which it refuses for the
    two inputs of Maximum; funcgrad's built-in "Identity" is straight-through to the first
    input with zeros elsewhere (docs/overrides.md): TensorFlow's numbers for the gradient
    function written out, [grad, None]."""
    with pytest.raises(ValueError, match=r"(?s)Num gradients 1 generated for op.*Maximum"):
        _tf_maximum_gradients(tf, run_tf1, "Identity")
    name = f"FirstInputParity{uuid.uuid4().hex}"
    tf.RegisterGradient(name)(lambda op, grad: [grad, None])
    tf_dx, tf_dy = _tf_maximum_gradients(tf, run_tf1, name)  # None for y: 0.0
    dx, dy = _fg_maximum_gradients("Identity")
    np.testing.assert_array_equal(dx, tf_dx)
    np.testing.assert_array_equal(dy, np.zeros_like(Y_MAX) + tf_dy)
