r"""``tf.contrib.opt``'s optimizers (TensorFlow 1.15), on :class:`TF1Optimizer`.

Sources: ``tensorflow/contrib/opt/python/training/adamax.py``, ``nadam_optimizer.py``,
``addsign.py``, ``powersign.py`` and ``sign_decay.py`` at r1.15, and the ``ApplyAdaMax``
/ ``ApplyAdam`` / ``ApplyAddSign`` / ``ApplyPowerSign`` kernels of
``tensorflow/core/kernels/training_ops.cc`` their dense rules call.  AdaMax and Nadam
extend ``tf.train.AdamOptimizer``: slots ``m`` and ``v`` named after the optimizer
(``<var>/AdaMax``, ``<var>/AdaMax_1``; Nadam keeps Adam's name, ``<var>/Adam``) and the
non-slot ``beta1_power`` / ``beta2_power``, multiplied by the betas after each step.
LARS keeps one slot ``momentum`` (``<var>/LARSOptimizer``).  AddSign and PowerSign keep
one slot ``m`` (``<var>/AddSignOptimizer``,
``<var>/PowerSignOptimizer``) and read ``sign_decay_fn(global_step)``, the step before
the update.  AdamW and MomentumW (``weight_decay_optimizers.py``) put
``DecoupledWeightDecayExtension`` in front of TensorFlow's Adam and momentum rules, with
slots named after their default names (``<var>/AdamW``, ``<var>/AdamW_1``;
``<var>/MomentumW``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train import _habits
from funcgrad.train import _var_list
from funcgrad.train._var_list import VarList
from funcgrad.train.names import variable_names
from funcgrad.train.optimizers.base import TF1Optimizer
from funcgrad.train.optimizers.base import TF1Step
from funcgrad.train.schedules._inject import LearningRate
from funcgrad.train.schedules._inject import check_schedule

__all__ = [
    "AdaMaxOptimizer",
    "AdamWOptimizer",
    "AddSignOptimizer",
    "LARSOptimizer",
    "MomentumWOptimizer",
    "NadamOptimizer",
    "PowerSignOptimizer",
    "get_cosine_decay_fn",
    "get_linear_decay_fn",
    "get_restart_decay_fn",
]

Slots = dict[str, jax.Array]


class _AdamOptimizer(TF1Optimizer):
    """``tf.train.AdamOptimizer``'s slots, non-slots, hyperparameters and ``_finish``."""

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
    ) -> None:
        super().__init__(learning_rate)
        self._check_numbers(beta1=beta1, beta2=beta2, epsilon=epsilon)
        self._beta1_t = jnp.float32(beta1)
        self._beta2_t = jnp.float32(beta2)
        self._epsilon_t = jnp.float32(epsilon)
        # 1 - beta in float32, as the kernels compute it (in NumPy: the same IEEE
        # subtraction, no trace to hold)
        self._one_minus_beta1_t = jnp.float32(np.float32(1) - np.float32(beta1))
        self._one_minus_beta2_t = jnp.float32(np.float32(1) - np.float32(beta2))
        self._betas = (beta1, beta2)

    def _prepare(self, step: TF1Step) -> dict[str, jax.Array]:
        """Adam's bias-corrected rate ``alpha``, ``lr * sqrt(1 - beta2_power) / (1 -
        beta1_power)``: the ``ApplyAdam`` kernel computes it per variable from the same
        scalars, so once per step gives every variable the same number."""
        beta1_power, beta2_power = step.non_slots["beta1_power"], step.non_slots["beta2_power"]
        return {"alpha": step.learning_rate * jnp.sqrt(1 - beta2_power) / (1 - beta1_power)}

    def _non_slots(self) -> dict[str, float]:
        beta1, beta2 = self._betas
        return {"beta1_power": beta1, "beta2_power": beta2}

    def _finish(self, non_slots: dict[str, jax.Array], step: TF1Step) -> dict[str, jax.Array]:
        return {
            "beta1_power": non_slots["beta1_power"] * self._beta1_t,
            "beta2_power": non_slots["beta2_power"] * self._beta2_t,
        }


