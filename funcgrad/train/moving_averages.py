r"""``ExponentialMovingAverage``: TensorFlow's moving averages of the parameters.

TensorFlow 1.x keeps a shadow variable per trained variable and moves it toward the
variable after each step (``tf.train.ExponentialMovingAverage.apply``); evaluating with
the averages often scores better than with the last weights (the cifar10 tutorial's
``MOVING_AVERAGE_DECAY = 0.9999``).  Here the shadows are a pytree in an
:class:`EmaState`, and ``apply`` returns a new one.  The arithmetic is TensorFlow's
(``tensorflow/python/training/moving_averages.py``): the decay is a float32, and the
update runs in each average's dtype with ``1 - decay`` rounded to it.
"""

from __future__ import annotations

import math
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad import _checks
from funcgrad._types import PyTree
from funcgrad._types import Schedule
from funcgrad._types import is_array

__all__ = ["EmaState", "ExponentialMovingAverage"]


class EmaState(NamedTuple):
    """The state of an :class:`ExponentialMovingAverage`.

    Attributes:
      average: the moving averages, a pytree like the parameters.
      biased: with ``zero_debias``, the average before debiasing (TensorFlow's
        ``biased`` shadow variables); ``None`` otherwise.
      local_step: with ``zero_debias``, an ``int32`` count of the ``apply`` calls
        (TensorFlow's ``local_step``); ``None`` otherwise.
    """

    average: PyTree
    biased: PyTree = None
    local_step: jax.Array | None = None


def _float_leaves(caller: str, params: PyTree) -> None:
    bad = [
        f"params{jax.tree_util.keystr(path)} is "
        f"{jnp.result_type(leaf) if is_array(leaf) else type(leaf).__name__}"
        for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]
        if not (is_array(leaf) and jnp.issubdtype(jnp.result_type(leaf), jnp.floating))
    ]
    if bad:
        raise TypeError(
            f"{caller}: moving averages are of floating arrays, and {'; '.join(bad)}; pass "
            "only the floating parameters (as TensorFlow: half, bfloat16, float or double)."
        )


def _as_int32(caller: str, step: Any) -> jax.Array:
    """``step`` as the ``int32`` a decay schedule reads; a host integer beyond it is an
    error, never wrapped."""
    if not isinstance(step, jax.Array) and not -(2**31) <= int(np.asarray(step)) < 2**31:
        raise ValueError(
            f"{caller}: step is {int(np.asarray(step))}, beyond the int32 that a decay "
            "schedule reads (state.global_step is an int32); pass a step below 2**31."
        )
    return jnp.asarray(step, jnp.int32)


