r"""``tf.contrib.opt.AddSignOptimizer`` (``addsign.py``, r1.15).

One slot ``m`` (``<var>/AddSignOptimizer``); the dense rule is the ``ApplyAddSign`` kernel,
the sparse rule the original's ``_apply_sparse``: all of ``m`` decayed, only the touched
rows of the variable moved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated
from typing import ClassVar

import jax
import numpy as np

from funcgrad._types import LearningRate
from funcgrad._types import Schedule
from funcgrad.train.optimizers.contrib._sign import SignOptimizer

__all__ = ["AddSignOptimizer"]


class AddSignOptimizer(SignOptimizer):
    r"""``tf.contrib.opt.AddSignOptimizer`` (Bello et al., 2017, "Neural Optimizer Search
    with Reinforcement Learning").

    .. math::
      m \leftarrow \beta m + (1 - \beta) g, \quad
      w \leftarrow w - \eta (\alpha + d(t) \operatorname{sign}(g) \operatorname{sign}(m)) g

    with :math:`d(t)` = ``sign_decay_fn(global_step)`` (1 without one).  An
    ``fg.IndexedSlices`` gradient decays all of :math:`m` and moves only the touched rows
    of :math:`w`, as the original's sparse rule.  optax has no AddSign.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      alpha: :math:`\alpha`.
      beta: :math:`\beta`.
      sign_decay_fn: ``None`` or a function of ``global_step``
        (:func:`get_linear_decay_fn`, ...).

    Raises:
      TypeError: a hyperparameter is not a number, or ``sign_decay_fn`` is not a function
        of the step returning one floating scalar.
      ValueError: ``alpha`` is not finite, or ``beta`` is outside ``[0, 1)``.

    Example:
      >>> opt = fg.train.AddSignOptimizer(0.1)
      >>> state, _ = opt.minimize(lambda p: 2.0 * p["w"], opt.init({"w": jnp.float32(1.0)}))
      >>> round(float(state.params["w"]), 4)  # 1 - 0.1 * (1 + 1) * 2
      0.6
    """

    slots: ClassVar[Mapping[str, str]] = {"m": "AddSignOptimizer"}

    def __init__(
        self,
        learning_rate: LearningRate = 0.1,
        alpha: Annotated[float, "finite"] = 1.0,
        beta: Annotated[float, "in [0, 1)"] = 0.9,
        sign_decay_fn: Schedule | None = None,
    ) -> None:
        super().__init__(learning_rate, beta, sign_decay_fn, alpha=alpha)
        self._alpha_t = np.float32(alpha)

    def _multiplier(self, sign_gm: jax.Array, sign_decay: jax.Array) -> jax.Array:
        return self._alpha_t + sign_decay * sign_gm
