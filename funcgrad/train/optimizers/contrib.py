r"""``tf.contrib.opt``'s optimizers (TensorFlow 1.15), on :class:`TF1Optimizer`.

Sources: ``tensorflow/contrib/opt/python/training/adamax.py`` and
``nadam_optimizer.py`` at r1.15, and the ``ApplyAdaMax`` / ``ApplyAdam`` kernels of
``tensorflow/core/kernels/training_ops.cc`` their dense rules call.  Both extend
``tf.train.AdamOptimizer``: slots ``m`` and ``v`` named after the optimizer
(``<var>/AdaMax``, ``<var>/AdaMax_1``; Nadam keeps Adam's name, ``<var>/Adam``) and the
non-slot ``beta1_power`` / ``beta2_power``, multiplied by the betas after each step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import jax
import jax.numpy as jnp

from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train.optimizers.base import TF1Optimizer
from funcgrad.train.optimizers.base import TF1Step
from funcgrad.train.schedules._inject import LearningRate

__all__ = ["AdaMaxOptimizer", "NadamOptimizer"]

Slots = dict[str, jax.Array]


class _AdamOptimizer(TF1Optimizer):
    """``tf.train.AdamOptimizer``'s slots, non-slots, hyperparameters and ``_finish``."""

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
    ) -> None:
        super().__init__(learning_rate)
        self._check_numbers(beta1=beta1, beta2=beta2, epsilon=epsilon)
        self._beta1_t = jnp.float32(beta1)
        self._beta2_t = jnp.float32(beta2)
        self._epsilon_t = jnp.float32(epsilon)
        self._betas = (beta1, beta2)

    def _non_slots(self) -> dict[str, float]:
        beta1, beta2 = self._betas
        return {"beta1_power": beta1, "beta2_power": beta2}

    def _finish(self, non_slots: dict[str, jax.Array], step: TF1Step) -> dict[str, jax.Array]:
        return {
            "beta1_power": non_slots["beta1_power"] * self._beta1_t,
            "beta2_power": non_slots["beta2_power"] * self._beta2_t,
        }


class AdaMaxOptimizer(_AdamOptimizer):
    r"""``tf.contrib.opt.AdaMaxOptimizer`` (Kingma & Ba, 2015, Section 7.1).

    .. math::
      m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad
      v \leftarrow \max(\beta_2 v, |g|), \quad
      w \leftarrow w - \frac{\eta}{1 - \beta_1^t} \frac{m}{v + \epsilon}

    An ``fg.IndexedSlices`` gradient changes only the touched rows of :math:`w`,
    :math:`m` and :math:`v`, as the original's sparse rule.  ``optax.adamax`` puts
    epsilon elsewhere and has no row-only rule.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      beta1: :math:`\beta_1`.
      beta2: :math:`\beta_2`.
      epsilon: :math:`\epsilon`.

    Raises:
      TypeError: a hyperparameter is not a number.

    Example:
      >>> opt = fg.train.AdaMaxOptimizer(0.1)
      >>> state, _ = opt.minimize(lambda p: 2.0 * p["w"], opt.init({"w": jnp.float32(1.0)}))
      >>> round(float(state.params["w"]), 4)  # 1 - 0.1 / 0.1 * 0.2 / 2
      0.9
    """

    slots: ClassVar[Mapping[str, str]] = {"m": "AdaMax", "v": "AdaMax"}

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        beta1_power = step.non_slots["beta1_power"]
        m, v = slots["m"], slots["v"]
        m = m + (grad - m) * (1 - self._beta1_t)
        v = jnp.maximum(self._beta2_t * v, jnp.abs(grad))
        var = var - step.learning_rate / (1 - beta1_power) * (m / (v + self._epsilon_t))
        return var, {"m": m, "v": v}

    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        beta1_power = step.non_slots["beta1_power"]
        indices = grad.indices
        # m_t = beta1 * m + (1 - beta1) * g_t
        m = slots["m"]
        m_slice = m[indices]
        m_t_slice = m_slice * self._beta1_t + grad.values * (1 - self._beta1_t)
        m_t = m.at[indices].set(m_t_slice)
        # u_t = max(beta2 * u, abs(g_t))
        v = slots["v"]
        v_slice = v[indices]
        v_t_slice = jnp.maximum(v_slice * self._beta2_t, jnp.abs(grad.values))
        v_t = v.at[indices].set(v_t_slice)
        # theta_t = theta - lr / (1 - beta1^t) * m_t / u_t
        var_slice = (
            -step.learning_rate / (1 - beta1_power) * (m_t_slice / (v_t_slice + self._epsilon_t))
        )
        var_update = var.at[indices].add(var_slice)
        return var_update, {"m": m_t, "v": v_t}


