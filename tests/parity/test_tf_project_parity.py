"""A whole TF1 project resumed across TensorFlow and funcgrad, both ways.

Each program runs in a TF1 graph (TensorFlow 2.21, graph mode) and saves with TensorFlow's
own default ``tf.compat.v1.train.Saver()``.  TF -> funcgrad: TensorFlow trains 3 steps,
saves, and trains 3 more (its own continuation); funcgrad restores the save and trains 3
steps.  funcgrad -> TF: funcgrad trains 3 steps and saves, TensorFlow's default ``Saver()``
restores every variable of its graph from that file and trains 3 steps, equal to
funcgrad's own 3 more.  Every variable of the graph is compared by its TensorFlow name:
funcgrad's state is written with ``save_tf_checkpoint`` and read back with TensorFlow's
``tf.train.load_checkpoint``.

The programs: a GAN (an ``OptimizerGroup`` of two Adams, an ``int32`` ``global_step``
that both train ops advance, a learning-rate ``Variable`` assigned between epochs, an EMA
with ``num_updates``), and a float16 regression with float32 master weights under a
dynamic loss scale (``MixedPrecisionLossScaleOptimizer`` over Momentum).
"""

import jax
import jax.numpy as jnp
import numpy as np

import funcgrad as fg

_rng = np.random.default_rng(28)
X = _rng.normal(size=(8, 3)).astype(np.float32)
R = _rng.normal(size=(8, 4)).astype(np.float32)
G0 = (0.5 * _rng.normal(size=(3, 4))).astype(np.float32)
D0 = (0.5 * _rng.normal(size=(4,))).astype(np.float32)
Y = _rng.normal(size=(8, 2)).astype(np.float32)
W0 = (0.5 * _rng.normal(size=(3, 2))).astype(np.float32)
LR, LR_EPOCH_2, DECAY = 0.01, 0.004, 0.99


def _tf_values(tf, prefix):
    reader = tf.compat.v1.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _assert_same(got, expected, rtol=2e-5, atol=1e-6):
    """Every variable, of the same dtype, equal; floats to ``rtol`` and ``atol`` times
    the tensor's largest magnitude (integers exactly)."""
    assert sorted(got) == sorted(expected)
    for name, want in expected.items():
        assert got[name].dtype == want.dtype, name
        if want.dtype.kind in "iu":
            np.testing.assert_array_equal(got[name], want, err_msg=name)
        else:
            bound = atol * max(1.0, float(np.max(np.abs(want))))
            np.testing.assert_allclose(got[name], want, rtol=rtol, atol=bound, err_msg=name)


def _tf_loop(tf, prefix, restore, save_after, ops, before_save=None):
    """In the graph built: TensorFlow's default ``Saver()``; from the checkpoint at
    ``prefix`` (``restore``) 3 steps, else 6 steps from the initializers, saving at
    ``prefix`` before step ``save_after`` (after running ``before_save``).  A step runs
    each of ``ops`` in turn.  Returns the prefix of the save after the last step."""
    v1 = tf.compat.v1
    saver = v1.train.Saver()
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        if restore:
            saver.restore(sess, prefix)
        for step in range(3 if restore else 6):
            if step == save_after:
                if before_save is not None:
                    sess.run(before_save)
                saver.save(sess, prefix)
            for op in ops:
                sess.run(op)
        return saver.save(sess, prefix + "-end")


# The GAN: D and G trained in turn by two Adams, both advancing an int32 global_step.


def _d_loss(p):
    fake = jnp.tanh(X @ p["G"])
    return jnp.mean((fake @ p["D"]) ** 2) + jnp.mean((R @ p["D"] - 1.0) ** 2)


def _g_loss(p):
    return jnp.mean((jnp.tanh(X @ p["G"]) @ p["D"] - 1.0) ** 2)


