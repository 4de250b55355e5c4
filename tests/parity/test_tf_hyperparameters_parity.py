"""Hyperparameters that TF1 programs change while training, spelled in funcgrad, against TF.

TensorFlow 2.21 in graph mode runs each TF1 program; funcgrad runs its documented spelling
from the same start; every variable is compared after each step:

- an EMA decay that switches at a step (TF: a decay tensor of ``global_step``; funcgrad:
  ``ExponentialMovingAverage(decay=schedule)``, the step passed to ``apply``);
- a learning-rate ``Variable`` assigned per epoch (``fg.train.set_learning_rate``);
- per-variable gradient multipliers between ``compute_gradients`` and ``apply_gradients``;
- a variable constraint applied after each update (TF: ``get_variable(constraint=)``;
  funcgrad: the function applied to ``state.params`` after the step);
- Adam's betas ramped at steps (TF: beta tensors of ``global_step``; funcgrad:
  ``optax.inject_hyperparams(fg.train.scale_by_tf_adam)`` with schedules).
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax

import funcgrad as fg

_rng = np.random.default_rng(4)
X = _rng.normal(size=(6, 3)).astype(np.float32)
Y = _rng.normal(size=(6, 2)).astype(np.float32)
W0 = (_rng.normal(size=(3, 2))).astype(np.float32)
B0 = (0.1 * _rng.normal(size=(2,))).astype(np.float32)
STEPS = 6


def _loss(p):
    return jnp.mean((jnp.tanh(X @ p["W"] + p["b"][None, :]) - Y) ** 2)


def _tf_model(tf, **w_options):
    v1 = tf.compat.v1
    w = v1.get_variable("W", initializer=W0, **w_options)
    b = v1.get_variable("b", initializer=B0)
    global_step = v1.train.get_or_create_global_step()
    loss = tf.reduce_mean((tf.tanh(tf.matmul(X, w) + b) - Y) ** 2)
    return w, b, global_step, loss


def _run(tf, ops_per_step, fetches, before_step=None):
    """Runs each op of ``ops_per_step`` in turn (one ``session.run`` each) ``STEPS`` times;
    ``before_step(sess, step)`` first; the fetches after each step."""
    v1 = tf.compat.v1
    out = []
    with v1.Session() as sess:
        # Adam's beta1_power starts at a beta that may read global_step, and TensorFlow
        # runs the initializers in no set order: global_step first.
        global_step = v1.train.get_global_step()
        if global_step is not None:
            sess.run(global_step.initializer)
        sess.run(v1.global_variables_initializer())
        for step in range(STEPS):
            if before_step is not None:
                before_step(sess, step)
            for op in ops_per_step:
                sess.run(op)
            out.append(sess.run(fetches))
    return out


def _close(got, want):
    for step, (g, w) in enumerate(zip(got, want, strict=True)):
        for a, b in zip(g, w, strict=True):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6, err_msg=f"step {step + 1}")


def _params():
    return {"W": jnp.asarray(W0), "b": jnp.asarray(B0)}


def test_ema_decay_that_switches_at_a_step(tf):
    with tf.Graph().as_default():
        w, b, global_step, loss = _tf_model(tf)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.5).minimize(loss, global_step)
        decay = tf.compat.v1.train.piecewise_constant(global_step, [3], [0.5, 0.9])
        ema = tf.compat.v1.train.ExponentialMovingAverage(decay)
        ema_op = ema.apply([w, b])  # run after train_op: the decay reads the step after it
        want = _run(tf, [train_op, ema_op], [ema.average(w), ema.average(b)])
    opt = fg.train.GradientDescentOptimizer(0.5)
    ema = fg.train.ExponentialMovingAverage(fg.train.piecewise_constant([3], [0.5, 0.9]))
    state = opt.init(_params())
    averages = ema.init(state.params)
    got = []
    for _ in range(STEPS):
        state, _ = opt.minimize(_loss, state)
        averages = ema.apply(averages, state.params, step=state.global_step)
        got.append([averages.average["W"], averages.average["b"]])
    _close(got, want)


def test_learning_rate_variable_assigned_per_epoch(tf):
    rates = {0: 0.1, 2: 0.05, 4: 0.01}  # the epoch starting at each step
    with tf.Graph().as_default():
        w, b, global_step, loss = _tf_model(tf)
        lr = tf.compat.v1.Variable(0.1, trainable=False, name="learning_rate")
        train_op = tf.compat.v1.train.AdamOptimizer(lr).minimize(loss, global_step)

        def assign(sess, step):
            if step in rates:
                sess.run(lr.assign(rates[step]))

        want = _run(tf, [train_op], [w, b], before_step=assign)
    opt = fg.train.AdamOptimizer(0.1)
    step = jax.jit(lambda s: opt.minimize(_loss, s)[0])
    state, got = opt.init(_params()), []
    for n in range(STEPS):
        if n in rates:
            state = fg.train.set_learning_rate(state, rates[n])
        state = step(state)
        got.append([state.params["W"], state.params["b"]])
    _close(got, want)


def test_per_variable_gradient_multipliers(tf):
    multipliers = {"W": 0.25, "b": 2.0}
    with tf.Graph().as_default():
        w, b, global_step, loss = _tf_model(tf)
        opt = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9)
        scaled = [(g * multipliers[v.op.name], v) for g, v in opt.compute_gradients(loss)]
        want = _run(tf, [opt.apply_gradients(scaled, global_step)], [w, b])
    opt = fg.train.MomentumOptimizer(0.1, 0.9)

    @jax.jit
    def step(state):
        gvs = opt.compute_gradients(_loss, state.params)
        names = fg.train.variable_names(state.params)
        gvs = [(g * multipliers[n], v) for (g, v), n in zip(gvs, names, strict=True)]
        return opt.apply_gradients(gvs, state)

    state, got = opt.init(_params()), []
    for _ in range(STEPS):
        state = step(state)
        got.append([state.params["W"], state.params["b"]])
    _close(got, want)


def test_constraint_applied_after_each_update(tf):
    with tf.Graph().as_default():
        w, b, global_step, loss = _tf_model(tf, constraint=lambda v: tf.clip_by_norm(v, 1.0))
        train_op = tf.compat.v1.train.MomentumOptimizer(0.5, 0.9).minimize(loss, global_step)
        want = _run(tf, [train_op], [w, b])
    opt = fg.train.MomentumOptimizer(0.5, 0.9)

    @jax.jit
    def step(state):
        state, _ = opt.minimize(_loss, state)
        return state._replace(params={**state.params, "W": fg.clip_by_norm(state.params["W"], 1.0)})

    state, got = opt.init(_params()), []
    for _ in range(STEPS):
        state = step(state)
        got.append([state.params["W"], state.params["b"]])
    assert float(jnp.linalg.norm(W0)) > 1.0  # the constraint acts from the first step
    _close(got, want)


def test_adam_betas_ramped_at_steps(tf):
    """Mean teacher's habit: Adam fed beta tensors of ``global_step``.  TensorFlow starts
    ``beta1_power`` at beta1's first value and multiplies it by the current beta1 each
    step; ``optax.inject_hyperparams(fg.train.scale_by_tf_adam)`` does the same."""
    with tf.Graph().as_default():
        w, b, global_step, loss = _tf_model(tf)
        beta1 = tf.compat.v1.train.piecewise_constant(global_step, [3], [0.5, 0.9])
        beta2 = tf.compat.v1.train.piecewise_constant(global_step, [2], [0.99, 0.999])
        adam = tf.compat.v1.train.AdamOptimizer(0.1, beta1=beta1, beta2=beta2)
        want = _run(tf, [adam.minimize(loss, global_step)], [w, b])
    adam_tx = optax.inject_hyperparams(fg.train.scale_by_tf_adam)(
        beta1=fg.train.piecewise_constant([3], [0.5, 0.9]),
        beta2=fg.train.piecewise_constant([2], [0.99, 0.999]),
    )
    opt = fg.train.Optimizer(optax.chain(adam_tx, optax.scale(-0.1)))
    step = jax.jit(lambda state: opt.minimize(_loss, state)[0])
    state, got = opt.init(_params()), []
    for _ in range(STEPS):
        state = step(state)
        got.append([state.params["W"], state.params["b"]])
    _close(got, want)
    # A constant beta (0.9 from the start) gives other numbers: the ramp is what is tested.
    assert not np.allclose(got[2][0], _adam_with_constant_betas()[2][0], atol=1e-4)


def _adam_with_constant_betas():
    opt = fg.train.AdamOptimizer(0.1, beta1=0.9, beta2=0.999)
    step = jax.jit(lambda state: opt.minimize(_loss, state)[0])
    state, got = opt.init(_params()), []
    for _ in range(STEPS):
        state = step(state)
        got.append([state.params["W"], state.params["b"]])
    return got
