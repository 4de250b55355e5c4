"""TensorFlow 1.x's learning-rate decays as schedules: ``schedule(step) -> learning_rate``.

Each factory takes ``tf.compat.v1.train.*_decay``'s arguments and defaults without
``global_step`` and returns a pure function of the step, which may be a traced integer
(jit it, vmap it, hand it to optax). ``schedule(global_step)`` is the rate TensorFlow's
``*_decay(..., global_step)`` gives, evaluated as TensorFlow does: the step is cast to the
learning rate's dtype (``float32`` for a Python number) and the formula of
``tensorflow/python/keras/optimizer_v2/learning_rate_schedule.py`` is applied in that
dtype. ``staircase=True`` floors ``step / decay_steps``, so the rate changes only every
``decay_steps`` steps.

The learning rate (and ``piecewise_constant``'s values) may be an array; the other
arguments shape the schedule and must be Python numbers. Static arguments are checked
when the schedule is made, the step's dtype when it is called.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad import _checks
from funcgrad._types import ArrayLike
from funcgrad._types import Schedule

__all__ = [
    "cosine_decay",
    "cosine_decay_restarts",
    "exponential_decay",
    "inverse_time_decay",
    "linear_cosine_decay",
    "natural_exp_decay",
    "noisy_linear_cosine_decay",
    "piecewise_constant",
    "polynomial_decay",
]


def _number(caller: str, name: str, value: float, rule: str) -> float:
    """``value`` as a float; it must be a finite real number within ``rule``
    (``_checks.RULES``)."""
    _checks.check_numbers(caller, {name: (value, rule)}, "see the schedule's docstring")
    return float(value)


def _positive(caller: str, name: str, value: float) -> float:
    return _number(caller, name, value, "> 0")


def _non_negative(caller: str, name: str, value: float) -> float:
    return _number(caller, name, value, ">= 0")


def _rate(caller: str, name: str, value: ArrayLike) -> jax.Array:
    """A learning rate as a floating scalar (float32 for a Python number); a value known
    now must be finite and >= 0."""
    if isinstance(value, bool) or not isinstance(
        value, int | float | np.ndarray | np.generic | jax.Array
    ):
        raise TypeError(
            f"{caller}: {name} must be a number or a scalar array, got {value!r}; pass a "
            "float such as 0.1."
        )
    if jnp.ndim(value) != 0:
        raise ValueError(
            f"{caller}: {name} must be a scalar, got shape {jnp.shape(value)}; pass one "
            "learning rate."
        )
    if isinstance(value, int | float | np.ndarray | np.generic):
        _number(caller, name, np.asarray(value).item(), ">= 0")
    rate = jnp.asarray(value, jnp.float32 if isinstance(value, int | float) else None)
    if not jnp.issubdtype(rate.dtype, jnp.floating):
        raise TypeError(
            f"{caller}: {name} has dtype {rate.dtype}; pass a float, e.g. "
            f"{name}.astype(jnp.float32)."
        )
    return rate


def _step(caller: str, step: ArrayLike) -> jax.Array:
    """The step as an integer array; a float, a bool or anything else is a TypeError."""
    if _checks.is_integer(step):
        return jnp.asarray(step)
    dtype = getattr(step, "dtype", None)
    got = f"dtype {dtype}" if dtype is not None else type(step).__name__
    raise TypeError(
        f"schedule(step) from {caller}: step must be an integer (a Python int or an integer "
        f"array such as TrainState.global_step), got {got}; cast it with "
        "step.astype(jnp.int32)."
    )


def _divide(x: jax.Array, d: ArrayLike) -> jax.Array:
    """``x / d`` as IEEE division, which TensorFlow computes.

    XLA rewrites a division by a scalar as a multiplication by its reciprocal, which can be
    one ulp off and so move a ``floor`` or ``ceil`` across a step boundary; a divisor
    computed from ``x`` and hidden behind an optimization barrier keeps the true division.
    ``x`` is a cast step or a quantity derived from it, so ``x * 0`` is zero.
    """
    return x / jax.lax.optimization_barrier(x * 0 + jnp.asarray(d, x.dtype))


def _progress(step: jax.Array, dtype: jnp.dtype, decay_steps: float, staircase: bool) -> jax.Array:
    """``step / decay_steps`` in ``dtype``, floored when ``staircase``."""
    p = _divide(step.astype(dtype), decay_steps)
    return jnp.floor(p) if staircase else p


def exponential_decay(
    learning_rate: ArrayLike, decay_steps: float, decay_rate: float, staircase: bool = False
) -> Schedule:
    """``tf.compat.v1.train.exponential_decay`` without ``global_step``.

    ``learning_rate * decay_rate ** (step / decay_steps)``, with the exponent floored when
    ``staircase``.

    Args:
      learning_rate: the rate at step 0, a number or a scalar array, >= 0.
      decay_steps: how many steps one factor of ``decay_rate`` takes, > 0.
      decay_rate: the factor per ``decay_steps`` steps, >= 0.
      staircase: decay at whole multiples of ``decay_steps`` only.

    Returns:
      ``schedule(step) -> learning_rate`` for an integer ``step`` (any shape).

    Raises:
      ValueError: for a negative or non-finite argument, or ``decay_steps == 0``.
      TypeError: for a non-number ``decay_steps`` / ``decay_rate``; the schedule raises it
        for a step that is not an integer.

    Example:
      >>> schedule = fg.train.exponential_decay(0.1, decay_steps=5, decay_rate=0.5, staircase=True)
      >>> [round(float(schedule(s)), 4) for s in (0, 4, 5, 10)]
      [0.1, 0.1, 0.05, 0.025]
    """
    caller = "fg.train.exponential_decay(learning_rate, decay_steps, decay_rate)"
    rate = _non_negative(caller, "decay_rate", decay_rate)
    return _exponential(caller, learning_rate, decay_steps, lambda _: rate, staircase)


def natural_exp_decay(
    learning_rate: ArrayLike, decay_steps: float, decay_rate: float, staircase: bool = False
) -> Schedule:
    """``tf.compat.v1.train.natural_exp_decay`` without ``global_step``.

    ``learning_rate * exp(-decay_rate) ** (step / decay_steps)`` — TensorFlow rounds
    ``exp(-decay_rate)`` to the learning rate's dtype first — floored when ``staircase``.

    Args:
      learning_rate: the rate at step 0 (a number or a scalar array, >= 0).
      decay_steps: how many steps one factor of ``exp(-decay_rate)`` takes (> 0).
      decay_rate: the exponential decay rate (>= 0).
      staircase: whether the exponent is floored, so the rate changes every
        ``decay_steps`` steps.

    Returns:
      A schedule, ``step -> learning_rate``, for integer steps of any shape.

    Raises:
      ValueError: ``learning_rate`` or ``decay_rate`` is negative or not finite, or
        ``decay_steps`` is not positive.
      TypeError: ``decay_steps`` or ``decay_rate`` is not a number; the schedule raises
        it for a step that is not an integer.

    Example:
      >>> schedule = fg.train.natural_exp_decay(1.0, decay_steps=1, decay_rate=0.5)
      >>> round(float(schedule(2)), 6)  # exp(-1)
      0.367879
    """
    caller = "fg.train.natural_exp_decay(learning_rate, decay_steps, decay_rate)"
    rate = _non_negative(caller, "decay_rate", decay_rate)
    return _exponential(
        caller,
        learning_rate,
        decay_steps,
        lambda dtype: jnp.exp(-jnp.asarray(rate, dtype)),
        staircase,
    )


def _exponential(
    caller: str,
    learning_rate: ArrayLike,
    decay_steps: float,
    rate: Callable[[jnp.dtype], ArrayLike],
    staircase: bool,
) -> Schedule:
    lr = _rate(caller, "learning_rate", learning_rate)
    steps = _positive(caller, "decay_steps", decay_steps)

    def schedule(step: ArrayLike) -> jax.Array:
        p = _progress(_step(caller, step), lr.dtype, steps, staircase)
        return lr * jnp.power(jnp.asarray(rate(lr.dtype), lr.dtype), p)

    return schedule


def inverse_time_decay(
    learning_rate: ArrayLike, decay_steps: float, decay_rate: float, staircase: bool = False
) -> Schedule:
    """``tf.compat.v1.train.inverse_time_decay`` without ``global_step``.

    ``learning_rate / (1 + decay_rate * step / decay_steps)``, with ``step / decay_steps``
    floored when ``staircase``.

    Args:
      learning_rate: the rate at step 0; a number or a scalar array, not negative.
      decay_steps: the steps one unit of ``decay_rate`` takes; positive.
      decay_rate: how fast the rate falls; not negative.
      staircase: hold the rate between whole multiples of ``decay_steps``.

    Returns:
      The function ``schedule(step)``, taking integer steps of any shape.

    Raises:
      ValueError: when an argument is negative or not finite, or ``decay_steps`` is 0.
      TypeError: when ``decay_steps`` or ``decay_rate`` is no number; the schedule
        raises it when the step is no integer.

    Example:
      >>> schedule = fg.train.inverse_time_decay(0.1, decay_steps=1, decay_rate=0.5)
      >>> [round(float(schedule(s)), 6) for s in (0, 2, 6)]
      [0.1, 0.05, 0.025]
    """
    caller = "fg.train.inverse_time_decay(learning_rate, decay_steps, decay_rate)"
    lr = _rate(caller, "learning_rate", learning_rate)
    steps = _positive(caller, "decay_steps", decay_steps)
    rate = _non_negative(caller, "decay_rate", decay_rate)

    def schedule(step: ArrayLike) -> jax.Array:
        p = _progress(_step(caller, step), lr.dtype, steps, staircase)
        return lr / (jnp.ones((), lr.dtype) + jnp.asarray(rate, lr.dtype) * p)

    return schedule


def polynomial_decay(
    learning_rate: ArrayLike,
    decay_steps: float,
    end_learning_rate: ArrayLike = 0.0001,
    power: float = 1.0,
    cycle: bool = False,
) -> Schedule:
    """``tf.compat.v1.train.polynomial_decay`` without ``global_step``.

    ``(learning_rate - end_learning_rate) * (1 - step / decay_steps) ** power +
    end_learning_rate``, with ``step`` held at ``decay_steps`` after it; with ``cycle``,
    ``decay_steps`` grows instead to the first multiple of itself not below ``step`` (one
    multiple at step 0), so the decay restarts from a lower peak.

    Args:
      learning_rate: the rate at step 0, a number or a scalar array, >= 0.
      decay_steps: the steps the decay takes, > 0.
      end_learning_rate: the rate it ends at, >= 0.
      power: the polynomial's power, >= 0 (1.0 is linear).
      cycle: restart the decay after ``decay_steps``.

    Returns:
      ``schedule(step) -> learning_rate`` for an integer ``step`` (any shape).

    Raises:
      ValueError: for a negative or non-finite argument, or ``decay_steps == 0``.
      TypeError: for a non-number ``decay_steps`` / ``power``; the schedule raises it for a
        step that is not an integer.

    Example:
      >>> schedule = fg.train.polynomial_decay(1.0, decay_steps=4, end_learning_rate=0.0)
      >>> [float(schedule(s)) for s in (0, 1, 4, 8)]
      [1.0, 0.75, 0.0, 0.0]
      >>> cyclic = fg.train.polynomial_decay(1.0, decay_steps=4, end_learning_rate=0.0, cycle=True)
      >>> [float(cyclic(s)) for s in (0, 1, 4, 5, 8)]
      [1.0, 0.75, 0.0, 0.375, 0.0]
    """
    caller = "fg.train.polynomial_decay(learning_rate, decay_steps, end_learning_rate, power)"
    lr = _rate(caller, "learning_rate", learning_rate)
    end = _rate(caller, "end_learning_rate", end_learning_rate).astype(lr.dtype)
    steps = _positive(caller, "decay_steps", decay_steps)
    exponent = _non_negative(caller, "power", power)

    def schedule(step: ArrayLike) -> jax.Array:
        s = _step(caller, step).astype(lr.dtype)
        total = jnp.asarray(steps, lr.dtype)
        if cycle:
            total = total * jnp.where(s == 0, jnp.ones((), lr.dtype), jnp.ceil(_divide(s, total)))
        else:
            s = jnp.minimum(s, total)
        return (lr - end) * jnp.power(1 - _divide(s, total), jnp.asarray(exponent, lr.dtype)) + end

    return schedule


def piecewise_constant(boundaries: Sequence[int], values: Sequence[ArrayLike]) -> Schedule:
    """``tf.compat.v1.train.piecewise_constant`` without its ``x`` (the step) argument.

    ``values[0]`` while ``step <= boundaries[0]``, ``values[i]`` while
    ``boundaries[i - 1] < step <= boundaries[i]``, and ``values[-1]`` after the last
    boundary — each boundary step still has the value before it, as in TensorFlow.

    Args:
      boundaries: the steps where the value changes, integers in increasing order.
      values: one more value than boundaries: scalars of one floating dtype (Python numbers
        count as float32), each finite and >= 0 where known.

    Returns:
      ``schedule(step) -> value`` for an integer ``step`` (any shape).

    Raises:
      ValueError: if ``len(values) != len(boundaries) + 1``, a boundary is not an integer
        or they decrease, the values differ in dtype, or a value is negative, not finite or
        not a scalar.
      TypeError: for an integer array among the values; the schedule raises it for a step
        that is not an integer.

    Example:
      >>> schedule = fg.train.piecewise_constant([100, 200], [1.0, 0.5, 0.1])
      >>> [round(float(schedule(s)), 4) for s in (0, 100, 101, 200, 201)]
      [1.0, 1.0, 0.5, 0.5, 0.1]
    """
    caller = "fg.train.piecewise_constant(boundaries, values)"
    bounds = np.asarray(boundaries)
    if bounds.ndim != 1 or len(values) != bounds.size + 1:
        raise ValueError(
            f"{caller}: needs one more value than boundaries, got {len(values)} values "
            f"and boundaries {boundaries!r}; pass a flat list of len(values) - 1 steps."
        )
    if bounds.size and (bounds.dtype.kind not in "iu" or (np.diff(bounds) < 0).any()):
        raise ValueError(
            f"{caller}: boundaries must be integer steps in increasing order, got "
            f"{boundaries!r}; a fractional step never occurs, so round them."
        )
    table = [_rate(caller, f"values[{i}]", v) for i, v in enumerate(values)]
    if len({v.dtype for v in table}) > 1:
        raise ValueError(
            f"{caller}: values must share one dtype, as in TensorFlow, got "
            f"{[str(v.dtype) for v in table]}; cast them to one, e.g. .astype(jnp.float32)."
        )
    stacked = jnp.stack(table)

    def schedule(step: ArrayLike) -> jax.Array:
        s = _step(caller, step)
        return stacked[jnp.searchsorted(jnp.asarray(bounds, s.dtype), s, side="left")]

    return schedule


def cosine_decay(learning_rate: ArrayLike, decay_steps: float, alpha: float = 0.0) -> Schedule:
    """``tf.compat.v1.train.cosine_decay`` without ``global_step``.

    ``learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) /
    decay_steps)) + alpha)`` (Loshchilov & Hutter, SGDR, 2017, without restarts).

    Args:
      learning_rate: the rate at step 0, a number or a scalar array, >= 0.
      decay_steps: the steps the decay takes, > 0.
      alpha: the final rate as a fraction of ``learning_rate``, in ``[0, 1]``.

    Returns:
      ``schedule(step) -> learning_rate`` for an integer ``step`` (any shape).

    Raises:
      ValueError: for a negative or non-finite argument, ``decay_steps == 0`` or
        ``alpha > 1``.
      TypeError: for a non-number ``decay_steps`` / ``alpha``; the schedule raises it for a
        step that is not an integer.

    Example:
      >>> schedule = fg.train.cosine_decay(1.0, decay_steps=10, alpha=0.1)
      >>> [round(float(schedule(s)), 6) for s in (0, 5, 10, 20)]
      [1.0, 0.55, 0.1, 0.1]
    """
    caller = "fg.train.cosine_decay(learning_rate, decay_steps, alpha)"
    lr = _rate(caller, "learning_rate", learning_rate)
    steps = _positive(caller, "decay_steps", decay_steps)
    floor = _fraction(caller, "alpha", alpha)

    def schedule(step: ArrayLike) -> jax.Array:
        total = jnp.asarray(steps, lr.dtype)
        fraction = _divide(jnp.minimum(_step(caller, step).astype(lr.dtype), total), total)
        return lr * ((1 - floor) * _half_cosine(fraction) + floor)

    return schedule


def _fraction(caller: str, name: str, value: float) -> float:
    return _number(caller, name, value, "in [0, 1]")


def _half_cosine(fraction: jax.Array) -> jax.Array:
    """``0.5 * (1 + cos(pi * fraction))``, with pi rounded to ``fraction``'s dtype first."""
    return 0.5 * (1.0 + jnp.cos(jnp.asarray(math.pi, fraction.dtype) * fraction))


