"""The JAX spellings the migration page gives for tf.nn's convolution, pooling and fused
losses, against TensorFlow 2.21: values and gradients.

Convolutions and pooling are sums of a few products or a choice among values (the
``rtol`` family of tests/README.md; max-pool's choice at a tie compared exactly); the
losses run through ``exp`` and ``log`` kernels whose rounding moves with the CPU, so they
are held to the rule against the same TensorFlow graph in float64.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests.parity.tolerance import assert_as_close_as_tensorflow

RNG = np.random.default_rng(11)
NHWC = ("NHWC", "HWIO", "NHWC")


def _tape(tf, f, *xs, cot=None):
    """``f(*xs)``, the gradients of ``sum(f * cot)`` with respect to every ``x``, and
    ``cot`` (drawn if not given; cast to the dtype of ``xs``)."""
    xs = [tf.constant(x) for x in xs]
    with tf.GradientTape() as tape:
        tape.watch(xs)
        y = f(*xs)
        cot = RNG.normal(size=y.shape) if cot is None else cot
        total = tf.reduce_sum(y * tf.constant(cot.astype(y.dtype.as_numpy_dtype)))
    grads = tape.gradient(total, xs)
    return y.numpy(), [None if g is None else g.numpy() for g in grads], cot


def _jax(f, cot, *xs):
    y, vjp = jax.vjp(f, *(jnp.asarray(x) for x in xs))
    return y, vjp(jnp.asarray(cot, y.dtype))


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d(tf, stride, padding):
    x = RNG.normal(size=(2, 7, 6, 3)).astype(np.float32)
    w = RNG.normal(size=(3, 2, 3, 4)).astype(np.float32)  # an even width: SAME pads unevenly
    want, want_grads, cot = _tape(
        tf, lambda x, w: tf.nn.conv2d(x, w, [1, stride, stride, 1], padding), x, w
    )

    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, (stride, stride), padding, dimension_numbers=NHWC)

    got, got_grads = _jax(conv, cot, x, w)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    for g, t in zip(got_grads, want_grads, strict=True):
        np.testing.assert_allclose(g, t, rtol=2e-6, atol=1e-5)


@pytest.mark.parametrize(
    ("window", "stride", "padding"), [(2, 2, "VALID"), (3, 2, "SAME"), (3, 1, "VALID")]
)
def test_max_pool_and_its_gradient_at_ties(tf, window, stride, padding):
    """Values drawn from four numbers: most windows hold a tie, and TensorFlow's
    MaxPoolGrad gives its gradient to the first maximum, as reduce_window's does."""
    x = RNG.integers(0, 4, size=(2, 6, 7, 2)).astype(np.float32)
    want, (want_grad,), cot = _tape(tf, lambda x: tf.nn.max_pool2d(x, window, stride, padding), x)

    def pool(x):
        dims = (1, window, window, 1)
        return jax.lax.reduce_window(
            x, -jnp.inf, jax.lax.max, dims, (1, stride, stride, 1), padding
        )

    got, (got_grad,) = _jax(pool, cot, x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-6, atol=1e-6)
    split = jax.grad(lambda x: jnp.sum(x[:, :, :6].reshape(2, 3, 2, 3, 2, 2).max(axis=(2, 4))))(x)
    assert np.any((split > 0) & (split < 1))  # a reshape + max splits a tie instead


def _in_float64(x):
    return x.astype(np.float64)


def test_sigmoid_cross_entropy_with_logits(tf):
    """TensorFlow's max(x, 0) - x * z + log1p(exp(-|x|)) against optax's log-sigmoids:
    the loss cancels at the scale of x, the labels' gradient -x * cot comes from a
    difference of two log-sigmoids, the logits' (sigmoid(x) - z) * cot at that of cot."""
    logits = np.concatenate([RNG.normal(scale=5, size=20), [-100.0, -30.0, 0.0, 40.0, 100.0]])
    logits = logits.astype(np.float32)
    labels = RNG.uniform(size=logits.shape).astype(np.float32)

    def loss(z, x):
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x)

    want, want_grads, cot = _tape(tf, loss, labels, logits)
    exact, exact_grads, _ = _tape(tf, loss, _in_float64(labels), _in_float64(logits), cot=cot)
    got, got_grads = _jax(
        lambda z, x: optax.sigmoid_binary_cross_entropy(x, z), cot, labels, logits
    )
    x, c = np.abs(logits), np.abs(cot)
    assert_as_close_as_tensorflow(got, want, exact, err_msg="loss", scale=x)
    assert_as_close_as_tensorflow(
        got_grads[0], want_grads[0], exact_grads[0], err_msg="labels", scale=c * (x + 1)
    )
    assert_as_close_as_tensorflow(
        got_grads[1], want_grads[1], exact_grads[1], err_msg="logits", scale=c
    )


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_softmax_cross_entropy_with_logits(tf, version):
    """TF 2's loss gives the labels a gradient; TF 1's (compat.v1) gives them none, as
    stop_gradient does.  The loss and the labels' gradient (-log_softmax * cot) carry the
    rounding of log_softmax at the scale of the logits; the logits' gradient,
    (softmax - z) * cot, that of cot."""
    logits = RNG.normal(scale=4, size=(6, 5)).astype(np.float32)
    logits[0] = [100.0, 0.0, -100.0, 3.0, 3.0]
    labels = RNG.dirichlet(np.ones(5), size=6).astype(np.float32)
    fused = tf.nn if version == "v2" else tf.compat.v1.nn

    def loss(z, x):
        return fused.softmax_cross_entropy_with_logits(labels=z, logits=x)

    def ours(z, x):
        return optax.softmax_cross_entropy(x, z if version == "v2" else jax.lax.stop_gradient(z))

    want, want_grads, cot = _tape(tf, loss, labels, logits)
    exact, exact_grads, _ = _tape(tf, loss, _in_float64(labels), _in_float64(logits), cot=cot)
    got, got_grads = _jax(ours, cot, labels, logits)
    x = np.abs(logits).max(axis=1) + np.log(5)
    c = np.abs(cot)[:, None]
    assert_as_close_as_tensorflow(got, want, exact, err_msg="loss", scale=x)
    assert_as_close_as_tensorflow(
        got_grads[1], want_grads[1], exact_grads[1], err_msg="logits", scale=c
    )
    if version == "v1":
        assert want_grads[0] is None and not np.any(got_grads[0])
    else:
        assert_as_close_as_tensorflow(
            got_grads[0], want_grads[0], exact_grads[0], err_msg="labels", scale=c * x[:, None]
        )
