"""fg.train.LossScaleOptimizer against TensorFlow 1.x's MixedPrecisionLossScaleOptimizer.

The same small regression trains in a TF1 graph (``tf.compat.v1.mixed_precision``'s
``MixedPrecisionLossScaleOptimizer`` with a ``DynamicLossScale`` or ``FixedLossScale``)
and with funcgrad, from the same start and data.  At chosen steps an ``inf`` in the
input makes a gradient non-finite.  After every step the parameters, the loss scale,
its counter and ``global_step`` are compared, and the loss before the step.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

STEPS = 10
_rng = np.random.default_rng(1)
X = _rng.normal(size=(8, 4)).astype(np.float32)
Y = _rng.normal(size=(8, 3)).astype(np.float32)
W0 = (0.5 * _rng.normal(size=(4, 3))).astype(np.float32)
B0 = (0.1 * _rng.normal(size=(3,))).astype(np.float32)


def _inputs(bad_steps, size=1.0):
    """The input of each step: ``X * size``, with an ``inf`` in it at ``bad_steps`` (0-based)."""
    inputs = []
    for step in range(STEPS):
        x = X * np.float32(size)
        if step in bad_steps:
            x = x.copy()
            x[step % 8, step % 4] = np.inf
        inputs.append(x)
    return inputs


def _loss(params, x, y):
    return jnp.mean((jnp.tanh(x @ params["W"] + params["b"][None, :]) - y) ** 2)


def _tf_run(tf, inputs, make_inner, loss_scale, targets=Y):
    """Per step: the loss before it, then W, b, the scale, good_steps and global_step."""
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, X.shape)
        W, b = tf.Variable(W0, name="W"), tf.Variable(B0, name="b")
        loss = tf.reduce_mean((tf.tanh(tf.matmul(x, W) + b) - targets) ** 2)
        global_step = v1.train.get_or_create_global_step()
        scale = loss_scale(v1.mixed_precision)
        opt = v1.mixed_precision.MixedPrecisionLossScaleOptimizer(make_inner(global_step), scale)
        train_op = opt.minimize(loss, global_step=global_step)
        good_steps = [v for v in v1.global_variables() if v.op.name == "good_steps"]
        fetches = [W, b, scale(), good_steps[0] if good_steps else tf.constant(0), global_step]
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            trajectory = []
            for value in inputs:
                before = sess.run(loss, {x: value})
                sess.run(train_op, {x: value})
                trajectory.append((before, *sess.run(fetches)))
    return trajectory


def _fg_run(opt, inputs, targets=Y):
    state = opt.init({"W": jnp.asarray(W0), "b": jnp.asarray(B0)})
    step = jax.jit(lambda s, x: opt.minimize(_loss, s, x, targets))
    trajectory = []
    for value in inputs:
        state, loss = step(state, value)
        trajectory.append(
            (
                loss,
                state.params["W"],
                state.params["b"],
                opt.loss_scale(state),
                state.opt_state.good_steps,
                state.global_step,
            )
        )
    return trajectory


def _assert_runs_equal(got, expected):
    names = ("loss", "W", "b", "loss scale", "good_steps", "global_step")
    for step, (g, e) in enumerate(zip(got, expected, strict=True)):
        for name, a, b in zip(names, g, e, strict=True):
            message = f"{name} after step {step + 1}"
            if name in ("loss", "W", "b"):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=message)
            else:
                np.testing.assert_array_equal(a, b, err_msg=message)


INNER = {
    "sgd": (
        lambda tf, _: tf.compat.v1.train.GradientDescentOptimizer(0.2),
        lambda: fg.train.GradientDescentOptimizer(0.2),
    ),
    "momentum": (
        lambda tf, _: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
        lambda: fg.train.MomentumOptimizer(0.1, 0.9),
    ),
    "adam": (
        lambda tf, _: tf.compat.v1.train.AdamOptimizer(0.05),
        lambda: fg.train.AdamOptimizer(0.05),
    ),
    # The rate follows global_step, which a skipped step does not advance.
    "adam_decay": (
        lambda tf, gs: tf.compat.v1.train.AdamOptimizer(
            tf.compat.v1.train.exponential_decay(0.05, gs, 2, 0.5, staircase=True)
        ),
        lambda: fg.train.AdamOptimizer(fg.train.exponential_decay(0.05, 2, 0.5, staircase=True)),
    ),
}


def _runs(tf, inner, inputs, targets=Y, **options):
    """funcgrad's and TensorFlow's runs of ``INNER[inner]`` under one loss scale:
    ``LossScaleOptimizer(inner, **options)`` and the TensorFlow loss-scale object with
    the same settings."""
    make_tf, make_fg = INNER[inner]
    opt = fg.train.LossScaleOptimizer(make_fg(), **options)

    def loss_scale(mp):
        if not opt.dynamic:
            return mp.FixedLossScale(opt.initial_scale)
        return mp.DynamicLossScale(
            initial_loss_scale=opt.initial_scale,
            increment_period=opt.growth_steps,
            multiplier=opt.multiplier,
        )

    expected = _tf_run(tf, inputs, lambda gs: make_tf(tf, gs), loss_scale, targets)
    return _fg_run(opt, inputs, targets), expected


@pytest.mark.parametrize("inner", list(INNER))
def test_injected_inf_steps_match_tensorflow_step_by_step(tf, inner) -> None:
    inputs = _inputs(bad_steps={2, 3, 7})
    got, expected = _runs(tf, inner, inputs, initial_scale=2.0**10, growth_steps=2)
    _assert_runs_equal(got, expected)
    # The run saw skips, growth and a step count behind the step number.
    scales = [float(e[3]) for e in expected]
    assert min(scales) < 2.0**10 < max(scales)
    assert int(expected[-1][5]) == STEPS - 3


def test_the_scale_grows_after_growth_steps_finite_steps_as_in_tensorflow(tf) -> None:
    inputs = _inputs(bad_steps=set())
    got, expected = _runs(tf, "sgd", inputs, initial_scale=3.0, growth_steps=3, multiplier=1.5)
    _assert_runs_equal(got, expected)
    assert [float(g[3]) for g in got] == [3.0, 3.0, 4.5, 4.5, 4.5, 6.75, 6.75, 6.75, 10.125, 10.125]


def test_an_overflowing_scale_is_lowered_until_the_gradients_fit_as_in_tensorflow(tf) -> None:
    """Gradients of ~350 times a scale of 2**127 overflow float32 with no injected inf:
    the scale halves until they fit, and growth on every finite step overflows again.

    The largest gradient times 2**119.5 is float32's maximum: half a power of two from
    the scales tried, so that XLA's reordering of the backward pass's multiplications
    (TensorFlow's order differs) cannot change which steps overflow.
    """
    inputs = _inputs(bad_steps=set())
    got, expected = _runs(
        tf, "adam", inputs, targets=1400 * Y, initial_scale=2.0**127, growth_steps=1
    )
    _assert_runs_equal(got, expected)
    assert 0 < int(expected[-1][5]) < STEPS - 3  # several steps skipped, some applied


def test_a_scale_at_float32_max_does_not_grow_to_inf_as_in_tensorflow(tf) -> None:
    inputs = _inputs(bad_steps=set())
    got, expected = _runs(
        tf, "sgd", inputs, targets=1e-3 * Y, initial_scale=2.0**127, growth_steps=1
    )
    _assert_runs_equal(got, expected)
    assert [float(g[3]) for g in got] == [2.0**127] * STEPS
    assert int(got[-1][5]) == STEPS


def test_a_fixed_scale_applies_every_step_as_tensorflow(tf) -> None:
    """A scale of 3, not a power of two: the unscaled gradients are TensorFlow's
    ``g * (1 / 3)``, and a non-finite step is applied."""
    inputs = _inputs(bad_steps={8})
    got, expected = _runs(tf, "sgd", inputs, dynamic=False, initial_scale=3.0)
    _assert_runs_equal(got[:8], expected[:8])
    assert np.isnan(got[8][1]).any() and np.isnan(expected[8][1]).any()
    assert int(got[-1][5]) == int(expected[-1][5]) == STEPS


def test_compute_gradients_returns_tensorflows_unscaled_gradients(tf, run_tf1) -> None:
    def build():
        v1 = tf.compat.v1
        W, b = tf.Variable(W0), tf.Variable(B0)
        loss = tf.reduce_mean((tf.tanh(tf.matmul(X, W) + b) - Y) ** 2)
        opt = v1.mixed_precision.MixedPrecisionLossScaleOptimizer(
            v1.train.GradientDescentOptimizer(0.1), v1.mixed_precision.FixedLossScale(3.0)
        )
        return [g for g, _ in opt.compute_gradients(loss, [W, b], grad_loss=tf.constant(0.5))]

    expected = run_tf1(build)
    opt = fg.train.LossScaleOptimizer(
        fg.train.GradientDescentOptimizer(0.1), dynamic=False, initial_scale=3.0
    )
    state = opt.init({"W": jnp.asarray(W0), "b": jnp.asarray(B0)})
    gvs = opt.compute_gradients(_loss, state, X, Y, grad_loss=jnp.float32(0.5))
    for (g, _), e, name in zip(gvs, expected, ["W", "b"], strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7, err_msg=name)
