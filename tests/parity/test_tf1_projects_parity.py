"""The optimizers TF1 projects brought with them, against their own source run in TF 2.21.

BERT: ``AdamWeightDecayOptimizer`` and ``create_optimizer``, transcribed below from
google-research/bert ``optimization.py`` at commit
ea96c0dda296799488cd98c53179f6b1246f24d3 (``tf.*`` spelled ``tf.compat.v1.*``).  ALBERT:
``LAMBOptimizer`` from google-research/albert ``lamb_optimizer.py`` at commit
6ca4dfd0d13495a0a0ed7931f452018e08f93ced, in the same ``create_optimizer`` step (ALBERT's
own, with its defaults, builds the same graph for ``optimizer="lamb"``).  One deviation,
in ``create_optimizer``: the hand-written ``global_step`` increment runs after
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


def _params():
    return {
        "embeddings": {"word_embeddings": jnp.asarray(E0)},
        "dense": {"kernel": jnp.asarray(K0), "bias": jnp.asarray(B0)},
        "LayerNorm": {"gamma": jnp.asarray(G0)},
    }


def _loss(params):
    x = params["embeddings"]["word_embeddings"][IDS]
    h = jnp.tanh(x @ params["dense"]["kernel"] + params["dense"]["bias"][None, :])
    return jnp.mean((params["LayerNorm"]["gamma"][None, :] * h - Y) ** 2)


def _tf_loss(tf):
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

    class LAMBOptimizer(AdamWeightDecayOptimizer):
        """LAMB (Layer-wise Adaptive Moments optimizer for Batch training)."""

        def __init__(
            self,
            learning_rate,
            weight_decay_rate=0.0,
            beta_1=0.9,
            beta_2=0.999,
            epsilon=1e-6,
            exclude_from_weight_decay=None,
            exclude_from_layer_adaptation=None,
            name="LAMBOptimizer",
        ):
            super().__init__(
                learning_rate, weight_decay_rate, beta_1, beta_2, epsilon,
                exclude_from_weight_decay, name,
            )  # fmt: skip
            if exclude_from_layer_adaptation:
                self.exclude_from_layer_adaptation = exclude_from_layer_adaptation
            else:
                self.exclude_from_layer_adaptation = exclude_from_weight_decay

        def apply_gradients(self, grads_and_vars, global_step=None, name=None):
            assignments = []
            for grad, param in grads_and_vars:
                if grad is None or param is None:
                    continue
                param_name = self._get_variable_name(param.name)
                m = tf1.get_variable(
                    name=param_name + "/adam_m", shape=param.shape.as_list(), dtype=tf.float32,
                    trainable=False, initializer=tf1.zeros_initializer(),
                )  # fmt: skip
                v = tf1.get_variable(
                    name=param_name + "/adam_v", shape=param.shape.as_list(), dtype=tf.float32,
                    trainable=False, initializer=tf1.zeros_initializer(),
                )  # fmt: skip
                next_m = tf.multiply(self.beta_1, m) + tf.multiply(1.0 - self.beta_1, grad)
                next_v = tf.multiply(self.beta_2, v) + tf.multiply(
                    1.0 - self.beta_2, tf.square(grad)
                )
                update = next_m / (tf.sqrt(next_v) + self.epsilon)
                if self._do_use_weight_decay(param_name):
                    update += self.weight_decay_rate * param
                ratio = 1.0
                if self._do_layer_adaptation(param_name):
                    w_norm = tf.norm(param, ord=2)
                    g_norm = tf.norm(update, ord=2)
                    ratio = tf1.where(
                        tf.greater(w_norm, 0),
                        tf1.where(tf.greater(g_norm, 0), (w_norm / g_norm), 1.0),
                        1.0,
                    )
                update_with_lr = ratio * self.learning_rate * update
                next_param = param - update_with_lr
                assignments.extend([param.assign(next_param), m.assign(next_m), v.assign(next_v)])
            return tf.group(*assignments, name=name)

        def _do_layer_adaptation(self, param_name):
            if self.exclude_from_layer_adaptation:
                for r in self.exclude_from_layer_adaptation:
                    if re.search(r, param_name) is not None:
                        return False
            return True

    def create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps, kind="bert", **more):
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
        optimizer = {"bert": AdamWeightDecayOptimizer, "lamb": LAMBOptimizer}[kind](
            learning_rate=learning_rate,
            weight_decay_rate=0.01,
            beta_1=0.9,
            beta_2=0.999,
            epsilon=1e-6,
            exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"],
            **more,
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


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, kind="bert", **more):
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

    classes = {"bert": fg.train.AdamWeightDecayOptimizer, "lamb": fg.train.LAMBOptimizer}
    optimizer = classes[kind](
        learning_rate=learning_rate,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"],
        **more,
    )

    def train_op(loss_fn, state):
        grads, tvars = zip(*optimizer.compute_gradients(loss_fn, state.params), strict=True)
        (grads, _) = fg.clip_by_global_norm(grads, clip_norm=1.0)
        # apply_gradients also does BERT's `new_global_step = global_step + 1`, after
        # the learning rate has read global_step.
        return optimizer.apply_gradients(zip(grads, tvars, strict=True), state)

    return optimizer, train_op


BERT_ARGS = (0.1, 10, 3)  # init_lr, num_train_steps, num_warmup_steps
#: The optimizers in create_optimizer's step: BERT's, ALBERT's LAMB as ALBERT builds it,
#: and LAMB adapting the LayerNorm too (its own exclusion list).
CASES = {
    "bert": {},
    "lamb": {"kind": "lamb"},
    "lamb_exclude_from_layer_adaptation": {
        "kind": "lamb",
        "exclude_from_layer_adaptation": ["bias"],
    },
}
_TF_RUNS: dict = {}


def _tf_run(tf, tmp_path_factory, case):
    """TensorFlow's 6 steps of ``create_optimizer`` for ``case``: every variable by name
    after each step, and a Saver checkpoint at step 3 (run once per case)."""
    if case not in _TF_RUNS:
        tf1 = tf.compat.v1
        prefix = str(tmp_path_factory.mktemp(case) / "model.ckpt-3")
        with tf.Graph().as_default():
            _, create = _bert(tf)
            train_op = create(_tf_loss(tf), *BERT_ARGS, **CASES[case])
            with tf1.Session() as sess:
                sess.run(tf1.global_variables_initializer())
                trajectory = []
                for step in range(STEPS):
                    sess.run(train_op)
                    trajectory.append({v.op.name: sess.run(v) for v in tf1.global_variables()})
                    if step == 2:
                        tf1.train.Saver().save(sess, prefix)
        _TF_RUNS[case] = trajectory, prefix
    return _TF_RUNS[case]


def _tf_continue(tf, prefix, steps, case):
    """TensorFlow's run of ``case`` restored from ``prefix`` and run ``steps`` steps."""
    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        _, create = _bert(tf)
        train_op = create(_tf_loss(tf), *BERT_ARGS, **CASES[case])
        with tf1.Session() as sess:
            tf1.train.Saver().restore(sess, prefix)
            for _ in range(steps):
                sess.run(train_op)
            return {v.op.name: sess.run(v) for v in tf1.global_variables()}