class AdaMaxOptimizer(_AdamOptimizer):
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
      beta1: :math:`\beta_1`.
      beta2: :math:`\beta_2`.
      epsilon: :math:`\epsilon`.

    Raises:
      TypeError: a hyperparameter is not a number.

    Example:
      >>> opt = fg.train.AdaMaxOptimizer(0.1)
      >>> state, _ = opt.minimize(lambda p: 2.0 * p["w"], opt.init({"w": jnp.float32(1.0)}))
      >>> round(float(state.params["w"]), 4)  # 1 - 0.1 / 0.1 * 0.2 / 2
      0.9
    """

    slots: ClassVar[Mapping[str, str]] = {"m": "AdaMax", "v": "AdaMax"}

    def _prepare(self, step: TF1Step) -> dict[str, jax.Array]:
        """AdaMax's rate ``lr / (1 - beta1_power)``, once per step."""
        return {"rate": step.learning_rate / (1 - step.non_slots["beta1_power"])}

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        m, v = slots["m"], slots["v"]
        m = m + (grad - m) * self._one_minus_beta1_t
        v = jnp.maximum(self._beta2_t * v, jnp.abs(grad))
        var = var - step.prepared["rate"] * (m / (v + self._epsilon_t))
        return var, {"m": m, "v": v}

    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        indices = grad.indices
        # m_t = beta1 * m + (1 - beta1) * g_t
        m = slots["m"]
        m_slice = m[indices]
        m_t_slice = m_slice * self._beta1_t + grad.values * self._one_minus_beta1_t
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


class NadamOptimizer(_AdamOptimizer):
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
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      beta1: :math:`\beta_1`.
      beta2: :math:`\beta_2`.
      epsilon: :math:`\epsilon`.

    Raises:
      TypeError: a hyperparameter is not a number.

    Example:
      >>> opt = fg.train.NadamOptimizer(0.1)
      >>> state, _ = opt.minimize(lambda p: 2.0 * p["w"], opt.init({"w": jnp.float32(1.0)}))
      >>> round(float(state.params["w"]), 4)  # 1 - 0.1 (0.1 * 0.2 + 0.9 * 0.02) / 0.02
      0.81
    """

    slots: ClassVar[Mapping[str, str]] = {"m": "Adam", "v": "Adam"}

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        alpha = step.prepared["alpha"]
        m, v = slots["m"], slots["v"]
        m = m + (grad - m) * self._one_minus_beta1_t
        v = v + (jnp.square(grad) - v) * self._one_minus_beta2_t
        nesterov = grad * self._one_minus_beta1_t + self._beta1_t * m
        var = var - (nesterov * alpha) / (jnp.sqrt(v) + self._epsilon_t)
        return var, {"m": m, "v": v}

    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        lr = step.prepared["alpha"]
        indices = grad.indices
        # m_t = beta1 * m + (1 - beta1) * g_t
        m = slots["m"]
        m_scaled_g_values = grad.values * self._one_minus_beta1_t
        m_t = (m * self._beta1_t).at[indices].add(m_scaled_g_values)
        # m_bar = (1 - beta1) * g_t + beta1 * m_t
        m_bar = m_scaled_g_values + self._beta1_t * m_t[indices]
        # v_t = beta2 * v + (1 - beta2) * (g_t * g_t)
        v = slots["v"]
        v_scaled_g_values = (grad.values * grad.values) * self._one_minus_beta2_t
        v_t = (v * self._beta2_t).at[indices].add(v_scaled_g_values)
        v_t_slice = v_t[indices]
        v_sqrt = jnp.sqrt(v_t_slice)
        var_update = var.at[indices].add(-lr * m_bar / (v_sqrt + self._epsilon_t))
        return var_update, {"m": m_t, "v": v_t}


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
      ValueError: ``momentum`` or ``weight_decay`` is negative (the original's check);
        ``skip_list`` matches none of the variables of a step.

    Example:
      >>> opt = fg.train.LARSOptimizer(1.0, momentum=0.0, weight_decay=0.0, eeta=0.1)
      >>> state = opt.init({"w": jnp.array([3.0, 4.0])})
      >>> state, _ = opt.minimize(lambda p: p["w"].sum(), state)
      >>> np.asarray(state.params["w"], np.float64).round(4).tolist()  # r = 0.1 * 5 / sqrt(2)
      [2.6464, 3.6464]
    """

    slots: ClassVar[Mapping[str, str]] = {"momentum": "LARSOptimizer"}

    def __init__(
        self,
        learning_rate: LearningRate,
        momentum: float = 0.9,
        weight_decay: float = 0.0001,
        eeta: float = 0.001,
        epsilon: float = 0.0,
        skip_list: list[str] | None = None,
        use_nesterov: bool = False,
    ) -> None:
        super().__init__(learning_rate)
        self._check_numbers(
            momentum=momentum, weight_decay=weight_decay, eeta=eeta, epsilon=epsilon
        )
        if momentum < 0.0:
            raise ValueError(
                f"fg.train.LARSOptimizer(...): momentum should be positive, got {momentum}; "
                "pass a momentum >= 0 (0.9 is the default)."
            )
        if weight_decay < 0.0:
            raise ValueError(
                f"fg.train.LARSOptimizer(...): weight_decay should be positive, got "
                f"{weight_decay}; pass a weight_decay >= 0 (0.0001 is the default)."
            )
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
        return _apply_momentum(var, slots, scaled_lr, grad, self._momentum, self._use_nesterov)

    # Fallback to momentum optimizer for sparse tensors
    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        return _sparse_apply_momentum(
            var, slots, step.learning_rate, grad, self._momentum, self._use_nesterov
        )