# fmt: off
def cosine_decay_restarts(
    learning_rate: ArrayLike, first_decay_steps: float,
    t_mul: float = 2.0, m_mul: float = 1.0, alpha: float = 0.0,
) -> Schedule:
    # fmt: on
    """``tf.compat.v1.train.cosine_decay_restarts`` without ``global_step`` (SGDR).

    A cosine decay over ``first_decay_steps``, then restarts: the i-th period is
    ``t_mul ** i`` times as long and starts from ``m_mul ** i`` times the rate; ``alpha``
    is the floor, as a fraction of ``learning_rate``. With ``t_mul < 1`` the periods
    shrink and, as in TensorFlow, the rate is NaN once their sum is used up.

    Args:
      learning_rate: the rate at step 0, a number or a scalar array, >= 0.
      first_decay_steps: the length of the first period, > 0.
      t_mul: the factor by which each period is longer than the one before, > 0.
      m_mul: the factor of each restart's peak over the one before, >= 0.
      alpha: the floor as a fraction of ``learning_rate``, in ``[0, 1]``.

    Returns:
      ``schedule(step) -> learning_rate`` for an integer ``step`` (any shape).

    Raises:
      ValueError: for a negative or non-finite argument, ``first_decay_steps == 0``,
        ``t_mul == 0`` or ``alpha > 1``.
      TypeError: for a non-number argument other than the learning rate; the schedule
        raises it for a step that is not an integer.

    Example:
      >>> schedule = fg.train.cosine_decay_restarts(1.0, first_decay_steps=2, m_mul=0.5)
      >>> [round(float(schedule(s)), 4) for s in (0, 1, 2, 4, 6)]  # periods of 2, 4, 8 steps
      [1.0, 0.5, 0.5, 0.25, 0.25]
    """
    caller = "fg.train.cosine_decay_restarts(learning_rate, first_decay_steps, ...)"
    lr = _rate(caller, "learning_rate", learning_rate)
    steps = _positive(caller, "first_decay_steps", first_decay_steps)
    t_mul_ = _positive(caller, "t_mul", t_mul)
    m_mul_ = _non_negative(caller, "m_mul", m_mul)
    floor = _fraction(caller, "alpha", alpha)

    def schedule(step: ArrayLike) -> jax.Array:
        t, m, a = (jnp.asarray(v, lr.dtype) for v in (t_mul_, m_mul_, floor))
        fraction = _divide(_step(caller, step).astype(lr.dtype), steps)
        if t_mul_ == 1.0:
            restart = jnp.floor(fraction)
            fraction = fraction - restart
        else:
            restart = jnp.floor(_divide(jnp.log(1.0 - fraction * (1.0 - t)), jnp.log(t)))
            done = _divide(1.0 - t**restart, 1.0 - t)
            fraction = _divide(fraction - done, t**restart)
        return lr * ((1 - a) * (m**restart * _half_cosine(fraction)) + a)

    return schedule


