"""SimCLR's own LARS, as a user writes it on ``fg.train.TF1Optimizer``, against its original.

funcgrad's side is ``examples/simclr_lars.py``: ``LARSOptimizer`` and
``learning_rate_schedule`` ported line for line.  TensorFlow's side is SimCLR's source,
transcribed below from google-research/simclr at commit
383d4143fd8cf7879ae10f1046a9baeb753ff438: ``lars_optimizer.py`` (the TF1 version at the
repository's root; it imports ``tensorflow.compat.v1 as tf``, as here) and
``model_util.py``'s ``learning_rate_schedule`` (its ``FLAGS`` as arguments), in
``model.py``'s ``optimizer.minimize(loss, global_step=tf.train.get_or_create_global_step())``.
One deviation: the ``global_step`` increment of ``apply_gradients`` runs after the other
assignments (a control dependency), where the original groups them unordered — the
learning rate reads ``global_step``, so whether it reads the old or the new step would be
up to TensorFlow's scheduler (run without the dependency, the three cases with SimCLR's
schedule fail here); funcgrad reads the old one, always.

On the model the TF1 projects' parity tests share (tests/parity/tf1_projects_model.py),
every variable and its ``<var>/Momentum`` are compared by their TF names after each of 6
steps, and a run resumed from a TF ``Saver`` checkpoint at step 3 (and TensorFlow resumed
from funcgrad's) continues both trajectories.  The original computes on dense tensors
(``grad += weight_decay * param`` and ``tf.norm`` make the embedding's ``IndexedSlices``
dense), as the port does without an ``_apply_sparse``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests import example_scripts
from tests.parity.tf1_projects_model import E0
from tests.parity.tf1_projects_model import STEPS
from tests.parity.tf1_projects_model import assert_resumes_both_ways
from tests.parity.tf1_projects_model import assert_same
from tests.parity.tf1_projects_model import by_tf_name
from tests.parity.tf1_projects_model import fg_run
from tests.parity.tf1_projects_model import params
from tests.parity.tf1_projects_model import tf_run

simclr_lars = example_scripts.load("simclr_lars")


def _simclr(tf2):
    """SimCLR's ``LARSOptimizer`` and ``learning_rate_schedule``, transcribed (see the
    module docstring)."""
    tf = tf2.compat.v1

    EETA_DEFAULT = 0.001

    class LARSOptimizer(tf.train.Optimizer):
        """Layer-wise Adaptive Rate Scaling for large batch training."""

        def __init__(
            self,
            learning_rate,
            momentum=0.9,
            use_nesterov=False,
            weight_decay=0.0,
            exclude_from_weight_decay=None,
            exclude_from_layer_adaptation=None,
            classic_momentum=True,
            eeta=EETA_DEFAULT,
            name="LARSOptimizer",
        ):
            super().__init__(False, name)

            self.learning_rate = learning_rate
            self.momentum = momentum
            self.weight_decay = weight_decay
            self.use_nesterov = use_nesterov
            self.classic_momentum = classic_momentum
            self.eeta = eeta
            self.exclude_from_weight_decay = exclude_from_weight_decay
            if exclude_from_layer_adaptation:
                self.exclude_from_layer_adaptation = exclude_from_layer_adaptation
            else:
                self.exclude_from_layer_adaptation = exclude_from_weight_decay

        def apply_gradients(self, grads_and_vars, global_step=None, name=None):
            assignments = []
            for grad, param in grads_and_vars:
                if grad is None or param is None:
                    continue

                param_name = param.op.name

                v = tf.get_variable(
                    name=param_name + "/Momentum",
                    shape=param.shape.as_list(),
                    dtype=tf.float32,
                    trainable=False,
                    initializer=tf.zeros_initializer(),
                )

                if self._use_weight_decay(param_name):
                    grad += self.weight_decay * param

                if self.classic_momentum:
                    trust_ratio = 1.0
                    if self._do_layer_adaptation(param_name):
                        w_norm = tf.norm(param, ord=2)
                        g_norm = tf.norm(grad, ord=2)
                        trust_ratio = tf.where(
                            tf.greater(w_norm, 0),
                            tf.where(tf.greater(g_norm, 0), (self.eeta * w_norm / g_norm), 1.0),
                            1.0,
                        )
                    scaled_lr = self.learning_rate * trust_ratio

                    next_v = tf.multiply(self.momentum, v) + scaled_lr * grad
                    if self.use_nesterov:
                        update = tf.multiply(self.momentum, next_v) + scaled_lr * grad
                    else:
                        update = next_v
                    next_param = param - update
                else:
                    next_v = tf.multiply(self.momentum, v) + grad
                    if self.use_nesterov:
                        update = tf.multiply(self.momentum, next_v) + grad
                    else:
                        update = next_v

                    trust_ratio = 1.0
                    if self._do_layer_adaptation(param_name):
                        w_norm = tf.norm(param, ord=2)
                        v_norm = tf.norm(update, ord=2)
                        trust_ratio = tf.where(
                            tf.greater(w_norm, 0),
                            tf.where(tf.greater(v_norm, 0), (self.eeta * w_norm / v_norm), 1.0),
                            1.0,
                        )
                    scaled_lr = trust_ratio * self.learning_rate
                    next_param = param - scaled_lr * update

                assignments.extend([param.assign(next_param), v.assign(next_v)])

            if global_step is not None:
                with tf.control_dependencies(assignments):  # the one deviation: ordered
                    new_global_step = global_step + 1
                assignments.append(global_step.assign(new_global_step))
            return tf.group(*assignments, name=name)

        def _use_weight_decay(self, param_name):
            if not self.weight_decay:
                return False
            if self.exclude_from_weight_decay:
                for r in self.exclude_from_weight_decay:
                    if re.search(r, param_name) is not None:
                        return False
            return True

        def _do_layer_adaptation(self, param_name):
            if self.exclude_from_layer_adaptation:
                for r in self.exclude_from_layer_adaptation:
                    if re.search(r, param_name) is not None:
                        return False
            return True

    def learning_rate_schedule(base_learning_rate, train_batch_size, warmup_steps, total_steps):
        global_step = tf.train.get_or_create_global_step()
        scaled_lr = base_learning_rate * train_batch_size / 256.0  # learning_rate_scaling linear
        learning_rate = (
            tf.to_float(global_step) / int(warmup_steps) * scaled_lr if warmup_steps else scaled_lr
        )
        learning_rate = tf.where(
            global_step < warmup_steps,
            learning_rate,
            tf.train.cosine_decay(
                scaled_lr, global_step - warmup_steps, total_steps - warmup_steps
            ),
        )
        return learning_rate

    return LARSOptimizer, learning_rate_schedule


#: SimCLR's rate (base rate, batch size, warmup steps, total steps): warmup for two steps
#: (the first step's rate is 0), then a cosine decay.
SCHEDULE = (0.5, 512, 2, 8)
#: LARS's arguments; ``"schedule"`` as the learning rate stands for SimCLR's.
CASES = {
    "simclr_get_optimizer": {
        "learning_rate": "schedule",
        "momentum": 0.9,
        "weight_decay": 0.05,
        "exclude_from_weight_decay": ["batch_normalization", "bias", "head_supervised"],
    },
    "classic_nesterov_eeta": {
        "learning_rate": "schedule",
        "use_nesterov": True,
        "weight_decay": 0.02,
        "exclude_from_weight_decay": ["bias"],
        "exclude_from_layer_adaptation": ["LayerNorm"],
        "eeta": 0.1,
    },
    "popular": {
        "learning_rate": 0.5,
        "momentum": 0.8,
        "weight_decay": 0.02,
        "exclude_from_weight_decay": ["LayerNorm", "bias"],
        "classic_momentum": False,
        "eeta": 0.05,
    },
    "popular_nesterov_no_decay": {
        "learning_rate": "schedule",
        "use_nesterov": True,
        "exclude_from_layer_adaptation": ["dense/bias", "^embeddings/"],
        "classic_momentum": False,
        "eeta": 0.1,
    },
}
#: Whether each case decays the embedding table: then its rows no id reads move too.
DECAYS_THE_TABLE = {"simclr_get_optimizer": True, "classic_nesterov_eeta": True, "popular": True}


def _minimize(tf, case):
    """``minimize(loss, global_step)``: SimCLR's train op of ``case`` (see ``tf_run``)."""

    def minimize(loss, global_step):
        lars, learning_rate_schedule = _simclr(tf)
        kwargs = dict(CASES[case])
        if kwargs["learning_rate"] == "schedule":
            kwargs["learning_rate"] = learning_rate_schedule(*SCHEDULE)
        return lars(**kwargs).minimize(loss, global_step=global_step)

    return minimize


