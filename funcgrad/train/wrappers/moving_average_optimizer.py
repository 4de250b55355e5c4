r"""``MovingAverageOptimizer``: tf.contrib.opt's optimizer that keeps moving averages of
the variables it trains.

TensorFlow 1.15's ``tf.contrib.opt.MovingAverageOptimizer``
(``tensorflow/contrib/opt/python/training/moving_average_optimizer.py``) wraps an
optimizer: its ``apply_gradients`` applies the wrapped optimizer, then
``ExponentialMovingAverage(average_decay, num_updates).apply(var_list)`` over the
variables that got a gradient; its ``swapping_saver`` saves each average under its
variable's name.  Here the wrapped optimizer's state and the averages are one
:class:`MovingAverageState` in ``TrainState.opt_state``, the averages are an
:class:`~funcgrad.train.ExponentialMovingAverage`'s, and ``swapping_saver`` is
:meth:`MovingAverageOptimizer.swapped`.
"""

from __future__ import annotations

from typing import Any
from typing import NamedTuple

import jax
import numpy as np

from funcgrad import _checks
from funcgrad._types import PyTree
from funcgrad.train import _pairs
from funcgrad.train._variables import Flat
from funcgrad.train.group import OptimizerGroup
from funcgrad.train.moving_averages import EmaState
from funcgrad.train.moving_averages import ExponentialMovingAverage
from funcgrad.train.names import variable_names
from funcgrad.train.optimizer import Optimizer
from funcgrad.train.state import TrainState
from funcgrad.train.wrappers._wrapper import Wrapper
from funcgrad.train.wrappers.loss_scale import LossScaleOptimizer

__all__ = ["MovingAverageOptimizer", "MovingAverageState"]


class MovingAverageState(NamedTuple):
    """``TrainState.opt_state`` of a :class:`MovingAverageOptimizer`.

    Attributes:
      inner_state: the wrapped optimizer's ``opt_state`` (its slots).
      ema_state: the moving averages, an :class:`~funcgrad.train.EmaState` whose
        ``average`` has the parameters' structure, with ``None`` where a leaf is no
        variable the wrapped optimizer trains (TensorFlow's
        ``<variable>/ExponentialMovingAverage``).
    """

    inner_state: Any
    ema_state: EmaState


