r"""TensorFlow 1.x's optimizers (``tf.compat.v1.train.*Optimizer``) with their update rules.

Each class takes TensorFlow's arguments and defaults (less ``use_locking`` and
``name``, which have no meaning here) and applies TensorFlow's formula, so a ported
program follows the same trajectory to float32 rounding.  ``learning_rate`` is a
number or a ``schedule(step)``; it is held in the optimizer state (see
:func:`~funcgrad.train.set_learning_rate`).  Every optimizer exposes its optax
transformation as ``.tx``, built from optax's pieces where the formula is the same
and from :mod:`funcgrad.train.optimizers.transforms` where TensorFlow's differs.

In the formulas, :math:`\eta` is the learning rate, :math:`g` the gradient, :math:`w`
the variable, and :math:`t` the step, counted from 1.

``bfloat16`` (and ``float16``) parameters keep their slots in their own dtype, as
TensorFlow's slot variables do, but every update is computed in float32 — ``1 - beta``,
bias corrections, decays, the learning-rate product — and only then stored, so
``bfloat16`` and ``float32`` parameters share one optimizer and a ``bfloat16`` run
follows the float32 trajectory to ``bfloat16`` rounding.  TensorFlow computes in the
variable's dtype instead, where ``1 - bfloat16(0.999)`` is 0: its ``bfloat16`` Adam
diverges from the first step.  An update smaller than half a parameter's spacing
(``2**-9`` of its size in ``bfloat16``) is lost, as in any ``bfloat16`` arithmetic —
Adadelta's first steps, or a small learning rate, leave such parameters where they are;
keep float32 parameters and cast inside the loss when that matters.

An ``fg.IndexedSlices`` gradient (an embedding table's) is applied with each
optimizer's TensorFlow sparse rule (``_apply_sparse``): the values of duplicate ids are
summed, then the optimizer's ``SparseApply*`` kernel updates the touched rows of the
variable and its slots; rows that no id touches keep their values and slots (for
Momentum, RMSProp, Ftrl and the proximal optimizers that differs from a dense update
with zero rows).  Adam's sparse rule decays all of its moments, as TensorFlow's does;
:class:`LazyAdamOptimizer` is the row-only Adam.  An id outside the table is an error
outside ``jax.jit`` and writes nothing under it.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable
from typing import Annotated
from typing import Any

import optax

from funcgrad import _checks
from funcgrad.train.optimizer import Optimizer
from funcgrad.train.optimizers import _sparse_rules
from funcgrad.train.optimizers._float32 import in_float32
from funcgrad.train.optimizers.transforms import scale_by_tf_adam
from funcgrad.train.optimizers.transforms import tf_ftrl
from funcgrad.train.optimizers.transforms import tf_proximal_adagrad
from funcgrad.train.optimizers.transforms import tf_proximal_gradient_descent
from funcgrad.train.schedules._inject import LearningRate
from funcgrad.train.schedules._inject import inject_learning_rate
from funcgrad.train.schedules.injection import scale_by_learning_rate

__all__ = [
    "AdadeltaOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "FtrlOptimizer",
    "GradientDescentOptimizer",
    "LazyAdamOptimizer",
    "MomentumOptimizer",
    "ProximalAdagradOptimizer",
    "ProximalGradientDescentOptimizer",
    "RMSPropOptimizer",
]


_RULES = {
    ">= 0": lambda v: v >= 0,
    "> 0": lambda v: v > 0,
    "<= 0": lambda v: v <= 0,
    "in [0, 1)": lambda v: 0 <= v < 1,
    "in [0, 1]": lambda v: 0 <= v <= 1,
}


def _ranges(cls: type) -> dict[str, str]:
    """The range each ``Annotated[float, rule]`` argument of ``cls.__init__`` states."""
    hints = typing.get_type_hints(cls.__init__, include_extras=True)  # type: ignore[misc]
    return {
        name: hint.__metadata__[0]
        for name, hint in hints.items()
        if typing.get_origin(hint) is Annotated
    }


def _then_rate(
    scale: optax.GradientTransformation,
) -> Callable[[Any], optax.GradientTransformation]:
    """The factory of ``scale`` followed by the learning rate (most TF1 rules' shape)."""
    return lambda rate: optax.chain(scale, scale_by_learning_rate(rate))


class _TfOptimizer(Optimizer):
    """An ``Optimizer`` whose ``tx`` holds the learning rate in its state.

    Each subclass gives the range of its numeric arguments in ``_RANGES``; they are
    checked together (every problem reported at once) and kept, as given, in
    ``hyperparameters``.
    """

    def __init__(
        self,
        learning_rate: LearningRate,
        factory: Callable[[Any], optax.GradientTransformation],
        sparse: _sparse_rules.RateRule,
        **hyperparameters: Any,
    ) -> None:
        name = type(self).__name__
        ranges = _ranges(type(self))
        ranged = {k: v for k, v in hyperparameters.items() if k in ranges}
        not_numbers = [
            f"{k} must be a number, got {v!r}"
            for k, v in ranged.items()
            if not _checks.is_real_number(v)
        ]
        hint = "TensorFlow's defaults are a safe start"
        caller = f"fg.train.{name}(...)"
        _checks.raise_collected(caller, not_numbers, f"pass Python numbers ({hint})", TypeError)
        out_of_range = [
            f"{k} must be finite and {ranges[k]}, got {v!r}"
            for k, v in ranged.items()
            if not (math.isfinite(v) and _RULES[ranges[k]](v))
        ]
        _checks.raise_collected(caller, out_of_range, f"pass values in range ({hint})")
        #: The optimizer's arguments other than the learning rate, as given.
        self.hyperparameters = hyperparameters
        rate_caller = f"fg.train.{name}(learning_rate, ...)"
        wide = lambda rate: in_float32(factory(rate))  # noqa: E731
        super().__init__(inject_learning_rate(rate_caller, wide, learning_rate))
        #: How an ``fg.IndexedSlices`` gradient is applied: TensorFlow's ``_apply_sparse``.
        self.sparse_rule = _sparse_rules.with_rate(learning_rate, sparse)


class GradientDescentOptimizer(_TfOptimizer):
    r"""Gradient descent: :math:`w \leftarrow w - \eta g`.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.

    Raises:
      ValueError: ``learning_rate`` is negative or not finite.

    Example:
      >>> opt = fg.train.GradientDescentOptimizer(0.1)
      >>> state, _ = opt.minimize(lambda w: (w * w).sum(), opt.init(jnp.array([1.0, 2.0])))
      >>> state.params
      Array([0.8, 1.6], dtype=float32)
    """

    def __init__(self, learning_rate: LearningRate) -> None:
        super().__init__(learning_rate, scale_by_learning_rate, _sparse_rules.gradient_descent())


class MomentumOptimizer(_TfOptimizer):
    r"""Momentum: :math:`a \leftarrow \mu a + g`, then :math:`w \leftarrow w - \eta a`.

    With ``use_nesterov=True``: :math:`w \leftarrow w - \eta (g + \mu a)` with the
    new :math:`a`.  The accumulator :math:`a` starts at zero.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      momentum: :math:`\mu`.
      use_nesterov: use Nesterov momentum.

    Raises:
      ValueError: ``learning_rate`` or ``momentum`` is negative or not finite.

    Example:
      >>> opt = fg.train.MomentumOptimizer(0.1, momentum=0.9)
      >>> state = opt.init(jnp.float32(1.0))
      >>> for _ in range(2):
      ...     state, _ = opt.minimize(lambda w: w, state)
      >>> round(float(state.params), 4)
      0.71
    """

    def __init__(
        self,
        learning_rate: LearningRate,
        momentum: Annotated[float, ">= 0"],
        use_nesterov: bool = False,
    ) -> None:
        trace = optax.trace(decay=momentum, nesterov=use_nesterov)
        sparse = _sparse_rules.momentum(momentum, use_nesterov)
        super().__init__(
            learning_rate, _then_rate(trace), sparse, momentum=momentum, use_nesterov=use_nesterov
        )


class AdamOptimizer(_TfOptimizer):
    r"""Adam in TensorFlow's "epsilon hat" form (Kingma & Ba, 2015, end of Section 2).

    .. math::
      m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad
      v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
      w \leftarrow w - \eta \frac{\sqrt{1 - \beta_2^t}}{1 - \beta_1^t}
        \frac{m}{\sqrt{v} + \hat\epsilon}

    ``optax.adam`` puts epsilon on the bias-corrected :math:`\sqrt{\hat v}` and so
    follows a different trajectory (optax#571); this one is TensorFlow's.  For
    ``bfloat16`` parameters it computes in float32 (see the module docstring), where
    TensorFlow's ``bfloat16`` Adam diverges.  The bias correction reads TensorFlow's
    running products ``beta1_power`` / ``beta2_power`` from the state.

    An ``fg.IndexedSlices`` gradient gets TensorFlow's sparse Adam
    (``_apply_sparse_shared``): all of :math:`m` and :math:`v` are decayed, the summed
    rows added, and *every* row of the variable moves — as costly as a dense step.
    :class:`LazyAdamOptimizer` changes the touched rows only.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      beta1: decay of the first moment.
      beta2: decay of the second moment.
      epsilon: :math:`\hat\epsilon`.

    Raises:
      ValueError: an argument is negative or not finite.

    Example:
      >>> opt = fg.train.AdamOptimizer(0.1)
      >>> state, _ = opt.minimize(lambda w: 3.0 * w, opt.init(jnp.float32(1.0)))
      >>> round(float(state.params), 4)
      0.9
    """

    _lazy = False

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        beta1: Annotated[float, "in [0, 1)"] = 0.9,
        beta2: Annotated[float, "in [0, 1)"] = 0.999,
        epsilon: Annotated[float, ">= 0"] = 1e-8,
    ) -> None:
        scale = scale_by_tf_adam(beta1, beta2, epsilon)
        sparse = (_sparse_rules.lazy_adam if self._lazy else _sparse_rules.adam)(
            beta1, beta2, epsilon
        )
        super().__init__(
            learning_rate, _then_rate(scale), sparse, beta1=beta1, beta2=beta2, epsilon=epsilon
        )


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

    _lazy = True