def _linear_cosine(
    caller: str, learning_rate: ArrayLike, decay_steps: float, shape: dict[str, float]
) -> tuple[jax.Array, Callable[[ArrayLike, Callable[..., jax.Array]], jax.Array]]:
    """The learning rate and ``rate(step, noise)`` of TensorFlow's linear cosine decays:
    ``learning_rate * ((alpha + linear + noise(step, clipped)) * cosine + beta)``."""
    lr = _rate(caller, "learning_rate", learning_rate)
    steps = _positive(caller, "decay_steps", decay_steps)
    values = {name: _non_negative(caller, name, v) for name, v in shape.items()}

    def rate(step: ArrayLike, noise: Callable[..., jax.Array]) -> jax.Array:
        whole = _step(caller, step)
        total = jnp.asarray(steps, lr.dtype)
        clipped = jnp.minimum(whole.astype(lr.dtype), total)
        linear = _divide(total - clipped, total) + noise(whole, clipped)
        periods = 2.0 * jnp.asarray(values["num_periods"], lr.dtype)
        cosine = _half_cosine(periods * _divide(clipped, total))
        alpha, beta = (jnp.asarray(values[k], lr.dtype) for k in ("alpha", "beta"))
        return lr * ((alpha + linear) * cosine + beta)

    return lr, rate


