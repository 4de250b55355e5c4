r"""ALBERT's ``LAMBOptimizer`` (``google-research/albert``, ``lamb_optimizer.py``).

Source: https://github.com/google-research/albert/blob/6ca4dfd0d13495a0a0ed7931f452018e08f93ced/lamb_optimizer.py.
The original repeats BERT's ``AdamWeightDecayOptimizer`` and multiplies its update by
the layer-wise trust ratio; here it extends that class, so only the ratio is new.
"""

from __future__ import annotations

import re
from typing import Annotated

import jax
import jax.numpy as jnp

from funcgrad._types import LearningRate
from funcgrad.train.optimizers.base import TF1Step
from funcgrad.train.optimizers.bert import AdamWeightDecayOptimizer

__all__ = ["LAMBOptimizer"]


class LAMBOptimizer(AdamWeightDecayOptimizer):
    r"""ALBERT's ``LAMBOptimizer``: BERT's update scaled per variable by a trust ratio
    (You et al., 2019, "Large Batch Optimization for Deep Learning").

    With :math:`u` the update of :class:`AdamWeightDecayOptimizer` (no bias correction,
    decoupled decay),

    .. math::
      r = \begin{cases} \|w\|_2 / \|u\|_2 & \|w\|_2 > 0 \text{ and } \|u\|_2 > 0 \\
        1 & \text{otherwise} \end{cases}, \quad
      w \leftarrow w - r \eta u

    where :math:`r = 1` for a variable whose name matches a pattern of
    ``exclude_from_layer_adaptation`` (``re.search``; when it is ``None`` or empty,
    ``exclude_from_weight_decay`` serves, as in the original).  The norms are over the
    whole variable.  ``optax.lamb`` corrects the bias and has no exclusions.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      weight_decay_rate: the decay of :class:`AdamWeightDecayOptimizer`.
      beta_1: the decay of the first moment.
      beta_2: the decay of the second moment.
      epsilon: added to :math:`\sqrt{v}`.
      exclude_from_weight_decay: ``None`` or a list of regular expressions.
      exclude_from_layer_adaptation: ``None`` or a list of regular expressions.

    Raises:
      TypeError: a hyperparameter is not a number, or a pattern list is not a list of
        strings.
      ValueError: a hyperparameter is out of its range or not finite; a pattern list
        matches none of the variables.

    Example:
      >>> opt = fg.train.LAMBOptimizer(0.1)
      >>> state = opt.init({"w": jnp.array([3.0, 4.0])})
      >>> state, _ = opt.minimize(lambda p: p["w"].sum(), state)
      >>> np.asarray(state.params["w"], np.float64).round(4).tolist()  # r = 5 / |u|
      [2.6464, 3.6464]
    """

    def __init__(
        self,
        learning_rate: LearningRate,
        weight_decay_rate: Annotated[float, ">= 0"] = 0.0,
        beta_1: Annotated[float, "in [0, 1)"] = 0.9,
        beta_2: Annotated[float, "in [0, 1)"] = 0.999,
        epsilon: Annotated[float, ">= 0"] = 1e-6,
        exclude_from_weight_decay: list[str] | None = None,
        exclude_from_layer_adaptation: list[str] | None = None,
    ) -> None:
        """Constructs a LAMBOptimizer."""
        super().__init__(
            learning_rate, weight_decay_rate, beta_1, beta_2, epsilon, exclude_from_weight_decay
        )
        exclude_from_layer_adaptation = self._check_patterns(
            "exclude_from_layer_adaptation", exclude_from_layer_adaptation
        )
        # exclude_from_layer_adaptation is set to exclude_from_weight_decay if the
        # arg is None.
        if exclude_from_layer_adaptation:
            self.exclude_from_layer_adaptation = exclude_from_layer_adaptation
        else:
            self.exclude_from_layer_adaptation = self.exclude_from_weight_decay

    def _check_names(self, names: list[str]) -> None:
        super()._check_names(names)
        self._check_matches(
            "exclude_from_layer_adaptation", self.exclude_from_layer_adaptation, names
        )

    def _apply_dense(
        self, grad: jax.Array, param: jax.Array, slots: dict[str, jax.Array], step: TF1Step
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        param_name = self._get_variable_name(step.name)

        update, next_slots = self._adam_update(grad, param, slots, param_name)

        ratio = jnp.float32(1.0)
        if self._do_layer_adaptation(param_name):
            w_norm = jnp.linalg.norm(param.ravel(), ord=2)
            g_norm = jnp.linalg.norm(update.ravel(), ord=2)
            ratio = jnp.where(
                jnp.greater(w_norm, 0), jnp.where(jnp.greater(g_norm, 0), w_norm / g_norm, 1.0), 1.0
            )

        update_with_lr = ratio * step.learning_rate * update

        next_param = param - update_with_lr

        return next_param, next_slots

    def _do_layer_adaptation(self, param_name: str) -> bool:
        """Whether to do layer-wise learning rate adaptation for `param_name`."""
        if self.exclude_from_layer_adaptation:
            for r in self.exclude_from_layer_adaptation:
                if re.search(r, param_name) is not None:
                    return False
        return True