class RMSPropOptimizer(_TfOptimizer):
    r"""RMSProp as TensorFlow 1.x computes it: mean square starting at one, epsilon
    inside the square root, the learning rate inside the momentum.

    .. math::
      s \leftarrow \rho s + (1 - \rho) g^2, \quad
      a \leftarrow \mu a + \frac{\eta g}{\sqrt{s + \epsilon}}, \quad
      w \leftarrow w - a

    :math:`s` starts at **one** (``optax.rmsprop`` starts it at zero, optax#532).
    With ``centered=True`` the denominator is :math:`\sqrt{s - \bar g^2 + \epsilon}`
    where :math:`\bar g \leftarrow \rho \bar g + (1 - \rho) g` starts at zero.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      decay: :math:`\rho`.
      momentum: :math:`\mu`.
      epsilon: :math:`\epsilon`.
      centered: normalise by the estimated variance rather than the second moment.

    Raises:
      ValueError: an argument is negative or not finite.

    Example:
      >>> opt = fg.train.RMSPropOptimizer(0.1)
      >>> state, _ = opt.minimize(lambda w: 2.0 * w, opt.init(jnp.float32(1.0)))
      >>> round(float(state.params), 4)  # 1 - 0.1 * 2 / sqrt(0.9 + 0.1 * 4)
      0.8246
    """

    def __init__(
        self,
        learning_rate: LearningRate,
        decay: Annotated[float, "in [0, 1]"] = 0.9,
        momentum: Annotated[float, ">= 0"] = 0.0,
        epsilon: Annotated[float, ">= 0"] = 1e-10,
        centered: bool = False,
    ) -> None:
        by = optax.scale_by_stddev if centered else optax.scale_by_rms
        scale = by(decay=decay, eps=epsilon, initial_scale=1.0, eps_in_sqrt=True)
        trace = optax.trace(decay=momentum)
        super().__init__(
            learning_rate,
            lambda lr: optax.chain(scale, scale_by_learning_rate(lr), trace),
            _sparse_rules.rmsprop(decay, momentum, epsilon, centered),
            decay=decay,
            momentum=momentum,
            epsilon=epsilon,
            centered=centered,
        )


