"""fg.gradients against real tf.gradients: the TF1 tutorial examples, stop_gradients, and the
JAX-convention differences under fg.tensorflow_conventions."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

A, B = np.float32(3.0), np.float32(2.0)


def _tf_gradients(tf, run_tf1, f, xs, grad_ys=None, **kwargs):
    nones = []

    def build():
        variables = [tf.Variable(x) for x in xs]
        grads = tf.compat.v1.gradients(f(*variables), variables, grad_ys=grad_ys, **kwargs)
        nones.extend(g is None for g in grads)
        return [tf.constant(np.nan) if g is None else g for g in grads]

    values = run_tf1(build)
    return [None if n else v for v, n in zip(values, nones, strict=True)]


def _assert_same(tf_grads, fg_grads):
    assert [g is None for g in tf_grads] == [g is None for g in fg_grads]
    for t, g in zip(tf_grads, fg_grads, strict=True):
        if t is not None:
            np.testing.assert_allclose(np.asarray(g), t, rtol=1e-6)


# Each example takes the ops namespace: TensorFlow's, or funcgrad's equivalents.
EXAMPLES = [
    pytest.param(lambda ops: lambda a, b: 5 * a + b, id="5a_plus_b"),
    pytest.param(lambda ops: lambda a, b: [a, b], id="ys_list"),
    pytest.param(lambda ops: lambda a, b: [a + b, 2 * a + 3 * b], id="two_outputs"),
    pytest.param(lambda ops: lambda a, b: ops.stop_gradient(a + b) + 2 * a + b, id="stop_grad"),
    pytest.param(lambda ops: lambda a, b: ops.stop_gradient(3 * a) * b, id="stopped_w1"),
    pytest.param(lambda ops: lambda a, b: 3 * a, id="unused"),
    pytest.param(lambda ops: lambda a, b: ops.sign(a) * b, id="sign"),
    pytest.param(lambda ops: lambda a, b: ops.floor(a) * b, id="floor"),
]
FG_OPS = types.SimpleNamespace(stop_gradient=fg.stop_gradient, sign=jnp.sign, floor=jnp.floor)


@pytest.mark.parametrize("example", EXAMPLES)
def test_tutorial_examples(tf, run_tf1, example):
    _assert_same(
        _tf_gradients(tf, run_tf1, example(tf), [A, B]), fg.gradients(example(FG_OPS), [A, B])
    )


def test_grad_ys_example(tf, run_tf1):
    def f(w1, w2, w3, w4):
        return [w1 + w2 + w3, w3 + w4]

    xs = [np.zeros(3, np.float32) for _ in range(4)]
    grad_ys = [np.array([2.0, 2.0, 3.0], np.float32), np.array([3.0, 2.0, 4.0], np.float32)]
    _assert_same(
        _tf_gradients(tf, run_tf1, f, xs, grad_ys=grad_ys), fg.gradients(f, xs, grad_ys=grad_ys)
    )


def test_unconnected_zero(tf, run_tf1):
    tf_grads = _tf_gradients(tf, run_tf1, lambda a, b: 3 * a, [A, B], unconnected_gradients="zero")
    _assert_same(tf_grads, fg.gradients(lambda a, b: 3 * a, [A, B], unconnected_gradients="zero"))


def test_jax_convention_differences_take_tensorflow_numbers(tf, run_tf1):
    """Where JAX's rule differs (docs/conventions.md), tensorflow_conventions gives TF's."""
    one, zero = np.float32(1.0), np.float32(0.0)
    tfc = fg.tensorflow_conventions

    def both(tf_f, jax_f, x):
        return _tf_gradients(tf, run_tf1, tf_f, [x])[0], float(fg.gradients(tfc(jax_f), x))

    tf_max, got = both(lambda x: tf.maximum(x, 1.0), lambda x: jnp.maximum(x, 1.0), one)
    assert tf_max == got == 1.0 and float(fg.gradients(lambda x: jnp.maximum(x, 1.0), one)) == 0.5
    tf_abs, got = both(tf.abs, jnp.abs, zero)
    assert tf_abs == got == 0.0 and float(fg.gradients(jnp.abs, zero)) == 1.0
    tf_relu, got = both(tf.nn.relu, jax.nn.relu, zero)
    assert tf_relu == got == 0.0
    tf_max0, got = both(lambda x: tf.maximum(x, 0.0), lambda x: jnp.maximum(x, 0.0), zero)
    assert tf_max0 == got == 1.0

    def third(f, d):
        return lambda x: d(lambda x: d(lambda x: d(f, x), x), x)

    def tf_d(f, x):
        return tf.compat.v1.gradients(f(x), [x])[0]

    tf_pow3 = run_tf1(lambda: third(lambda a: a**2, tf_d)(tf.Variable(one)))
    assert tf_pow3 == 0.0
    assert third(lambda a: a**2, fg.gradients)(one) is None
    assert float(third(tfc(lambda a: a**2), fg.gradients)(one)) == tf_pow3
    tf_pow3_at_0 = run_tf1(lambda: third(lambda a: a**2, tf_d)(tf.Variable(zero)))
    assert np.isnan(tf_pow3_at_0) and np.isnan(third(tfc(lambda a: a**2), fg.gradients)(zero))


def test_masked_sqrt_takes_tensorflow_zero(tf, run_tf1):
    x = np.array([0.0, 4.0], np.float32)
    tf_grad = _tf_gradients(
        tf, run_tf1, lambda x: tf.where(x > 0, tf.sqrt(x), tf.zeros_like(x)), [x]
    )[0]
    f = lambda x: jnp.where(x > 0, jnp.sqrt(x), 0.0)  # noqa: E731
    assert np.isnan(fg.gradients(f, x)[0])
    np.testing.assert_array_equal(fg.gradients(fg.tensorflow_conventions(f), x), tf_grad)


#: The function as it is, and traced again by funcgrad's wrappers (a tap of an input
#: stays that input through them).
WRAPPERS = [
    pytest.param(lambda f: f, id="plain"),
    pytest.param(fg.tensorflow_conventions, id="tensorflow_conventions"),
    pytest.param(lambda f: fg.gradient_override_map(f, {"Sign": "Identity"}), id="override"),
]


@pytest.mark.filterwarnings("ignore::funcgrad.UnusedOverrideWarning")
@pytest.mark.parametrize("wrap", WRAPPERS)
def test_stop_gradients_of_the_input_itself(tf, run_tf1, wrap):
    """tf.gradients(a * a + 2 * a, a, stop_gradients=[a]) and with b = 2 * a stopped too."""

    def tf_grad(stopped):
        def build():
            a = tf.constant(3.0)
            b = 2.0 * a
            stop = {"a": a, "b": b}
            return tf.compat.v1.gradients(a * a + b, a, stop_gradients=[stop[n] for n in stopped])

        return float(run_tf1(build)[0])

    @wrap
    def f(x):
        a = fg.tap(x, "a")
        b = fg.tap(2.0 * a, "b")
        return a * a + b

    for stopped in (["a"], ["a", "b"]):
        got = float(fg.gradients(f, np.float32(3.0), stop_gradients=stopped))
        assert got == tf_grad(stopped)
    assert tf_grad(["a"]) == 8.0 and tf_grad(["a", "b"]) == 6.0


@pytest.mark.filterwarnings("ignore::funcgrad.UnusedOverrideWarning")
@pytest.mark.parametrize("wrap", WRAPPERS)
def test_stop_gradients_doc_example(tf, run_tf1, wrap):
    """TensorFlow's own example: tf.gradients(a + b, [a, b], stop_gradients=[a, b])."""

    def build(stop):
        a = tf.constant(0.0)
        b = 2 * a
        return tf.compat.v1.gradients(a + b, [a, b], stop_gradients=[a, b] if stop else None)

    @wrap
    def f(x):
        a = fg.tap(x, "a")
        return a + fg.tap(2.0 * a, "b")

    for stop in (True, False):
        want = [float(v) for v in run_tf1(lambda stop=stop: build(stop))]
        got = fg.tap_gradients(f, np.float32(0.0), ["a", "b"], stop_gradients=["a", "b"] * stop)
        assert [float(got["a"]), float(got["b"])] == want


@pytest.mark.filterwarnings("ignore::funcgrad.UnusedOverrideWarning")
@pytest.mark.parametrize("wrap", WRAPPERS)
def test_partial_derivatives(tf, run_tf1, wrap):
    """TensorFlow's testPartialDerivatives: the gradients of x + y to [x, y] with
    stop_gradients=[x, y], x and y both inputs and both tapped."""

    def build():
        x, y = tf.constant(1.0), tf.constant(2.0)
        return tf.compat.v1.gradients(x + y, [x, y], stop_gradients=[x, y])

    @wrap
    def f(x, y):
        return fg.tap(x, "x") + fg.tap(y, "y")

    got = fg.gradients(f, [np.float32(1.0), np.float32(2.0)], stop_gradients=["x", "y"])
    assert [float(g) for g in got] == [float(v) for v in run_tf1(build)] == [1.0, 1.0]