class MovingAverageOptimizer(Wrapper):
    r"""tf.contrib.opt's ``MovingAverageOptimizer``: any ``fg.train`` optimizer, with
    moving averages of the variables it trains.

    A step applies the wrapped optimizer, then moves the average :math:`\bar w` of each
    variable that got a gradient, as ``tf.train.ExponentialMovingAverage`` does:

    .. math::
      \delta = \begin{cases} \min\left(d, \frac{1 + s}{10 + s}\right) &
        \text{with num\_updates} \\ d & \text{otherwise} \end{cases}, \quad
      \bar w \leftarrow \bar w - (1 - \delta)(\bar w - w)

    with :math:`d` = ``average_decay``.  With ``sequential_update=True`` (TensorFlow's
    default, the average runs after the update under a control dependency), :math:`w`
    is the variable after the step and :math:`s` the ``global_step`` after it.  With
    ``sequential_update=False`` TensorFlow runs the average and the update unordered,
    a race: in TensorFlow 2.21 the average mostly reads the variables and
    ``global_step`` before the update, and sometimes after it (how often: the docs page
    *Optimizers of TF1 projects*).  Here it
    always reads them *before* the step: :math:`w` is the variable before the step and
    :math:`s` the ``global_step`` before it.  Averages start at the parameters given to
    :meth:`init` and are kept in each variable's dtype.

    Differences from TensorFlow: the averages are made by :meth:`init` for every
    variable the wrapped optimizer trains (TensorFlow makes them, at the first
    ``apply_gradients``, for the variables that got a gradient there); a step moves
    only the averages of variables with a gradient, as TensorFlow's.  ``num_updates``
    follows ``state.global_step``, which every step counts (TensorFlow's counts only
    when ``minimize`` is given ``global_step``).

    Args:
      opt: the ``fg.train`` optimizer to wrap: a TF1 optimizer, a
        ``TF1Optimizer`` subclass (BERT's, tf.contrib.opt's, your own) or an
        ``fg.train.Optimizer(tx)``.
      average_decay: :math:`d`, a number in ``[0, 1)`` and below 1 in float32.
      num_updates: ``None``; ``True`` for TensorFlow's ``num_updates=global_step``
        (:math:`s` is ``state.global_step``); or a fixed count, an integer ``>= 0``.
      sequential_update: average the variables after the step (``True``) or before it.

    Attributes:
      optimizer: the wrapped optimizer.
      ema: the ``fg.train.ExponentialMovingAverage`` that moves the averages.
      sequential_update: as given.

    Raises:
      TypeError: ``opt`` is not an ``fg.train`` optimizer this class can wrap (an
        optax transformation, an ``OptimizerGroup`` or one of its optimizers, a
        ``LossScaleOptimizer``, a ``MovingAverageOptimizer``), or an argument has the
        wrong type.
      ValueError: ``average_decay`` or ``num_updates`` is out of range.

    Example:
      >>> opt = fg.train.MovingAverageOptimizer(
      ...     fg.train.GradientDescentOptimizer(0.5), average_decay=0.75)
      >>> state = opt.init({"w": jnp.float32(4.0)})
      >>> state, loss = opt.minimize(lambda p: p["w"] ** 2, state)  # w: 4 -> 0
      >>> float(state.params["w"]), float(state.opt_state.ema_state.average["w"])
      (0.0, 3.0)
      >>> float(opt.swapped(state).params["w"])  # evaluate with the average
      3.0
    """

    state_type = MovingAverageState

    def __init__(
        self,
        opt: Optimizer,
        average_decay: float = 0.9999,
        num_updates: bool | int | None = None,
        sequential_update: bool = True,
    ) -> None:
        caller = (
            "fg.train.MovingAverageOptimizer(opt, average_decay, num_updates, sequential_update)"
        )
        _check_opt(caller, opt)
        problems = []
        if not _checks.is_real_number(average_decay):
            problems.append(f"average_decay={average_decay!r} is not a number (e.g. 0.9999)")
        if not (
            num_updates is None
            or num_updates is True
            or _checks.is_integer(num_updates, arrays=False)
        ):
            problems.append(
                f"num_updates={num_updates!r} is not None, True (TensorFlow's "
                "num_updates=global_step) or an integer"
            )
        if not isinstance(sequential_update, bool):
            problems.append(f"sequential_update={sequential_update!r} is not True or False")
        _checks.raise_collected(
            caller,
            problems,
            "pass e.g. MovingAverageOptimizer(opt, average_decay=0.9999, num_updates=True)",
            TypeError,
        )
        count = None if num_updates is None or num_updates is True else int(num_updates)
        if count is not None and count < 0:
            raise ValueError(
                f"{caller}: num_updates={num_updates!r} is negative; pass a count >= 0, or "
                "True to follow state.global_step."
            )
        try:
            self.ema = ExponentialMovingAverage(average_decay, num_updates=num_updates is True)
        except ValueError:
            raise ValueError(
                f"{caller}: average_decay={average_decay!r} is not in [0, 1) and below 1 in "
                "float32 (TensorFlow's dtype for it); pass e.g. 0.999 or 0.9999."
            ) from None
        if count is not None:  # TensorFlow's min(decay, (1 + n) / (10 + n)), n a constant
            n = np.float32(count)
            decay = min(np.float32(average_decay), (1 + n) / (10 + n))
            self.ema = ExponentialMovingAverage(float(decay))
        super().__init__(opt)
        self.sequential_update = sequential_update

    def init(self, params: PyTree) -> TrainState:
        """A fresh state: the wrapped optimizer's, with the averages beside its slots.

        Args:
          params: the parameters, any pytree the wrapped optimizer takes.

        Returns:
          ``TrainState(params, MovingAverageState(slots, ema_state), int32 0)``, the
          averages new arrays equal to the variables the wrapped optimizer trains.

        Raises:
          TypeError: ``params`` is a ``TrainState``; as the wrapped optimizer's ``init``.

        Example:
          >>> opt = fg.train.MovingAverageOptimizer(fg.train.AdamOptimizer(0.1))
          >>> state = opt.init({"w": jnp.ones(2), "step": jnp.int32(0)})
          >>> state.opt_state.ema_state.average
          {'step': None, 'w': Array([1., 1.], dtype=float32)}
        """
        return super().init(params)

    def _own_state(self, params: PyTree, inner: TrainState) -> MovingAverageState:
        averaged = Flat(params).with_holes(self._trained(self._caller("init(params)"), params))
        return MovingAverageState(inner.opt_state, self.ema.init(averaged))

    def swapped(self, state: TrainState) -> TrainState:
        """``state`` with every average and its variable swapped: TensorFlow's
        ``swapping_saver``.

        ``save_tf_checkpoint(path, opt.swapped(state), opt)`` writes what TensorFlow's
        ``opt.swapping_saver().save`` writes: each average under its variable's name,
        the variable under ``<name>/ExponentialMovingAverage``, everything else as it
        is.  ``opt.swapped(state).params`` are the averaged weights to evaluate with,
        and a swapped state restored from such a checkpoint is swapped back the same
        way (swapping twice gives ``state``).  Works under ``jax.jit``.

        Args:
          state: a ``TrainState`` this optimizer made.

        Returns:
          The swapped ``TrainState``.

        Raises:
          TypeError: ``state`` is not a ``TrainState``.
          ValueError: ``state`` was not made by a ``MovingAverageOptimizer``.

        Example:
          >>> opt = fg.train.MovingAverageOptimizer(fg.train.GradientDescentOptimizer(1.0), 0.5)
          >>> state, _ = opt.minimize(lambda w: 2 * w, opt.init(jnp.float32(3.0)))
          >>> float(state.params), float(state.opt_state.ema_state.average)
          (1.0, 2.0)
          >>> swapped = opt.swapped(state)
          >>> float(swapped.params), float(swapped.opt_state.ema_state.average)
          (2.0, 1.0)
        """
        caller = self._caller("swapped(state)")
        self._check_state(caller, state, "evaluated = opt.swapped(state)")
        ma_state = state.opt_state
        flat = Flat(state.params)
        trained = self._trained(caller, state.params)
        averages = iter(jax.tree.leaves(ma_state.ema_state.average))
        params = flat.replaced(
            [next(averages) if t else v for v, t in zip(flat.variables, trained, strict=True)]
        )
        ema_state = EmaState(flat.with_holes(trained))
        return TrainState(params, ma_state._replace(ema_state=ema_state), state.global_step)

    # The hook of Optimizer's steps: the wrapped optimizer applied, then the averages moved.

    def _apply(self, caller: str, call: str, grads: list[Any], state: TrainState) -> TrainState:
        """The wrapped optimizer's step by ``grads`` (one per variable), then the averages
        of the variables with a gradient moved toward them."""
        if all(g is None for g in grads):
            raise _pairs.no_gradients(caller, variable_names(state.params))
        ma_state = state.opt_state
        before = self._inner(state)
        after = self.optimizer._apply(caller, call, grads, before)
        read = after if self.sequential_update else before
        flat = Flat(read.params)
        trained = self._trained(caller, state.params)
        step = {"step": read.global_step} if self.ema.num_updates else {}
        moved = self.ema.apply(ma_state.ema_state, flat.with_holes(trained), **step).average
        has_grad = flat.like_holes(
            trained, [g is not None for g, t in zip(grads, trained, strict=True) if t]
        )
        average = jax.tree.map(
            lambda g, new, old: new if g else old, has_grad, moved, ma_state.ema_state.average
        )
        return self._outer(state, after, ema_state=EmaState(average))


