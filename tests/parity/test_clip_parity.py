"""fg.clip_* against TensorFlow's clip_ops: values and gradients, edge cases included."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from tests.parity import tolerance

_RNG = np.random.default_rng(0)
_NAN, _INF = np.float32(np.nan), np.float32(np.inf)


def _f32(*values):
    return np.array(values, np.float32)


def _tf_value_and_grads(tf, fn, args, weight):
    """TensorFlow's fn(*args) and the gradient of sum(weight * fn(*args)) to every arg."""
    tensors = [tf.constant(a) for a in args]
    with tf.GradientTape() as tape:
        for t in tensors:
            tape.watch(t)
        out = fn(*tensors)
        loss = tf.reduce_sum(tf.constant(weight) * out)
    return out.numpy(), [g.numpy() for g in tape.gradient(loss, tensors)]


def _fg_value_and_grads(fn, args, weight):
    def loss(*xs):
        return jnp.sum(weight * fn(*xs))

    jitted = jax.jit(fn)
    return jitted(*args), jax.jit(jax.grad(loss, argnums=tuple(range(len(args)))))(*args)


def _assert_parity(tf, tf_fn, fg_fn, args):
    shape = np.broadcast_shapes(*(np.shape(a) for a in args[:1]))
    weight = _RNG.uniform(0.5, 1.5, shape).astype(np.float32)
    tf_out, tf_grads = _tf_value_and_grads(tf, tf_fn, args, weight)
    fg_out, fg_grads = _fg_value_and_grads(fg_fn, args, weight)
    np.testing.assert_allclose(fg_out, tf_out, rtol=2e-7, atol=0)
    for i, (g, e) in enumerate(zip(fg_grads, tf_grads, strict=True)):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7, err_msg=f"gradient to args[{i}]")


_VALUE_CASES = [
    pytest.param(_RNG.normal(size=(4, 5)).astype(np.float32), -0.5, 0.5, id="random"),
    pytest.param(_f32(-1.0, -0.5, 0.0, 0.5, 1.0), -0.5, 0.5, id="on_the_bounds"),
    pytest.param(_f32(_NAN, _INF, -_INF, 0.2), -0.5, 0.5, id="nan_and_inf"),
    pytest.param(_f32(1.0, 2.0, 3.0), 2.0, 2.0, id="lo_equals_hi"),
    pytest.param(
        _f32([-2.0, 0.0, 2.0], [-2.0, 0.0, 2.0]), _f32([-1.0], [0.0]), _f32(1.0), id="broadcast"
    ),
]


@pytest.mark.parametrize(("t", "lo", "hi"), _VALUE_CASES)
def test_clip_by_value_matches_tensorflow(tf, t, lo, hi) -> None:
    args = [t, np.float32(lo) if np.ndim(lo) == 0 else lo, np.float32(hi)]
    _assert_parity(tf, tf.clip_by_value, fg.clip_by_value, args)


_NORM_CASES = [
    pytest.param(_RNG.normal(size=(3, 4)).astype(np.float32), 1.0, None, id="clipped"),
    pytest.param(_RNG.normal(size=(3, 4)).astype(np.float32), 100.0, None, id="unclipped"),
    pytest.param(_f32(3.0, 4.0), 5.0, None, id="norm_equals_clip_norm"),
    pytest.param(np.zeros(3, np.float32), 1.0, None, id="zeros"),
    pytest.param(_f32(3.0, _NAN, 4.0), 1.0, None, id="nan"),
    pytest.param(_f32(3.0, _INF, 4.0), 1.0, None, id="inf"),
    pytest.param(_f32([3.0, 4.0], [0.3, 0.4], [0.0, 0.0]), 1.0, [1], id="rows"),
    pytest.param(_RNG.normal(size=(2, 3, 4)).astype(np.float32), 0.5, [0, 2], id="two_axes"),
    pytest.param(_f32(3.0, 4.0), 0.0, None, id="zero_clip_norm"),
]


@pytest.mark.parametrize(("t", "clip_norm", "axes"), _NORM_CASES)
def test_clip_by_norm_matches_tensorflow(tf, t, clip_norm, axes) -> None:
    def tf_fn(t, c):
        return tf.clip_by_norm(t, c, axes=axes)

    def fg_fn(t, c):
        return fg.clip_by_norm(t, c, axes=axes)

    _assert_parity(tf, tf_fn, fg_fn, [t, np.float32(clip_norm)])


# clip_by_average_norm has no axes, and TensorFlow's 1 / clip_norm needs clip_norm > 0.
_AVERAGE_CASES = [c for c in _NORM_CASES if c.values[2] is None and c.values[1] > 0]