class AdagradOptimizer(_TfOptimizer):
    r"""Adagrad: :math:`n \leftarrow n + g^2`, :math:`w \leftarrow w - \eta g / \sqrt{n}`.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      initial_accumulator_value: the start of :math:`n`, positive.

    Raises:
      ValueError: ``initial_accumulator_value`` is not positive, or the learning
        rate is negative or not finite.

    Example:
      >>> opt = fg.train.AdagradOptimizer(0.5, initial_accumulator_value=3.0)
      >>> state, _ = opt.minimize(lambda w: w, opt.init(jnp.float32(1.0)))
      >>> float(state.params)  # 1 - 0.5 * 1 / sqrt(3 + 1)
      0.75
    """

    def __init__(
        self, learning_rate: LearningRate, initial_accumulator_value: Annotated[float, "> 0"] = 0.1
    ) -> None:
        scale = optax.scale_by_rss(initial_accumulator_value, eps=0.0)
        super().__init__(
            learning_rate,
            _then_rate(scale),
            _sparse_rules.adagrad(),
            initial_accumulator_value=initial_accumulator_value,
        )


class AdadeltaOptimizer(_TfOptimizer):
    r"""Adadelta (Zeiler, 2012) with a learning rate, as TensorFlow applies it.

    .. math::
      n \leftarrow \rho n + (1 - \rho) g^2, \quad
      u = \frac{\sqrt{d + \epsilon}}{\sqrt{n + \epsilon}} g, \quad
      d \leftarrow \rho d + (1 - \rho) u^2, \quad w \leftarrow w - \eta u

    Args:
      learning_rate: :math:`\eta` (``1.0`` is the paper's form).
      rho: :math:`\rho`, the decay rate.
      epsilon: :math:`\epsilon`.

    Raises:
      ValueError: an argument is negative or not finite.

    Example:
      >>> opt = fg.train.AdadeltaOptimizer(1.0, rho=0.5, epsilon=1.0)
      >>> state, _ = opt.minimize(lambda w: w, opt.init(jnp.float32(1.0)))
      >>> round(float(state.params), 4)  # 1 - sqrt(1) / sqrt(0.5 + 1)
      0.1835
    """

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        rho: Annotated[float, "in [0, 1]"] = 0.95,
        epsilon: Annotated[float, ">= 0"] = 1e-8,
    ) -> None:
        scale = optax.scale_by_adadelta(rho=rho, eps=epsilon)
        sparse = _sparse_rules.adadelta(rho, epsilon)
        super().__init__(learning_rate, _then_rate(scale), sparse, rho=rho, epsilon=epsilon)


