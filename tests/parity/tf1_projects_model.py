"""The model the parity tests of TF1 projects' optimizers share: a dense layer, a bias, a
``LayerNorm/gamma`` and an embedding table read by a gather (ids repeat, rows 0, 2 and 5
are never read), in funcgrad and in TensorFlow, and the helpers that run both, compare a
funcgrad state with TensorFlow's variables by their TF names, and resume each from the
other's checkpoint."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import funcgrad as fg

_rng = np.random.default_rng(7)
E0 = (_rng.standard_normal((6, 3)) * 0.5).astype(np.float32)
K0 = (_rng.standard_normal((3, 4)) * 0.5).astype(np.float32)
B0 = (_rng.standard_normal(4) * 0.1).astype(np.float32)
G0 = (1 + _rng.standard_normal(4) * 0.1).astype(np.float32)
IDS = np.array([1, 3, 1, 4], np.int32)
Y = _rng.standard_normal((4, 4)).astype(np.float32)
STEPS = 6
# float32 rounding over 6 steps of an Adam-type rule whose denominators are small.
RTOL, ATOL = 2e-5, 2e-6


def params():
    return {
        "embeddings": {"word_embeddings": jnp.asarray(E0)},
        "dense": {"kernel": jnp.asarray(K0), "bias": jnp.asarray(B0)},
        "LayerNorm": {"gamma": jnp.asarray(G0)},
    }


def loss(params):
    x = params["embeddings"]["word_embeddings"][IDS]
    h = jnp.tanh(x @ params["dense"]["kernel"] + params["dense"]["bias"][None, :])
    return jnp.mean((params["LayerNorm"]["gamma"][None, :] * h - Y) ** 2)


def tf_loss(tf):
    tf1 = tf.compat.v1
    with tf1.variable_scope("embeddings"):
        table = tf1.get_variable("word_embeddings", initializer=E0)
    with tf1.variable_scope("dense"):
        kernel = tf1.get_variable("kernel", initializer=K0)
        bias = tf1.get_variable("bias", initializer=B0)
    with tf1.variable_scope("LayerNorm"):
        gamma = tf1.get_variable("gamma", initializer=G0)
    x = tf.gather(table, IDS)
    h = tf.tanh(tf.matmul(x, kernel) + bias)
    return tf.reduce_mean((gamma * h - Y) ** 2)


def tf_run(tf, minimize, steps, *, restore=None, save=None):
    """TensorFlow's ``steps`` steps of ``minimize(loss, global_step)`` (the train op it
    builds in the current graph), restored from ``restore`` if given: every variable by
    name after each step; a ``Saver`` checkpoint at ``save`` after step 3."""
    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        global_step = tf1.train.get_or_create_global_step()
        train_op = minimize(tf_loss(tf), global_step)
        with tf1.Session() as sess:
            if restore is None:
                sess.run(tf1.global_variables_initializer())
            else:
                tf1.train.Saver().restore(sess, restore)
            trajectory = []
            for step in range(steps):
                sess.run(train_op)
                trajectory.append({v.op.name: sess.run(v) for v in tf1.global_variables()})
                if save is not None and step == 2:
                    tf1.train.Saver().save(sess, save)
    return trajectory


def by_tf_name(tf, tmp_path, state, opt):
    """``state`` by TensorFlow name, as funcgrad saves it."""
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "fg" / "model.ckpt"), state, opt)
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def assert_same(got, want, rtol=RTOL, atol=ATOL):
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)


def fg_run(state, train_op, steps):
    step = jax.jit(lambda s: train_op(loss, s), donate_argnums=0)
    states = []
    for _ in range(steps):
        state = step(state)
        states.append(jax.tree.map(jnp.copy, state))  # the donated one is gone next step
    return states


def assert_resumes_both_ways(tf, tmp_path, opt, train_op, minimize, run, rtol=RTOL, atol=ATOL):
    """funcgrad restored from TensorFlow's checkpoint at step 3, and TensorFlow restored
    from funcgrad's, each run to step 6, end where TensorFlow's run ``(trajectory, prefix)``
    of ``minimize`` (see :func:`tf_run`) ends."""
    trajectory, tf_prefix = run
    template = opt.init(jax.tree.map(jnp.zeros_like, params()))
    restored = fg.train.restore_tf_checkpoint(tf_prefix, template, opt)
    assert int(restored.global_step) == 3
    resumed = fg_run(restored, train_op, 3)[-1]
    assert_same(by_tf_name(tf, tmp_path, resumed, opt), trajectory[-1], rtol, atol)

    own = fg_run(opt.init(params()), train_op, 3)[-1]
    fg_prefix = fg.train.save_tf_checkpoint(str(tmp_path / "own" / "model.ckpt-3"), own, opt)
    got = tf_run(tf, minimize, 3, restore=fg_prefix)[-1]
    assert_same(got, trajectory[-1], rtol, atol)
