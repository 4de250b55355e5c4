r"""``tf.contrib.opt.PowerSignOptimizer`` (``powersign.py``, r1.15).

One slot ``m`` (``<var>/PowerSignOptimizer``); the dense rule is the ``ApplyPowerSign``
kernel (``exp``), the sparse rule the original's ``_apply_sparse`` (``math_ops.pow`` of
``e``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad._types import LearningRate
from funcgrad._types import Schedule
from funcgrad.train.optimizers.contrib._sign import SignOptimizer

__all__ = ["PowerSignOptimizer"]


class PowerSignOptimizer(SignOptimizer):
    r"""``tf.contrib.opt.PowerSignOptimizer`` (Bello et al., 2017).

    .. math::
      m \leftarrow \beta m + (1 - \beta) g, \quad
      w \leftarrow w - \eta \exp(\ln(\text{base})\, d(t)
        \operatorname{sign}(g) \operatorname{sign}(m)) g

    with :math:`d(t)` = ``sign_decay_fn(global_step)`` (1 without one).  An
    ``fg.IndexedSlices`` gradient decays all of :math:`m` and moves only the touched rows
    of :math:`w`, as the original's sparse rule, which computes the multiplier as
    ``pow(e, ln(base) d(t) sign(g) sign(m))`` where the dense kernel takes ``exp`` (the two
    may differ in the last bits).  optax has no PowerSign.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      base: the base, :math:`e` by default.
      beta: :math:`\beta`.
      sign_decay_fn: ``None`` or a function of ``global_step``.

    Raises:
      TypeError: a hyperparameter is not a number, or ``sign_decay_fn`` is not a function
        of the step returning one floating scalar.
      ValueError: ``base`` is not positive, or ``beta`` is outside ``[0, 1)``.

    Example:
      >>> opt = fg.train.PowerSignOptimizer(0.1)
      >>> state, _ = opt.minimize(lambda p: p["w"], opt.init({"w": jnp.float32(1.0)}))
      >>> round(float(state.params["w"]), 4)  # 1 - 0.1 * e
      0.7282
    """

    slots: ClassVar[Mapping[str, str]] = {"m": "PowerSignOptimizer"}

    def __init__(
        self,
        learning_rate: LearningRate = 0.1,
        base: Annotated[float, "> 0"] = math.e,
        beta: Annotated[float, "in [0, 1)"] = 0.9,
        sign_decay_fn: Schedule | None = None,
    ) -> None:
        super().__init__(learning_rate, beta, sign_decay_fn, base=base)
        self._logbase_t = np.float32(math.log(base))

    def _multiplier(self, sign_gm: jax.Array, sign_decay: jax.Array) -> jax.Array:
        return jnp.exp(self._logbase_t * sign_decay * sign_gm)

    def _sparse_multiplier(self, sign_gm: jax.Array, sign_decay: jax.Array) -> jax.Array:
        e_t = jnp.float32(math.e)
        return jnp.power(e_t, self._logbase_t * sign_decay * sign_gm)
