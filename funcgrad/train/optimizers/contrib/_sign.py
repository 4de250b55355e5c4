"""What ``addsign.py`` and ``powersign.py`` (r1.15) share — private.

Design note
-----------
The two originals are one file each, the same but for the multiplier of the gradient:
the slot ``m`` (named after the optimizer), the learning rate, ``beta`` and the sign decay
(``sign_decay_fn(global_step)``, read at the step before the update), and the dense rule
``var -= lr * multiplier(sign(g) sign(m)) * g`` of the ``ApplyAddSign`` /
``ApplyPowerSign`` kernels.  :class:`SignOptimizer` holds that; a subclass gives
``_multiplier`` (the dense kernel's) and ``_sparse_multiplier`` (its original's
``_apply_sparse``, the rest of which the two share).
"""

from __future__ import annotations

from typing import Annotated
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad._types import LearningRate
from funcgrad._types import Schedule
from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train.optimizers import _kernels
from funcgrad.train.optimizers.base import TF1Optimizer
from funcgrad.train.optimizers.base import TF1Step

Slots = dict[str, jax.Array]


class SignOptimizer(TF1Optimizer):
    """AddSign's and PowerSign's slot, hyperparameters, sign decay and dense rule."""

    def __init__(
        self,
        learning_rate: LearningRate,
        beta: Annotated[float, "in [0, 1)"],
        sign_decay_fn: Schedule | None,
        **more: Any,
    ) -> None:
        super().__init__(learning_rate, beta=beta, sign_decay_fn=sign_decay_fn, **more)
        self._beta_t = np.float32(beta)
        self._sign_decay_fn = sign_decay_fn

    def _sign_decay(self, step: TF1Step) -> jax.Array:
        if self._sign_decay_fn is None:
            return jnp.float32(1.0)
        return jnp.asarray(self._sign_decay_fn(step.global_step), jnp.float32)

    def _multiplier(self, sign_gm: jax.Array, sign_decay: jax.Array) -> jax.Array:
        """The dense kernel's multiplier of the gradient, from ``sign(g) * sign(m)``."""
        raise NotImplementedError

    def _sparse_multiplier(self, sign_gm: jax.Array, sign_decay: jax.Array) -> jax.Array:
        """The sparse rule's multiplier (the dense one unless the original writes it
        otherwise)."""
        return self._multiplier(sign_gm, sign_decay)

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        m = _kernels.sign_moment(grad, slots["m"], self._beta_t)
        sign_gm = jnp.sign(grad) * jnp.sign(m)
        multiplier = self._multiplier(sign_gm, self._sign_decay(step))
        return var - step.learning_rate * multiplier * grad, {"m": m}

    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        m_t = _kernels.sign_moment(grad.to_dense(), slots["m"], self._beta_t)
        sign_gm = jnp.sign(m_t)[grad.indices] * jnp.sign(grad.values)
        multiplier_values = self._sparse_multiplier(sign_gm, self._sign_decay(step))
        final_update = step.learning_rate * multiplier_values * grad.values
        var_update = var.at[grad.indices].add(-final_update)
        return var_update, {"m": m_t}