def _tf_gan(tf, prefix, restore, save_after):
    """Runs the TF1 GAN; returns its variables after the last step.  ``restore``: start
    from the checkpoint at ``prefix``; else train ``save_after`` steps, assign the second
    epoch's rate and save at ``prefix``, then go on.  6 steps from scratch, 3 restored."""
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        d = v1.get_variable("D", initializer=D0)
        g = v1.get_variable("G", initializer=G0)
        global_step = v1.Variable(0, dtype=tf.int32, name="global_step", trainable=False)
        lr = v1.Variable(LR, name="learning_rate", trainable=False)
        fake = tf.tanh(tf.matmul(X, g))
        d_loss = tf.reduce_mean(tf.linalg.matvec(fake, d) ** 2) + tf.reduce_mean(
            (tf.linalg.matvec(R, d) - 1.0) ** 2
        )
        g_loss = tf.reduce_mean((tf.linalg.matvec(fake, d) - 1.0) ** 2)
        d_op = v1.train.AdamOptimizer(lr).minimize(d_loss, global_step, var_list=[d])
        g_op = v1.train.AdamOptimizer(lr, beta1=0.5).minimize(g_loss, global_step, var_list=[g])
        ema_op = v1.train.ExponentialMovingAverage(DECAY, num_updates=global_step).apply([d, g])
        epoch_2 = lr.assign(LR_EPOCH_2)
        return _tf_loop(tf, prefix, restore, save_after, [d_op, g_op, ema_op], epoch_2)


_GROUP = fg.train.OptimizerGroup(
    D=(fg.train.AdamOptimizer(LR), ["D"]), G=(fg.train.AdamOptimizer(LR, beta1=0.5), ["G"])
)
_EMA = fg.train.ExponentialMovingAverage(DECAY, num_updates=True)


@jax.jit
def _gan_step(state, ema_state):
    state, _ = _GROUP["D"].minimize(_d_loss, state)
    state, _ = _GROUP["G"].minimize(_g_loss, state)
    return state, _EMA.apply(ema_state, state.params, step=state.global_step)


def _fg_gan(state, ema_state, steps):
    for _ in range(steps):
        state, ema_state = _gan_step(state, ema_state)
    return state, ema_state


def _save_gan(path, state, ema_state):
    rate = {"learning_rate": state.opt_state["D"].learning_rate}
    return fg.train.save_tf_checkpoint(
        path, state, _GROUP, ema_state=ema_state, extras=rate, global_step_dtype=np.int32
    )


def _gan_params(d=D0, g=G0):
    return {"D": jnp.asarray(d), "G": jnp.asarray(g)}


def test_gan_resumed_from_tensorflow(tf, tmp_path):
    prefix = str(tmp_path / "gan")
    tf_end = _tf_gan(tf, prefix, restore=False, save_after=3)
    expected = _tf_values(tf, tf_end)
    zeros = _gan_params(np.zeros_like(D0), np.zeros_like(G0))
    state, ema_state, extras = fg.train.restore_tf_checkpoint(
        prefix,
        _GROUP.init(zeros),
        _GROUP,
        ema_state=_EMA.init(zeros),
        extras={"learning_rate": jnp.float32(0)},
    )
    assert int(state.global_step) == 6 and float(extras["learning_rate"]) == np.float32(LR_EPOCH_2)
    state = fg.train.set_learning_rate(state, extras["learning_rate"])
    saved = _save_gan(str(tmp_path / "back"), state, ema_state)
    _assert_same(_tf_values(tf, saved), _tf_values(tf, prefix), rtol=0, atol=0)  # nothing lost
    state, ema_state = _fg_gan(state, ema_state, 3)
    got = _tf_values(tf, _save_gan(str(tmp_path / "fg"), state, ema_state))
    _assert_same(got, expected)
    # The port check says the same, by TensorFlow's names.
    rate = {"learning_rate": state.opt_state["D"].learning_rate}
    report = fg.testing.compare_tf_checkpoint(
        tf_end, state, _GROUP, ema_state=ema_state, extras=rate, rtol=2e-5
    )
    assert sorted(report) == sorted(expected)


