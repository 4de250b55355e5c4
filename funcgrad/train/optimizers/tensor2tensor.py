r"""tensor2tensor's optimizers (``tensorflow/tensor2tensor``), on :class:`TF1Optimizer`.

Sources, at commit bafdc1b67730430d38d6ab802cbd51f9d053ba2e:
``tensor2tensor/utils/adafactor.py`` (``AdafactorOptimizer``, ``adafactor_decay_rate_adam``,
``adafactor_decay_rate_pow``; T5 and Mesh TensorFlow use the same rule) and
``tensor2tensor/utils/multistep_optimizer.py`` (``MultistepAdamOptimizer``).  The classes
read as the originals do: ``_create_slots`` is ``slots`` + ``_slots_of`` (TF names
``<var>/Adafactor``, ``_1``, ``_2`` in creation order; ``<var>/Adam``, ``_1``, ``_2``),
``_resource_apply_dense`` is ``_apply_dense``, and the originals' ``_apply_sparse`` (the
dense rule on ``tf.convert_to_tensor(grad)``) is the base's dense fallback.  The step
number the originals read from ``tf.train.get_or_create_global_step()`` is
``step.global_step``, the count before this step, as TensorFlow reads it there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated
from typing import ClassVar

import jax
import jax.numpy as jnp

from funcgrad import _checks
from funcgrad._types import LearningRate
from funcgrad._types import Schedule
from funcgrad.train.optimizers.base import TF1Optimizer
from funcgrad.train.optimizers.base import TF1Step
from funcgrad.train.optimizers.tf1 import AdamOptimizer

__all__ = [
    "AdafactorOptimizer",
    "MultistepAdamOptimizer",
    "adafactor_decay_rate_adam",
    "adafactor_decay_rate_pow",
]


def _step_num(global_step: jax.Array) -> jax.Array:
    """tensor2tensor's ``step_num()``: the global step as float32."""
    return jnp.asarray(global_step).astype(jnp.float32)


def adafactor_decay_rate_adam(beta2: float) -> Schedule:
    r"""tensor2tensor's ``adafactor_decay_rate_adam``: a second-moment decay rate like
    Adam's, its bias correction folded in.

    .. math::
      \hat\beta_2(t) = \beta_2 \frac{1 - \beta_2^{t-1}}{1 - \beta_2^t},
      \quad t = \text{global\_step} + 1

    Args:
      beta2: :math:`\beta_2`, in ``[0, 1)``.

    Returns:
      ``decay_rate(global_step)``, for ``AdafactorOptimizer(decay_rate=...)``.

    Raises:
      TypeError: ``beta2`` is not a number.
      ValueError: ``beta2`` is outside ``[0, 1)``.

    Example:
      >>> rate = fg.train.adafactor_decay_rate_adam(0.999)
      >>> [round(float(rate(jnp.int32(s))), 4) for s in (0, 1, 1000)]
      [0.0, 0.4998, 0.9984]
    """
    caller = "fg.train.adafactor_decay_rate_adam(beta2)"
    _checks.check_numbers(caller, {"beta2": (beta2, "in [0, 1)")}, "e.g. 0.999")
    beta2 = float(beta2)

    def decay_rate(global_step: jax.Array) -> jax.Array:
        t = _step_num(global_step) + 1.0
        b = jnp.float32(beta2)
        return beta2 * (1.0 - jnp.power(b, t - 1.0)) / (1.0 - jnp.power(b, t))

    return decay_rate


def adafactor_decay_rate_pow(exponent: float) -> Schedule:
    r"""tensor2tensor's ``adafactor_decay_rate_pow``: a second-moment decay rate whose
    memory grows as ``step ** exponent`` (Adafactor's default, with ``exponent=0.8``).

    .. math::
      \hat\beta_2(t) = 1 - t^{-c}, \quad t = \text{global\_step} + 1

    Args:
      exponent: :math:`c`, in ``[0, 1]``.

    Returns:
      ``decay_rate(global_step)``, for ``AdafactorOptimizer(decay_rate=...)``.

    Raises:
      TypeError: ``exponent`` is not a number.
      ValueError: ``exponent`` is outside ``[0, 1]``.

    Example:
      >>> rate = fg.train.adafactor_decay_rate_pow(0.8)
      >>> [round(float(rate(jnp.int32(s))), 4) for s in (0, 1, 1000)]
      [0.0, 0.4257, 0.996]
    """
    caller = "fg.train.adafactor_decay_rate_pow(exponent)"
    _checks.check_numbers(caller, {"exponent": (exponent, "in [0, 1]")}, "e.g. 0.8")
    exponent = float(exponent)

    def decay_rate(global_step: jax.Array) -> jax.Array:
        return 1.0 - jnp.power(_step_num(global_step) + 1.0, jnp.float32(-exponent))

    return decay_rate


