r"""BERT's optimizer (``google-research/bert``, ``optimization.py``), on :class:`TF1Optimizer`.

Source: https://github.com/google-research/bert/blob/ea96c0dda296799488cd98c53179f6b1246f24d3/optimization.py
(ALBERT and ELECTRA copy it).  The class below reads as the original does: its
``apply_gradients`` loop body, for one ``(grad, param)``, is ``_apply_dense``; its two
``tf.get_variable(name=param_name + "/adam_m")`` are the ``slots`` (TF names
``<var>/adam_m``, ``<var>/adam_v``).  Like the original it keeps no bias correction and
no non-slot variable; an ``fg.IndexedSlices`` gradient is made dense first, as
``tf.multiply`` makes the original's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated
from typing import ClassVar

import jax
import jax.numpy as jnp

from funcgrad._types import LearningRate
from funcgrad.train.optimizers.base import TF1Optimizer
from funcgrad.train.optimizers.base import TF1Step

__all__ = ["AdamWeightDecayOptimizer"]


class AdamWeightDecayOptimizer(TF1Optimizer):
    r"""BERT's ``AdamWeightDecayOptimizer``: Adam without bias correction, with decoupled
    weight decay.

    .. math::
      m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad
      v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
      w \leftarrow w - \eta \left(\frac{m}{\sqrt{v} + \epsilon} + \lambda w\right)

    where the decay :math:`\lambda w` is left out for a variable whose name matches a
    pattern of ``exclude_from_weight_decay`` (``re.search``, as the original).  Names are
    funcgrad's (``"bert/encoder/LayerNorm/gamma"``), as the original matches TF's.

    ``optax.adamw`` differs: it corrects the bias (the docs page *Optimizers of TF1
    projects* compares the first steps), and decays every variable unless
    given a mask.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      weight_decay_rate: :math:`\lambda`.
      beta_1: :math:`\beta_1`.
      beta_2: :math:`\beta_2`.
      epsilon: :math:`\epsilon`.
      exclude_from_weight_decay: ``None`` or a list of regular expressions.

    Raises:
      TypeError: a hyperparameter is not a number, or ``exclude_from_weight_decay`` is
        not a list of strings.
      ValueError: a hyperparameter is out of its range or not finite;
        ``exclude_from_weight_decay`` matches none of the variables (the original would
        decay them all).

    Example:
      >>> opt = fg.train.AdamWeightDecayOptimizer(0.1, weight_decay_rate=0.5,
      ...     exclude_from_weight_decay=["bias"])
      >>> state = opt.init({"kernel": jnp.float32(1.0), "bias": jnp.float32(1.0)})
      >>> state, _ = opt.minimize(lambda p: p["kernel"] + p["bias"], state)
      >>> {k: round(float(v), 4) for k, v in state.params.items()}
      {'bias': 0.6838, 'kernel': 0.6338}
    """

    slots: ClassVar[Mapping[str, str]] = {"adam_m": "adam_m", "adam_v": "adam_v"}

    def __init__(
        self,
        learning_rate: LearningRate,
        weight_decay_rate: Annotated[float, ">= 0"] = 0.0,
        beta_1: Annotated[float, "in [0, 1)"] = 0.9,
        beta_2: Annotated[float, "in [0, 1)"] = 0.999,
        epsilon: Annotated[float, ">= 0"] = 1e-6,
        exclude_from_weight_decay: list[str] | None = None,
    ) -> None:
        """Constructs a AdamWeightDecayOptimizer."""
        super().__init__(
            learning_rate, weight_decay_rate=weight_decay_rate, beta_1=beta_1, beta_2=beta_2,
            epsilon=epsilon,
        )  # fmt: skip
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = self._check_patterns(
            "exclude_from_weight_decay", exclude_from_weight_decay
        )

    def _check_names(self, names: list[str]) -> None:
        if self.weight_decay_rate:
            self._check_matches("exclude_from_weight_decay", self.exclude_from_weight_decay, names)

    def _apply_dense(
        self, grad: jax.Array, param: jax.Array, slots: dict[str, jax.Array], step: TF1Step
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        param_name = self._get_variable_name(step.name)

        update, next_slots = self._adam_update(grad, param, slots, param_name)

        update_with_lr = step.learning_rate * update

        next_param = param - update_with_lr

        return next_param, next_slots

    def _adam_update(
        self, grad: jax.Array, param: jax.Array, slots: dict[str, jax.Array], param_name: str
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """The update before the learning rate, and the new slots (shared with LAMB)."""
        m = slots["adam_m"]
        v = slots["adam_v"]

        # Standard Adam update.
        next_m = jnp.multiply(self.beta_1, m) + jnp.multiply(1.0 - self.beta_1, grad)
        next_v = jnp.multiply(self.beta_2, v) + jnp.multiply(1.0 - self.beta_2, jnp.square(grad))

        update = next_m / (jnp.sqrt(next_v) + self.epsilon)

        if self._do_use_weight_decay(param_name):
            update += self.weight_decay_rate * param

        return update, {"adam_m": next_m, "adam_v": next_v}

    def _do_use_weight_decay(self, param_name: str) -> bool:
        """Whether to use L2 weight decay for `param_name`."""
        if not self.weight_decay_rate:
            return False
        if self.exclude_from_weight_decay:
            for r in self.exclude_from_weight_decay:
                if re.search(r, param_name) is not None:
                    return False
        return True

    def _get_variable_name(self, param_name: str) -> str:
        """Get the variable name from the tensor name (``"W:0"`` -> ``"W"``)."""
        m = re.match("^(.*):\\d+$", param_name)
        if m is not None:
            param_name = m.group(1)
        return param_name
