r"""``tf.contrib.opt.LARSOptimizer`` (``lars_optimizer.py``, r1.15).

Momentum with a layer-wise trust ratio; one slot ``momentum`` (``<var>/LARSOptimizer``).
The rule is TensorFlow's ``ApplyMomentum`` kernel at the scaled rate (the original calls
``training_ops.apply_momentum``), and its sparse rule ``SparseApplyMomentum`` at the rate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated
from typing import ClassVar

import jax
import jax.numpy as jnp

from funcgrad._types import LearningRate
from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train.optimizers import _kernels
from funcgrad.train.optimizers.base import TF1Optimizer
from funcgrad.train.optimizers.base import TF1Step

__all__ = ["LARSOptimizer"]

Slots = dict[str, jax.Array]


class LARSOptimizer(TF1Optimizer):
    r"""``tf.contrib.opt.LARSOptimizer``: momentum with a layer-wise trust ratio (You,
    Gitman & Ginsburg, 2017, "Large Batch Training of Convolutional Networks").

    For a variable no ``skip_list`` entry is a substring of (as the original's
    ``v in var.name``),

    .. math::
      r = \begin{cases} \frac{\text{eeta} \|w\|}{\|g\| + \text{weight\_decay} \|w\|
        + \epsilon} & \|w\| > 0 \text{ and } \|g\| > 0 \\ 1 & \text{otherwise}
        \end{cases}

    (:math:`r = 1` for a skipped one), then TensorFlow's momentum with the rate
    :math:`\eta r`: :math:`a \leftarrow \mu a + g`, :math:`w \leftarrow w - \eta r a`
    (Nesterov: :math:`w \leftarrow w - \eta r (g + \mu a)`).  As in the original,
    ``weight_decay`` enters the ratio only (the gradient is not decayed), and an
    ``fg.IndexedSlices`` gradient gets plain sparse momentum at :math:`\eta` on the
    touched rows.  ``optax.lars`` is another rule (it adds the decay to the gradient and
    scales the update, not the rate of a momentum).

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      momentum: :math:`\mu`, zero or more.
      weight_decay: zero or more.
      eeta: the LARS coefficient.
      epsilon: added to the ratio's denominator.
      skip_list: ``None`` or a list of strings; a variable whose name contains one
        keeps :math:`r = 1`.
      use_nesterov: Nesterov momentum.

    Raises:
      TypeError: a hyperparameter is not a number, or ``skip_list`` is not a list of
        strings.
      ValueError: ``momentum``, ``weight_decay``, ``eeta`` or ``epsilon`` is negative or
        not finite (the original checks the first two); ``skip_list`` matches none of the
        variables of a step.

    Example:
      >>> opt = fg.train.LARSOptimizer(1.0, momentum=0.0, weight_decay=0.0, eeta=0.1)
      >>> state = opt.init({"w": jnp.array([3.0, 4.0])})
      >>> state, _ = opt.minimize(lambda p: p["w"].sum(), state)
      >>> np.asarray(state.params["w"], np.float64).round(4).tolist()  # r = 0.1 * 5 / sqrt(2)
      [2.6464, 3.6464]
    """

    slots: ClassVar[Mapping[str, str]] = {"momentum": "LARSOptimizer"}
    _widen_for_sparse = False

    def __init__(
        self,
        learning_rate: LearningRate,
        momentum: Annotated[float, ">= 0"] = 0.9,
        weight_decay: Annotated[float, ">= 0"] = 0.0001,
        eeta: Annotated[float, ">= 0"] = 0.001,
        epsilon: Annotated[float, ">= 0"] = 0.0,
        skip_list: list[str] | None = None,
        use_nesterov: bool = False,
    ) -> None:
        super().__init__(
            learning_rate, momentum=momentum, weight_decay=weight_decay, eeta=eeta,
            epsilon=epsilon, use_nesterov=use_nesterov,
        )  # fmt: skip
        self._momentum = momentum
        self._weight_decay = weight_decay
        self._eeta = eeta
        self._epsilon = epsilon
        self._skip_list = self._check_patterns("skip_list", skip_list) if skip_list else None
        self._use_nesterov = use_nesterov

    def _check_names(self, names: list[str]) -> None:
        substrings = [re.escape(v) for v in self._skip_list or []]
        self._check_matches("skip_list", substrings, names)

    def compute_lr(self, grad: jax.Array, var: jax.Array, step: TF1Step) -> jax.Array:
        """The learning rate times the trust ratio of ``var`` (the rate for a skipped one).

        Args:
          grad: the gradient of ``var``.
          var: the variable.
          step: the step's values (the learning rate, the variable's name).

        Returns:
          The scaled rate, a float32 scalar.

        Example:
          >>> opt = fg.train.LARSOptimizer(1.0, eeta=0.1, weight_decay=0.0)
          >>> step = fg.train.TF1Step(jnp.float32(1.0), jnp.int32(0), "w", {})
          >>> round(float(opt.compute_lr(jnp.ones(4), jnp.ones(4), step)), 4)  # 0.1 * 2 / 2
          0.1
        """
        scaled_lr = step.learning_rate
        if self._skip_list is None or not any(v in step.name for v in self._skip_list):
            w_norm = jnp.linalg.norm(var.ravel(), ord=2)
            g_norm = jnp.linalg.norm(grad.ravel(), ord=2)
            trust_ratio = jnp.where(
                jnp.greater(w_norm, 0),
                jnp.where(
                    jnp.greater(g_norm, 0),
                    (self._eeta * w_norm / (g_norm + self._weight_decay * w_norm + self._epsilon)),
                    1.0,
                ),
                1.0,
            )
            scaled_lr = step.learning_rate * trust_ratio
        return scaled_lr

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        scaled_lr = self.compute_lr(grad, var, step)
        var, accum = _kernels.momentum(
            grad, var, slots["momentum"], scaled_lr, self._momentum, self._use_nesterov
        )
        return var, {"momentum": accum}

    # Fallback to momentum optimizer for sparse tensors
    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        def kernel(g: jax.Array, w: jax.Array, a: jax.Array) -> tuple[jax.Array, ...]:
            lr = step.learning_rate.astype(w.dtype)
            return _kernels.momentum(g, w, a, lr, self._momentum, self._use_nesterov)

        var, accum = _kernels.on_rows(kernel, grad, var, slots["momentum"])
        return var, {"momentum": accum}