def linear_cosine_decay(
    learning_rate: ArrayLike,
    decay_steps: float,
    *,
    num_periods: float = 0.5,
    alpha: float = 0.0,
    beta: float = 0.001,
) -> Schedule:
    """``tf.compat.v1.train.linear_cosine_decay`` without ``global_step``.

    With ``s = min(step, decay_steps)``: ``learning_rate * ((alpha + (decay_steps - s) /
    decay_steps) * 0.5 * (1 + cos(pi * 2 * num_periods * s / decay_steps)) + beta)``
    (Bello et al., 2017, Neural Optimizer Search with Reinforcement Learning): a linear
    decay times a cosine of ``num_periods`` periods, ``beta`` above zero at the end.

    Args:
      learning_rate: the rate at step 0 is ``learning_rate * (1 + alpha + beta)``; a
        number or a scalar array, >= 0.
      decay_steps: the steps the decay takes, > 0.
      num_periods: the number of cosine periods over ``decay_steps``, >= 0.  This and
        the arguments after it are keyword-only.
      alpha: added to the linear decay, >= 0.
      beta: the final rate as a fraction of ``learning_rate``, >= 0.

    Returns:
      ``schedule(step) -> learning_rate`` for an integer ``step`` (any shape).

    Raises:
      ValueError: for a negative or non-finite argument, or ``decay_steps == 0``.
      TypeError: for a non-number argument other than the learning rate; the schedule
        raises it for a step that is not an integer.

    Example:
      >>> schedule = fg.train.linear_cosine_decay(1.0, decay_steps=10, beta=0.0)
      >>> [round(float(schedule(s)), 4) for s in (0, 5, 10, 20)]  # (1 - s/10) cos(pi s/20)^2
      [1.0, 0.25, 0.0, 0.0]
    """
    caller = "fg.train.linear_cosine_decay(learning_rate, decay_steps, ...)"
    shape = {"num_periods": num_periods, "alpha": alpha, "beta": beta}
    _, rate = _linear_cosine(caller, learning_rate, decay_steps, shape)
    return lambda step: rate(step, lambda whole, clipped: jnp.zeros((), clipped.dtype))


