"""tensor2tensor's optimizers against their own source run in TF 2.21.

``AdafactorOptimizer`` with ``adafactor_decay_rate_adam`` / ``_pow`` and
``MultistepAdamOptimizer``, transcribed below from tensorflow/tensor2tensor
``tensor2tensor/utils/adafactor.py`` and ``tensor2tensor/utils/multistep_optimizer.py`` at
commit bafdc1b67730430d38d6ab802cbd51f9d053ba2e, with ``tf.*`` spelled as TF 2.21 has it
(``tf.to_float`` -> ``tf.cast``, ``tf.assign`` -> ``tf.compat.v1.assign``, ``tf.mod`` ->
``tf.math.floormod``).  Left out: what the original runs only for bfloat16 variables or
simulated quantization (``parameter_encoding``, ``simulated_quantize_bits``, which funcgrad
refuses) and ``tf.logging`` warnings; ``common_layers.cast_like(new_m, var)`` is
``tf.cast(new_m, var.dtype)``.

On the model the TF1 projects' parity tests share (tests/parity/tf1_projects_model.py),
every variable and slot is compared by its TF name after each of 6 steps, and a run resumed
from a TF ``Saver`` checkpoint at step 3 (and TensorFlow resumed from funcgrad's)
continues both trajectories.
"""

from __future__ import annotations

import types

import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from tests.parity.tf1_projects_model import E0
from tests.parity.tf1_projects_model import STEPS
from tests.parity.tf1_projects_model import assert_resumes_both_ways
from tests.parity.tf1_projects_model import assert_same
from tests.parity.tf1_projects_model import by_tf_name
from tests.parity.tf1_projects_model import fg_run
from tests.parity.tf1_projects_model import params
from tests.parity.tf1_projects_model import tf_run

# float32 rounding over 6 steps of rules with rsqrt, a parameter RMS and Adam's powers.
RTOL, ATOL = 2e-5, 2e-6


