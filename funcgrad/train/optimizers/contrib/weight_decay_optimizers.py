r"""``tf.contrib.opt``'s decoupled weight decay (``weight_decay_optimizers.py``, r1.15).

``DecoupledWeightDecayExtension`` puts ``var -= weight_decay * var`` in front of the
rule of the optimizer it extends; ``AdamWOptimizer`` extends ``AdamOptimizer`` and
``MomentumWOptimizer`` ``MomentumOptimizer``, as in the original, with their slots named
after their default names (``<var>/AdamW``, ``<var>/AdamW_1``; ``<var>/MomentumW``).
``decay_var_list`` is an option of the optimizer (any form of ``var_list``), and
TensorFlow's keyword of ``minimize`` / ``apply_gradients`` sets it for one call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated
from typing import Any
from typing import ClassVar

import jax
import jax.numpy as jnp

from funcgrad._types import LearningRate
from funcgrad._types import Schedule
from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train._var_list import VarList
from funcgrad.train.optimizers.base import TF1Optimizer
from funcgrad.train.optimizers.base import TF1Step
from funcgrad.train.optimizers.tf1 import AdamOptimizer
from funcgrad.train.optimizers.tf1 import MomentumOptimizer

__all__ = ["AdamWOptimizer", "MomentumWOptimizer"]

Slots = dict[str, jax.Array]


class _DecoupledWeightDecayExtension(TF1Optimizer):
    """``DecoupledWeightDecayExtension``: ``var -= weight_decay * var`` before the
    extended optimizer's rule, for the variables ``decay_var_list`` selects (all without
    one).  It comes first among the bases, as in the original, so its rules run the decay,
    then the next base's rule on the decayed variable."""

    _widen_for_sparse = True  # the decay reads the whole rows of the variable

    def __init__(
        self,
        weight_decay: Annotated[float | Schedule, ">= 0"],
        *,
        decay_var_list: VarList = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        caller = f"fg.train.{type(self).__name__}(...)"
        self._check_hyperparameters(caller, {"weight_decay": weight_decay})
        self._check_var_list(caller, "decay_var_list", decay_var_list)
        self.hyperparameters = {"weight_decay": weight_decay, **self.hyperparameters}
        self._weight_decay = weight_decay
        self._decay_var_list = decay_var_list

    def _var_lists(self) -> dict[str, VarList]:
        return {"decay_var_list": self._decay_var_list}

    def _decays(self, step: TF1Step) -> bool:
        chosen = step.selected.get("decay_var_list")
        return chosen is None or step.name in chosen

    def _prepare(self, step: TF1Step) -> dict[str, Any]:
        """The extended optimizer's values, and the weight decay of this step (a
        schedule's at ``global_step`` before it)."""
        if callable(self._weight_decay):
            weight_decay = jnp.asarray(self._weight_decay(step.global_step), jnp.float32)
        else:
            weight_decay = jnp.float32(self._weight_decay)
        return {**super()._prepare(step), "weight_decay": weight_decay}

    def _decay_weights_op(self, var: jax.Array, step: TF1Step) -> jax.Array:
        if self._decays(step):
            return var - step.prepared["weight_decay"] * var
        return var

    def _decay_weights_sparse_op(
        self, var: jax.Array, indices: jax.Array, step: TF1Step
    ) -> jax.Array:
        if self._decays(step):
            update = -step.prepared["weight_decay"] * var[indices]
            return var.at[indices].add(update)
        return var

    # The extended optimizer's rules, on the variable after the decay.
    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        return super()._apply_dense(grad, self._decay_weights_op(var, step), slots, step)

    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        var = self._decay_weights_sparse_op(var, grad.indices, step)
        return super()._apply_sparse(grad, var, slots, step)


class AdamWOptimizer(_DecoupledWeightDecayExtension, AdamOptimizer):
    r"""``tf.contrib.opt.AdamWOptimizer``: TensorFlow's Adam with decoupled weight decay
    (Loshchilov & Hutter, "Decoupled Weight Decay Regularization").

    .. math::
      w \leftarrow w - \lambda w, \quad
      m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad
      v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
      w \leftarrow w - \eta \frac{\sqrt{1 - \beta_2^t}}{1 - \beta_1^t}
        \frac{m}{\sqrt{v} + \epsilon}

    The decay :math:`\lambda` is not scaled by the learning rate, and comes first, as in
    the original.  ``decay_var_list`` (any form of ``var_list``) selects the variables
    decayed; TensorFlow's ``minimize(..., decay_var_list=...)`` /
    ``apply_gradients(..., decay_var_list=...)`` take it too, for that call.  An
    ``fg.IndexedSlices`` gradient decays only the touched rows, then moves all of
    :math:`m`, :math:`v` and
    :math:`w` (Adam's sparse rule).  Slots ``<var>/AdamW``, ``<var>/AdamW_1`` and the
    non-slot ``beta1_power`` / ``beta2_power``, the original's names.  ``optax.adamw``
    scales the decay by the learning rate and applies it after the update.

    Args:
      weight_decay: :math:`\lambda`, a number or a ``schedule(step)`` (TensorFlow's
        tensor of ``global_step``, such as the learning rate's decay times a factor).
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      beta1: :math:`\beta_1`.
      beta2: :math:`\beta_2`.
      epsilon: :math:`\epsilon`.
      decay_var_list: the variables to decay, in a form of ``var_list``: ``None`` (all),
        a list of variable names, a predicate ``(name, leaf) -> bool`` or a boolean
        pytree mask.

    Raises:
      TypeError: a hyperparameter is not a number (or ``weight_decay`` a schedule of one
        floating scalar), or ``decay_var_list`` is a string.
      ValueError: a hyperparameter is out of its range or not finite.

    Example:
      >>> opt = fg.train.AdamWOptimizer(0.1, 0.01)
      >>> state, _ = opt.minimize(lambda p: p["w"], opt.init({"w": jnp.float32(1.0)}))
      >>> round(float(state.params["w"]), 4)  # 1 - 0.1 * 1 - 0.01
      0.89
    """

    slots: ClassVar[Mapping[str, str]] = {"m": "AdamW", "v": "AdamW"}

    def __init__(
        self,
        weight_decay: Annotated[float | Schedule, ">= 0"],
        learning_rate: LearningRate = 0.001,
        beta1: Annotated[float, "in [0, 1)"] = 0.9,
        beta2: Annotated[float, "in [0, 1)"] = 0.999,
        epsilon: Annotated[float, ">= 0"] = 1e-8,
        decay_var_list: VarList = None,
    ) -> None:
        super().__init__(
            weight_decay, learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon,
            decay_var_list=decay_var_list,
        )  # fmt: skip


class MomentumWOptimizer(_DecoupledWeightDecayExtension, MomentumOptimizer):
    r"""``tf.contrib.opt.MomentumWOptimizer``: TensorFlow's momentum with decoupled weight
    decay (SGDW, Loshchilov & Hutter).

    .. math::
      w \leftarrow w - \lambda w, \quad a \leftarrow \mu a + g, \quad
      w \leftarrow w - \eta a \quad
      (\text{Nesterov: } w \leftarrow w - \eta (g + \mu a))

    The decay :math:`\lambda` is not scaled by the learning rate, and comes first, as in
    the original; ``decay_var_list`` (any form of ``var_list``) selects the variables
    decayed, and TensorFlow's ``minimize`` / ``apply_gradients`` take it for one call.
    An ``fg.IndexedSlices`` gradient decays and moves only the touched rows of :math:`w`
    and :math:`a`.  Slot ``<var>/MomentumW``, the original's name.

    Args:
      weight_decay: :math:`\lambda`, a number or a ``schedule(step)`` (TensorFlow's
        tensor of ``global_step``, such as the learning rate's decay times a factor).
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      momentum: :math:`\mu`.
      use_nesterov: Nesterov momentum.
      decay_var_list: the variables to decay, as for :class:`AdamWOptimizer`.

    Raises:
      TypeError: a hyperparameter is not a number (or ``weight_decay`` a schedule of one
        floating scalar), or ``decay_var_list`` is a string.
      ValueError: a hyperparameter is out of its range or not finite.

    Example:
      >>> opt = fg.train.MomentumWOptimizer(0.1, 0.01, 0.9)
      >>> state, _ = opt.minimize(lambda p: p["w"], opt.init({"w": jnp.float32(1.0)}))
      >>> round(float(state.params["w"]), 4)  # 1 - 0.1 * 1 - 0.01 * 1
      0.89
    """

    slots: ClassVar[Mapping[str, str]] = {"momentum": "MomentumW"}

    def __init__(
        self,
        weight_decay: Annotated[float | Schedule, ">= 0"],
        learning_rate: LearningRate,
        momentum: Annotated[float, ">= 0"],
        use_nesterov: bool = False,
        decay_var_list: VarList = None,
    ) -> None:
        super().__init__(
            weight_decay, learning_rate=learning_rate, momentum=momentum,
            use_nesterov=use_nesterov, decay_var_list=decay_var_list,
        )  # fmt: skip
