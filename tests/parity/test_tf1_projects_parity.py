"""The optimizers TF1 projects brought with them, against their own source run in TF 2.21.

BERT: ``AdamWeightDecayOptimizer`` and ``create_optimizer``, transcribed below from
google-research/bert ``optimization.py`` at commit
eedf5716ce1268e56f0a50264a88cafad334ac61 (``tf.*`` spelled ``tf.compat.v1.*``).  One
deviation, in ``create_optimizer``: the hand-written ``global_step`` increment runs after
the train op (a control dependency), where the original groups the two unordered — so
whether the learning rate reads the old or the new step is up to TensorFlow's scheduler
there; funcgrad reads the old one, always.

The model has a dense layer, a bias, a ``LayerNorm/gamma`` and an embedding table read by
a gather (ids repeat, rows 0, 2 and 5 are never read).  Every variable and slot is
compared by its TF name after each of 6 steps, and a run resumed from a TF ``Saver``
checkpoint at step 3 (and TensorFlow resumed from funcgrad's) continues both trajectories.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from tests.parity.tf1_projects_model import ATOL
from tests.parity.tf1_projects_model import RTOL
from tests.parity.tf1_projects_model import STEPS
from tests.parity.tf1_projects_model import assert_same as _assert_same
from tests.parity.tf1_projects_model import by_tf_name as _by_tf_name
from tests.parity.tf1_projects_model import fg_run as _fg_run
from tests.parity.tf1_projects_model import loss as _loss
from tests.parity.tf1_projects_model import params as _params
from tests.parity.tf1_projects_model import tf_loss as _tf_loss

# --- BERT's optimization.py, transcribed (see the module docstring) ---------------------


def _bert(tf):
    tf1 = tf.compat.v1

    class AdamWeightDecayOptimizer(tf1.train.Optimizer):
        """A basic Adam optimizer that includes "correct" L2 weight decay."""

        def __init__(
            self,
            learning_rate,
            weight_decay_rate=0.0,
            beta_1=0.9,
            beta_2=0.999,
            epsilon=1e-6,
            exclude_from_weight_decay=None,
            name="AdamWeightDecayOptimizer",
        ):
            super().__init__(False, name)
            self.learning_rate = learning_rate
            self.weight_decay_rate = weight_decay_rate
            self.beta_1 = beta_1
            self.beta_2 = beta_2
            self.epsilon = epsilon
            self.exclude_from_weight_decay = exclude_from_weight_decay

        def apply_gradients(self, grads_and_vars, global_step=None, name=None):
            assignments = []
            for grad, param in grads_and_vars:
                if grad is None or param is None:
                    continue
                param_name = self._get_variable_name(param.name)
                m = tf1.get_variable(
                    name=param_name + "/adam_m",
                    shape=param.shape.as_list(),
                    dtype=tf.float32,
                    trainable=False,
                    initializer=tf1.zeros_initializer(),
                )
                v = tf1.get_variable(
                    name=param_name + "/adam_v",
                    shape=param.shape.as_list(),
                    dtype=tf.float32,
                    trainable=False,
                    initializer=tf1.zeros_initializer(),
                )
                next_m = tf.multiply(self.beta_1, m) + tf.multiply(1.0 - self.beta_1, grad)
                next_v = tf.multiply(self.beta_2, v) + tf.multiply(
                    1.0 - self.beta_2, tf.square(grad)
                )
                update = next_m / (tf.sqrt(next_v) + self.epsilon)
                if self._do_use_weight_decay(param_name):
                    update += self.weight_decay_rate * param
                update_with_lr = self.learning_rate * update
                next_param = param - update_with_lr
                assignments.extend([param.assign(next_param), m.assign(next_m), v.assign(next_v)])
            return tf.group(*assignments, name=name)

        def _do_use_weight_decay(self, param_name):
            if not self.weight_decay_rate:
                return False
            if self.exclude_from_weight_decay:
                for r in self.exclude_from_weight_decay:
                    if re.search(r, param_name) is not None:
                        return False
            return True

        def _get_variable_name(self, param_name):
            m = re.match("^(.*):\\d+$", param_name)
            if m is not None:
                param_name = m.group(1)
            return param_name

    def create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps):
        global_step = tf1.train.get_or_create_global_step()
        learning_rate = tf.constant(value=init_lr, shape=[], dtype=tf.float32)
        learning_rate = tf1.train.polynomial_decay(
            learning_rate, global_step, num_train_steps, end_learning_rate=0.0, power=1.0,
            cycle=False,
        )  # fmt: skip
        if num_warmup_steps:
            global_steps_int = tf.cast(global_step, tf.int32)
            warmup_steps_int = tf.constant(num_warmup_steps, dtype=tf.int32)
            global_steps_float = tf.cast(global_steps_int, tf.float32)
            warmup_steps_float = tf.cast(warmup_steps_int, tf.float32)
            warmup_percent_done = global_steps_float / warmup_steps_float
            warmup_learning_rate = init_lr * warmup_percent_done
            is_warmup = tf.cast(global_steps_int < warmup_steps_int, tf.float32)
            learning_rate = (1.0 - is_warmup) * learning_rate + is_warmup * warmup_learning_rate
        optimizer = AdamWeightDecayOptimizer(
            learning_rate=learning_rate,
            weight_decay_rate=0.01,
            beta_1=0.9,
            beta_2=0.999,
            epsilon=1e-6,
            exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"],
        )
        tvars = tf1.trainable_variables()
        grads = tf.gradients(loss, tvars)
        (grads, _) = tf.clip_by_global_norm(grads, clip_norm=1.0)
        train_op = optimizer.apply_gradients(
            zip(grads, tvars, strict=True), global_step=global_step
        )
        with tf.control_dependencies([train_op]):  # the one deviation: ordered
            new_global_step = global_step + 1
        train_op = tf.group(train_op, [global_step.assign(new_global_step)])
        return train_op

    return AdamWeightDecayOptimizer, create_optimizer


# --- The same, ported to funcgrad (the docs' example) ---------------------------------------


def create_optimizer(init_lr, num_train_steps, num_warmup_steps):
    """BERT's ``create_optimizer``, line for line: ``(optimizer, train_op)``."""
    learning_rate = fg.train.polynomial_decay(
        init_lr, num_train_steps, end_learning_rate=0.0, power=1.0, cycle=False
    )
    if num_warmup_steps:
        decayed = learning_rate

        def learning_rate(global_step):
            global_steps_int = global_step.astype(jnp.int32)
            warmup_steps_int = jnp.int32(num_warmup_steps)
            global_steps_float = global_steps_int.astype(jnp.float32)
            warmup_steps_float = warmup_steps_int.astype(jnp.float32)
            warmup_percent_done = global_steps_float / warmup_steps_float
            warmup_learning_rate = init_lr * warmup_percent_done
            is_warmup = (global_steps_int < warmup_steps_int).astype(jnp.float32)
            return (1.0 - is_warmup) * decayed(global_step) + is_warmup * warmup_learning_rate

    optimizer = fg.train.AdamWeightDecayOptimizer(
        learning_rate=learning_rate,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"],
    )

    def train_op(loss_fn, state):
        grads, tvars = zip(*optimizer.compute_gradients(loss_fn, state.params), strict=True)
        (grads, _) = fg.clip_by_global_norm(grads, clip_norm=1.0)
        # apply_gradients also does BERT's `new_global_step = global_step + 1`, after
        # the learning rate has read global_step.
        return optimizer.apply_gradients(zip(grads, tvars, strict=True), state)

    return optimizer, train_op