def _t2t(tf):
    """tensor2tensor's two optimizer modules, transcribed (see the module docstring)."""
    tf1 = tf.compat.v1

    class AdafactorOptimizer(tf1.train.Optimizer):
        """Optimizer that implements the Adafactor algorithm."""

        def __init__(
            self,
            multiply_by_parameter_scale=True,
            learning_rate=None,
            decay_rate=None,
            beta1=0.0,
            clipping_threshold=1.0,
            factored=True,
            simulated_quantize_bits=None,
            parameter_encoding=None,
            use_locking=False,
            name="Adafactor",
            epsilon1=1e-30,
            epsilon2=1e-3,
        ):
            super().__init__(use_locking, name)
            self._multiply_by_parameter_scale = multiply_by_parameter_scale
            if learning_rate is None:
                learning_rate = self._learning_rate_default(multiply_by_parameter_scale)
            self._learning_rate = learning_rate
            if decay_rate is None:
                decay_rate = self._decay_rate_default()
            self._decay_rate = decay_rate
            self._beta1 = beta1
            self._clipping_threshold = clipping_threshold
            self._factored = factored
            self._epsilon1 = epsilon1
            self._epsilon2 = epsilon2

        def _should_use_factored_second_moment_estimate(self, shape):
            return self._factored and len(shape) >= 2

        def _create_slots(self, var_list):
            for var in var_list:
                shape = var.get_shape().as_list()
                if self._beta1:
                    self._zeros_slot(var, "m", self._name)
                if self._should_use_factored_second_moment_estimate(shape):
                    r_val = tf.zeros(shape[:-1], dtype=tf.float32)
                    c_val = tf.zeros(shape[:-2] + shape[-1:], dtype=tf.float32)
                    self._get_or_make_slot(var, r_val, "vr", self._name)
                    self._get_or_make_slot(var, c_val, "vc", self._name)
                else:
                    v_val = tf.zeros(shape, dtype=tf.float32)
                    self._get_or_make_slot(var, v_val, "v", self._name)

        def _apply_dense(self, grad, var):
            return self._resource_apply_dense(grad, var)

        def _apply_sparse(self, grad, var):
            return self._apply_dense(tf.convert_to_tensor(grad), var)

        def _resource_apply_sparse(self, grad, handle, indices):
            return self._resource_apply_dense(
                tf.convert_to_tensor(tf.IndexedSlices(grad, indices, tf.shape(handle))), handle
            )

        def _parameter_scale(self, var):
            return tf.maximum(reduce_rms(var), self._epsilon2)

        def _resource_apply_dense(self, grad, handle):
            var = handle
            grad = tf.cast(grad, tf.float32)
            grad_squared = tf.square(grad) + self._epsilon1
            grad_squared_mean = tf.reduce_mean(grad_squared)
            decay_rate = self._call_if_callable(self._decay_rate)
            update_scale = self._call_if_callable(self._learning_rate)
            update_scale = tf.convert_to_tensor(update_scale, name="update_scale")
            update_scale = tf.cast(update_scale, grad_squared_mean.dtype.base_dtype)
            old_val = var
            if self._multiply_by_parameter_scale:
                update_scale *= tf.cast(self._parameter_scale(old_val), tf.float32)
            # HACK: Make things dependent on grad.
            decay_rate += grad_squared_mean * 1e-30
            update_scale += grad_squared_mean * 1e-30
            # END HACK
            mixing_rate = 1.0 - decay_rate
            shape = var.get_shape().as_list()
            updates = []
            if self._should_use_factored_second_moment_estimate(shape):
                grad_squared_row_mean = tf.reduce_mean(grad_squared, -1)
                grad_squared_col_mean = tf.reduce_mean(grad_squared, -2)
                vr = self.get_slot(var, "vr")
                new_vr = decay_rate * vr + mixing_rate * grad_squared_row_mean
                vc = self.get_slot(var, "vc")
                new_vc = decay_rate * vc + mixing_rate * grad_squared_col_mean
                vr_update = tf1.assign(vr, new_vr, use_locking=self._use_locking)
                vc_update = tf1.assign(vc, new_vc, use_locking=self._use_locking)
                updates = [vr_update, vc_update]
                long_term_mean = tf.reduce_mean(new_vr, -1, keepdims=True)
                r_factor = tf.math.rsqrt(new_vr / long_term_mean)
                c_factor = tf.math.rsqrt(new_vc)
                x = grad * tf.expand_dims(r_factor, -1) * tf.expand_dims(c_factor, -2)
            else:
                v = self.get_slot(var, "v")
                new_v = decay_rate * v + mixing_rate * grad_squared
                v_update = tf1.assign(v, new_v, use_locking=self._use_locking)
                updates = [v_update]
                x = grad * tf.math.rsqrt(new_v)
            if self._clipping_threshold is not None:
                clipping_denom = tf.maximum(1.0, reduce_rms(x) / self._clipping_threshold)
                x /= clipping_denom
            subtrahend = update_scale * x
            if self._beta1:
                m = self.get_slot(var, "m")
                new_m = self._beta1 * tf.cast(m, tf.float32) + (1.0 - self._beta1) * subtrahend
                subtrahend = new_m
                new_m = tf.cast(new_m, var.dtype)
                updates.append(tf1.assign(m, new_m, use_locking=self._use_locking))
            new_val = tf.cast(old_val, tf.float32) - subtrahend
            new_val = tf.cast(new_val, var.dtype)
            var_update = tf1.assign(var, new_val, use_locking=self._use_locking)
            updates = [var_update, *updates]
            return tf.group(*updates)

        def _decay_rate_default(self):
            return adafactor_decay_rate_pow(0.8)

        def _learning_rate_default(self, multiply_by_parameter_scale):
            learning_rate = tf.minimum(tf.math.rsqrt(step_num() + 1.0), 0.01)
            if not multiply_by_parameter_scale:
                learning_rate *= 0.05
            return learning_rate

    def adafactor_decay_rate_adam(beta2):
        t = tf.cast(tf1.train.get_or_create_global_step(), tf.float32) + 1.0
        decay = beta2 * (1.0 - tf.pow(beta2, t - 1.0)) / (1.0 - tf.pow(beta2, t))
        return decay

    def adafactor_decay_rate_pow(exponent):
        return 1.0 - tf.pow((step_num() + 1.0), -exponent)

    def step_num():
        return tf.cast(tf1.train.get_or_create_global_step(), tf.float32)

    def reduce_rms(x):
        return tf.sqrt(tf.reduce_mean(tf.square(x)))

    class MultistepAdamOptimizer(tf1.train.AdamOptimizer):
        """Adam with SGD updates every n steps with accumulated gradients."""

        def __init__(
            self,
            learning_rate=0.001,
            beta1=0.9,
            beta2=0.999,
            epsilon=1e-8,
            use_locking=False,
            name="Adam",
            n=1,
        ):
            super().__init__(
                learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon,
                use_locking=use_locking, name=name,
            )  # fmt: skip
            self._n = n
            self._n_t = None

        def _create_slots(self, var_list):
            super()._create_slots(var_list)
            first_var = min(var_list, key=lambda x: x.name)
            self._create_non_slot_variable(
                initial_value=0 if self._n == 1 else 1, name="iter", colocate_with=first_var
            )
            for v in var_list:
                self._zeros_slot(v, "grad_acc", self._name)

        def _get_iter_variable(self):
            graph = None if tf.executing_eagerly() else tf1.get_default_graph()
            return self._get_non_slot_variable("iter", graph=graph)

        def _prepare(self):
            super()._prepare()
            self._n_t = tf.convert_to_tensor(self._n, name="n")

        def _apply_cond(self, apply_fn, grad, var, *args, **kwargs):
            grad_acc = self.get_slot(var, "grad_acc")

            def apply_adam(grad_acc, apply_fn, grad, var, *args, **kwargs):
                total_grad = (grad_acc + grad) / tf.cast(self._n_t, grad.dtype)
                adam_op = apply_fn(total_grad, var, *args, **kwargs)
                with tf.control_dependencies([adam_op]):
                    grad_acc_to_zero_op = grad_acc.assign(
                        tf.zeros_like(grad_acc), use_locking=self._use_locking
                    )
                return tf.group(adam_op, grad_acc_to_zero_op)

            def accumulate_gradient(grad_acc, grad):
                assign_op = tf1.assign_add(grad_acc, grad, use_locking=self._use_locking)
                return tf.group(assign_op)

            return tf.cond(
                tf.equal(self._get_iter_variable(), 0),
                lambda: apply_adam(grad_acc, apply_fn, grad, var, *args, **kwargs),
                lambda: accumulate_gradient(grad_acc, grad),
            )

        def _apply_dense(self, grad, var):
            return self._apply_cond(super()._apply_dense, grad, var)

        def _resource_apply_dense(self, grad, var):
            return self._apply_cond(super()._resource_apply_dense, grad, var)

        def _apply_sparse_shared(self, grad, var, indices, scatter_add):
            return self._apply_cond(super()._apply_sparse_shared, grad, var, indices, scatter_add)

        def _apply_sparse(self, grad, var):
            dense_grad = tf.convert_to_tensor(grad)
            return self._apply_cond(super()._apply_dense, dense_grad, var)

        def _resource_apply_sparse_duplicate_indices(self, grad, var, indices):
            dense_grad = tf.convert_to_tensor(
                tf.IndexedSlices(values=grad, indices=indices, dense_shape=tf.shape(var))
            )
            return self._apply_cond(super()._resource_apply_dense, dense_grad, var)

        def _finish(self, update_ops, name_scope):
            iter_ = self._get_iter_variable()
            beta1_power, beta2_power = self._get_beta_accumulators()
            with tf.control_dependencies(update_ops), tf1.colocate_with(iter_):

                def update_beta_op():
                    update_beta1 = beta1_power.assign(
                        beta1_power * self._beta1_t, use_locking=self._use_locking
                    )
                    update_beta2 = beta2_power.assign(
                        beta2_power * self._beta2_t, use_locking=self._use_locking
                    )
                    return tf.group(update_beta1, update_beta2)

                maybe_update_beta = tf.cond(tf.equal(iter_, 0), update_beta_op, tf.no_op)
                with tf.control_dependencies([maybe_update_beta]):
                    update_iter = iter_.assign(
                        tf.math.floormod(iter_ + 1, self._n_t), use_locking=self._use_locking
                    )
            return tf.group(*[*update_ops, update_iter, maybe_update_beta], name=name_scope)

    return types.SimpleNamespace(
        AdafactorOptimizer=AdafactorOptimizer,
        MultistepAdamOptimizer=MultistepAdamOptimizer,
        adafactor_decay_rate_adam=adafactor_decay_rate_adam,
        adafactor_decay_rate_pow=adafactor_decay_rate_pow,
    )