def _apply_momentum(
    var: jax.Array, slots: Slots, lr: jax.Array, grad: jax.Array, momentum: float, nesterov: bool
) -> tuple[jax.Array, Slots]:
    """TensorFlow's ``ApplyMomentum`` kernel: the new variable and its ``momentum`` slot."""
    accum = slots["momentum"] * momentum + grad
    if nesterov:
        return var - (grad * lr + accum * momentum * lr), {"momentum": accum}
    return var - lr * accum, {"momentum": accum}


def _sparse_apply_momentum(
    var: jax.Array,
    slots: Slots,
    lr: jax.Array,
    grad: IndexedSlices,
    momentum: float,
    nesterov: bool,
) -> tuple[jax.Array, Slots]:
    """TensorFlow's ``SparseApplyMomentum`` kernel: ``ApplyMomentum`` on the touched rows."""
    rows = grad.indices
    touched = {"momentum": slots["momentum"][rows]}
    new_var, new = _apply_momentum(var[rows], touched, lr, grad.values, momentum, nesterov)
    accum = slots["momentum"].at[rows].set(new["momentum"])
    return var.at[rows].set(new_var), {"momentum": accum}


#: A ``sign_decay_fn``: ``global_step -> float32 scalar``.
SignDecay = Callable[[jax.Array], jax.Array]