BERT_ARGS = (0.1, 10, 3)  # init_lr, num_train_steps, num_warmup_steps


@pytest.fixture(scope="module")
def bert_tf(tf, tmp_path_factory):
    """TensorFlow's 6 steps of BERT's create_optimizer: every variable by name after each
    step, and a Saver checkpoint at step 3."""
    tf1 = tf.compat.v1
    prefix = str(tmp_path_factory.mktemp("bert_tf") / "model.ckpt-3")
    with tf.Graph().as_default():
        _, create = _bert(tf)
        train_op = create(_tf_loss(tf), *BERT_ARGS)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            trajectory = []
            for step in range(STEPS):
                sess.run(train_op)
                trajectory.append({v.op.name: sess.run(v) for v in tf1.global_variables()})
                if step == 2:
                    tf1.train.Saver().save(sess, prefix)
    return trajectory, prefix


def _tf_continue(tf, prefix, steps):
    """TensorFlow's BERT run restored from ``prefix`` and run ``steps`` steps."""
    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        _, create = _bert(tf)
        train_op = create(_tf_loss(tf), *BERT_ARGS)
        with tf1.Session() as sess:
            tf1.train.Saver().restore(sess, prefix)
            for _ in range(steps):
                sess.run(train_op)
            return {v.op.name: sess.run(v) for v in tf1.global_variables()}