def test_gan_resumed_in_tensorflow(tf, tmp_path):
    params = _gan_params()
    state, ema_state = _fg_gan(_GROUP.init(params), _EMA.init(params), 3)
    state = fg.train.set_learning_rate(state, LR_EPOCH_2)
    prefix = _save_gan(str(tmp_path / "fg"), state, ema_state)
    resumed = _tf_values(tf, _tf_gan(tf, prefix, restore=True, save_after=-1))
    state, ema_state = _fg_gan(state, ema_state, 3)
    _assert_same(resumed, _tf_values(tf, _save_gan(str(tmp_path / "fg-end"), state, ema_state)))


# float16 compute, float32 master weights, a dynamic loss scale over Momentum.  TensorFlow's
# float16 kernels (tanh, matmul) and XLA's round differently by a float16 unit or two
# (2**-11 relative each): the continuations are compared to 2**-9 of each tensor's size,
# the restored values and the loss scale, its counter and global_step exactly.

_HALF = {"rtol": 2.0**-9, "atol": 2.0**-9}

_SCALE = {"initial_scale": 2.0**14, "growth_steps": 2, "multiplier": 2.0}
_LSO = fg.train.LossScaleOptimizer(fg.train.MomentumOptimizer(0.1, 0.9), **_SCALE)


def _half_loss(p):
    out = jnp.tanh(X.astype(jnp.float16) @ p["W"].astype(jnp.float16))
    return jnp.mean((out.astype(jnp.float32) - Y) ** 2)


def _tf_half(tf, prefix, restore, save_after):
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        w = v1.get_variable("W", initializer=W0)
        global_step = v1.train.get_or_create_global_step()
        out = tf.tanh(tf.matmul(tf.cast(X, tf.float16), tf.cast(w, tf.float16)))
        loss = tf.reduce_mean((tf.cast(out, tf.float32) - Y) ** 2)
        scale = v1.mixed_precision.DynamicLossScale(
            _SCALE["initial_scale"], _SCALE["growth_steps"], _SCALE["multiplier"]
        )
        opt = v1.train.MomentumOptimizer(0.1, 0.9)
        train_op = v1.mixed_precision.MixedPrecisionLossScaleOptimizer(opt, scale).minimize(
            loss, global_step
        )
        return _tf_loop(tf, prefix, restore, save_after, [train_op])


_half_step = jax.jit(lambda s: _LSO.minimize(_half_loss, s)[0])


def _fg_half(state, steps):
    for _ in range(steps):
        state = _half_step(state)
    return state


def test_loss_scaled_float16_resumed_from_tensorflow(tf, tmp_path):
    prefix = str(tmp_path / "half")
    expected = _tf_values(tf, _tf_half(tf, prefix, restore=False, save_after=3))
    state = fg.train.restore_tf_checkpoint(prefix, _LSO.init({"W": jnp.zeros_like(W0)}), _LSO)
    saved = fg.train.save_tf_checkpoint(str(tmp_path / "back"), state, _LSO)
    _assert_same(_tf_values(tf, saved), _tf_values(tf, prefix), rtol=0, atol=0)  # nothing lost
    state = _fg_half(state, 3)
    got = _tf_values(tf, fg.train.save_tf_checkpoint(str(tmp_path / "fg"), state, _LSO))
    _assert_same(got, expected, **_HALF)


def test_loss_scaled_float16_resumed_in_tensorflow(tf, tmp_path):
    state = _fg_half(_LSO.init({"W": jnp.asarray(W0)}), 3)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "fg"), state, _LSO)
    resumed = _tf_values(tf, _tf_half(tf, prefix, restore=True, save_after=-1))
    state = _fg_half(state, 3)
    saved = fg.train.save_tf_checkpoint(str(tmp_path / "fg-end"), state, _LSO)
    _assert_same(resumed, _tf_values(tf, saved), **_HALF)