class NadamOptimizer(_AdamOptimizer):
    r"""``tf.contrib.opt.NadamOptimizer``: Adam with Nesterov momentum (Dozat, 2016), as
    TensorFlow's ``ApplyAdam(use_nesterov=True)`` computes it.

    .. math::
      m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad
      v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
      w \leftarrow w - \eta \frac{\sqrt{1 - \beta_2^t}}{1 - \beta_1^t}
        \frac{\beta_1 m + (1 - \beta_1) g}{\sqrt{v} + \epsilon}

    An ``fg.IndexedSlices`` gradient decays all of :math:`m` and :math:`v` and moves
    only the touched rows of :math:`w`, as the original's sparse rule.  The slots keep
    Adam's TF names (``<var>/Adam``, ``<var>/Adam_1``), the original's default name.
    ``optax.nadam`` corrects the bias of its Nesterov term otherwise.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      beta1: :math:`\beta_1`.
      beta2: :math:`\beta_2`.
      epsilon: :math:`\epsilon`.

    Raises:
      TypeError: a hyperparameter is not a number.

    Example:
      >>> opt = fg.train.NadamOptimizer(0.1)
      >>> state, _ = opt.minimize(lambda p: 2.0 * p["w"], opt.init({"w": jnp.float32(1.0)}))
      >>> round(float(state.params["w"]), 4)  # 1 - 0.1 (0.1 * 0.2 + 0.9 * 0.02) / 0.02
      0.81
    """

    slots: ClassVar[Mapping[str, str]] = {"m": "Adam", "v": "Adam"}

    def _alpha(self, step: TF1Step) -> jax.Array:
        beta1_power, beta2_power = step.non_slots["beta1_power"], step.non_slots["beta2_power"]
        return step.learning_rate * jnp.sqrt(1 - beta2_power) / (1 - beta1_power)

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        alpha = self._alpha(step)
        m, v = slots["m"], slots["v"]
        m = m + (grad - m) * (1 - self._beta1_t)
        v = v + (jnp.square(grad) - v) * (1 - self._beta2_t)
        nesterov = grad * (1 - self._beta1_t) + self._beta1_t * m
        var = var - (nesterov * alpha) / (jnp.sqrt(v) + self._epsilon_t)
        return var, {"m": m, "v": v}

    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        lr = self._alpha(step)
        indices = grad.indices
        # m_t = beta1 * m + (1 - beta1) * g_t
        m = slots["m"]
        m_scaled_g_values = grad.values * (1 - self._beta1_t)
        m_t = (m * self._beta1_t).at[indices].add(m_scaled_g_values)
        # m_bar = (1 - beta1) * g_t + beta1 * m_t
        m_bar = m_scaled_g_values + self._beta1_t * m_t[indices]
        # v_t = beta2 * v + (1 - beta2) * (g_t * g_t)
        v = slots["v"]
        v_scaled_g_values = (grad.values * grad.values) * (1 - self._beta2_t)
        v_t = (v * self._beta2_t).at[indices].add(v_scaled_g_values)
        v_t_slice = v_t[indices]
        v_sqrt = jnp.sqrt(v_t_slice)
        var_update = var.at[indices].add(-lr * m_bar / (v_sqrt + self._epsilon_t))
        return var_update, {"m": m_t, "v": v_t}
