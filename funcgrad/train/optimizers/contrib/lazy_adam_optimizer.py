r"""``tf.contrib.opt.LazyAdamOptimizer`` (``lazy_adam_optimizer.py``, r1.15), on
``AdamOptimizer``: Adam whose sparse rule changes only the rows of the batch.
"""

from __future__ import annotations

import jax

from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train.optimizers import _kernels
from funcgrad.train.optimizers.base import TF1Step
from funcgrad.train.optimizers.tf1 import AdamOptimizer

__all__ = ["LazyAdamOptimizer"]

Slots = dict[str, jax.Array]
Array = jax.Array


class LazyAdamOptimizer(AdamOptimizer):
    r"""``tf.contrib.opt.LazyAdamOptimizer``: Adam whose sparse step touches only the
    rows of the batch.

    For an ``fg.IndexedSlices`` gradient (duplicate ids summed first), only the touched
    rows :math:`i` of :math:`m`, :math:`v` and the variable change:

    .. math::
      m_i \leftarrow \beta_1 m_i + (1 - \beta_1) g_i, \quad
      v_i \leftarrow \beta_2 v_i + (1 - \beta_2) g_i^2, \quad
      w_i \leftarrow w_i - \eta \frac{\sqrt{1 - \beta_2^t}}{1 - \beta_1^t}
        \frac{m_i}{\sqrt{v_i} + \hat\epsilon}

    so a step costs the batch, not the table.  The bias correction's :math:`t` counts
    every step (``beta1_power`` / ``beta2_power`` advance once per step, as in
    TensorFlow), not the steps that touched the row.  A dense gradient gets
    :class:`AdamOptimizer`'s update; the slots, their TF checkpoint names (``W/Adam``,
    ``W/Adam_1``, ``beta1_power``) and the arguments are Adam's.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``, as for Adam.
      beta1: :math:`\beta_1`, as for Adam.
      beta2: :math:`\beta_2`, as for Adam.
      epsilon: :math:`\hat\epsilon`, as for Adam.

    Raises:
      ValueError: an argument is negative or not finite.

    Example:
      >>> opt = fg.train.LazyAdamOptimizer(0.1)
      >>> state = opt.init(jnp.ones((3, 2)))
      >>> g = fg.IndexedSlices(jnp.ones((2, 2)), jnp.array([2, 2]), (3, 2))
      >>> state = opt.apply_gradients([(g, None)], state)
      >>> np.asarray(state.params, np.float64).round(4).tolist()  # rows 0, 1 untouched
      [[1.0, 1.0], [1.0, 1.0], [0.9, 0.9]]
    """

    _widen_for_sparse = False

    def _apply_sparse(
        self, grad: IndexedSlices, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        def kernel(g: Array, w: Array, m: Array, v: Array) -> tuple[Array, ...]:
            beta1, beta2 = self._beta1_t.astype(m.dtype), self._beta2_t.astype(v.dtype)
            alpha = step.prepared["alpha"].astype(w.dtype)
            return _kernels.lazy_adam(g, w, m, v, alpha, beta1, beta2, self._epsilon)

        var, m, v = _kernels.on_rows(kernel, grad, var, slots["m"], slots["v"])
        return var, {"m": m, "v": v}
