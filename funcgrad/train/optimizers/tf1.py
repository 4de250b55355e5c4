r"""TensorFlow 1.x's optimizers (``tf.compat.v1.train.*Optimizer``) with their update rules.

Each class takes TensorFlow's arguments and defaults (less ``use_locking`` and
``name``, which have no meaning here) and applies TensorFlow's formula, so a ported
program follows the same trajectory to float32 rounding.  ``learning_rate`` is a
number or a ``schedule(step)``; it is held in the optimizer state (see
:func:`~funcgrad.train.set_learning_rate`).  Each is a
:class:`~funcgrad.train.TF1Optimizer` that declares what TensorFlow names (its slots and
non-slots, their TF names), its hyperparameters with their ranges, and its rule as
TensorFlow's ``Optimizer`` subclass writes it (``_apply_dense``, ``_apply_sparse``,
``_prepare``, ``_finish``), each kernel from :mod:`funcgrad.train.optimizers._kernels`.
Its dense step is an optax chain (``_chain``): ``.tx``, built from optax's pieces where the
formula is the same and from :mod:`funcgrad.train.optimizers.transforms` where
TensorFlow's differs.  A subclass that writes a rule of its own (``AdamWOptimizer``'s
decay) is stepped by the rules instead, as in TensorFlow.

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
summed (``GradientDescentOptimizer`` scatters them as they are, as TensorFlow does), then
the optimizer's ``SparseApply*`` kernel updates the touched rows of the variable and its
slots; rows that no id touches keep their values and slots (for
Momentum, RMSProp, Ftrl and the proximal optimizers that differs from a dense update
with zero rows).  Adam's sparse rule decays all of its moments, as TensorFlow's does;
``fg.train.LazyAdamOptimizer`` is the row-only Adam.  An id outside the table is an error
outside ``jax.jit`` and writes nothing under it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated
from typing import Any
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import optax

from funcgrad._types import LearningRate
from funcgrad._types import put_path
from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train import _sparse
from funcgrad.train.optimizers import _kernels
from funcgrad.train.optimizers.base import Chain
from funcgrad.train.optimizers.base import TF1Optimizer
from funcgrad.train.optimizers.base import TF1Step
from funcgrad.train.optimizers.base import placed_like
from funcgrad.train.optimizers.transforms import scale_by_tf_adam
from funcgrad.train.optimizers.transforms import tf_ftrl
from funcgrad.train.optimizers.transforms import tf_proximal_adagrad
from funcgrad.train.optimizers.transforms import tf_proximal_gradient_descent
from funcgrad.train.schedules.learning_rate import scale_by_learning_rate

__all__ = [
    "AdadeltaOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "FtrlOptimizer",
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "ProximalAdagradOptimizer",
    "ProximalGradientDescentOptimizer",
    "RMSPropOptimizer",
]

Slots = dict[str, jax.Array]
Array = jax.Array


def _then_rate(scale: optax.GradientTransformation) -> Any:
    """The transformation of ``scale`` followed by the learning rate (most TF1 rules' shape)."""
    return lambda rate: optax.chain(scale, scale_by_learning_rate(rate))


def _lr(step: TF1Step, like: Array) -> Array:
    """The step's learning rate in ``like``'s dtype, as TensorFlow casts ``_lr_t``."""
    return step.learning_rate.astype(like.dtype)


class GradientDescentOptimizer(TF1Optimizer):
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

    _widen_for_sparse = False

    def __init__(self, learning_rate: LearningRate) -> None:
        super().__init__(learning_rate)

    def _chain(self) -> Chain:
        return Chain(scale_by_learning_rate, {})

    def _apply_dense(
        self, grad: Array, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        return var - _lr(step, var) * grad, {}

    def _apply_sparse_duplicate_indices(
        self, grad: IndexedSlices, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        """``_resource_apply_sparse_duplicate_indices``: ``var[i] += -g * lr``, each row
        scattered as it is (duplicates are not summed first)."""
        values, ids = _sparse.in_table(grad)
        delta = -values * step.learning_rate.astype(values.dtype)
        return var.at[ids].add(delta.astype(var.dtype), mode="drop"), {}


class MomentumOptimizer(TF1Optimizer):
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

    slots: ClassVar[Mapping[str, str]] = {"momentum": "Momentum"}
    _widen_for_sparse = False

    def __init__(
        self,
        learning_rate: LearningRate,
        momentum: Annotated[float, ">= 0"],
        use_nesterov: bool = False,
    ) -> None:
        super().__init__(learning_rate, momentum=momentum, use_nesterov=use_nesterov)
        self._momentum = momentum
        self._use_nesterov = use_nesterov

    def _chain(self) -> Chain:
        trace = optax.trace(decay=self._momentum, nesterov=self._use_nesterov)
        return Chain(_then_rate(trace), {"momentum": ((0, "trace"), 1)})

    def _apply_dense(
        self, grad: Array, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        var, accum = _kernels.momentum(
            grad, var, slots["momentum"], _lr(step, var), self._momentum, self._use_nesterov
        )
        return var, {"momentum": accum}

    def _apply_sparse(
        self, grad: IndexedSlices, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        def kernel(g: Array, w: Array, a: Array) -> tuple[Array, ...]:
            return _kernels.momentum(g, w, a, _lr(step, w), self._momentum, self._use_nesterov)

        var, accum = _kernels.on_rows(kernel, grad, var, slots["momentum"])
        return var, {"momentum": accum}


class AdamOptimizer(TF1Optimizer):
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
    ``fg.train.LazyAdamOptimizer`` changes the touched rows only.

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

    slots: ClassVar[Mapping[str, str]] = {"m": "Adam", "v": "Adam"}

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        beta1: Annotated[float, "in [0, 1)"] = 0.9,
        beta2: Annotated[float, "in [0, 1)"] = 0.999,
        epsilon: Annotated[float, ">= 0"] = 1e-8,
    ) -> None:
        _refuse_fed_betas(f"fg.train.{type(self).__name__}(...)", beta1=beta1, beta2=beta2)
        super().__init__(learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon)
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon
        self._beta1_t = np.float32(beta1)
        self._beta2_t = np.float32(beta2)
        self._epsilon_t = np.float32(epsilon)

    def _chain(self) -> Chain:
        scale = scale_by_tf_adam(self._beta1, self._beta2, self._epsilon)
        return Chain(
            _then_rate(scale),
            {"m": ((0, "mu"), 1), "v": ((0, "nu"), 1)},
            {"beta1_power": (0, "beta1_power"), "beta2_power": (0, "beta2_power")},
        )

    def _non_slots(self) -> dict[str, float]:
        return {"beta1_power": self._beta1, "beta2_power": self._beta2}

    def _prepare(self, step: TF1Step) -> dict[str, Any]:
        """The bias-corrected rate ``alpha``, ``lr * sqrt(1 - beta2_power) / (1 -
        beta1_power)``: the ``ApplyAdam`` kernel computes it per variable from the same
        scalars, so once per step gives every variable the same number."""
        beta1_power, beta2_power = step.non_slots["beta1_power"], step.non_slots["beta2_power"]
        return {"alpha": step.learning_rate * jnp.sqrt(1 - beta2_power) / (1 - beta1_power)}

    def _apply_dense(
        self, grad: Array, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        delta, m, v = _kernels.adam(
            grad, slots["m"], slots["v"], step.prepared["alpha"], self._beta1_t, self._beta2_t,
            self._epsilon_t, nesterov=False,
        )  # fmt: skip
        return var - delta, {"m": m, "v": v}

    def _apply_sparse(
        self, grad: IndexedSlices, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        """``_apply_sparse_shared``: all of ``m`` and ``v`` decayed, the rows added, every
        row of the variable moved (dense in cost, as in TensorFlow)."""
        m, v = slots["m"], slots["v"]
        beta1, beta2 = self._beta1_t.astype(m.dtype), self._beta2_t.astype(v.dtype)
        m, v = _kernels.adam_sparse_moments(grad, m, v, beta1, beta2)
        alpha = step.prepared["alpha"].astype(m.dtype)
        return var - alpha * m / (jnp.sqrt(v) + self._epsilon), {"m": m, "v": v}

    def _finish(self, non_slots: dict[str, Array], step: TF1Step) -> dict[str, Array]:
        return {
            **non_slots,
            "beta1_power": non_slots["beta1_power"] * self._beta1_t,
            "beta2_power": non_slots["beta2_power"] * self._beta2_t,
        }

    def _restore_non_slots(
        self, caller: str, inner: Any, values: dict[str, Any], global_step: int
    ) -> Any:
        """The powers as read and, in the chain's state, its step count: the ``t`` of
        ``beta1_power = beta1 ** (t + 1)`` (both powers are read, or neither)."""
        if self._stepped_by_chain():
            if len(values) != 2:
                raise ValueError(
                    f"{caller}: name_map keeps one of ['beta1_power', 'beta2_power'] (maps it "
                    "to None) and reads the other; Adam's step is the pair's, so map both to "
                    "None or neither."
                )
            powers = [float(values["beta1_power"]), float(values["beta2_power"])]
            count = _adam_count(powers, [self._beta1, self._beta2], global_step)
            if count is None:
                raise ValueError(
                    f"{caller}: beta1_power={powers[0]} and beta2_power={powers[1]} are not "
                    f"powers of this optimizer's beta1={self._beta1} and beta2={self._beta2}; "
                    f"build fg.train.{type(self).__name__} with the beta1 and beta2 of the "
                    "TensorFlow run."
                )
            inner = put_path(inner, (0, "step"), placed_like(count, inner[0].step))
        return super()._restore_non_slots(caller, inner, values, global_step)


def _refuse_fed_betas(caller: str, **betas: Any) -> None:
    """Raise, naming the way, for a beta fed as a schedule or an array (TensorFlow's tensor
    of ``global_step``): TensorFlow's Adam with such betas is built from its optax piece."""
    fed = [
        f"{k} is {'a function (a schedule?)' if callable(v) else 'an array'}"
        for k, v in betas.items()
        if callable(v) or isinstance(v, jax.Array | np.ndarray)
    ]
    if fed:
        raise TypeError(
            f"{caller}: {', '.join(fed)}, and Adam's betas here are Python numbers; for betas "
            "that change with the step, build TensorFlow's Adam from its optax piece, "
            "fg.train.Optimizer(optax.chain(optax.inject_hyperparams(fg.train.scale_by_tf_adam)"
            "(beta1=schedule, beta2=0.999), fg.train.scale_by_learning_rate(rate))) (docs: "
            "porting.md, Hyperparameters that change while training)."
        )


def power(beta: float, n: int) -> np.float32:
    """``beta ** n`` as TensorFlow's ``beta1_power`` holds it: float32 ``beta``, multiplied
    ``n`` times in float32 (not ``np.float32(beta) ** n``, which rounds differently)."""
    product, b = np.float32(1.0), np.float32(beta)
    while n > 0 and product != 0:
        chunk = min(n, 1 << 20)
        product = np.multiply.accumulate(np.concatenate([[product], np.full(chunk, b)]))[-1]
        n -= chunk
    return np.float32(product)


def _adam_count(powers: list[float], betas: list[float], global_step: int) -> int | None:
    """Adam's step ``t`` from TensorFlow's ``beta_power = beta ** (t + 1)``.

    ``global_step`` when it gives both powers exactly (a ``minimize(global_step=...)``
    run); else the count each power's logarithm gives — exact while ``beta1_power`` is a
    normal float32, within one after (when ``1 - beta2 ** t`` is 1 in float32 anyway).
    Once both powers are 0, every ``t`` past that gives the same numbers.  ``None`` when
    the powers do not come from these betas (not in ``(0, beta]``, or the two counts
    disagree).
    """
    if all(power(b, global_step + 1) == p for b, p in zip(betas, powers, strict=True)):
        return global_step
    tiny = float(np.finfo(np.float32).tiny)
    pairs = [(p, float(np.float32(b))) for p, b in zip(powers, betas, strict=True)]
    if any(not 0 <= p <= b for p, b in pairs):
        return None
    counts = [round(math.log(p) / math.log(b)) - 1 for p, b in pairs if 0 < b < 1 and p >= tiny]
    if len(counts) == 2 and abs(counts[0] - counts[1]) > 1 + counts[0] // 1000:
        return None
    if counts:
        return counts[0]
    past = [math.ceil(math.log(tiny) / math.log(b)) for _, b in pairs if 0 < b < 1]
    return max(global_step, *past)


class RMSPropOptimizer(TF1Optimizer):
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

    slots: ClassVar[Mapping[str, str]] = {"rms": "RMSProp", "mg": "RMSProp", "momentum": "RMSProp"}
    _widen_for_sparse = False
    _sparse_takes_held_slots = True

    def __init__(
        self,
        learning_rate: LearningRate,
        decay: Annotated[float, "in [0, 1]"] = 0.9,
        momentum: Annotated[float, ">= 0"] = 0.0,
        epsilon: Annotated[float, ">= 0"] = 1e-10,
        centered: bool = False,
    ) -> None:
        super().__init__(
            learning_rate, decay=decay, momentum=momentum, epsilon=epsilon, centered=centered
        )
        self._decay = decay
        self._momentum = momentum
        self._epsilon = epsilon
        self._centered = centered

    def _chain(self) -> Chain:
        by = optax.scale_by_stddev if self._centered else optax.scale_by_rms
        scale = by(decay=self._decay, eps=self._epsilon, initial_scale=1.0, eps_in_sqrt=True)
        trace = optax.trace(decay=self._momentum)
        mg = {"mg": ((0, "mu"), 1)} if self._centered else {}
        return Chain(
            lambda lr: optax.chain(scale, scale_by_learning_rate(lr), trace),
            {"rms": ((0, "nu"), 1), **mg, "momentum": ((2, "trace"), -1)},
        )

    def _slots_of(self, var: Array) -> tuple[str, ...]:
        return ("rms", "mg", "momentum") if self._centered else ("rms", "momentum")

    def _slot_initial(self, key: str, var: Array) -> Array:
        return jnp.ones_like(var) if key == "rms" else jnp.zeros_like(var)

    def _apply_dense(
        self, grad: Array, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        lr, rho, mu, eps = _lr(step, var), self._decay, self._momentum, self._epsilon
        if self._centered:
            var, ms, mg, mom = _kernels.centered_rmsprop(
                grad, var, slots["rms"], slots["mg"], slots["momentum"], lr, rho, mu, eps
            )
            return var, {"rms": ms, "mg": mg, "momentum": mom}
        var, ms, mom = _kernels.rmsprop(
            grad, var, slots["rms"], slots["momentum"], lr, rho, mu, eps
        )
        return var, {"rms": ms, "momentum": mom}

    def _apply_sparse(
        self, grad: IndexedSlices, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        """``SparseApplyRMSProp`` / ``SparseApplyCenteredRMSProp``, in their own order of
        arithmetic (``ms * rho + g^2 (1 - rho)``). The momentum comes as the state holds it
        (negated, in the optax chain's state): only its touched rows are signed."""
        rho, mu, eps = self._decay, self._momentum, self._epsilon
        sign = self._layout()[0]["momentum"][1]
        if self._centered:

            def centered(g: Array, w: Array, ms: Array, mg: Array, mom: Array) -> tuple[Array, ...]:
                w, ms, mg, mom = _kernels.sparse_centered_rmsprop(
                    g, w, ms, mg, sign * mom, _lr(step, w), rho, mu, eps
                )
                return w, ms, mg, sign * mom

            var, ms, mg, mom = _kernels.on_rows(
                centered, grad, var, slots["rms"], slots["mg"], slots["momentum"]
            )
            return var, {"rms": ms, "mg": mg, "momentum": mom}

        def plain(g: Array, w: Array, ms: Array, mom: Array) -> tuple[Array, ...]:
            w, ms, mom = _kernels.sparse_rmsprop(g, w, ms, sign * mom, _lr(step, w), rho, mu, eps)
            return w, ms, sign * mom

        var, ms, mom = _kernels.on_rows(plain, grad, var, slots["rms"], slots["momentum"])
        return var, {"rms": ms, "momentum": mom}


class AdagradOptimizer(TF1Optimizer):
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

    slots: ClassVar[Mapping[str, str]] = {"accumulator": "Adagrad"}
    _widen_for_sparse = False

    def __init__(
        self, learning_rate: LearningRate, initial_accumulator_value: Annotated[float, "> 0"] = 0.1
    ) -> None:
        super().__init__(learning_rate, initial_accumulator_value=initial_accumulator_value)
        self._initial_accumulator_value = initial_accumulator_value

    def _chain(self) -> Chain:
        scale = optax.scale_by_rss(self._initial_accumulator_value, eps=0.0)
        return Chain(_then_rate(scale), {"accumulator": ((0, "sum_of_squares"), 1)})

    def _slot_initial(self, key: str, var: Array) -> Array:
        return jnp.full_like(var, self._initial_accumulator_value)

    def _apply_dense(
        self, grad: Array, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        var, accum = _kernels.adagrad(grad, var, slots["accumulator"], _lr(step, var))
        return var, {"accumulator": accum}

    def _apply_sparse(
        self, grad: IndexedSlices, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        def kernel(g: Array, w: Array, n: Array) -> tuple[Array, ...]:
            return _kernels.adagrad(g, w, n, _lr(step, w))

        var, accum = _kernels.on_rows(kernel, grad, var, slots["accumulator"])
        return var, {"accumulator": accum}


class AdadeltaOptimizer(TF1Optimizer):
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

    slots: ClassVar[Mapping[str, str]] = {"accum": "Adadelta", "accum_update": "Adadelta"}
    _widen_for_sparse = False

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        rho: Annotated[float, "in [0, 1]"] = 0.95,
        epsilon: Annotated[float, ">= 0"] = 1e-8,
    ) -> None:
        super().__init__(learning_rate, rho=rho, epsilon=epsilon)
        self._rho = rho
        self._epsilon = epsilon

    def _chain(self) -> Chain:
        scale = optax.scale_by_adadelta(rho=self._rho, eps=self._epsilon)
        return Chain(_then_rate(scale), {"accum": ((0, "e_g"), 1), "accum_update": ((0, "e_x"), 1)})

    def _apply_dense(
        self, grad: Array, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        var, n, d = _kernels.adadelta(
            grad,
            var,
            slots["accum"],
            slots["accum_update"],
            _lr(step, var),
            self._rho,
            self._epsilon,
        )
        return var, {"accum": n, "accum_update": d}

    def _apply_sparse(
        self, grad: IndexedSlices, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        def kernel(g: Array, w: Array, n: Array, d: Array) -> tuple[Array, ...]:
            return _kernels.adadelta(g, w, n, d, _lr(step, w), self._rho, self._epsilon)

        var, n, d = _kernels.on_rows(kernel, grad, var, slots["accum"], slots["accum_update"])
        return var, {"accum": n, "accum_update": d}


class FtrlOptimizer(TF1Optimizer):
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

    slots: ClassVar[Mapping[str, str]] = {"accum": "Ftrl", "linear": "Ftrl"}
    _widen_for_sparse = False

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
        super().__init__(
            learning_rate,
            learning_rate_power=learning_rate_power,
            initial_accumulator_value=initial_accumulator_value,
            l1_regularization_strength=l1_regularization_strength,
            l2_regularization_strength=l2_regularization_strength,
            l2_shrinkage_regularization_strength=l2_shrinkage_regularization_strength,
            beta=0.0 if beta is None else beta,
        )
        self._arguments = tuple(self.hyperparameters.values())
        self._initial_accumulator_value = initial_accumulator_value

    def _chain(self) -> Chain:
        arguments = self._arguments
        return Chain(
            lambda lr: tf_ftrl(lr, *arguments),
            {"accum": (("accumulator",), 1), "linear": (("linear",), 1)},
        )

    def _slot_initial(self, key: str, var: Array) -> Array:
        if key == "accum":
            return jnp.full_like(var, self._initial_accumulator_value)
        return jnp.zeros_like(var)

    def _kernel(self, lr: Array) -> Any:
        power, _, l1, l2, l2_shrinkage, beta = self._arguments

        def kernel(g: Array, w: Array, n: Array, z: Array) -> tuple[Array, ...]:
            return _kernels.ftrl(g, w, n, z, lr.astype(w.dtype), -power, l1, l2, l2_shrinkage, beta)

        return kernel

    def _apply_dense(
        self, grad: Array, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        var, n, z = self._kernel(step.learning_rate)(grad, var, slots["accum"], slots["linear"])
        return var, {"accum": n, "linear": z}

    def _apply_sparse(
        self, grad: IndexedSlices, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        kernel = self._kernel(step.learning_rate)
        var, n, z = _kernels.on_rows(kernel, grad, var, slots["accum"], slots["linear"])
        return var, {"accum": n, "linear": z}


class ProximalGradientDescentOptimizer(TF1Optimizer):
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

    _widen_for_sparse = False

    def __init__(
        self,
        learning_rate: LearningRate,
        l1_regularization_strength: Annotated[float, ">= 0"] = 0.0,
        l2_regularization_strength: Annotated[float, ">= 0"] = 0.0,
    ) -> None:
        super().__init__(
            learning_rate,
            l1_regularization_strength=l1_regularization_strength,
            l2_regularization_strength=l2_regularization_strength,
        )
        self._l1 = l1_regularization_strength
        self._l2 = l2_regularization_strength

    def _chain(self) -> Chain:
        l1, l2 = self._l1, self._l2
        return Chain(lambda lr: tf_proximal_gradient_descent(lr, l1, l2), {})

    def _apply_dense(
        self, grad: Array, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        return _kernels.proximal(var, grad, _lr(step, var), self._l1, self._l2), {}

    def _apply_sparse(
        self, grad: IndexedSlices, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        def kernel(g: Array, w: Array) -> tuple[Array, ...]:
            return (_kernels.proximal(w, g, _lr(step, w), self._l1, self._l2),)

        (var,) = _kernels.on_rows(kernel, grad, var)
        return var, {}


class ProximalAdagradOptimizer(TF1Optimizer):
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

    slots: ClassVar[Mapping[str, str]] = {"accumulator": "ProximalAdagrad"}
    _widen_for_sparse = False

    def __init__(
        self,
        learning_rate: LearningRate,
        initial_accumulator_value: Annotated[float, "> 0"] = 0.1,
        l1_regularization_strength: Annotated[float, ">= 0"] = 0.0,
        l2_regularization_strength: Annotated[float, ">= 0"] = 0.0,
    ) -> None:
        super().__init__(
            learning_rate,
            initial_accumulator_value=initial_accumulator_value,
            l1_regularization_strength=l1_regularization_strength,
            l2_regularization_strength=l2_regularization_strength,
        )
        self._initial_accumulator_value = initial_accumulator_value
        self._l1 = l1_regularization_strength
        self._l2 = l2_regularization_strength

    def _chain(self) -> Chain:
        initial, l1, l2 = self._initial_accumulator_value, self._l1, self._l2
        return Chain(
            lambda lr: tf_proximal_adagrad(lr, initial, l1, l2),
            {"accumulator": (("accumulator",), 1)},
        )

    def _slot_initial(self, key: str, var: Array) -> Array:
        return jnp.full_like(var, self._initial_accumulator_value)

    def _apply_dense(
        self, grad: Array, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        var, n = _kernels.proximal_adagrad(
            grad, var, slots["accumulator"], _lr(step, var), self._l1, self._l2
        )
        return var, {"accumulator": n}

    def _apply_sparse(
        self, grad: IndexedSlices, var: Array, slots: Slots, step: TF1Step
    ) -> tuple[Array, Slots]:
        def kernel(g: Array, w: Array, n: Array) -> tuple[Array, ...]:
            return _kernels.proximal_adagrad(g, w, n, _lr(step, w), self._l1, self._l2)

        var, n = _kernels.on_rows(kernel, grad, var, slots["accumulator"])
        return var, {"accumulator": n}