class FtrlOptimizer(_TfOptimizer):
    r"""FTRL-Proximal (McMahan et al., 2013), TensorFlow's ``ApplyFtrlV2`` rule.

    See :func:`~funcgrad.train.tf_ftrl` for the formula.

    Args:
      learning_rate: a number or a ``schedule(step)``.
      learning_rate_power: zero or negative; ``-0.5`` gives Adagrad-like decay.
      initial_accumulator_value: the accumulator's start, zero or more.
      l1_regularization_strength: zero or more.
      l2_regularization_strength: zero or more.
      l2_shrinkage_regularization_strength: zero or more; an L2 penalty added to the
        gradient (the loss), unlike the stabilising ``l2_regularization_strength``.
      beta: added to the L2 strength as ``beta / (2 * learning_rate)``.

    Raises:
      ValueError: an argument is out of its range.

    Example:
      >>> opt = fg.train.FtrlOptimizer(0.1, l1_regularization_strength=5.0)
      >>> state, _ = opt.minimize(lambda w: w.sum(), opt.init(jnp.array([0.1, 0.2])))
      >>> state.params.tolist()  # |linear| <= l1: the L1 term sets them to zero
      [0.0, 0.0]
    """

    def __init__(
        self,
        learning_rate: LearningRate,
        learning_rate_power: Annotated[float, "<= 0"] = -0.5,
        initial_accumulator_value: Annotated[float, ">= 0"] = 0.1,
        l1_regularization_strength: Annotated[float, ">= 0"] = 0.0,
        l2_regularization_strength: Annotated[float, ">= 0"] = 0.0,
        l2_shrinkage_regularization_strength: Annotated[float, ">= 0"] = 0.0,
        beta: Annotated[float | None, ">= 0"] = None,
    ) -> None:
        arguments = {
            "learning_rate_power": learning_rate_power,
            "initial_accumulator_value": initial_accumulator_value,
            "l1_regularization_strength": l1_regularization_strength,
            "l2_regularization_strength": l2_regularization_strength,
            "l2_shrinkage_regularization_strength": l2_shrinkage_regularization_strength,
            "beta": 0.0 if beta is None else beta,
        }
        sparse = _sparse_rules.ftrl(
            -learning_rate_power,
            l1_regularization_strength,
            l2_regularization_strength,
            l2_shrinkage_regularization_strength,
            arguments["beta"],
        )
        super().__init__(
            learning_rate, lambda lr: tf_ftrl(lr, *arguments.values()), sparse, **arguments
        )


