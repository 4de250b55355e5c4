"""``decay_var_list`` through the wrappers and a group, against TensorFlow 2.21.

tf.contrib.opt's ``AdamWOptimizer`` / ``MomentumWOptimizer`` (transcribed in
``test_tf1_projects_parity``) take ``decay_var_list`` at ``apply_gradients``; TensorFlow's
wrappers call ``apply_gradients(grads_and_vars, global_step, name)`` without it, so a TF1
program that wraps one fixes the list in a subclass (below, ``_listed``: the one
adaptation).  funcgrad's ``decay_var_list`` is the optimizer's own argument, and a call's
keyword travels through a wrapper to it: both are checked against TensorFlow's run of
the same composition, every variable, slot and average by its TF name after each of 6
steps.  As in ``test_tf1_projects_parity``, TensorFlow's ``apply_gradients`` runs after
every gradient (a control dependency): the decay reads no gradient, so TensorFlow may
otherwise run it before the forward pass reads the variable.

The compositions: ``MixedPrecisionLossScaleOptimizer`` (``tf.compat.v1.mixed_precision``),
tf.contrib.opt's ``MovingAverageOptimizer`` (transcribed in
``test_moving_average_optimizer_parity``), ``tf.contrib.layers.optimize_loss``
(transcribed in ``test_optimize_loss_parity``) and two optimizers over one graph's
variables, an ``OptimizerGroup`` here.
"""

from __future__ import annotations

import pytest

import funcgrad as fg
from tests.parity.test_moving_average_optimizer_parity import _moving_average_optimizer
from tests.parity.test_optimize_loss_parity import _contrib as _optimize_loss_module
from tests.parity.test_tf1_projects_parity import DECAYED
from tests.parity.test_tf1_projects_parity import _weight_decay_optimizers
from tests.parity.tf1_projects_model import STEPS
from tests.parity.tf1_projects_model import assert_same
from tests.parity.tf1_projects_model import by_tf_name
from tests.parity.tf1_projects_model import fg_run
from tests.parity.tf1_projects_model import params
from tests.parity.tf1_projects_model import tf_run

_ADAMW = {"weight_decay": 0.1, "learning_rate": 0.02, "beta1": 0.5, "beta2": 0.9}
_MOMENTUMW = {"weight_decay": 0.05, "learning_rate": 0.1, "momentum": 0.5}


def _listed(tf, name, **kwargs):
    """TensorFlow's ``name`` (AdamW or MomentumW) that decays the variables ``DECAYED``
    names whoever calls its ``apply_gradients`` — the adaptation a TF1 program writes to
    wrap one — after every gradient."""
    base = _weight_decay_optimizers(tf)[name]

    class Listed(base):
        def apply_gradients(self, grads_and_vars, global_step=None, name=None, **_):
            grads_and_vars = list(grads_and_vars)
            by_name = {v.op.name: v for v in tf.compat.v1.trainable_variables()}
            with tf.control_dependencies([g for g, _ in grads_and_vars if g is not None]):
                return super().apply_gradients(
                    grads_and_vars, global_step, name, decay_var_list=[by_name[n] for n in DECAYED]
                )

    return Listed(**kwargs)


def _tf_minimize(tf, case):
    """TensorFlow's ``minimize(loss, global_step)`` of ``case``."""
    tf1 = tf.compat.v1

    def minimize(loss, global_step):
        if case == "loss_scale":
            opt = tf1.mixed_precision.MixedPrecisionLossScaleOptimizer(
                _listed(tf, "AdamWOptimizer", **_ADAMW), "dynamic"
            )
            return opt.minimize(loss, global_step)
        if case == "moving_average":
            inner = _listed(tf, "MomentumWOptimizer", **_MOMENTUMW)
            return _moving_average_optimizer(tf)(inner, 0.9).minimize(loss, global_step)
        if case == "optimize_loss":
            optimize_loss = _optimize_loss_module(tf, None)
            opt = _listed(tf, "AdamWOptimizer", **_ADAMW)
            return optimize_loss(loss, global_step, None, opt, clip_gradients=1.0)
        by_name = {v.op.name: v for v in tf1.trainable_variables()}
        table = [by_name["embeddings/word_embeddings"]]
        rest = [v for n, v in by_name.items() if n != "embeddings/word_embeddings"]
        adamw = _listed(tf, "AdamWOptimizer", **_ADAMW)
        sgd = tf1.train.GradientDescentOptimizer(0.1)
        return tf.group(
            adamw.apply_gradients(adamw.compute_gradients(loss, rest), global_step),
            sgd.minimize(loss, var_list=table),
        )

    return minimize


def _fg(case, at_call):
    """funcgrad's ``(optimizer, train_op)`` of ``case``: ``decay_var_list`` given to the
    optimizer inside, or (``at_call``) to the call of the outermost."""
    option = {} if at_call else {"decay_var_list": DECAYED}
    call = {"decay_var_list": DECAYED} if at_call else {}
    if case == "loss_scale":
        inner = fg.train.AdamWOptimizer(**_ADAMW, **option)
        opt = fg.train.LossScaleOptimizer(inner)
    elif case == "moving_average":
        inner = fg.train.MomentumWOptimizer(**_MOMENTUMW, **option)
        opt = fg.train.MovingAverageOptimizer(inner, 0.9)
    elif case == "optimize_loss":
        inner = fg.train.AdamWOptimizer(**_ADAMW, **option)
        opt = fg.train.optimize_loss(None, inner, clip_gradients=1.0)
    else:
        table = ["embeddings/word_embeddings"]
        group = fg.train.OptimizerGroup(
            adamw=(
                fg.train.AdamWOptimizer(**_ADAMW, **option),
                lambda name, _: name not in table,
            ),
            sgd=(fg.train.GradientDescentOptimizer(0.1), table),
        )
        return group, lambda loss_fn, state: group.minimize(loss_fn, state)[0]
    return opt, lambda loss_fn, state: opt.minimize(loss_fn, state, **call)[0]


@pytest.mark.parametrize(
    ("case", "at_call"),
    [
        *[
            pytest.param(case, at_call, id=f"{case}-{'call' if at_call else 'argument'}")
            for case in ("loss_scale", "moving_average", "optimize_loss")
            for at_call in (False, True)
        ],
        pytest.param("group", False, id="group-argument"),  # its one step refuses a call's
    ],
)
def test_decay_var_list_through_the_composition_is_tensorflows(tf, tmp_path, case, at_call):
    want = tf_run(tf, _tf_minimize(tf, case), STEPS)
    opt, train_op = _fg(case, at_call)
    states = fg_run(opt.init(params()), train_op, STEPS)
    for state, expected in zip(states, want, strict=True):
        assert_same(by_tf_name(tf, tmp_path, state, opt), expected)