# Each case: (the TF optimizer from the transcribed module, the funcgrad one).
CASES = {
    "adafactor_defaults": (
        lambda t: t.AdafactorOptimizer(),
        lambda: fg.train.AdafactorOptimizer(),
    ),
    "adafactor_momentum_unfactored_adam_decay_no_clip": (
        lambda t: t.AdafactorOptimizer(
            learning_rate=0.05, decay_rate=t.adafactor_decay_rate_adam(0.999), beta1=0.9,
            clipping_threshold=None, factored=False,
        ),
        lambda: fg.train.AdafactorOptimizer(
            learning_rate=0.05, decay_rate=fg.train.adafactor_decay_rate_adam(0.999),
            beta1=0.9, clipping_threshold=None, factored=False,
        ),
    ),
    "adafactor_momentum_factored_no_parameter_scale_pow_decay": (
        lambda t: t.AdafactorOptimizer(
            multiply_by_parameter_scale=False, decay_rate=t.adafactor_decay_rate_pow(0.5),
            beta1=0.5, clipping_threshold=1.5, epsilon2=1e-2,
        ),
        lambda: fg.train.AdafactorOptimizer(
            multiply_by_parameter_scale=False, decay_rate=fg.train.adafactor_decay_rate_pow(0.5),
            beta1=0.5, clipping_threshold=1.5, epsilon2=1e-2,
        ),
    ),
    "adafactor_constant_decay_and_rate": (
        lambda t: t.AdafactorOptimizer(learning_rate=0.02, decay_rate=0.9, epsilon1=1e-3),
        lambda: fg.train.AdafactorOptimizer(learning_rate=0.02, decay_rate=0.9, epsilon1=1e-3),
    ),
    "multistep_adam_n1": (
        lambda t: t.MultistepAdamOptimizer(0.05),
        lambda: fg.train.MultistepAdamOptimizer(0.05),
    ),
    "multistep_adam_n3": (
        lambda t: t.MultistepAdamOptimizer(0.05, beta1=0.8, beta2=0.99, n=3),
        lambda: fg.train.MultistepAdamOptimizer(0.05, beta1=0.8, beta2=0.99, n=3),
    ),
}  # fmt: skip