class _SignOptimizer(TF1Optimizer):
    """AddSign's and PowerSign's slot, hyperparameters, sign decay and sparse rule; a
    subclass gives the multiplier of the gradient from ``sign(g) * sign(m)``."""

    def __init__(
        self, learning_rate: LearningRate, beta: float, sign_decay_fn: SignDecay | None, **more: Any
    ) -> None:
        super().__init__(learning_rate)
        self._check_numbers(beta=beta, **more)
        if sign_decay_fn is not None and not callable(sign_decay_fn):
            raise TypeError(
                f"fg.train.{type(self).__name__}(...): sign_decay_fn must be None or a "
                f"function of global_step, got {sign_decay_fn!r}; pass e.g. "
                "fg.train.get_linear_decay_fn(1000)."
            )
        self._beta_t = jnp.float32(beta)
        self._sign_decay_fn = sign_decay_fn

    def _sign_decay(self, step: TF1Step) -> jax.Array:
        if self._sign_decay_fn is None:
            return jnp.float32(1.0)
        return jnp.asarray(self._sign_decay_fn(step.global_step), jnp.float32)

    def _multiplier(self, sign_gm: jax.Array, sign_decay: jax.Array) -> jax.Array:
        raise NotImplementedError

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        m = slots["m"] * self._beta_t + grad * (1 - self._beta_t)
        sign_gm = jnp.sign(grad) * jnp.sign(m)
        var = var - step.learning_rate * self._multiplier(sign_gm, self._sign_decay(step)) * grad
        return var, {"m": m}

    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        m = slots["m"]
        m_t = (m * self._beta_t) + (grad.to_dense() * (1 - self._beta_t))
        sign_gm = jnp.sign(m_t)[grad.indices] * jnp.sign(grad.values)
        multiplier_values = self._multiplier(sign_gm, self._sign_decay(step))
        final_update = step.learning_rate * multiplier_values * grad.values
        var_update = var.at[grad.indices].add(-final_update)
        return var_update, {"m": m_t}


class AddSignOptimizer(_SignOptimizer):
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
      TypeError: a hyperparameter is not a number, or ``sign_decay_fn`` is not callable.

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
        alpha: float = 1.0,
        beta: float = 0.9,
        sign_decay_fn: SignDecay | None = None,
    ) -> None:
        super().__init__(learning_rate, beta, sign_decay_fn, alpha=alpha)
        self._alpha_t = jnp.float32(alpha)

    def _multiplier(self, sign_gm: jax.Array, sign_decay: jax.Array) -> jax.Array:
        return self._alpha_t + sign_decay * sign_gm