@pytest.mark.parametrize(("t", "clip_norm", "axes"), _AVERAGE_CASES)
def test_clip_by_average_norm_matches_tensorflow(tf, t, clip_norm, axes) -> None:
    _assert_parity(
        tf,
        tf.compat.v1.clip_by_average_norm,
        fg.clip_by_average_norm,
        [t, np.float32(clip_norm / t.size)],
    )


_LIST_CASES = [
    pytest.param([_RNG.normal(size=(3, 4)), _RNG.normal(size=5)], 1.0, id="clipped"),
    pytest.param([_RNG.normal(size=(3, 4)), _RNG.normal(size=5)], 100.0, id="unclipped"),
    pytest.param([_f32(3.0), _f32(4.0)], 5.0, id="norm_equals_clip_norm"),
    pytest.param([np.zeros(2), np.zeros(3)], 1.0, id="zeros"),
    pytest.param([_f32(3.0, _NAN), _f32(1.0)], 1.0, id="nan"),
    pytest.param([_f32(3.0, _INF), _f32(1.0)], 1.0, id="inf"),
    pytest.param([np.full(4, 1e30), np.ones(2)], 1.0, id="overflow_to_inf"),
]


@pytest.mark.parametrize(("t_list", "clip_norm"), _LIST_CASES)
def test_clip_by_global_norm_matches_tensorflow(tf, t_list, clip_norm) -> None:
    t_list = [np.asarray(t, np.float32) for t in t_list]
    weights = [_RNG.uniform(0.5, 1.5, t.shape).astype(np.float32) for t in t_list]
    tensors = [tf.constant(t) for t in t_list]
    with tf.GradientTape() as tape:
        for t in tensors:
            tape.watch(t)
        clipped, norm = tf.clip_by_global_norm([tensors[0], None, tensors[1]], clip_norm)
        kept = [clipped[0], clipped[2]]
        loss = sum(tf.reduce_sum(w * c) for w, c in zip(weights, kept, strict=True)) + norm
    tf_grads = [g.numpy() for g in tape.gradient(loss, tensors)]

    def fg_loss(t_list):
        clipped, norm = fg.clip_by_global_norm([t_list[0], None, t_list[1]], clip_norm)
        assert clipped[1] is None
        kept = [clipped[0], clipped[2]]
        return sum(jnp.sum(w * c) for w, c in zip(weights, kept, strict=True)) + norm, (kept, norm)

    fg_grads, (fg_kept, fg_norm) = jax.jit(jax.grad(fg_loss, has_aux=True))(t_list)
    # A sum of squares: its order, and so TensorFlow's rounding, changes with the CPU.
    exact = np.sqrt(sum(np.sum(np.square(t.astype(np.float64))) for t in t_list))
    tolerance.assert_as_close_as_tensorflow(fg_norm, norm.numpy(), exact, err_msg="norm")
    tolerance.assert_as_close_as_tensorflow(
        fg.global_norm(t_list), tf.linalg.global_norm(t_list), exact, err_msg="global_norm"
    )
    for got, expected in zip([*fg_kept, *fg_grads], [*kept, *tf_grads], strict=True):
        np.testing.assert_allclose(got, np.asarray(expected), rtol=1e-6, atol=1e-7)


def test_global_norm_of_only_none_matches_tensorflow(tf) -> None:
    assert float(fg.global_norm([None, None])) == float(tf.linalg.global_norm([None, None]))
    assert float(fg.global_norm([])) == float(tf.linalg.global_norm([]))


def test_clip_by_global_norm_with_use_norm_matches_tensorflow(tf) -> None:
    t_list = [_RNG.normal(size=3).astype(np.float32), _RNG.normal(size=2).astype(np.float32)]
    expected, _ = tf.clip_by_global_norm(t_list, 0.5, use_norm=tf.constant(2.0))
    got, norm = fg.clip_by_global_norm(t_list, 0.5, use_norm=2.0)
    assert float(norm) == 2.0
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e.numpy(), rtol=2e-7)


def test_tf1_graph_clip_by_norm_gradient_matches(tf, run_tf1) -> None:
    """The same gradient in a TF1 graph (tf.compat.v1.gradients) as in eager TensorFlow."""
    t = _RNG.normal(size=(2, 3)).astype(np.float32)

    def build():
        x = tf.constant(t)
        return tf.compat.v1.gradients(tf.reduce_sum(tf.clip_by_norm(x, 1.0) ** 2), x)[0]

    got = jax.grad(lambda x: jnp.sum(fg.clip_by_norm(x, 1.0) ** 2))(t)
    np.testing.assert_allclose(got, run_tf1(build), rtol=1e-6, atol=1e-7)