def test_bert_create_optimizer_six_steps(tf, tmp_path, bert_tf) -> None:
    trajectory, _ = bert_tf
    opt, train_op = create_optimizer(*BERT_ARGS)
    states = _fg_run(opt.init(_params()), train_op, STEPS)
    assert "embeddings/word_embeddings/adam_m" in trajectory[-1]
    for state, want in zip(states, trajectory, strict=True):
        _assert_same(_by_tf_name(tf, tmp_path, state, opt), want)
    table = trajectory[-1]["embeddings/word_embeddings/adam_m"]
    assert np.all(table[[0, 2, 5]] == 0) and np.all(table[[1, 3, 4]] != 0)


def test_bert_resume_from_a_tensorflow_checkpoint_and_the_other_way(tf, tmp_path, bert_tf) -> None:
    trajectory, tf_prefix = bert_tf
    opt, train_op = create_optimizer(*BERT_ARGS)
    template = opt.init(jax.tree.map(jnp.zeros_like, _params()))
    restored = fg.train.restore_tf_checkpoint(tf_prefix, template, opt)
    assert int(restored.global_step) == 3
    resumed = _fg_run(restored, train_op, 3)[-1]
    _assert_same(_by_tf_name(tf, tmp_path, resumed, opt), trajectory[-1])

    own = _fg_run(opt.init(_params()), train_op, 3)[-1]
    fg_prefix = fg.train.save_tf_checkpoint(str(tmp_path / "own" / "model.ckpt-3"), own, opt)
    _assert_same(_tf_continue(tf, fg_prefix, 3), trajectory[-1])


def test_adam_weight_decay_optimizer_defaults(tf, run_tf1_steps) -> None:
    """The class alone, with its defaults (no decay) and a decay with no exclusions."""
    AdamWeightDecayOptimizer, _ = _bert(tf)
    for kwargs in ({}, {"weight_decay_rate": 0.1}):

        def build(kwargs=kwargs):
            opt = AdamWeightDecayOptimizer(0.05, **kwargs)
            train_op = opt.minimize(_tf_loss(tf))
            return train_op, {v.op.name: v for v in tf.compat.v1.global_variables()}

        want = run_tf1_steps(build, STEPS)
        opt = fg.train.AdamWeightDecayOptimizer(0.05, **kwargs)
        step = jax.jit(lambda s, opt=opt: opt.minimize(_loss, s)[0])
        state = opt.init(_params())
        for expected in want:
            state = step(state)
            names = fg.train.variable_names(state.params)
            got = dict(zip(names, jax.tree.leaves(state.params), strict=True))
            for name, value in got.items():
                np.testing.assert_allclose(value, expected[name], rtol=RTOL, atol=ATOL)