class PowerSignOptimizer(_SignOptimizer):
    r"""``tf.contrib.opt.PowerSignOptimizer`` (Bello et al., 2017).

    .. math::
      m \leftarrow \beta m + (1 - \beta) g, \quad
      w \leftarrow w - \eta \exp(\ln(\text{base})\, d(t)
        \operatorname{sign}(g) \operatorname{sign}(m)) g

    with :math:`d(t)` = ``sign_decay_fn(global_step)`` (1 without one); the sparse rule
    is AddSign's shape.  optax has no PowerSign.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      base: the base, :math:`e` by default.
      beta: :math:`\beta`.
      sign_decay_fn: ``None`` or a function of ``global_step``.

    Raises:
      TypeError: a hyperparameter is not a number, or ``sign_decay_fn`` is not callable.

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
        base: float = math.e,
        beta: float = 0.9,
        sign_decay_fn: SignDecay | None = None,
    ) -> None:
        super().__init__(learning_rate, beta, sign_decay_fn, base=base)
        self._logbase_t = jnp.float32(math.log(base))

    def _multiplier(self, sign_gm: jax.Array, sign_decay: jax.Array) -> jax.Array:
        return jnp.exp(self._logbase_t * sign_decay * sign_gm)


def get_linear_decay_fn(decay_steps: int) -> SignDecay:
    """``tf.contrib.opt.get_linear_decay_fn``: ``max(0, (decay_steps - t) / decay_steps)``.

    Args:
      decay_steps: the number of steps to decay over.

    Returns:
      ``sign_decay_fn(global_step)``, a float32 scalar.

    Example:
      >>> fn = fg.train.get_linear_decay_fn(4)
      >>> [float(fn(jnp.int32(t))) for t in (0, 1, 4, 9)]
      [1.0, 0.75, 0.0, 0.0]
    """

    def linear_decay_fn(global_step: jax.Array) -> jax.Array:
        global_step = jnp.minimum(global_step, decay_steps)
        remaining_steps = jnp.int32(decay_steps) - jnp.asarray(global_step).astype(jnp.int32)
        decayed = remaining_steps.astype(jnp.float32) / jnp.float32(decay_steps)
        return jnp.maximum(jnp.float32(0.0), decayed)

    return linear_decay_fn


def get_cosine_decay_fn(
    decay_steps: int, num_periods: float = 0.5, zero_after: float | None = None
) -> SignDecay:
    """``tf.contrib.opt.get_cosine_decay_fn``: ``0.5 (1 + cos(2 pi num_periods t /
    decay_steps))``, ``t`` held at ``decay_steps``; 0 from ``2 num_periods t / decay_steps
    >= 2 zero_after`` on when ``zero_after`` is given.

    Args:
      decay_steps: the number of steps to decay over.
      num_periods: the periods of the cosine (0.5 ends at 0).
      zero_after: ``None``, or the fraction of periods after which the decay is 0.

    Returns:
      ``sign_decay_fn(global_step)``, a float32 scalar.

    Example:
      >>> fn = fg.train.get_cosine_decay_fn(4)
      >>> [round(float(fn(jnp.int32(t))), 4) for t in (0, 2, 4)]
      [1.0, 0.5, 0.0]
    """

    def cosine_decay_fn(global_step: jax.Array) -> jax.Array:
        global_step = jnp.minimum(global_step, decay_steps)
        completed_fraction = jnp.asarray(global_step).astype(jnp.float32) / jnp.float32(decay_steps)
        fraction = 2.0 * num_periods * completed_fraction
        decayed = 0.5 * (1.0 + jnp.cos(jnp.float32(math.pi) * fraction))
        if zero_after is not None:
            decayed = jnp.where(jnp.greater_equal(fraction, 2 * zero_after), 0.0, decayed)
        return decayed

    return cosine_decay_fn


def get_restart_decay_fn(
    decay_steps: int, num_periods: float = 1, zero_after: float | None = None
) -> SignDecay:
    """``tf.contrib.opt.get_restart_decay_fn``: ``0.5 (1 + cos(pi ((num_periods t) mod
    decay_steps) / decay_steps))``, ``t`` held at ``decay_steps``; 0 from ``num_periods
    t / decay_steps >= zero_after`` on when ``zero_after`` is given.

    Args:
      decay_steps: the number of steps to decay over.
      num_periods: the number of restarts.
      zero_after: ``None``, or the number of periods after which the decay is 0.

    Returns:
      ``sign_decay_fn(global_step)``, a float32 scalar.

    Example:
      >>> fn = fg.train.get_restart_decay_fn(4, num_periods=2)
      >>> [round(float(fn(jnp.int32(t))), 4) for t in (0, 1, 2, 3)]
      [1.0, 0.5, 1.0, 0.5]
    """

    def restart_decay_fn(global_step: jax.Array) -> jax.Array:
        global_step = jnp.minimum(global_step, decay_steps)
        num = jnp.mod(num_periods * jnp.asarray(global_step).astype(jnp.float32), decay_steps)
        fraction = num / jnp.float32(decay_steps)
        decayed = 0.5 * (1.0 + jnp.cos(jnp.float32(math.pi) * fraction))
        if zero_after is not None:
            tmp = jnp.asarray(num_periods * global_step).astype(jnp.float32) / jnp.float32(
                decay_steps
            )
            decayed = jnp.where(jnp.greater_equal(tmp, zero_after), 0.0, decayed)
        return decayed

    return restart_decay_fn


class _DecoupledWeightDecayExtension(TF1Optimizer):
    """``DecoupledWeightDecayExtension``: ``var -= weight_decay * var`` before the wrapped
    optimizer's rule (``weight_decay_optimizers.py``, r1.15), for the variables
    ``decay_var_list`` of ``minimize`` / ``apply_gradients`` selects (all without one).
    It comes first among the bases, as in the original, so its rules run the decay, then
    the next base's rule on the decayed variable."""

    def __init__(self, weight_decay: LearningRate, **kwargs: Any) -> None:
        self._decay_var_list: frozenset[str] | None = None  # is set in minimize or apply_gradients
        super().__init__(**kwargs)
        if callable(weight_decay):
            hint = "pass a number or a schedule(step), e.g. fg.train.exponential_decay"
            check_schedule(
                f"fg.train.{type(self).__name__}(...)", "weight_decay", weight_decay, hint
            )
        else:
            self._check_numbers(weight_decay=weight_decay)
        self._weight_decay = weight_decay

    def minimize(
        self,
        loss_fn: Callable[..., Any],
        state: Any,
        /,
        *args: Any,
        decay_var_list: VarList = None,
        **kwargs: Any,
    ) -> tuple[Any, Any]:
        """:meth:`Optimizer.minimize`, decaying only the variables ``decay_var_list``
        selects (all of them when it is ``None``).

        Args:
          loss_fn: as in :meth:`Optimizer.minimize`.
          state: the ``TrainState``.
          *args: further arguments of ``loss_fn``.
          decay_var_list: the variables to decay, in a form of ``var_list``: ``None``
            (all), a list of variable names, a predicate ``(name, leaf) -> bool`` or a
            boolean pytree mask.
          **kwargs: ``var_list``, ``grad_loss``, ``has_aux`` and ``loss_fn``'s keyword
            arguments, as in :meth:`Optimizer.minimize`.

        Returns:
          ``(new_state, loss)`` as :meth:`Optimizer.minimize`.

        Raises:
          TypeError: ``decay_var_list`` is a string or a mask of non-bools.
          ValueError: ``decay_var_list`` names an unknown variable or selects none.

        Example:
          >>> opt = fg.train.MomentumWOptimizer(0.5, 0.1, 0.9)
          >>> state = opt.init({"W": jnp.float32(2.0), "b": jnp.float32(2.0)})
          >>> state, _ = opt.minimize(lambda p: 0.0 * p["W"] + 0.0 * p["b"], state,
          ...                         decay_var_list=["W"])
          >>> [float(v) for v in state.params.values()]
          [1.0, 2.0]
        """
        caller = f"fg.train.{type(self).__name__}.minimize(..., decay_var_list)"
        self._decay_var_list = self._decayed(caller, state, decay_var_list)
        try:
            return super().minimize(loss_fn, state, *args, **kwargs)
        finally:
            self._decay_var_list = None

    def apply_gradients(
        self,
        grads_and_vars: Iterable[tuple[Any, Any]],
        state: Any = _habits.NO_STATE,
        /,
        *,
        decay_var_list: VarList = None,
        **tf_arguments: Any,
    ) -> Any:
        """:meth:`Optimizer.apply_gradients`, decaying only the variables
        ``decay_var_list`` selects (all of them when it is ``None``).

        Args:
          grads_and_vars: ``(gradient, variable)`` pairs, as in
            :meth:`Optimizer.apply_gradients`.
          state: the ``TrainState`` to update.
          decay_var_list: the variables to decay, as in :meth:`minimize`.
          **tf_arguments: as in :meth:`Optimizer.apply_gradients` (none is taken).

        Returns:
          The new ``TrainState``.

        Raises:
          TypeError: ``decay_var_list`` is a string or a mask of non-bools.
          ValueError: ``decay_var_list`` names an unknown variable or selects none.

        Example:
          >>> opt = fg.train.AdamWOptimizer(0.5)
          >>> state = opt.init({"W": jnp.float32(2.0), "b": jnp.float32(2.0)})
          >>> gvs = opt.compute_gradients(lambda p: 0.0 * p["W"] + 0.0 * p["b"], state.params)
          >>> state = opt.apply_gradients(gvs, state, decay_var_list=lambda name, _: name == "b")
          >>> [float(v) for v in state.params.values()]
          [2.0, 1.0]
        """
        caller = f"fg.train.{type(self).__name__}.apply_gradients(..., decay_var_list)"
        self._decay_var_list = self._decayed(caller, state, decay_var_list)
        try:
            return super().apply_gradients(grads_and_vars, state, **tf_arguments)
        finally:
            self._decay_var_list = None

    def _decayed(self, caller: str, state: Any, decay_var_list: VarList) -> frozenset[str] | None:
        """The names of the variables ``decay_var_list`` selects (``None``: all)."""
        if decay_var_list is None:
            return None
        params = getattr(state, "params", None)
        if params is None:
            return None  # the base method says what the state is missing
        names = variable_names(params)
        selected = _var_list.selection(caller, params, decay_var_list)
        if not any(selected):
            raise ValueError(
                f"{caller}: decay_var_list={decay_var_list!r} selects none of the variables "
                f"{names[:8]}{' ...' if len(names) > 8 else ''}, so nothing would be decayed "
                "(TensorFlow decays every variable for an empty one); pass decay_var_list="
                "None to decay every variable, or select some by name."
            )
        return frozenset(n for n, s in zip(names, selected, strict=True) if s)

    def _decays(self, step: TF1Step) -> bool:
        return self._decay_var_list is None or step.name in self._decay_var_list

    def _prepare(self, step: TF1Step) -> dict[str, jax.Array]:
        """The wrapped optimizer's values, and the weight decay of this step (a
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

    # The wrapped optimizer's rules, on the variable after the decay.
    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        return super()._apply_dense(grad, self._decay_weights_op(var, step), slots, step)

    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        var = self._decay_weights_sparse_op(var, grad.indices, step)
        return super()._apply_sparse(grad, var, slots, step)


class _TFAdamOptimizer(_AdamOptimizer):
    """``tf.train.AdamOptimizer``'s rules: the ``ApplyAdam`` kernel, and
    ``_apply_sparse_shared`` (all of ``m``, ``v`` and the variable move)."""

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        alpha = step.prepared["alpha"]
        m, v = slots["m"], slots["v"]
        m = m + (grad - m) * self._one_minus_beta1_t
        v = v + (jnp.square(grad) - v) * self._one_minus_beta2_t
        var = var - (m * alpha) / (jnp.sqrt(v) + self._epsilon_t)
        return var, {"m": m, "v": v}

    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        lr = step.prepared["alpha"]
        indices = grad.indices
        # m_t = beta1 * m + (1 - beta1) * g_t
        m_scaled_g_values = grad.values * self._one_minus_beta1_t
        m_t = (slots["m"] * self._beta1_t).at[indices].add(m_scaled_g_values)
        # v_t = beta2 * v + (1 - beta2) * (g_t * g_t)
        v_scaled_g_values = (grad.values * grad.values) * self._one_minus_beta2_t
        v_t = (slots["v"] * self._beta2_t).at[indices].add(v_scaled_g_values)
        v_sqrt = jnp.sqrt(v_t)
        var_update = var - lr * m_t / (v_sqrt + self._epsilon_t)
        return var_update, {"m": m_t, "v": v_t}


class AdamWOptimizer(_DecoupledWeightDecayExtension, _TFAdamOptimizer):
    r"""``tf.contrib.opt.AdamWOptimizer``: TensorFlow's Adam with decoupled weight decay
    (Loshchilov & Hutter, "Decoupled Weight Decay Regularization").

    .. math::
      w \leftarrow w - \lambda w, \quad
      m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad
      v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
      w \leftarrow w - \eta \frac{\sqrt{1 - \beta_2^t}}{1 - \beta_1^t}
        \frac{m}{\sqrt{v} + \epsilon}

    The decay :math:`\lambda` is not scaled by the learning rate, and comes first, as in
    the original.  ``minimize`` / ``apply_gradients`` take ``decay_var_list`` (any form
    of ``var_list``): only those variables are decayed.  An ``fg.IndexedSlices``
    gradient decays only the touched rows, then moves all of :math:`m`, :math:`v` and
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

    Raises:
      TypeError: a hyperparameter is not a number.

    Example:
      >>> opt = fg.train.AdamWOptimizer(0.1, 0.01)
      >>> state, _ = opt.minimize(lambda p: p["w"], opt.init({"w": jnp.float32(1.0)}))
      >>> round(float(state.params["w"]), 4)  # 1 - 0.1 * 1 - 0.01
      0.89
    """

    slots: ClassVar[Mapping[str, str]] = {"m": "AdamW", "v": "AdamW"}

    def __init__(
        self,
        weight_decay: float,
        learning_rate: LearningRate = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
    ) -> None:
        super().__init__(
            weight_decay, learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon
        )


class _TFMomentumOptimizer(TF1Optimizer):
    """``tf.train.MomentumOptimizer``'s rules: ``ApplyMomentum`` and ``SparseApplyMomentum``."""

    def __init__(
        self, learning_rate: LearningRate, momentum: float, use_nesterov: bool = False
    ) -> None:
        super().__init__(learning_rate)
        self._check_numbers(momentum=momentum)
        self._momentum = momentum
        self._use_nesterov = use_nesterov

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        return _apply_momentum(
            var, slots, step.learning_rate, grad, self._momentum, self._use_nesterov
        )

    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: Slots, step: TF1Step
    ) -> tuple[jax.Array, Slots]:
        return _sparse_apply_momentum(
            var, slots, step.learning_rate, grad, self._momentum, self._use_nesterov
        )