def noisy_linear_cosine_decay(
    learning_rate: ArrayLike,
    decay_steps: float,
    *,
    key: jax.Array,
    initial_variance: float = 1.0,
    variance_decay: float = 0.55,
    num_periods: float = 0.5,
    alpha: float = 0.0,
    beta: float = 0.001,
) -> Schedule:
    """``tf.compat.v1.train.noisy_linear_cosine_decay`` without ``global_step``, with ``key``.

    :func:`linear_cosine_decay` with Gaussian noise added to the linear term:
    ``(alpha + linear + eps) * cosine + beta``, where ``eps`` has variance
    ``initial_variance / (1 + s) ** variance_decay`` with ``s = min(step,
    decay_steps)``.  The noise at a step is drawn from ``jax.random.fold_in(key,
    step)``: ``eps = sqrt(variance) * jax.random.normal(jax.random.fold_in(key, step))``,
    so the same step always gets the same rate — the schedule stays a pure function,
    and a resumed run sees the rates it would have seen.  TensorFlow draws new noise
    each time the rate is evaluated, so the rates are TensorFlow's in distribution, not
    number for number.  As in TensorFlow, a large draw can make the rate negative.

    Args:
      learning_rate: the base rate, a number or a scalar array, >= 0.
      decay_steps: the steps the decay takes, > 0.
      initial_variance: the noise's variance at step 0, >= 0.  This, ``key`` and the
        other arguments after ``decay_steps`` are keyword-only.
      variance_decay: how fast the variance falls with the step, >= 0.
      num_periods: the number of cosine periods over ``decay_steps``, >= 0.
      alpha: added to the linear decay, >= 0.
      beta: the rate's floor as a fraction of ``learning_rate``, >= 0.
      key: a ``jax.random.key`` (or a legacy ``PRNGKey``) for the noise.

    Returns:
      ``schedule(step) -> learning_rate`` for an integer ``step`` (any shape; each
      element gets its own noise).

    Raises:
      ValueError: for a negative or non-finite argument, or ``decay_steps == 0``.
      TypeError: for a non-number argument other than the learning rate, or a ``key``
        that is not a PRNG key; the schedule raises it for a step that is not an integer.

    Example:
      >>> schedule = fg.train.noisy_linear_cosine_decay(1.0, 100, key=jax.random.key(0))
      >>> bool(schedule(7) == schedule(7)), bool(schedule(7) == schedule(8))
      (True, False)
      >>> quiet = fg.train.noisy_linear_cosine_decay(
      ...     1.0, 100, initial_variance=0.0, key=jax.random.key(0))
      >>> bool(quiet(7) == fg.train.linear_cosine_decay(1.0, 100)(7))
      True
    """
    caller = "fg.train.noisy_linear_cosine_decay(learning_rate, decay_steps, ..., key)"
    _checks.check_key(caller, "key", key, "pass e.g. key=jax.random.key(0)")
    variance = _non_negative(caller, "initial_variance", initial_variance)
    power = _non_negative(caller, "variance_decay", variance_decay)
    shape = {"num_periods": num_periods, "alpha": alpha, "beta": beta}
    lr, rate = _linear_cosine(caller, learning_rate, decay_steps, shape)

    def noise(whole: jax.Array, clipped: jax.Array) -> jax.Array:
        draw = jax.vmap(lambda s: jax.random.normal(jax.random.fold_in(key, s), (), lr.dtype))
        z = draw(whole.reshape(-1)).reshape(whole.shape)
        var = jnp.asarray(variance, lr.dtype) / (1.0 + clipped) ** jnp.asarray(power, lr.dtype)
        return z * jnp.sqrt(var)

    return lambda step: rate(step, noise)