def _learning_rate_default(multiply_by_parameter_scale: bool) -> Schedule:
    """Adafactor's default (relative) step size: ``min(rsqrt(step + 1), 0.01)``, times
    0.05 without the parameter scale."""

    def learning_rate(global_step: jax.Array) -> jax.Array:
        rate = jnp.minimum(jax.lax.rsqrt(_step_num(global_step) + 1.0), 0.01)
        return rate if multiply_by_parameter_scale else rate * 0.05

    return learning_rate


def _reduce_rms(x: jax.Array) -> jax.Array:
    return jnp.sqrt(jnp.mean(jnp.square(x)))


class AdafactorOptimizer(TF1Optimizer):
    r"""tensor2tensor's ``AdafactorOptimizer`` (Shazeer & Stern, 2018,
    https://arxiv.org/abs/1804.04235): Adam-like steps with a factored second moment,
    update clipping and a step size relative to the parameters' scale.

    With :math:`G = g^2 + \epsilon_1`, decay :math:`\hat\beta_2` and step :math:`\rho`
    (the learning rate), a variable of rank 2 or more (``factored=True``) keeps row and
    column means of :math:`G` over its last two dimensions; any other, the full
    :math:`v`:

    .. math::
      R \leftarrow \hat\beta_2 R + (1 - \hat\beta_2)\,\mathrm{mean}_{-1} G, \quad
      C \leftarrow \hat\beta_2 C + (1 - \hat\beta_2)\,\mathrm{mean}_{-2} G, \quad
      x = \frac{g}{\sqrt{(R / \mathrm{mean}_{-1} R) \otimes C}}
      \quad\text{(or } v \leftarrow \hat\beta_2 v + (1 - \hat\beta_2) G,\ x = g/\sqrt{v})

    .. math::
      x \leftarrow \frac{x}{\max(1, \mathrm{rms}(x) / d)}, \quad
      u = \rho \max(\mathrm{rms}(w), \epsilon_2)\, x, \quad
      m \leftarrow \beta_1 m + (1 - \beta_1) u \text{ (if } \beta_1 > 0), \quad
      w \leftarrow w - (m \text{ or } u)

    without the clip when ``clipping_threshold`` (:math:`d`) is ``None`` and without the
    parameter scale when ``multiply_by_parameter_scale`` is false.  Slots, as TensorFlow
    names them from the original's ``_create_slots``: ``m`` (when ``beta1 > 0``) then
    ``vr``, ``vc`` (factored) or ``v``, all named ``Adafactor`` — so ``W/Adafactor`` and
    ``W/Adafactor_1`` are ``vr`` and ``vc`` without momentum, ``vr`` is ``W/Adafactor_1``
    with it.  A 0-d or 1-d variable gets the unfactored rule, as in the original.  An
    ``fg.IndexedSlices`` gradient is made dense, as the original's ``_apply_sparse`` does.
    The slots are stored in the variable's dtype (the original keeps ``vr``, ``vc``, ``v``
    in float32 and needs a ``parameter_encoding`` for bfloat16 variables); the rule
    computes in float32.

    ``optax.adafactor`` differs: it factors the two largest dimensions of at least
    ``min_dim_size_to_factor`` (128) elements, not the last two, has no Adam-style
    ``decay_rate`` and adds its epsilon elsewhere (measured on the docs page).

    Args:
      multiply_by_parameter_scale: scale the step by :math:`\max(\mathrm{rms}(w), \epsilon_2)`.
      learning_rate: :math:`\rho`, a number or a ``schedule(step)``; ``None``:
        ``min(rsqrt(step + 1), 0.01)``, times 0.05 without the parameter scale.
      decay_rate: :math:`\hat\beta_2`, a number in ``[0, 1)`` or a ``schedule(step)``
        (:func:`adafactor_decay_rate_adam`, :func:`adafactor_decay_rate_pow`); ``None``:
        ``adafactor_decay_rate_pow(0.8)``.
      beta1: :math:`\beta_1` in ``[0, 1)``; above 0 it adds the momentum slot ``m``.
      clipping_threshold: :math:`d > 0`, or ``None`` for no update clipping.
      factored: factor the second moment of variables of rank 2 or more.
      simulated_quantize_bits: ``None`` or 0 (simulated quantization is not supported).
      parameter_encoding: ``None`` (bfloat16 parameter encodings are not supported).
      epsilon1: :math:`\epsilon_1 \geq 0`, added to the squared gradient.
      epsilon2: :math:`\epsilon_2 \geq 0`, the least parameter scale.

    Raises:
      TypeError: a hyperparameter of the wrong type (a flag that is not a bool, a string
        for a number, a schedule that does not return one floating scalar).
      ValueError: a hyperparameter out of range or not finite, or a quantization option.

    Example:
      >>> opt = fg.train.AdafactorOptimizer(learning_rate=0.1)
      >>> state = opt.init({"W": jnp.ones((2, 3)), "b": jnp.ones(3)})
      >>> state, _ = opt.minimize(lambda p: (p["W"] ** 2).sum() + p["b"].sum(), state)
      >>> np.asarray(state.params["W"][0], np.float64).round(4).tolist()
      [0.9, 0.9, 0.9]
      >>> [k for k, _ in opt.tf_names(state.params)[0][0]]  # W's slots: W/Adafactor, _1
      ['vr', 'vc']
    """

    slots: ClassVar[Mapping[str, str]] = {
        "m": "Adafactor",
        "vr": "Adafactor",
        "vc": "Adafactor",
        "v": "Adafactor",
    }

    def __init__(
        self,
        multiply_by_parameter_scale: bool = True,
        learning_rate: LearningRate | None = None,
        decay_rate: Annotated[float | Schedule | None, "in [0, 1)"] = None,
        beta1: Annotated[float, "in [0, 1)"] = 0.0,
        clipping_threshold: Annotated[float | None, "> 0"] = 1.0,
        factored: bool = True,
        simulated_quantize_bits: int | None = None,
        parameter_encoding: None = None,
        *,
        epsilon1: Annotated[float, ">= 0"] = 1e-30,
        epsilon2: Annotated[float, ">= 0"] = 1e-3,
    ) -> None:
        """Construct a new Adafactor optimizer."""
        caller = "fg.train.AdafactorOptimizer(...)"
        if simulated_quantize_bits not in (None, 0) or parameter_encoding is not None:
            raise ValueError(
                f"{caller}: simulated_quantize_bits={simulated_quantize_bits!r}, "
                f"parameter_encoding={parameter_encoding!r}: simulated quantization and "
                "bfloat16 parameter encodings are not supported; leave both None."
            )
        if learning_rate is None:
            learning_rate = _learning_rate_default(multiply_by_parameter_scale is True)
        super().__init__(
            learning_rate,
            multiply_by_parameter_scale=multiply_by_parameter_scale, decay_rate=decay_rate,
            beta1=beta1, clipping_threshold=clipping_threshold, factored=factored,
            epsilon1=epsilon1, epsilon2=epsilon2,
        )  # fmt: skip
        self._multiply_by_parameter_scale = multiply_by_parameter_scale
        if decay_rate is None:
            decay_rate = adafactor_decay_rate_pow(0.8)
        self._decay_rate = decay_rate
        self._beta1 = float(beta1)
        self._clipping_threshold = clipping_threshold
        self._factored = factored
        self._epsilon1 = epsilon1
        self._epsilon2 = epsilon2

    def _should_use_factored_second_moment_estimate(self, shape: tuple[int, ...]) -> bool:
        """Should we use a factored second moment estimator (from the variable's shape)."""
        return self._factored and len(shape) >= 2

    def _slots_of(self, var: jax.Array) -> tuple[str, ...]:
        momentum = ("m",) if self._beta1 else ()
        if self._should_use_factored_second_moment_estimate(var.shape):
            return (*momentum, "vr", "vc")
        return (*momentum, "v")

    def _slot_initial(self, key: str, var: jax.Array) -> jax.Array:
        shape = var.shape
        if key == "vr":
            return jnp.zeros(shape[:-1], var.dtype)
        if key == "vc":
            return jnp.zeros(shape[:-2] + shape[-1:], var.dtype)
        return jnp.zeros_like(var)

    def _parameter_scale(self, var: jax.Array) -> jax.Array:
        """The scale of the parameters, at least ``epsilon2`` (a chance to escape 0)."""
        return jnp.maximum(_reduce_rms(var), self._epsilon2)

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: dict[str, jax.Array], step: TF1Step
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        grad_squared = jnp.square(grad) + self._epsilon1
        grad_squared_mean = jnp.mean(grad_squared)
        decay_rate = self._call_if_callable(self._decay_rate, step)
        update_scale = step.learning_rate.astype(grad_squared_mean.dtype)
        old_val = var
        if self._multiply_by_parameter_scale:
            update_scale *= self._parameter_scale(old_val)
        # The original's HACK (it keeps XLA from fusing across variables), kept for its numbers.
        decay_rate += grad_squared_mean * 1e-30
        update_scale += grad_squared_mean * 1e-30
        mixing_rate = 1.0 - decay_rate
        updates = {}
        if self._should_use_factored_second_moment_estimate(var.shape):
            grad_squared_row_mean = jnp.mean(grad_squared, -1)
            grad_squared_col_mean = jnp.mean(grad_squared, -2)
            new_vr = decay_rate * slots["vr"] + mixing_rate * grad_squared_row_mean
            new_vc = decay_rate * slots["vc"] + mixing_rate * grad_squared_col_mean
            updates = {"vr": new_vr, "vc": new_vc}
            long_term_mean = jnp.mean(new_vr, -1, keepdims=True)
            r_factor = jax.lax.rsqrt(new_vr / long_term_mean)
            c_factor = jax.lax.rsqrt(new_vc)
            x = grad * jnp.expand_dims(r_factor, -1) * jnp.expand_dims(c_factor, -2)
        else:
            new_v = decay_rate * slots["v"] + mixing_rate * grad_squared
            updates = {"v": new_v}
            x = grad * jax.lax.rsqrt(new_v)
        if self._clipping_threshold is not None:
            clipping_denom = jnp.maximum(1.0, _reduce_rms(x) / self._clipping_threshold)
            x /= clipping_denom
        subtrahend = update_scale * x
        if self._beta1:
            new_m = self._beta1 * slots["m"] + (1.0 - self._beta1) * subtrahend
            subtrahend = new_m
            updates["m"] = new_m
        new_val = old_val - subtrahend
        return new_val, updates

    def _call_if_callable(self, value: float | Schedule, step: TF1Step) -> jax.Array:
        """A number, or a schedule evaluated at ``global_step``, as a float32 scalar."""
        rate = value(step.global_step) if callable(value) else value
        return jnp.asarray(rate, jnp.float32)