def _by_tf_name(tf, tmp_path, state, opt):
    """``state`` by TensorFlow name, as funcgrad saves it."""
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "fg" / "model.ckpt"), state, opt)
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _assert_same(got, want):
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=RTOL, atol=ATOL, err_msg=name)


def _fg_run(state, train_op, steps):
    step = jax.jit(lambda s: train_op(_loss, s), donate_argnums=0)
    states = []
    for _ in range(steps):
        state = step(state)
        states.append(jax.tree.map(jnp.copy, state))  # the donated one is gone next step
    return states


@pytest.mark.parametrize("case", list(CASES))
def test_create_optimizer_six_steps(tf, tmp_path, tmp_path_factory, case) -> None:
    trajectory, _ = _tf_run(tf, tmp_path_factory, case)
    opt, train_op = create_optimizer(*BERT_ARGS, **CASES[case])
    states = _fg_run(opt.init(_params()), train_op, STEPS)
    assert "embeddings/word_embeddings/adam_m" in trajectory[-1]
    for state, want in zip(states, trajectory, strict=True):
        _assert_same(_by_tf_name(tf, tmp_path, state, opt), want)
    table = trajectory[-1]["embeddings/word_embeddings/adam_m"]
    assert np.all(table[[0, 2, 5]] == 0) and np.all(table[[1, 3, 4]] != 0)


@pytest.mark.parametrize("case", list(CASES))
def test_resume_from_a_tensorflow_checkpoint_and_the_other_way(
    tf, tmp_path, tmp_path_factory, case
) -> None:
    trajectory, tf_prefix = _tf_run(tf, tmp_path_factory, case)
    opt, train_op = create_optimizer(*BERT_ARGS, **CASES[case])
    template = opt.init(jax.tree.map(jnp.zeros_like, _params()))
    restored = fg.train.restore_tf_checkpoint(tf_prefix, template, opt)
    assert int(restored.global_step) == 3
    resumed = _fg_run(restored, train_op, 3)[-1]
    _assert_same(_by_tf_name(tf, tmp_path, resumed, opt), trajectory[-1])

    own = _fg_run(opt.init(_params()), train_op, 3)[-1]
    fg_prefix = fg.train.save_tf_checkpoint(str(tmp_path / "own" / "model.ckpt-3"), own, opt)
    _assert_same(_tf_continue(tf, fg_prefix, 3, case), trajectory[-1])


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
