"""Resuming TensorFlow 1.x runs: tf.compat.v1.train.Saver checkpoints <-> funcgrad, both ways.

For each TF1 optimizer, one TF1 graph trains 3 steps, saves, and trains 3 more (TensorFlow's
own continuation); funcgrad restores the save and trains 3 steps: every variable, slot and
global_step equals TensorFlow's.  The other way: funcgrad trains 3 steps and saves,
TensorFlow restores that and trains 3 steps, equal to funcgrad's own 3 more steps — and
TensorFlow's Saver, saving what it restored, writes the very bytes funcgrad wrote.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from tests.parity.test_optimizers_parity import B0
from tests.parity.test_optimizers_parity import CASES
from tests.parity.test_optimizers_parity import W0
from tests.parity.test_optimizers_parity import X
from tests.parity.test_optimizers_parity import Y


def _loss(params):
    logits = X @ params["W"] + params["layer1"]["bias"][None, :]
    return jnp.mean((jnp.tanh(logits) - Y) ** 2)


_STEPS: dict = {}


def _fg_steps(opt, state, steps):
    """``steps`` steps of ``opt`` (one compiled step per optimizer)."""
    if opt not in _STEPS:
        _STEPS[opt] = jax.jit(lambda s: opt.minimize(_loss, s)[0])
    for _ in range(steps):
        state = _STEPS[opt](state)
    return state


def _params(w=W0, b=B0):
    return {"W": jnp.asarray(w), "layer1": {"bias": jnp.asarray(b)}}


def _tf_model(tf, optimizer):
    """The graph: W, layer1/bias, global_step, and the train op."""
    tf1 = tf.compat.v1
    w = tf1.get_variable("W", initializer=W0)
    with tf1.variable_scope("layer1"):
        b = tf1.get_variable("bias", initializer=B0)
    global_step = tf1.train.get_or_create_global_step()
    loss = tf.reduce_mean((tf.tanh(tf.matmul(X, w) + b) - Y) ** 2)
    return optimizer.minimize(loss, global_step=global_step)


def _tf_values(tf, sess):
    return {v.op.name: sess.run(v) for v in tf.compat.v1.global_variables()}


def _saved(tf, prefix):
    reader = tf.train.load_checkpoint(prefix)  # TensorFlow reads what funcgrad wrote
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _assert_same_names_and_values(got, want):
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize(("name", "kwargs"), CASES)
def test_resume_a_tensorflow_run_and_the_other_way(tf, tmp_path, name, kwargs) -> None:
    tf1 = tf.compat.v1
    opt = getattr(fg.train, name)(**kwargs)
    fg_state = _fg_steps(opt, opt.init(_params()), 3)
    fg_prefix = fg.train.save_tf_checkpoint(str(tmp_path / "fg" / "model.ckpt-3"), fg_state, opt)
    with tf.Graph().as_default():
        train = _tf_model(tf, getattr(tf1.train, name)(**kwargs))
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for _ in range(3):
                sess.run(train)
            tf_prefix = saver.save(sess, str(tmp_path / "tf" / "model.ckpt"), global_step=3)
            for _ in range(3):
                sess.run(train)
            tf_continued = _tf_values(tf, sess)
            saver.restore(sess, tf.train.latest_checkpoint(str(tmp_path / "fg")))
            again = saver.save(sess, str(tmp_path / "again" / "model.ckpt-3"))
            for _ in range(3):
                sess.run(train)
            tf_continued_fg = _tf_values(tf, sess)
    # TensorFlow -> funcgrad: restore, 3 more steps, every name equal to TensorFlow's
    template = opt.init(_params(np.zeros_like(W0), np.zeros_like(B0)))
    restored = fg.train.restore_tf_checkpoint(tf_prefix, template, opt)
    assert int(restored.global_step) == 3
    resumed = _fg_steps(opt, restored, 3)
    path = fg.train.save_tf_checkpoint(str(tmp_path / "resumed" / "m"), resumed, opt)
    _assert_same_names_and_values(_saved(tf, path), tf_continued)
    # funcgrad -> TensorFlow: TensorFlow's 3 steps from funcgrad's save equal funcgrad's
    path = fg.train.save_tf_checkpoint(
        str(tmp_path / "continued" / "m"), _fg_steps(opt, fg_state, 3), opt
    )
    _assert_same_names_and_values(_saved(tf, path), tf_continued_fg)
    for suffix in (".index", ".data-00000-of-00001"):  # and a Saver writes the same bytes
        with open(fg_prefix + suffix, "rb") as ours, open(again + suffix, "rb") as theirs:
            assert ours.read() == theirs.read(), suffix


def test_names_in_a_variable_scope_through_name_map(tf, tmp_path) -> None:
    """minimize inside tf.variable_scope('train') prefixes the slots and Adam's powers;
    a variable outside var_list gets no slots."""
    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        w = tf1.get_variable("W", initializer=W0)
        with tf1.variable_scope("layer1"):
            b = tf1.get_variable("bias", initializer=B0)
        global_step = tf1.train.get_or_create_global_step()
        loss = tf.reduce_mean((tf.tanh(tf.matmul(X, w) + b) - Y) ** 2)
        with tf1.variable_scope("train"):
            train = tf1.train.AdamOptimizer(0.05).minimize(
                loss, global_step=global_step, var_list=[w]
            )
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for _ in range(2):
                sess.run(train)
            prefix = tf1.train.Saver().save(sess, str(tmp_path / "model.ckpt"))
            sess.run(train)
            want = sess.run(w)
    opt = fg.train.AdamOptimizer(0.05)
    template = opt.init(_params(np.zeros_like(W0), np.zeros_like(B0)))
    with pytest.raises(ValueError, match=r"'W/Adam' \(did you mean 'train/W/Adam'\?\)"):
        fg.train.restore_tf_checkpoint(prefix, template, opt)
    name_map = {
        "W/Adam": "train/W/Adam",
        "W/Adam_1": "train/W/Adam_1",
        "beta1_power": "train/beta1_power",
        "beta2_power": "train/beta2_power",
    }
    restored = fg.train.restore_tf_checkpoint(prefix, template, opt, name_map, var_list=["W"])
    state, _ = opt.minimize(_loss, restored, var_list=["W"])
    np.testing.assert_allclose(state.params["W"], want, rtol=1e-5, atol=1e-6)


def test_a_sharded_checkpoint(tf, tmp_path) -> None:
    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        with tf1.device("/cpu:0"):
            tf1.get_variable("W", initializer=W0)
            tf1.train.get_or_create_global_step()
        with tf1.device("/cpu:1"), tf1.variable_scope("layer1"):
            tf1.get_variable("bias", initializer=B0)
        saver = tf1.train.Saver(sharded=True)
        with tf1.Session(config=tf1.ConfigProto(device_count={"CPU": 2})) as sess:
            sess.run(tf1.global_variables_initializer())
            prefix = saver.save(sess, str(tmp_path / "model.ckpt"))
    assert os.path.exists(prefix + ".data-00001-of-00002")
    opt = fg.train.GradientDescentOptimizer(0.1)
    restored = fg.train.restore_tf_checkpoint(tmp_path, opt.init(_params(W0 * 0, B0 * 0)), opt)
    np.testing.assert_array_equal(restored.params["W"], W0)
    np.testing.assert_array_equal(restored.params["layer1"]["bias"], B0)


def test_a_partitioned_variable_restores_whole(tf, tmp_path) -> None:
    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        w = tf1.get_variable(
            "W",
            shape=W0.shape,
            initializer=tf1.random_normal_initializer(seed=1),
            partitioner=tf1.fixed_size_partitioner(2, axis=0),
        )
        with tf1.variable_scope("layer1"):
            tf1.get_variable("bias", initializer=B0)
        tf1.train.get_or_create_global_step()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            prefix = tf1.train.Saver().save(sess, str(tmp_path / "model.ckpt"))
            whole = sess.run(tf.concat(list(w), 0))
    opt = fg.train.GradientDescentOptimizer(0.1)
    restored = fg.train.restore_tf_checkpoint(prefix, opt.init(_params()), opt)
    np.testing.assert_array_equal(restored.params["W"], whole)


def test_extras_keep_int64_and_float64_both_ways(tf, tmp_path) -> None:
    """TensorFlow's Saver restores the int64 and float64 variables funcgrad writes (it
    restores only matching dtypes), and funcgrad reads TensorFlow's back: into NumPy
    templates with jax_enable_x64 off, into JAX templates with it on."""
    tf1 = tf.compat.v1
    opt = fg.train.GradientDescentOptimizer(0.1)
    extras = {"counter": np.int64(2**40 + 3), "decay": np.float64(0.1), "epoch": 7, "rate": 0.5}
    prefix = fg.train.save_tf_checkpoint(
        str(tmp_path / "fg" / "m"), opt.init(_params()), opt, extras=extras
    )
    with tf.Graph().as_default():
        _tf_model(tf, tf1.train.GradientDescentOptimizer(0.1))
        graph = {
            "counter": tf1.Variable(np.int64(0), name="counter"),
            "decay": tf1.Variable(np.float64(0), name="decay"),
            "epoch": tf1.Variable(0, name="epoch"),  # int32, as tf.Variable(7) makes it
            "rate": tf1.Variable(0.0, name="rate"),  # float32
        }
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            saver.restore(sess, prefix)
            restored_in_tf = sess.run(graph)
            sess.run([graph["counter"].assign_add(1), graph["decay"].assign(graph["decay"] / 3)])
            tf_prefix = saver.save(sess, str(tmp_path / "tf" / "m"))
            tf_values = sess.run(graph)
    dtypes = {"counter": np.int64, "decay": np.float64, "epoch": np.int32, "rate": np.float32}
    for name, value in restored_in_tf.items():
        assert (value.dtype, value) == (dtypes[name], dtypes[name](extras[name])), name
    templates = {"counter": np.int64(0), "decay": np.float64(0), "epoch": 0, "rate": 0.0}
    _, _, restored = fg.train.restore_tf_checkpoint(
        tf_prefix, opt.init(_params()), opt, extras=templates
    )
    for name, value in tf_values.items():
        assert (restored[name].dtype, restored[name]) == (value.dtype, value), name
    fg.testing.compare_tf_checkpoint(tf_prefix, opt.init(_params()), opt, extras=restored)
    with jax.enable_x64(True):
        templates = {"counter": jnp.int64(0), "decay": jnp.float64(0)}
        _, _, restored = fg.train.restore_tf_checkpoint(
            tf_prefix, opt.init(_params()), opt, extras=templates
        )
        assert int(restored["counter"]) == 2**40 + 4
        assert float(restored["decay"]) == tf_values["decay"]