def _minimize(tf, case):
    """``minimize(loss, global_step)``: the train op of ``case`` (see ``tf_run``)."""
    return lambda loss, global_step: CASES[case][0](_t2t(tf)).minimize(
        loss, global_step=global_step
    )


@pytest.fixture(scope="module", params=list(CASES))
def case_tf(request, tf, tmp_path_factory):
    """``(case, TensorFlow's trajectory, its Saver checkpoint at step 3)``."""
    case = request.param
    prefix = str(tmp_path_factory.mktemp(case) / "model.ckpt-3")
    return case, tf_run(tf, _minimize(tf, case), STEPS, save=prefix), prefix


def _train_op(opt):
    return lambda loss, state: opt.minimize(loss, state)[0]


def test_six_steps_every_variable_and_slot_by_tf_name(tf, tmp_path, case_tf) -> None:
    case, trajectory, _ = case_tf
    opt = CASES[case][1]()
    states = fg_run(opt.init(params()), _train_op(opt), STEPS)
    for state, want in zip(states, trajectory, strict=True):
        assert_same(by_tf_name(tf, tmp_path, state, opt), want, rtol=RTOL, atol=ATOL)
    changed = np.any(trajectory[-1]["embeddings/word_embeddings"] != E0, axis=1)
    assert changed.tolist() == [False, True, False, True, True, False]  # rows read: 1, 3, 4