def _check_opt(caller: str, opt: Any) -> None:
    """Raise unless ``opt`` is an ``fg.train`` optimizer this class can wrap."""
    if isinstance(opt, MovingAverageOptimizer):
        fix = "it already keeps moving averages; wrap the optimizer once"
    elif isinstance(opt, LossScaleOptimizer):
        fix = (
            "wrap the other way round, LossScaleOptimizer(MovingAverageOptimizer(opt)), as "
            "TensorFlow's mixed-precision wrapper goes around the optimizer it is given"
        )
    elif isinstance(opt, OptimizerGroup) or isinstance(getattr(opt, "group", None), OptimizerGroup):
        fix = (
            "the averages would not be the group's; keep them beside the group with "
            "fg.train.ExponentialMovingAverage (docs: moving averages)"
        )
    elif isinstance(opt, Optimizer):
        return
    elif callable(getattr(opt, "init", None)) and callable(getattr(opt, "update", None)):
        fix = "wrap the optax transformation first: MovingAverageOptimizer(fg.train.Optimizer(tx))"
    else:
        fix = "pass one, e.g. MovingAverageOptimizer(fg.train.MomentumOptimizer(0.1, 0.9))"
    raise TypeError(
        f"{caller}: opt is a {type(opt).__name__}, which this optimizer cannot wrap; {fix}."
    )