class MultistepAdamOptimizer(AdamOptimizer):
    r"""tensor2tensor's ``MultistepAdamOptimizer``: TensorFlow's Adam applied every
    ``n``-th step to the mean of the last ``n`` gradients (Saunders et al., 2018,
    https://arxiv.org/abs/1805.00456).

    Each step adds the gradient to the accumulator ``grad_acc``; when the non-slot
    counter ``iter`` is 0, TF's Adam (:math:`\alpha = \eta\sqrt{1-\beta_2^t}/(1-\beta_1^t)`,
    :math:`w \leftarrow w - \alpha m / (\sqrt v + \hat\epsilon)`) runs on
    ``(grad_acc + g) / n`` instead, ``grad_acc`` is zeroed and ``beta1_power``,
    ``beta2_power`` advance; ``iter`` becomes ``(iter + 1) mod n`` (it starts at 1 for
    ``n > 1``, so the first update is at step ``n``).  TF names: ``<var>/Adam``,
    ``<var>/Adam_1`` (``m``, ``v``), ``<var>/Adam_2`` (``grad_acc``), non-slots
    ``beta1_power``, ``beta2_power`` (float32) and ``iter`` (int32).  An
    ``fg.IndexedSlices`` gradient is made dense, as the original does (it warns "does not
    support sparse updates").  ``fg.train.accumulate_gradients`` over ``AdamOptimizer``
    differs: its Adam step count and checkpoint names are its own.

    Args:
      learning_rate: :math:`\eta`, a number or a ``schedule(step)``.
      beta1: :math:`\beta_1`, in ``[0, 1)``.
      beta2: :math:`\beta_2`, in ``[0, 1)``.
      epsilon: :math:`\hat\epsilon`.
      n: apply every ``n``-th step (keyword only: the original's ``use_locking`` and
        ``name`` come before it).

    Raises:
      TypeError: a hyperparameter is not a number, or ``n`` not an integer.
      ValueError: ``beta1`` / ``beta2`` outside ``[0, 1)``, a negative ``epsilon``, or
        ``n < 1``.

    Example:
      >>> opt = fg.train.MultistepAdamOptimizer(0.1, n=2)
      >>> state = opt.init({"W": jnp.ones(2)})
      >>> for _ in range(3):
      ...     state, _ = opt.minimize(lambda p: p["W"].sum(), state)
      ...     print(np.asarray(state.params["W"], np.float64).round(4).tolist())
      [1.0, 1.0]
      [0.9, 0.9]
      [0.9, 0.9]
    """

    slots: ClassVar[Mapping[str, str]] = {"m": "Adam", "v": "Adam", "grad_acc": "Adam"}

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        beta1: Annotated[float, "in [0, 1)"] = 0.9,
        beta2: Annotated[float, "in [0, 1)"] = 0.999,
        epsilon: Annotated[float, ">= 0"] = 1e-8,
        *,
        n: Annotated[int, ">= 1"] = 1,
    ) -> None:
        super().__init__(learning_rate, beta1, beta2, epsilon)
        self._check_hyperparameters("fg.train.MultistepAdamOptimizer(...)", {"n": n})
        self.hyperparameters = {**self.hyperparameters, "n": n}
        self._n = int(n)

    def _non_slots(self) -> dict[str, float]:
        return {**super()._non_slots(), "iter": 0 if self._n == 1 else 1}

    # The original's _apply_sparse makes the gradient dense (tf.convert_to_tensor) for its
    # dense rule: the base's fallback, as without an _apply_sparse of Adam's.
    _apply_sparse = TF1Optimizer._apply_sparse

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: dict[str, jax.Array], step: TF1Step
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        grad_acc = slots["grad_acc"]

        def apply_adam() -> tuple[jax.Array, dict[str, jax.Array]]:
            total_grad = (grad_acc + grad) / jnp.asarray(self._n, grad.dtype)
            adam = {"m": slots["m"], "v": slots["v"]}
            new_var, new_slots = super(MultistepAdamOptimizer, self)._apply_dense(
                total_grad, var, adam, step
            )
            return new_var, {**new_slots, "grad_acc": jnp.zeros_like(grad_acc)}

        def accumulate_gradient() -> tuple[jax.Array, dict[str, jax.Array]]:
            return var, {**slots, "grad_acc": grad_acc + grad}

        return jax.lax.cond(step.non_slots["iter"] == 0, apply_adam, accumulate_gradient)

    def _finish(self, non_slots: dict[str, jax.Array], step: TF1Step) -> dict[str, jax.Array]:
        """Updates the beta powers every ``n`` steps and advances ``iter``."""
        iter_ = non_slots["iter"]
        applied = iter_ == 0
        beta1_power, beta2_power = non_slots["beta1_power"], non_slots["beta2_power"]
        return {
            "beta1_power": jnp.where(applied, beta1_power * self._beta1, beta1_power),
            "beta2_power": jnp.where(applied, beta2_power * self._beta2, beta2_power),
            "iter": jnp.mod(iter_ + 1, self._n),
        }