class ProximalGradientDescentOptimizer(_TfOptimizer):
    r"""Proximal gradient descent with L1/L2 (TensorFlow's ``ApplyProximalGradientDescent``).

    See :func:`~funcgrad.train.tf_proximal_gradient_descent` for the formula.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      l1_regularization_strength: :math:`\lambda_1 \ge 0`, which pulls small weights to 0.
      l2_regularization_strength: :math:`\lambda_2 \ge 0`, which shrinks every weight.

    Raises:
      ValueError: a strength or the learning rate is negative or not finite.

    Example:
      With L2, the step is shrunk; with L1, weights near zero land on it.

      >>> opt = fg.train.ProximalGradientDescentOptimizer(0.5, l2_regularization_strength=1.0)
      >>> state, _ = opt.minimize(lambda w: w, opt.init(jnp.float32(2.0)))
      >>> float(state.params)  # (2 - 0.5) / (1 + 0.5)
      1.0
      >>> sparse = fg.train.ProximalGradientDescentOptimizer(0.5, l1_regularization_strength=1.0)
      >>> sparse.minimize(jnp.sum, sparse.init(jnp.array([2.0, 0.2])))[0].params.tolist()
      [1.0, 0.0]
    """

    def __init__(
        self,
        learning_rate: LearningRate,
        l1_regularization_strength: Annotated[float, ">= 0"] = 0.0,
        l2_regularization_strength: Annotated[float, ">= 0"] = 0.0,
    ) -> None:
        l1, l2 = l1_regularization_strength, l2_regularization_strength
        super().__init__(
            learning_rate,
            lambda lr: tf_proximal_gradient_descent(lr, l1, l2),
            _sparse_rules.proximal_gradient_descent(l1, l2),
            l1_regularization_strength=l1,
            l2_regularization_strength=l2,
        )


class ProximalAdagradOptimizer(_TfOptimizer):
    r"""Proximal Adagrad with L1/L2 (TensorFlow's ``ApplyProximalAdagrad``).

    See :func:`~funcgrad.train.tf_proximal_adagrad` for the formula.

    Args:
      learning_rate: a number or a ``schedule(step)``.
      initial_accumulator_value: the accumulator's start, positive.
      l1_regularization_strength: zero or more.
      l2_regularization_strength: zero or more.

    Raises:
      ValueError: an argument is out of its range.

    Example:
      >>> opt = fg.train.ProximalAdagradOptimizer(0.5, initial_accumulator_value=3.0)
      >>> state, _ = opt.minimize(jnp.sum, opt.init(jnp.array([1.0, 0.1])))
      >>> state.params  # w - 0.5 / sqrt(3 + 1)
      Array([ 0.75, -0.15], dtype=float32)
    """

    def __init__(
        self,
        learning_rate: LearningRate,
        initial_accumulator_value: Annotated[float, "> 0"] = 0.1,
        l1_regularization_strength: Annotated[float, ">= 0"] = 0.0,
        l2_regularization_strength: Annotated[float, ">= 0"] = 0.0,
    ) -> None:
        arguments = {
            "initial_accumulator_value": initial_accumulator_value,
            "l1_regularization_strength": l1_regularization_strength,
            "l2_regularization_strength": l2_regularization_strength,
        }
        super().__init__(
            learning_rate,
            lambda lr: tf_proximal_adagrad(lr, *arguments.values()),
            _sparse_rules.proximal_adagrad(l1_regularization_strength, l2_regularization_strength),
            **arguments,
        )
