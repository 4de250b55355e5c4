r"""``tf.contrib.opt.AdaMaxOptimizer`` (``adamax.py``, r1.15), on ``AdamOptimizer``.

As in the original, the class extends TensorFlow's Adam: its slots ``m`` and ``v``
(named after the optimizer, ``<var>/AdaMax``, ``<var>/AdaMax_1``), the non-slots
``beta1_power`` / ``beta2_power`` and their ``_finish`` are Adam's; the dense rule is the
``ApplyAdaMax`` kernel and the sparse rule the original's ``_apply_sparse_shared``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from typing import ClassVar

import jax
import jax.numpy as jnp

from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train.optimizers import _kernels
from funcgrad.train.optimizers.base import TF1Step
from funcgrad.train.optimizers.tf1 import AdamOptimizer

__all__ = ["AdaMaxOptimizer"]

Slots = dict[str, jax.Array]


class AdaMaxOptimizer(AdamOptimizer):
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
      beta1: :math:`\beta_1`, in ``[0, 1)``.
      beta2: :math:`\beta_2`, in ``[0, 1)``.
      epsilon: :math:`\epsilon`, ``>= 0``.

    Raises:
      TypeError: an argument is not a number (or a schedule, for ``learning_rate``).
      ValueError: an argument is out of its range or not finite.

    Example:
      >>> opt = fg.train.AdaMaxOptimizer(0.1)
      >>> state, _ = opt.minimize(lambda p: 2.0 * p["w"], opt.init({"w": jnp.float32(1.0)}))
      >>> round(float(state.params["w"]), 4)  # 1 - 0.1 / 0.1 * 0.2 / 2
      0.9
    """

    slots: ClassVar[Mapping[str, str]] = {"m": "AdaMax", "v": "AdaMax"}

    def _prepare(self, step: TF1Step) -> dict[str, Any]:
        """AdaMax's rate ``lr / (1 - beta1_power)``, once per step."""
        return {"rate": step.learning_rate / (1 - step.non_slots["beta1_power"])}

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        var, m, v = _kernels.adamax(
            grad, var, slots["m"], slots["v"], step.prepared["rate"], self._beta1_t,
            self._beta2_t, self._epsilon_t,
        )  # fmt: skip
        return var, {"m": m, "v": v}

    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
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
        var_slice = -step.prepared["rate"] * (m_t_slice / (v_t_slice + self._epsilon_t))
        var_update = var.at[indices].add(var_slice)
        return var_update, {"m": m_t, "v": v_t}