def test_resume_from_a_tensorflow_checkpoint_and_the_other_way(tf, tmp_path, case_tf) -> None:
    case, trajectory, tf_prefix = case_tf
    opt = CASES[case][1]()
    run = (trajectory, tf_prefix)
    assert_resumes_both_ways(
        tf, tmp_path, opt, _train_op(opt), _minimize(tf, case), run, RTOL, ATOL
    )


def test_slot_names_as_tensorflow_creates_them(case_tf) -> None:
    case, trajectory, _ = case_tf
    names = set(trajectory[0])
    want = {
        "adafactor_defaults": {"dense/kernel/Adafactor", "dense/kernel/Adafactor_1"},
        "adafactor_momentum_unfactored_adam_decay_no_clip": {"dense/kernel/Adafactor_1"},
        "adafactor_momentum_factored_no_parameter_scale_pow_decay": {
            "dense/kernel/Adafactor_2", "dense/bias/Adafactor_1",
        },
        "adafactor_constant_decay_and_rate": {"LayerNorm/gamma/Adafactor"},
        "multistep_adam_n1": {"dense/kernel/Adam_2", "iter", "beta1_power"},
        "multistep_adam_n3": {"embeddings/word_embeddings/Adam_2", "iter", "beta2_power"},
    }[case]  # fmt: skip
    assert want <= names
    assert not any(n.endswith("_3") for n in names)


def test_adafactor_on_rank_3_and_0_d_variables(tf, run_tf1_steps) -> None:
    """The last two dimensions of a rank-3 variable factored, a scalar unfactored."""
    rng = np.random.default_rng(11)
    w0 = rng.standard_normal((2, 3, 4)).astype(np.float32)
    s0 = np.float32(0.7)
    x = rng.standard_normal((2, 4)).astype(np.float32)

    def build():
        w = tf.compat.v1.get_variable("w", initializer=w0)
        s = tf.compat.v1.get_variable("s", initializer=s0)
        loss = tf.reduce_sum(tf.tanh(s * tf.einsum("abc,ac->ab", w, x)) ** 2)
        opt = _t2t(tf).AdafactorOptimizer(beta1=0.5)
        train_op = opt.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
        return train_op, {v.op.name: v for v in tf.compat.v1.global_variables()}

    want = run_tf1_steps(build, 3)
    assert want[0]["w/Adafactor_1"].shape == (2, 3) and want[0]["w/Adafactor_2"].shape == (2, 4)

    def loss(p):
        return jnp.sum(jnp.tanh(p["s"] * jnp.einsum("abc,ac->ab", p["w"], x)) ** 2)

    opt = fg.train.AdafactorOptimizer(beta1=0.5)
    state = opt.init({"w": jnp.asarray(w0), "s": jnp.asarray(s0)})
    for expected in want:
        state, _ = opt.minimize(loss, state)
        slots = state.opt_state.inner_state.slots
        got = {
            "w": state.params["w"], "s": state.params["s"], "w/Adafactor": slots["m"]["w"],
            "w/Adafactor_1": slots["vr"]["w"], "w/Adafactor_2": slots["vc"]["w"],
            "s/Adafactor": slots["m"]["s"], "s/Adafactor_1": slots["v"]["s"],
            "global_step": state.global_step,
        }  # fmt: skip
        assert_same(got, expected, rtol=RTOL, atol=ATOL)
