"""tf.contrib.opt's ``MovingAverageOptimizer`` against its own source run in TF 2.21.

``MovingAverageOptimizer`` is transcribed below from TensorFlow r1.15's
``tensorflow/contrib/opt/python/training/moving_average_optimizer.py`` (read at
uve/tensorflow commit e08079463bf43e5963acc41da1f57e95603f8080, a copy of
tensorflow/tensorflow from August 2019, where r1.15 branched; TF 2.21 has no
``tf.contrib``), over TF 2.21's ``tf.compat.v1.train`` optimizers and the transcribed
``LARSOptimizer`` of ``test_tf1_projects_parity``.  One deviation, for
``sequential_update=False``: the original leaves the average and the update unordered
(measured in TF 2.21 with ``GradientDescentOptimizer``: one variable of four read its
updated value in 17 of 100 steps, and the updated ``global_step`` was read in 12 of 75),
so here the average runs first, under a control dependency — what funcgrad always
computes.

The model is the TF1 projects' shared one (a dense layer, a bias, a ``LayerNorm/gamma``,
an embedding table read by a gather with repeating ids).  Every variable, slot and
``<var>/ExponentialMovingAverage`` is compared by its TF name after each of 6 steps; the
``swapping_saver``'s checkpoint at step 3 is compared with ``opt.swapped(state)``; a run
resumed from a TF ``Saver`` checkpoint at step 3 (and TensorFlow resumed from funcgrad's)
continues both trajectories.  Inside ``tf.contrib.layers.optimize_loss`` (transcribed in
``test_optimize_loss_parity``) the averages are made in its variable scope, as the slots:
``OptimizeLoss/<var>/ExponentialMovingAverage``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from tests.parity.test_optimize_loss_parity import _contrib as _optimize_loss_module
from tests.parity.test_tf1_projects_parity import _contrib
from tests.parity.tf1_projects_model import ATOL
from tests.parity.tf1_projects_model import RTOL
from tests.parity.tf1_projects_model import STEPS
from tests.parity.tf1_projects_model import assert_same
from tests.parity.tf1_projects_model import by_tf_name
from tests.parity.tf1_projects_model import fg_run
from tests.parity.tf1_projects_model import params
from tests.parity.tf1_projects_model import tf_loss


def _moving_average_optimizer(tf):
    """moving_average_optimizer.py (r1.15), transcribed; ``tf.*`` as TF 2.21 spells it."""
    tf1 = tf.compat.v1
    from tensorflow.python.training.saving import saveable_object_util

    class MovingAverageOptimizer(tf1.train.Optimizer):
        def __init__(self, opt, average_decay=0.9999, num_updates=None, sequential_update=True):
            self._optimizer = opt
            self._ema = tf1.train.ExponentialMovingAverage(average_decay, num_updates=num_updates)
            self._swapped_variable_name_map = None
            self._sequential_update = sequential_update

        def compute_gradients(self, *args, **kwargs):
            return self._optimizer.compute_gradients(*args, **kwargs)

        def apply_gradients(self, grads_and_vars, global_step=None, name=None):
            var_list = [x[1] for x in grads_and_vars if x[0] is not None]
            self._swapped_variable_name_map = {}
            if self._sequential_update:
                train_op = self._optimizer.apply_gradients(
                    grads_and_vars, global_step=global_step, name=name
                )
                with tf.control_dependencies([train_op]):
                    ma_op = self._ema.apply(var_list)
            else:  # the deviation: the average first, then the update (see above)
                ma_op = self._ema.apply(var_list)
                with tf.control_dependencies([ma_op]):
                    train_op = self._optimizer.apply_gradients(
                        grads_and_vars, global_step=global_step, name=name
                    )

            for v in var_list:
                v_avg = self._ema.average(v)
                self._swapped_variable_name_map[v.op.name] = v_avg.op.name
                self._swapped_variable_name_map[v_avg.op.name] = v.op.name
            return tf.group(train_op, ma_op, name="train_with_avg")

        def _find_swapped_variable(self, v_name_to_tensor, v_name, tensor):
            swapped_v_name = self._swapped_variable_name_map.get(v_name, None)
            if swapped_v_name is None:
                return tensor
            if swapped_v_name in v_name_to_tensor:
                return v_name_to_tensor[swapped_v_name]
            raise ValueError(
                f"Variable to swap {swapped_v_name} is not part of variables to save. "
                "This breaks MovingAverageOptimizer."
            )

        def swapping_saver(self, var_list=None, name="swapping_saver", **kwargs):
            if self._swapped_variable_name_map is None:
                raise RuntimeError(
                    "Must call apply_gradients or minimize before creating the swapping_saver"
                )
            if var_list is None:
                var_list = tf1.global_variables()
            if not isinstance(var_list, dict):
                var_list = saveable_object_util.op_list_to_dict(var_list)
            v_name_to_tensor = {}
            for k, tensor_or_list in var_list.items():
                if isinstance(tensor_or_list, list):
                    for tensor in tensor_or_list:
                        v_name_to_tensor[tensor.op.name] = tensor
                else:
                    v_name_to_tensor[k] = tensor_or_list
            swapped_var_list = {}
            for k, tensor_or_list in var_list.items():
                if isinstance(tensor_or_list, list):
                    swapped_var_list[k] = [
                        self._find_swapped_variable(v_name_to_tensor, t.op.name, t)
                        for t in tensor_or_list
                    ]
                else:
                    swapped_var_list[k] = self._find_swapped_variable(
                        v_name_to_tensor, k, tensor_or_list
                    )
            return tf1.train.Saver(swapped_var_list, name=name, **kwargs)

    return MovingAverageOptimizer


#: The wrapped optimizer: TF 2.21's (or the transcribed LARS) and funcgrad's, by name.
WRAPPED = {
    "GradientDescent": ((0.5,), {}),
    "Momentum": ((0.1,), {"momentum": 0.9}),
    "Adam": ((0.05,), {}),
    "LARS": ((0.5,), {"eeta": 0.01}),
}
#: Each case: the wrapped optimizer, average_decay, num_updates=global_step or not,
#: sequential_update.
CASES = {
    "gradient_descent": ("GradientDescent", 0.9, False, True),
    "momentum_global_step": ("Momentum", 0.99, True, True),
    "adam": ("Adam", 0.5, False, True),
    "adam_unordered": ("Adam", 0.9, False, False),
    "adam_global_step_unordered": ("Adam", 0.999, True, False),
    "lars_global_step": ("LARS", 0.99, True, True),
    "lars_global_step_unordered": ("LARS", 0.9, True, False),
}
_TF_RUNS: dict = {}


def _tf_train_op(tf, case):
    """The case's TF1 ``minimize(loss, global_step)`` in the current graph, and its
    optimizer."""
    tf1 = tf.compat.v1
    wrapped, decay, num_updates, sequential = CASES[case]
    args, kwargs = WRAPPED[wrapped]
    loss = tf_loss(tf)
    global_step = tf1.train.get_or_create_global_step()
    if wrapped == "LARS":
        inner = _contrib(tf)["LARSOptimizer"](*args, **kwargs)
    else:
        inner = getattr(tf1.train, f"{wrapped}Optimizer")(*args, **kwargs)
    opt = _moving_average_optimizer(tf)(
        inner, decay, global_step if num_updates else None, sequential
    )
    return opt.minimize(loss, global_step=global_step), opt


def _fg_opt(case):
    wrapped, decay, num_updates, sequential = CASES[case]
    args, kwargs = WRAPPED[wrapped]
    inner = getattr(fg.train, f"{wrapped}Optimizer")(*args, **kwargs)
    return fg.train.MovingAverageOptimizer(inner, decay, num_updates or None, sequential)


def _train_op(opt):
    return lambda loss_fn, state: opt.minimize(loss_fn, state)[0]


def _tf_run(tf, tmp_path_factory, case):
    """TensorFlow's 6 steps of ``case``: every variable by name after each step, and at
    step 3 a ``Saver`` checkpoint and a ``swapping_saver`` one (run once per case)."""
    if case not in _TF_RUNS:
        tf1 = tf.compat.v1
        directory = tmp_path_factory.mktemp(case)
        prefixes = str(directory / "model.ckpt-3"), str(directory / "swapped.ckpt-3")
        with tf.Graph().as_default():
            train_op, opt = _tf_train_op(tf, case)
            saver, swapping = tf1.train.Saver(), opt.swapping_saver()
            with tf1.Session() as sess:
                sess.run(tf1.global_variables_initializer())
                trajectory = []
                for step in range(STEPS):
                    sess.run(train_op)
                    trajectory.append({v.op.name: sess.run(v) for v in tf1.global_variables()})
                    if step == 2:
                        saver.save(sess, prefixes[0])
                        swapping.save(sess, prefixes[1])
        _TF_RUNS[case] = trajectory, prefixes
    return _TF_RUNS[case]


def _tf_continue(tf, prefix, steps, case):
    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        train_op, _ = _tf_train_op(tf, case)
        with tf1.Session() as sess:
            tf1.train.Saver().restore(sess, prefix)
            for _ in range(steps):
                sess.run(train_op)
            return {v.op.name: sess.run(v) for v in tf1.global_variables()}


@pytest.mark.parametrize("case", CASES)
def test_six_steps_and_the_swapping_saver(tf, tmp_path, tmp_path_factory, case) -> None:
    trajectory, (_, swapped_prefix) = _tf_run(tf, tmp_path_factory, case)
    opt = _fg_opt(case)
    states = fg_run(opt.init(params()), _train_op(opt), STEPS)
    for state, want in zip(states, trajectory, strict=True):
        got = by_tf_name(tf, tmp_path, state, opt)
        assert {n for n in got if n.endswith("/ExponentialMovingAverage")} == {
            f"{n}/ExponentialMovingAverage" for n in fg.train.variable_names(state.params)
        }
        assert_same(got, want)
    kernel = trajectory[-1]["dense/kernel"]  # the averages lag the weights they follow
    assert not np.allclose(trajectory[-1]["dense/kernel/ExponentialMovingAverage"], kernel)
    swapped = opt.swapped(states[2])
    fg.testing.compare_tf_checkpoint(swapped_prefix, swapped, opt, rtol=RTOL, atol=ATOL)
    template = opt.init(jax.tree.map(jnp.zeros_like, params()))
    read_back = opt.swapped(fg.train.restore_tf_checkpoint(swapped_prefix, template, opt))
    assert_same(by_tf_name(tf, tmp_path, read_back, opt), trajectory[2])


@pytest.mark.parametrize("case", CASES)
def test_resume_from_a_tensorflow_checkpoint_and_the_other_way(
    tf, tmp_path, tmp_path_factory, case
) -> None:
    trajectory, (tf_prefix, _) = _tf_run(tf, tmp_path_factory, case)
    opt = _fg_opt(case)
    template = opt.init(jax.tree.map(jnp.zeros_like, params()))
    restored = fg.train.restore_tf_checkpoint(tf_prefix, template, opt)
    assert int(restored.global_step) == 3
    resumed = fg_run(restored, _train_op(opt), 3)[-1]
    assert_same(by_tf_name(tf, tmp_path, resumed, opt), trajectory[-1])

    own = fg_run(opt.init(params()), _train_op(opt), 3)[-1]
    fg_prefix = fg.train.save_tf_checkpoint(str(tmp_path / "own" / "model.ckpt-3"), own, opt)
    assert_same(_tf_continue(tf, fg_prefix, 3, case), trajectory[-1])


def test_inside_optimize_loss_the_averages_are_in_its_scope(tf, tmp_path) -> None:
    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        loss = tf_loss(tf)
        global_step = tf1.train.get_or_create_global_step()
        inner = tf1.train.MomentumOptimizer(0.1, momentum=0.9)
        averaged = _moving_average_optimizer(tf)(inner, 0.9, global_step)
        optimize_loss = _optimize_loss_module(tf, tf1.random.truncated_normal)
        train_op = optimize_loss(loss, global_step, learning_rate=None, optimizer=averaged)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            trajectory = []
            for _ in range(3):
                sess.run(train_op)
                trajectory.append({v.op.name: sess.run(v) for v in tf1.global_variables()})
    assert "OptimizeLoss/dense/kernel/ExponentialMovingAverage" in trajectory[-1]
    opt = fg.train.optimize_loss(
        None, fg.train.MovingAverageOptimizer(fg.train.MomentumOptimizer(0.1, 0.9), 0.9, True)
    )
    states = fg_run(opt.init(params()), _train_op(opt), 3)
    for state, want in zip(states, trajectory, strict=True):
        assert_same(by_tf_name(tf, tmp_path, state, opt), want)