class ExponentialMovingAverage:
    r"""TensorFlow 1.x's ``tf.train.ExponentialMovingAverage`` on a parameter pytree.

    Each :meth:`apply` moves every average :math:`\bar w` toward its parameter
    :math:`w`:

    .. math::
      \delta = \begin{cases} \min\left(d, \frac{1 + s}{10 + s}\right) &
        \text{with num\_updates} \\ d & \text{otherwise} \end{cases}, \quad
      \bar w \leftarrow \bar w - (1 - \delta)(\bar w - w)

    :math:`\delta` is computed in float32, then :math:`1 - \delta` is rounded to the
    average's dtype and the update runs in that dtype, as in TensorFlow.  Averages
    start at the parameters given to :meth:`init` (TensorFlow's shadow of a variable).

    With ``zero_debias`` (TensorFlow applies it to the average of a *tensor*, which
    starts at zero): :math:`b` starts at zero, and with :math:`n` the number of updates

    .. math::
      b \leftarrow b - (1 - \delta)(b - w), \quad n \leftarrow n + 1, \quad
      \bar w = \frac{b}{1 - \delta^n}

    with the current :math:`\delta` (Kingma & Ba, 2015, Section 3).  Differences from
    TensorFlow: TensorFlow ignores ``zero_debias`` for a ``tf.Variable`` (here the
    parameters are values, so it holds); and where TensorFlow computes the correction
    in the average's dtype — for bfloat16, :math:`1 - (1 - \delta)` rounds to 1 when
    :math:`\delta > 0.998` (a division by zero) and the count stops at 256 — the
    correction here is computed in float32 (or wider) and the count is an ``int32``.

    An average held in bfloat16 or float16 moves only when
    :math:`(1 - \delta)|\bar w - w|` exceeds half its last digit, in TensorFlow as here;
    keep the averages of low-precision parameters in float32 by averaging
    ``jax.tree.map(lambda p: p.astype(jnp.float32), params)``.

    A decay that changes while training — TensorFlow takes a tensor, e.g.
    ``tf.where(global_step < 1000, 0.99, 0.999)`` — is a ``schedule(step)``: :math:`d` is
    then ``decay(step)`` at the ``step`` passed to :meth:`apply` (the global step after
    the training step, as TensorFlow's tensor reads it under the usual
    ``control_dependencies``): ``fg.train.piecewise_constant([1000], [0.99, 0.999])``
    for TensorFlow's ``piecewise_constant(global_step, [1000], [0.99, 0.999])``, or any
    function of the step.  Its values are not checked (they are traced): keep them in
    ``[0, 1)``.

    Args:
      decay: :math:`d`, in ``[0, 1)`` and below 1 in float32 (``0.999``, ``0.9999``), or a
        ``schedule(step)`` giving it.
      num_updates: let :math:`\delta` follow the step :math:`s` passed to
        :meth:`apply` (TensorFlow's ``num_updates=global_step``): averages move fast
        early in training.
      zero_debias: start the averages at zero and divide by :math:`1 - \delta^n`.

    Raises:
      ValueError: ``decay`` is out of range, or rounds to 1 in float32.
      TypeError: ``decay`` is not a number or a schedule of one floating scalar, or a
        flag is not a bool.

    Example:
      >>> ema = fg.train.ExponentialMovingAverage(0.5)
      >>> state = ema.init({"w": jnp.float32(0.0)})
      >>> state = ema.apply(state, {"w": jnp.float32(4.0)})
      >>> state = ema.apply(state, {"w": jnp.float32(4.0)})
      >>> float(state.average["w"])  # 0 -> 2 -> 3
      3.0
    """

    def __init__(
        self, decay: float | Schedule, num_updates: bool = False, zero_debias: bool = False
    ) -> None:
        caller = "fg.train.ExponentialMovingAverage(decay, num_updates, zero_debias)"
        if callable(decay):
            _checks.check_schedule(
                caller, "decay", decay, "pass a number such as 0.999 or a schedule"
            )
        elif not _checks.is_real_number(decay):
            raise TypeError(
                f"{caller}: decay must be a Python number or a schedule(step), got {decay!r}; "
                "pass e.g. 0.999."
            )
        elif not (math.isfinite(decay) and 0 <= decay < 1 and np.float32(decay) < 1):
            raise ValueError(
                f"{caller}: decay must be in [0, 1) and below 1 in float32 (TensorFlow's "
                f"dtype for it), got {decay!r}; pass e.g. 0.999 or 0.9999."
            )
        flags = {"num_updates": num_updates, "zero_debias": zero_debias}
        not_bools = [f"{k}={v!r}" for k, v in flags.items() if not isinstance(v, bool)]
        if not_bools:
            raise TypeError(
                f"{caller}: {', '.join(not_bools)} must be True or False; pass the step to "
                "apply(ema_state, params, step=state.global_step) when num_updates=True."
            )
        self.decay = decay if callable(decay) else float(decay)
        self.num_updates = num_updates
        self.zero_debias = zero_debias

    @property
    def _needs_step(self) -> bool:
        return self.num_updates or callable(self.decay)

    def init(self, params: PyTree) -> EmaState:
        """The state before any update: averages equal to ``params`` (zeros with
        ``zero_debias``).

        Args:
          params: a pytree of floating arrays.

        Returns:
          An :class:`EmaState`.

        Raises:
          TypeError: a leaf is not a floating array.

        Example:
          >>> ema = fg.train.ExponentialMovingAverage(0.9, zero_debias=True)
          >>> state = ema.init(jnp.array([1.0, 2.0]))
          >>> state.average.tolist(), int(state.local_step)
          ([0.0, 0.0], 0)
        """
        _float_leaves("fg.train.ExponentialMovingAverage.init(params)", params)
        # New buffers, none shared with params or with each other: a donated state
        # must not delete the parameters, nor hold one buffer twice.
        if not self.zero_debias:
            return EmaState(jax.tree.map(jnp.array, params))
        average, biased = (jax.tree.map(jnp.zeros_like, params) for _ in range(2))
        return EmaState(average, biased, jnp.zeros([], jnp.int32))

    def apply(self, ema_state: EmaState, params: PyTree, step: Any = None) -> EmaState:
        r"""Move the averages toward ``params``: TensorFlow's ``ema.apply(var_list)``.

        Args:
          ema_state: the state :meth:`init` or the previous ``apply`` returned.
          params: the parameters after the step, structured as the averages.
          step: with ``num_updates=True`` or a decay schedule, the global step *after*
            the training step
            (``state.global_step`` of the state ``minimize`` returned), which
            TensorFlow's usual ``with tf.control_dependencies([train_op]):
            ema.apply(...)`` reads; an integer.  Leave it out otherwise.

        Returns:
          The new :class:`EmaState`.

        Raises:
          ValueError: ``step`` is missing with ``num_updates=True`` or a decay schedule,
            or given without either, or ``params`` differs from the averages in
            structure, shape or dtype.
          TypeError: ``ema_state`` is not an ``EmaState`` of this average, or ``step``
            is not an integer.

        Example:
          >>> ema = fg.train.ExponentialMovingAverage(0.9999, num_updates=True)
          >>> state = ema.init(jnp.float32(0.0))
          >>> state = ema.apply(state, jnp.float32(10.0), step=jnp.int32(1))
          >>> round(float(state.average), 6)  # decay min(0.9999, 2 / 11)
          8.181818
          >>> decay = fg.train.piecewise_constant([1], [0.5, 0.75])  # 0.5 to step 1
          >>> switching = fg.train.ExponentialMovingAverage(decay)
          >>> state = switching.init(jnp.float32(0.0))
          >>> state = switching.apply(state, jnp.float32(8.0), step=jnp.int32(1))  # decay 0.5
          >>> state = switching.apply(state, jnp.float32(8.0), step=jnp.int32(2))  # decay 0.75
          >>> float(state.average)  # 0 -> 4 -> 5
          5.0
        """
        caller = "fg.train.ExponentialMovingAverage.apply(ema_state, params, step)"
        self._check(caller, ema_state, params, step)
        if callable(self.decay):
            decay = jnp.asarray(self.decay(_as_int32(caller, step)), jnp.float32)
        else:
            decay = jnp.float32(self.decay)
        if self.num_updates:
            # As TensorFlow's cast of num_updates to float32: a host integer is converted
            # as it is, never first wrapped to int32 (2**40 would become 0).
            s = step.astype(jnp.float32) if isinstance(step, jax.Array) else np.float32(step)
            decay = jnp.minimum(decay, (1.0 + s) / (10.0 + s))
        rate = 1.0 - decay

        def move(average: jax.Array, value: Any) -> jax.Array:
            return average - (average - value) * rate.astype(average.dtype)

        if not self.zero_debias:
            return EmaState(jax.tree.map(move, ema_state.average, params))
        biased = jax.tree.map(move, ema_state.biased, params)
        local_step = jnp.asarray(ema_state.local_step) + 1

        def debias(b: jax.Array) -> jax.Array:
            wide = jnp.float32 if b.dtype.itemsize < 4 else b.dtype  # float32 or wider
            kept = 1 - rate.astype(b.dtype).astype(wide)
            return (b.astype(wide) / (1 - kept ** local_step.astype(wide))).astype(b.dtype)

        return EmaState(jax.tree.map(debias, biased), biased, local_step)

    def _check(self, caller: str, ema_state: Any, params: PyTree, step: Any) -> None:
        if (
            not isinstance(ema_state, EmaState)
            or (ema_state.local_step is None) == self.zero_debias
        ):
            raise TypeError(
                f"{caller}: ema_state is a {type(ema_state).__name__}, not the EmaState "
                f"of this average (zero_debias={self.zero_debias}); pass ema.init(params) "
                "or what the last apply returned (the EMA state first, then the params)."
            )
        if self._needs_step and step is None:
            why = "num_updates=True" if self.num_updates else "a decay schedule"
            raise ValueError(
                f"{caller}: {why} needs the step; pass the global step after the "
                "training step, apply(ema_state, params, step=state.global_step)."
            )
        if not self._needs_step and step is not None:
            raise ValueError(
                f"{caller}: step={step!r} is given but this average has num_updates=False "
                "and a fixed decay, so it does not follow the step; build it with "
                "num_updates=True or decay=schedule(step), or leave step out."
            )
        if step is not None and not _checks.is_integer(step):
            raise TypeError(
                f"{caller}: step must be an integer (the global step), got {step!r}; pass "
                "state.global_step."
            )
        averages, treedef = jax.tree.flatten(ema_state.average)
        structure: Any = jax.tree.structure(params)
        if structure != treedef:
            raise ValueError(
                f"{caller}: params has structure {jax.tree.structure(params)}, the averages "
                f"{treedef}; pass the same parameters init was given."
            )
        names = [
            jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]
        ]
        bad = [
            f"params{n} is {jnp.result_type(x)}{list(jnp.shape(x))}, its average "
            f"{a.dtype}{list(a.shape)}"
            for n, x, a in zip(names, jax.tree.leaves(params), averages, strict=True)
            if jnp.shape(x) != a.shape or jnp.result_type(x) != a.dtype
        ]
        if bad:
            raise ValueError(
                f"{caller}: {'; '.join(bad)}; pass parameters of the shapes and dtypes "
                "init was given."
            )
