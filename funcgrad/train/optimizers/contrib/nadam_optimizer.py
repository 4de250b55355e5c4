r"""``tf.contrib.opt.NadamOptimizer`` (``nadam_optimizer.py``, r1.15), on ``AdamOptimizer``.

As in the original, the class extends TensorFlow's Adam and keeps its slots' names
(``<var>/Adam``, ``<var>/Adam_1``), its non-slots and ``_finish``; the dense rule is the
``ApplyAdam`` kernel with ``use_nesterov=True``, the sparse rule the original's
``_apply_sparse_shared``, with Adam's sparse moments.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train.optimizers import _kernels
from funcgrad.train.optimizers.base import TF1Step
from funcgrad.train.optimizers.tf1 import AdamOptimizer

__all__ = ["NadamOptimizer"]

Slots = dict[str, jax.Array]


class NadamOptimizer(AdamOptimizer):
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
      learning_rate: :math:`\eta` (a number or a ``schedule(step)``), as for
        :class:`~funcgrad.train.AdamOptimizer`.
      beta1: :math:`\beta_1`, as for Adam.
      beta2: :math:`\beta_2`, as for Adam.
      epsilon: :math:`\epsilon`, as for Adam.

    Raises:
      TypeError: as for Adam: an argument of the wrong type.
      ValueError: as for Adam: an argument out of range or not finite.

    Example:
      >>> opt = fg.train.NadamOptimizer(0.1)
      >>> state, _ = opt.minimize(lambda p: 2.0 * p["w"], opt.init({"w": jnp.float32(1.0)}))
      >>> round(float(state.params["w"]), 4)  # 1 - 0.1 (0.1 * 0.2 + 0.9 * 0.02) / 0.02
      0.81
    """

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        delta, m, v = _kernels.adam(
            grad, slots["m"], slots["v"], step.prepared["alpha"], self._beta1_t, self._beta2_t,
            self._epsilon_t, nesterov=True,
        )  # fmt: skip
        return var - delta, {"m": m, "v": v}

    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        lr = step.prepared["alpha"]
        indices = grad.indices
        # m_t = beta1 * m + (1 - beta1) * g_t, v_t = beta2 * v + (1 - beta2) * (g_t * g_t)
        m_t, v_t = _kernels.adam_sparse_moments(
            grad, slots["m"], slots["v"], self._beta1_t, self._beta2_t
        )
        # m_bar = (1 - beta1) * g_t + beta1 * m_t
        m_bar = grad.values * (1 - self._beta1_t) + self._beta1_t * m_t[indices]
        v_t_slice = v_t[indices]
        v_sqrt = jnp.sqrt(v_t_slice)
        var_update = var.at[indices].add(-lr * m_bar / (v_sqrt + self._epsilon_t))
        return var_update, {"m": m_t, "v": v_t}
