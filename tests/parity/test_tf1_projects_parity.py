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

tf.contrib.opt (r1.15): ``AdaMaxOptimizer``, ``NadamOptimizer``, ``LARSOptimizer``,
``AddSignOptimizer``,
``PowerSignOptimizer`` and the three sign decays, transcribed (files and
commits at their transcription) in a plain ``minimize(loss, global_step)``.
``AdamWOptimizer`` and ``MomentumWOptimizer`` run ``compute_gradients`` then
``apply_gradients(..., decay_var_list)`` (``minimize`` drops its ``decay_var_list``:
``test_tensorflow_minimize_drops_decay_var_list``), with one deviation: ``apply_gradients``
runs after every gradient (a control dependency).  In the original, the decay
``var.assign_sub(weight_decay * var)`` takes no gradient as input, so TensorFlow may run
it before the forward or backward pass reads that variable — the gradients of the other
variables then see the decayed one, or not, as the scheduler goes (the first test run
without the dependency was off by 4e-4 in the table's first moment); funcgrad computes
every gradient from the variables before the step, always.

The model has a dense layer, a bias, a ``LayerNorm/gamma`` and an embedding table read by
a gather (ids repeat, rows 0 and 5 are never read, rows 2 and 4 every other step).  Every
variable and slot is compared by its TF name after each of 6 steps, and a run resumed from
a TF ``Saver`` checkpoint at step 3 (and TensorFlow resumed from funcgrad's) continues
both trajectories.
"""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from tests.parity.tf1_projects_model import B0
from tests.parity.tf1_projects_model import E0
from tests.parity.tf1_projects_model import G0
from tests.parity.tf1_projects_model import K0
from tests.parity.tf1_projects_model import STEPS
from tests.parity.tf1_projects_model import Y
from tests.parity.tf1_projects_model import assert_same as _assert_same
from tests.parity.tf1_projects_model import by_tf_name as _by_tf_name
from tests.parity.tf1_projects_model import params as _params

#: The ids of each step, by step parity: ids repeat, rows 0 and 5 are never read, rows 2
#: and 4 every other step (where a sparse rule and a dense one part).
IDS = np.array([[1, 3, 1, 4], [3, 2, 3, 3]], np.int32)


def _loss(params, ids):
    x = params["embeddings"]["word_embeddings"][ids]
    h = jnp.tanh(x @ params["dense"]["kernel"] + params["dense"]["bias"][None, :])
    return jnp.mean((params["LayerNorm"]["gamma"][None, :] * h - Y) ** 2)


def _tf_loss(tf):
    """The loss, and the placeholder of the ids it reads."""
    tf1 = tf.compat.v1
    ids = tf1.placeholder(tf.int32, [4], name="ids")
    with tf1.variable_scope("embeddings"):
        table = tf1.get_variable("word_embeddings", initializer=E0)
    with tf1.variable_scope("dense"):
        kernel = tf1.get_variable("kernel", initializer=K0)
        bias = tf1.get_variable("bias", initializer=B0)
    with tf1.variable_scope("LayerNorm"):
        gamma = tf1.get_variable("gamma", initializer=G0)
    x = tf.gather(table, ids)
    h = tf.tanh(tf.matmul(x, kernel) + bias)
    return tf.reduce_mean((gamma * h - Y) ** 2), ids


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


# --- tf.contrib.opt (r1.15), transcribed: tensorflow/contrib/opt/python/training/ ----------
# adamax.py at commit 00db8b5b4efff8a5925278d75f3a850d1625f75a and nadam_optimizer.py at
# commit 05712d4690f39128f69d311e28b8e7181699394b; the dense rules call the kernels TF 2.21
# still has (tf.raw_ops.ResourceApplyAdaMax, ResourceApplyAdam with use_nesterov).


def _contrib(tf):
    tf1 = tf.compat.v1

    class AdaMaxOptimizer(tf1.train.AdamOptimizer):
        def __init__(
            self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, name="AdaMax"
        ):
            super().__init__(learning_rate, beta1, beta2, epsilon, False, name)

        def _resource_apply_dense(self, grad, var):
            m = self.get_slot(var, "m")
            v = self.get_slot(var, "v")
            beta1_power, _ = self._get_beta_accumulators()
            return tf.raw_ops.ResourceApplyAdaMax(
                var=var.handle, m=m.handle, v=v.handle,
                beta1_power=tf.cast(beta1_power, grad.dtype.base_dtype),
                lr=tf.cast(self._lr_t, grad.dtype.base_dtype),
                beta1=tf.cast(self._beta1_t, grad.dtype.base_dtype),
                beta2=tf.cast(self._beta2_t, grad.dtype.base_dtype),
                epsilon=tf.cast(self._epsilon_t, grad.dtype.base_dtype), grad=grad,
            )  # fmt: skip

        def _apply_sparse_shared(self, grad, var, indices, scatter_add, scatter_update):
            beta1_power, _ = self._get_beta_accumulators()
            beta1_power = tf.cast(beta1_power, var.dtype.base_dtype)
            lr_t = tf.cast(self._lr_t, var.dtype.base_dtype)
            beta1_t = tf.cast(self._beta1_t, var.dtype.base_dtype)
            beta2_t = tf.cast(self._beta2_t, var.dtype.base_dtype)
            epsilon_t = tf.cast(self._epsilon_t, var.dtype.base_dtype)
            m = self.get_slot(var, "m")
            m_slice = tf.gather(m, indices)
            m_t_slice = m_slice * beta1_t + grad * (1 - beta1_t)
            with tf.control_dependencies([m_t_slice]):
                m_t = scatter_update(m, indices, m_t_slice)
            v = self.get_slot(var, "v")
            v_slice = tf.gather(v, indices)
            v_t_slice = tf.maximum(v_slice * beta2_t, tf.abs(grad))
            with tf.control_dependencies([v_t_slice]):
                v_t = scatter_update(v, indices, v_t_slice)
            var_slice = -lr_t / (1 - beta1_power) * (m_t_slice / (v_t_slice + epsilon_t))
            with tf.control_dependencies([var_slice]):
                var_update = scatter_add(var, indices, var_slice)
            return tf.group(*[var_update, m_t, v_t])

        def _resource_scatter_update(self, x, i, v):
            with tf.control_dependencies([tf.raw_ops.ResourceScatterUpdate(
                resource=x.handle, indices=i, updates=v
            )]):  # fmt: skip
                return x.value()

        def _resource_apply_sparse(self, grad, var, indices):
            return self._apply_sparse_shared(
                grad, var, indices, self._resource_scatter_add, self._resource_scatter_update
            )

    class NadamOptimizer(tf1.train.AdamOptimizer):
        def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08, name="Adam"):
            super().__init__(learning_rate, beta1, beta2, epsilon, False, name)

        def _resource_apply_dense(self, grad, var):
            m = self.get_slot(var, "m")
            v = self.get_slot(var, "v")
            beta1_power, beta2_power = self._get_beta_accumulators()
            return tf.raw_ops.ResourceApplyAdam(
                var=var.handle, m=m.handle, v=v.handle,
                beta1_power=tf.cast(beta1_power, grad.dtype.base_dtype),
                beta2_power=tf.cast(beta2_power, grad.dtype.base_dtype),
                lr=tf.cast(self._lr_t, grad.dtype.base_dtype),
                beta1=tf.cast(self._beta1_t, grad.dtype.base_dtype),
                beta2=tf.cast(self._beta2_t, grad.dtype.base_dtype),
                epsilon=tf.cast(self._epsilon_t, grad.dtype.base_dtype), grad=grad,
                use_nesterov=True,
            )  # fmt: skip

        def _apply_sparse_shared(self, grad, var, indices, scatter_add):
            beta1_power, beta2_power = self._get_beta_accumulators()
            beta1_power = tf.cast(beta1_power, var.dtype.base_dtype)
            beta2_power = tf.cast(beta2_power, var.dtype.base_dtype)
            lr_t = tf.cast(self._lr_t, var.dtype.base_dtype)
            beta1_t = tf.cast(self._beta1_t, var.dtype.base_dtype)
            beta2_t = tf.cast(self._beta2_t, var.dtype.base_dtype)
            epsilon_t = tf.cast(self._epsilon_t, var.dtype.base_dtype)
            lr = lr_t * tf.sqrt(1 - beta2_power) / (1 - beta1_power)
            m = self.get_slot(var, "m")
            m_scaled_g_values = grad * (1 - beta1_t)
            m_t = tf1.assign(m, m * beta1_t)
            with tf.control_dependencies([m_t]):
                m_t = scatter_add(m, indices, m_scaled_g_values)
                m_bar = m_scaled_g_values + beta1_t * tf.gather(m_t, indices)
            v = self.get_slot(var, "v")
            v_scaled_g_values = (grad * grad) * (1 - beta2_t)
            v_t = tf1.assign(v, v * beta2_t)
            with tf.control_dependencies([v_t]):
                v_t = scatter_add(v, indices, v_scaled_g_values)
            v_t_slice = tf.gather(v_t, indices)
            v_sqrt = tf.sqrt(v_t_slice)
            var_update = scatter_add(var, indices, -lr * m_bar / (v_sqrt + epsilon_t))
            return tf.group(*[var_update, m_bar, v_t])

        def _resource_apply_sparse(self, grad, var, indices):
            return self._apply_sparse_shared(grad, var, indices, self._resource_scatter_add)

    class _SignOptimizer(tf1.train.Optimizer):
        """AddSign's and PowerSign's lines: addsign.py / powersign.py at commit
        01fc22e646ae65d1c6c943911d1592df8f91f7a1, which are the same file but for alpha /
        base and the multiplier (adaptation: the shared lines are written once here, the
        multipliers are each original's)."""

        def __init__(self, learning_rate, beta, sign_decay_fn, name):
            super().__init__(False, name)
            self._lr = learning_rate
            self._beta = beta
            self._sign_decay_fn = sign_decay_fn

        def apply_gradients(self, grads_and_vars, global_step=None, name=None):
            if self._sign_decay_fn is not None:
                self._sign_decay_t = tf.convert_to_tensor(
                    self._sign_decay_fn(global_step), name="sign_decay"
                )
            return super().apply_gradients(grads_and_vars, global_step=global_step, name=name)

        def _create_slots(self, var_list):
            for v in var_list:
                self._zeros_slot(v, "m", self._name)

        def _prepare(self):
            self._lr_t = tf.convert_to_tensor(self._lr, name="learning_rate")
            self._beta_t = tf.convert_to_tensor(self._beta, name="beta")
            if self._sign_decay_fn is None:
                self._sign_decay_t = tf.convert_to_tensor(1.0, name="sign_decay")

        # The original's _apply_sparse, for the resource variables of TF 2.21 (the
        # original has no _resource_apply_sparse): `grad * (1 - beta_t)` made the
        # IndexedSlices dense there, as convert_to_tensor does here.
        def _resource_apply_sparse(self, grad, var, indices):
            lr_t = tf.cast(self._lr_t, var.dtype.base_dtype)
            beta_t = tf.cast(self._beta_t, var.dtype.base_dtype)
            m = self.get_slot(var, "m")
            dense = tf.convert_to_tensor(tf.IndexedSlices(grad, indices, tf.shape(var)))
            m_t = m.assign((m * beta_t) + (dense * (1 - beta_t)))
            sign_gm = tf.gather(tf.sign(m_t), indices) * tf.sign(grad)
            sign_decayed = tf.cast(self._sign_decay_t, var.dtype.base_dtype)
            multiplier_values = self._sparse_multiplier(sign_decayed, sign_gm, var)
            final_update = lr_t * multiplier_values * grad
            var_update = tf.raw_ops.ResourceScatterSub(
                resource=var.handle, indices=indices, updates=final_update
            )
            return tf.group(*[var_update, m_t])

    class AddSignOptimizer(_SignOptimizer):
        def __init__(
            self, learning_rate=0.1, alpha=1.0, beta=0.9, sign_decay_fn=None,
            name="AddSignOptimizer",
        ):  # fmt: skip
            super().__init__(learning_rate, beta, sign_decay_fn, name)
            self._alpha = alpha

        def _prepare(self):
            super()._prepare()
            self._alpha_t = tf.convert_to_tensor(self._alpha, name="alpha")

        def _resource_apply_dense(self, grad, var):
            m = self.get_slot(var, "m")
            return tf.raw_ops.ResourceApplyAddSign(
                var=var.handle, m=m.handle, lr=tf.cast(self._lr_t, var.dtype.base_dtype),
                alpha=tf.cast(self._alpha_t, var.dtype.base_dtype),
                sign_decay=tf.cast(self._sign_decay_t, var.dtype.base_dtype),
                beta=tf.cast(self._beta_t, var.dtype.base_dtype), grad=grad,
            )  # fmt: skip

        def _sparse_multiplier(self, sign_decayed, sign_gm, var):
            alpha_t = tf.cast(self._alpha_t, var.dtype.base_dtype)
            return alpha_t + sign_decayed * sign_gm

    class PowerSignOptimizer(_SignOptimizer):
        def __init__(
            self, learning_rate=0.1, base=math.e, beta=0.9, sign_decay_fn=None,
            name="PowerSignOptimizer",
        ):  # fmt: skip
            super().__init__(learning_rate, beta, sign_decay_fn, name)
            self._base = base

        def _prepare(self):
            super()._prepare()
            self._logbase_t = tf.convert_to_tensor(math.log(self._base), name="logbase")

        def _resource_apply_dense(self, grad, var):
            m = self.get_slot(var, "m")
            return tf.raw_ops.ResourceApplyPowerSign(
                var=var.handle, m=m.handle, lr=tf.cast(self._lr_t, var.dtype.base_dtype),
                logbase=tf.cast(self._logbase_t, var.dtype.base_dtype),
                sign_decay=tf.cast(self._sign_decay_t, var.dtype.base_dtype),
                beta=tf.cast(self._beta_t, var.dtype.base_dtype), grad=grad,
            )  # fmt: skip

        def _sparse_multiplier(self, sign_decayed, sign_gm, var):
            logbase_t = tf.cast(self._logbase_t, var.dtype.base_dtype)
            e_t = tf.cast(math.e, var.dtype.base_dtype)
            return tf.pow(e_t, logbase_t * sign_decayed * sign_gm)

    class LARSOptimizer(tf1.train.Optimizer):
        """lars_optimizer.py at commit 5c8077a6fd768817b70b344bdcddb7fef213245a."""

        def __init__(
            self, learning_rate, momentum=0.9, weight_decay=0.0001, eeta=0.001, epsilon=0.0,
            name="LARSOptimizer", skip_list=None, use_nesterov=False,
        ):  # fmt: skip
            super().__init__(use_locking=False, name=name)
            self._learning_rate = learning_rate
            self._momentum = momentum
            self._weight_decay = weight_decay
            self._eeta = eeta
            self._epsilon = epsilon
            self._name = name
            self._skip_list = skip_list
            self._use_nesterov = use_nesterov

        def _create_slots(self, var_list):
            for v in var_list:
                self._zeros_slot(v, "momentum", self._name)

        def compute_lr(self, grad, var):
            scaled_lr = self._learning_rate
            if self._skip_list is None or not any(v in var.name for v in self._skip_list):
                w_norm = tf.norm(var, ord=2)
                g_norm = tf.norm(grad, ord=2)
                trust_ratio = tf1.where(
                    tf.greater(w_norm, 0),
                    tf1.where(
                        tf.greater(g_norm, 0),
                        (
                            self._eeta
                            * w_norm
                            / (g_norm + self._weight_decay * w_norm + self._epsilon)
                        ),
                        1.0,
                    ),
                    1.0,
                )
                scaled_lr = self._learning_rate * trust_ratio
            return scaled_lr

        def _resource_apply_dense(self, grad, var):
            scaled_lr = self.compute_lr(grad, var)
            mom = self.get_slot(var, "momentum")
            return tf.raw_ops.ResourceApplyMomentum(
                var=var.handle, accum=mom.handle, lr=scaled_lr, grad=grad,
                momentum=tf.cast(self._momentum, grad.dtype), use_nesterov=self._use_nesterov,
            )  # fmt: skip

        def _resource_apply_sparse(self, grad, var, indices):
            mom = self.get_slot(var, "momentum")
            return tf.raw_ops.ResourceSparseApplyMomentum(
                var=var.handle, accum=mom.handle,
                lr=tf.cast(self._learning_rate_tensor, grad.dtype), grad=grad, indices=indices,
                momentum=tf.cast(self._momentum_tensor, grad.dtype),
                use_nesterov=self._use_nesterov,
            )  # fmt: skip

        def _prepare(self):
            self._learning_rate_tensor = tf.convert_to_tensor(
                self._learning_rate, name="learning_rate"
            )
            self._momentum_tensor = tf.convert_to_tensor(self._momentum, name="momentum")

    # sign_decay.py at commit 79422ab39b5fe0e1491abb8deabc7ecb5fd9f3a2.
    def get_linear_decay_fn(decay_steps):
        def linear_decay_fn(global_step):
            global_step = tf.minimum(global_step, decay_steps)
            remaining_steps = tf.cast(decay_steps, tf.int32) - tf.cast(global_step, tf.int32)
            decayed = tf.cast(remaining_steps, tf.float32) / tf.cast(decay_steps, tf.float32)
            return tf.maximum(0.0, decayed)

        return linear_decay_fn

    def get_cosine_decay_fn(decay_steps, num_periods=0.5, zero_after=None):
        def cosine_decay_fn(global_step):
            global_step = tf.minimum(global_step, decay_steps)
            completed_fraction = tf.cast(global_step, tf.float32) / tf.cast(decay_steps, tf.float32)
            fraction = 2.0 * num_periods * completed_fraction
            decayed = 0.5 * (1.0 + tf.cos(tf.constant(math.pi) * fraction))
            if zero_after is not None:
                decayed = tf1.where(tf.greater_equal(fraction, 2 * zero_after), 0.0, decayed)
            return decayed

        return cosine_decay_fn

    def get_restart_decay_fn(decay_steps, num_periods=1, zero_after=None):
        def restart_decay_fn(global_step):
            global_step = tf.minimum(global_step, decay_steps)
            num = tf.math.mod(num_periods * tf.cast(global_step, tf.float32), decay_steps)
            fraction = num / tf.cast(decay_steps, tf.float32)
            decayed = 0.5 * (1.0 + tf.cos(tf.constant(math.pi) * fraction))
            if zero_after is not None:
                tmp = tf.cast(num_periods * global_step, tf.float32) / tf.cast(
                    decay_steps, tf.float32
                )
                decayed = tf1.where(tf.greater_equal(tmp, zero_after), 0.0, decayed)
            return decayed

        return restart_decay_fn

    return {
        "AdaMaxOptimizer": AdaMaxOptimizer,
        "NadamOptimizer": NadamOptimizer,
        "AddSignOptimizer": AddSignOptimizer,
        "PowerSignOptimizer": PowerSignOptimizer,
        "LARSOptimizer": LARSOptimizer,
        "get_linear_decay_fn": get_linear_decay_fn,
        "get_cosine_decay_fn": get_cosine_decay_fn,
        "get_restart_decay_fn": get_restart_decay_fn,
    }


# --- tf.contrib.opt's weight_decay_optimizers.py (r1.15), transcribed -------------------
# tensorflow/contrib/opt/python/training/weight_decay_optimizers.py, branch r1.15 (stored
# at commit 01a1da9eb71b364a7a5ffb2e0b50897b2205fe81): DecoupledWeightDecayExtension,
# AdamWOptimizer and MomentumWOptimizer, with tf.compat.v1's AdamOptimizer and
# MomentumOptimizer as their bases (the originals' adam.AdamOptimizer and
# momentum.MomentumOptimizer); resource_variable_ops.resource_scatter_add is spelled
# tf.raw_ops.ResourceScatterAdd.


def _weight_decay_optimizers(tf):
    tf1 = tf.compat.v1

    class DecoupledWeightDecayExtension:
        def __init__(self, weight_decay, **kwargs):
            self._decay_var_list = None  # is set in minimize or apply_gradients
            self._weight_decay = weight_decay
            self._weight_decay_tensor = None
            super().__init__(**kwargs)

        def minimize(
            self, loss, global_step=None, var_list=None,
            gate_gradients=tf1.train.Optimizer.GATE_OP, aggregation_method=None,
            colocate_gradients_with_ops=False, name=None, grad_loss=None, decay_var_list=None,
        ):  # fmt: skip
            self._decay_var_list = set(decay_var_list) if decay_var_list else False
            return super().minimize(
                loss, global_step=global_step, var_list=var_list,
                gate_gradients=gate_gradients, aggregation_method=aggregation_method,
                colocate_gradients_with_ops=colocate_gradients_with_ops, name=name,
                grad_loss=grad_loss,
            )  # fmt: skip

        def apply_gradients(self, grads_and_vars, global_step=None, name=None, decay_var_list=None):
            self._decay_var_list = set(decay_var_list) if decay_var_list else False
            return super().apply_gradients(grads_and_vars, global_step=global_step, name=name)

        def _prepare(self):
            weight_decay = self._weight_decay
            if callable(weight_decay):
                weight_decay = weight_decay()
            self._weight_decay_tensor = tf.convert_to_tensor(weight_decay, name="weight_decay")
            super()._prepare()

        def _decay_weights_op(self, var):
            if not self._decay_var_list or var in self._decay_var_list:
                return var.assign_sub(self._weight_decay * var, self._use_locking)
            return tf.no_op()

        def _decay_weights_sparse_op(self, var, indices, scatter_add):
            if not self._decay_var_list or var in self._decay_var_list:
                update = -self._weight_decay * tf.gather(var, indices)
                return scatter_add(var, indices, update, self._use_locking)
            return tf.no_op()

        def _apply_dense(self, grad, var):
            with tf.control_dependencies([self._decay_weights_op(var)]):
                return super()._apply_dense(grad, var)

        def _resource_apply_dense(self, grad, var):
            with tf.control_dependencies([self._decay_weights_op(var)]):
                return super()._resource_apply_dense(grad, var)

        def _apply_sparse(self, grad, var):
            scatter_add = tf1.scatter_add
            decay_op = self._decay_weights_sparse_op(var, grad.indices, scatter_add)
            with tf.control_dependencies([decay_op]):
                return super()._apply_sparse(grad, var)

        def _resource_scatter_add(self, x, i, v, _=None):
            with tf.control_dependencies([tf.raw_ops.ResourceScatterAdd(
                resource=x.handle, indices=i, updates=v
            )]):  # fmt: skip
                return x.value()

        def _resource_apply_sparse(self, grad, var, indices):
            scatter_add = self._resource_scatter_add
            decay_op = self._decay_weights_sparse_op(var, indices, scatter_add)
            with tf.control_dependencies([decay_op]):
                return super()._resource_apply_sparse(grad, var, indices)

    class MomentumWOptimizer(DecoupledWeightDecayExtension, tf1.train.MomentumOptimizer):
        def __init__(
            self, weight_decay, learning_rate, momentum, use_locking=False, name="MomentumW",
            use_nesterov=False,
        ):  # fmt: skip
            super().__init__(
                weight_decay, learning_rate=learning_rate, momentum=momentum,
                use_locking=use_locking, name=name, use_nesterov=use_nesterov,
            )  # fmt: skip

    class AdamWOptimizer(DecoupledWeightDecayExtension, tf1.train.AdamOptimizer):
        def __init__(
            self, weight_decay, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
            use_locking=False, name="AdamW",
        ):  # fmt: skip
            super().__init__(
                weight_decay, learning_rate=learning_rate, beta1=beta1, beta2=beta2,
                epsilon=epsilon, use_locking=use_locking, name=name,
            )  # fmt: skip

    return {"AdamWOptimizer": AdamWOptimizer, "MomentumWOptimizer": MomentumWOptimizer}


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

    def train_op(loss_fn, state, *batch):
        gvs = optimizer.compute_gradients(loss_fn, state.params, *batch)
        grads, tvars = zip(*gvs, strict=True)
        (grads, _) = fg.clip_by_global_norm(grads, clip_norm=1.0)
        # apply_gradients also does BERT's `new_global_step = global_step + 1`, after
        # the learning rate has read global_step.
        return optimizer.apply_gradients(zip(grads, tvars, strict=True), state)

    return optimizer, train_op


BERT_ARGS = (0.1, 10, 3)  # init_lr, num_train_steps, num_warmup_steps
#: The optimizers in create_optimizer's step: BERT's, ALBERT's LAMB as ALBERT builds it,
#: and LAMB adapting the LayerNorm too (its own exclusion list).
STEP_CASES = {
    "bert": {},
    "lamb": {"kind": "lamb"},
    "lamb_exclude_from_layer_adaptation": {
        "kind": "lamb",
        "exclude_from_layer_adaptation": ["bias"],
    },
}
#: The optimizers in a plain ``minimize(loss, global_step)``: class name, arguments.
MINIMIZE_CASES = {
    "adamax": ("AdaMaxOptimizer", {"learning_rate": 0.05}),
    "adamax_args": ("AdaMaxOptimizer", {"learning_rate": 0.02, "beta1": 0.5, "beta2": 0.9}),
    "nadam": ("NadamOptimizer", {"learning_rate": 0.05}),
    "nadam_args": ("NadamOptimizer", {"learning_rate": 0.02, "beta1": 0.5, "epsilon": 1e-3}),
    "lars": ("LARSOptimizer", {"learning_rate": 0.5, "eeta": 0.01}),
    "lars_skip_nesterov": (
        "LARSOptimizer",
        {
            "learning_rate": 0.5,
            "momentum": 0.5,
            "weight_decay": 0.01,
            "eeta": 0.05,
            "epsilon": 1e-3,
            "skip_list": ["bias", "LayerNorm"],
            "use_nesterov": True,
        },
    ),
    "addsign": ("AddSignOptimizer", {"learning_rate": 0.05}),
    "addsign_linear": (
        "AddSignOptimizer",
        {"learning_rate": 0.05, "alpha": 0.5, "beta": 0.8, "decay": ("get_linear_decay_fn", 5)},
    ),
    "powersign": ("PowerSignOptimizer", {"learning_rate": 0.05}),
    "powersign_cosine": (
        "PowerSignOptimizer",
        {"learning_rate": 0.05, "base": 2.0, "decay": ("get_cosine_decay_fn", 6, 1.0, 0.4)},
    ),
    "powersign_restart": (
        "PowerSignOptimizer",
        {"learning_rate": 0.05, "decay": ("get_restart_decay_fn", 4, 2, 1.2)},
    ),
}
#: The variables a subset of ``decay_var_list`` names (the rest are never decayed).
DECAYED = ["embeddings/word_embeddings", "dense/kernel"]
_ADAMW_ARGS = {"weight_decay": 0.1, "learning_rate": 0.02, "beta1": 0.5, "beta2": 0.9}
_MOMENTUMW_ARGS = {"weight_decay": 0.05, "learning_rate": 0.1, "momentum": 0.5}
#: AdamW and MomentumW: class name, arguments, the names in TensorFlow's decay_var_list
#: and funcgrad's call (method and decay_var_list, in each form of var_list).
DECAY_CASES = {
    "adamw": ("AdamWOptimizer", {"weight_decay": 0.05}, None, ("minimize", None)),
    "adamw_args_names": (
        "AdamWOptimizer",
        {**_ADAMW_ARGS, "epsilon": 1e-3},
        DECAYED,
        ("minimize", DECAYED),
    ),
    "adamw_mask": (
        "AdamWOptimizer",
        _ADAMW_ARGS,
        DECAYED,
        (
            "apply_gradients",
            {"embeddings": True, "dense": {"kernel": True, "bias": False}, "LayerNorm": False},
        ),
    ),
    "momentumw": (
        "MomentumWOptimizer",
        {"weight_decay": 0.05, "learning_rate": 0.05, "momentum": 0.9},
        None,
        ("apply_gradients", None),
    ),
    "adamw_decay_schedule": (
        "AdamWOptimizer",
        {**_ADAMW_ARGS, "weight_decay": ("exponential_decay", 0.2, 2, 0.5)},
        None,
        ("minimize", None),
    ),
    "momentumw_nesterov_predicate": (
        "MomentumWOptimizer",
        {**_MOMENTUMW_ARGS, "use_nesterov": True},
        DECAYED,
        ("minimize", lambda name, _: name in DECAYED),
    ),
}
CASES = [*STEP_CASES, *MINIMIZE_CASES, *DECAY_CASES]
_TF_RUNS: dict = {}


def _tf_train_op(tf, case):
    """The TF1 train op of ``case`` in the current graph."""
    loss, ids = _tf_loss(tf)
    if case in STEP_CASES:
        _, create = _bert(tf)
        return create(loss, *BERT_ARGS, **STEP_CASES[case]), ids
    global_step = tf.compat.v1.train.get_or_create_global_step()
    if case in DECAY_CASES:
        name, kwargs, decayed, _ = DECAY_CASES[case]
        if isinstance(kwargs["weight_decay"], tuple):  # a tensor of global_step
            _, rate, *args = kwargs["weight_decay"]
            schedule = tf.compat.v1.train.exponential_decay(rate, global_step, *args)
            kwargs = {**kwargs, "weight_decay": schedule}
        opt = _weight_decay_optimizers(tf)[name](**kwargs)
        by_name = {v.op.name: v for v in tf.compat.v1.trainable_variables()}
        decay_var_list = None if decayed is None else [by_name[n] for n in decayed]
        gvs = opt.compute_gradients(loss)
        with tf.control_dependencies([g.op for g, _ in gvs]):  # the deviation: ordered
            return opt.apply_gradients(gvs, global_step, decay_var_list=decay_var_list), ids
    contrib = _contrib(tf)
    name, kwargs = _with_decay(contrib, *MINIMIZE_CASES[case])
    return contrib[name](**kwargs).minimize(loss, global_step=global_step), ids


def _with_decay(functions, name, kwargs):
    """``kwargs`` with ``decay=(function name, *arguments)`` made ``sign_decay_fn``."""
    if "decay" not in kwargs:
        return name, kwargs
    fn, *args = kwargs["decay"]
    more = {k: v for k, v in kwargs.items() if k != "decay"}
    return name, {**more, "sign_decay_fn": functions[fn](*args)}


def _fg_case(case):
    """funcgrad's ``(optimizer, train_op(loss_fn, state))`` of ``case``."""
    if case in STEP_CASES:
        return create_optimizer(*BERT_ARGS, **STEP_CASES[case])
    if case in DECAY_CASES:
        name, kwargs, _, (method, decay_var_list) = DECAY_CASES[case]
        if isinstance(kwargs["weight_decay"], tuple):
            _, *args = kwargs["weight_decay"]
            kwargs = {**kwargs, "weight_decay": fg.train.exponential_decay(*args)}
        opt = getattr(fg.train, name)(**kwargs)
        if method == "minimize":
            return opt, lambda loss_fn, state, *batch: opt.minimize(
                loss_fn, state, *batch, decay_var_list=decay_var_list
            )[0]

        def apply(loss_fn, state, *batch):
            gvs = opt.compute_gradients(loss_fn, state.params, *batch)
            return opt.apply_gradients(gvs, state, decay_var_list=decay_var_list)

        return opt, apply
    name, kwargs = _with_decay(vars(fg.train), *MINIMIZE_CASES[case])
    opt = getattr(fg.train, name)(**kwargs)
    return opt, lambda loss_fn, state, *batch: opt.minimize(loss_fn, state, *batch)[0]


def _tf_run(tf, tmp_path_factory, case):
    """TensorFlow's 6 steps of ``case``: every variable by name after each step, and a
    Saver checkpoint at step 3 (run once per case)."""
    if case not in _TF_RUNS:
        tf1 = tf.compat.v1
        prefix = str(tmp_path_factory.mktemp(case) / "model.ckpt-3")
        with tf.Graph().as_default():
            train_op, ids = _tf_train_op(tf, case)
            with tf1.Session() as sess:
                sess.run(tf1.global_variables_initializer())
                trajectory = []
                for step in range(STEPS):
                    sess.run(train_op, {ids: IDS[step % 2]})
                    trajectory.append({v.op.name: sess.run(v) for v in tf1.global_variables()})
                    if step == 2:
                        tf1.train.Saver().save(sess, prefix)
        _TF_RUNS[case] = trajectory, prefix
    return _TF_RUNS[case]


def _tf_continue(tf, prefix, steps, case):
    """TensorFlow's run of ``case`` restored from ``prefix`` and run ``steps`` steps."""
    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        train_op, ids = _tf_train_op(tf, case)
        with tf1.Session() as sess:
            tf1.train.Saver().restore(sess, prefix)
            for step in range(STEPS - steps, STEPS):
                sess.run(train_op, {ids: IDS[step % 2]})
            return {v.op.name: sess.run(v) for v in tf1.global_variables()}


def _fg_run(state, train_op, steps):
    step = jax.jit(lambda s, ids: train_op(_loss, s, ids), donate_argnums=0)
    states = []
    for _ in range(steps):
        state = step(state, IDS[int(state.global_step) % 2])
        states.append(jax.tree.map(jnp.copy, state))  # the donated one is gone next step
    return states


@pytest.mark.parametrize("case", CASES)
def test_six_steps(tf, tmp_path, tmp_path_factory, case) -> None:
    trajectory, _ = _tf_run(tf, tmp_path_factory, case)
    opt, train_op = _fg_case(case)
    states = _fg_run(opt.init(_params()), train_op, STEPS)
    for state, want in zip(states, trajectory, strict=True):
        _assert_same(_by_tf_name(tf, tmp_path, state, opt), want)
    table = trajectory[-1]["embeddings/word_embeddings"]  # rows never read: as they were?
    moved = not np.array_equal(table[[0, 5]], E0[[0, 5]])
    assert moved == (case in STEP_CASES)  # dense rules decay them; sparse rules do not
    assert not np.array_equal(table[[1, 2, 3, 4]], E0[[1, 2, 3, 4]])


@pytest.mark.parametrize("case", CASES)
def test_resume_from_a_tensorflow_checkpoint_and_the_other_way(
    tf, tmp_path, tmp_path_factory, case
) -> None:
    trajectory, tf_prefix = _tf_run(tf, tmp_path_factory, case)
    opt, train_op = _fg_case(case)
    template = opt.init(jax.tree.map(jnp.zeros_like, _params()))
    restored = fg.train.restore_tf_checkpoint(tf_prefix, template, opt)
    assert int(restored.global_step) == 3
    resumed = _fg_run(restored, train_op, 3)[-1]
    _assert_same(_by_tf_name(tf, tmp_path, resumed, opt), trajectory[-1])

    own = _fg_run(opt.init(_params()), train_op, 3)[-1]
    fg_prefix = fg.train.save_tf_checkpoint(str(tmp_path / "own" / "model.ckpt-3"), own, opt)
    _assert_same(_tf_continue(tf, fg_prefix, 3, case), trajectory[-1])


def test_tensorflow_minimize_drops_decay_var_list(tf) -> None:
    """TensorFlow's ``minimize(..., decay_var_list)`` calls the ``apply_gradients``
    override without it, which resets the list: every variable is decayed there (the
    docs page's note; funcgrad's ``minimize`` keeps it)."""
    with tf.Graph().as_default():
        loss, _ = _tf_loss(tf)
        opt = _weight_decay_optimizers(tf)["AdamWOptimizer"](0.1)
        table = tf.compat.v1.trainable_variables()[0]
        opt.minimize(loss, decay_var_list=[table])
        assert opt._decay_var_list is False  # decay every variable
        opt.apply_gradients(opt.compute_gradients(loss), decay_var_list=[table])
        assert opt._decay_var_list == {table}


def test_sign_decay_functions(tf) -> None:
    contrib = _contrib(tf)
    calls = [
        ("get_linear_decay_fn", (7,)),
        ("get_cosine_decay_fn", (7,)),
        ("get_cosine_decay_fn", (7, 2.0, 0.6)),
        ("get_restart_decay_fn", (7,)),
        ("get_restart_decay_fn", (7, 3, 1.5)),
    ]
    steps = np.arange(12)
    for name, args in calls:
        with tf.Graph().as_default():
            fn = contrib[name](*args)
            with tf.compat.v1.Session() as sess:
                want = [sess.run(fn(tf.constant(int(t), tf.int64))) for t in steps]
        got = [getattr(fg.train, name)(*args)(jnp.int32(t)) for t in steps]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=f"{name}{args}")