def _fg_optimizer(case):
    kwargs = dict(CASES[case])
    if kwargs["learning_rate"] == "schedule":
        kwargs["learning_rate"] = simclr_lars.learning_rate_schedule(*SCHEDULE)
    return simclr_lars.LARSOptimizer(**kwargs)


def _train_op(opt):
    return lambda loss, state: opt.minimize(loss, state)[0]


@pytest.fixture(scope="module", params=list(CASES))
def case_tf(request, tf, tmp_path_factory):
    """``(case, TensorFlow's trajectory, its Saver checkpoint at step 3)``."""
    case = request.param
    prefix = str(tmp_path_factory.mktemp(case) / "model.ckpt-3")
    return case, tf_run(tf, _minimize(tf, case), STEPS, save=prefix), prefix


def test_six_steps_every_variable_and_momentum_by_tf_name(tf, tmp_path, case_tf) -> None:
    case, trajectory, _ = case_tf
    opt = _fg_optimizer(case)
    states = fg_run(opt.init(params()), _train_op(opt), STEPS)
    for state, want in zip(states, trajectory, strict=True):
        assert_same(by_tf_name(tf, tmp_path, state, opt), want)
    assert "embeddings/word_embeddings/Momentum" in trajectory[0]
    changed = np.any(trajectory[-1]["embeddings/word_embeddings"] != E0, axis=1)
    unread = DECAYS_THE_TABLE.get(case, False)  # rows 0, 2, 5: moved by the decay alone
    assert changed.tolist() == [unread, True, unread, True, True, unread]


def test_resume_from_a_tensorflow_checkpoint_and_the_other_way(tf, tmp_path, case_tf) -> None:
    case, trajectory, tf_prefix = case_tf
    opt = _fg_optimizer(case)
    run = (trajectory, tf_prefix)
    assert_resumes_both_ways(tf, tmp_path, opt, _train_op(opt), _minimize(tf, case), run)


def test_learning_rate_schedule(tf) -> None:
    tf1 = tf.compat.v1
    _, learning_rate_schedule = _simclr(tf)
    ours = simclr_lars.learning_rate_schedule(*SCHEDULE)
    for step in range(10):
        with tf.Graph().as_default():
            rate = learning_rate_schedule(*SCHEDULE)
            with tf1.Session() as sess:
                sess.run(tf1.train.get_or_create_global_step().assign(step))
                want = sess.run(rate)
        np.testing.assert_allclose(ours(np.int32(step)), want, rtol=1e-6, err_msg=str(step))