class MomentumWOptimizer(_DecoupledWeightDecayExtension, _TFMomentumOptimizer):
    r"""``tf.contrib.opt.MomentumWOptimizer``: TensorFlow's momentum with decoupled weight
    decay (SGDW, Loshchilov & Hutter).

    .. math::
      w \leftarrow w - \lambda w, \quad a \leftarrow \mu a + g, \quad
      w \leftarrow w - \eta a \quad
      (\text{Nesterov: } w \leftarrow w - \eta (g + \mu a))

    The decay :math:`\lambda` is not scaled by the learning rate, and comes first, as in
    the original; ``minimize`` / ``apply_gradients`` take ``decay_var_list`` (any form
    of ``var_list``).  An ``fg.IndexedSlices`` gradient decays and moves only the touched
    rows of :math:`w` and :math:`a`.  Slot ``<var>/MomentumW``, the original's name.

    Args:
      weight_decay: :math:`\lambda`, a number or a ``schedule(step)`` (TensorFlow's
        tensor of ``global_step``, such as the learning rate's decay times a factor).
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      momentum: :math:`\mu`.
      use_nesterov: Nesterov momentum.

    Raises:
      TypeError: a hyperparameter is not a number.

    Example:
      >>> opt = fg.train.MomentumWOptimizer(0.1, 0.01, 0.9)
      >>> state, _ = opt.minimize(lambda p: p["w"], opt.init({"w": jnp.float32(1.0)}))
      >>> round(float(state.params["w"]), 4)  # 1 - 0.1 * 1 - 0.01 * 1
      0.89
    """

    slots: ClassVar[Mapping[str, str]] = {"momentum": "MomentumW"}

    def __init__(
        self,
        weight_decay: float,
        learning_rate: LearningRate,
        momentum: float,
        use_nesterov: bool = False,
    ) -> None:
        super().__init__(
            weight_decay,
            learning_rate=learning_rate,
            momentum=momentum,
            use_nesterov=use_nesterov,
        )
