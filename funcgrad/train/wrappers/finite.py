"""Skip a step whose gradients are not finite, counting the skipped steps.

A long run must survive one bad batch: a gradient holding ``inf`` or ``NaN`` would
otherwise poison the parameters and every optimizer slot for good.  This wraps any
optax transformation in ``optax.apply_if_finite`` and reads its counters back from a
``TrainState``.
"""

from __future__ import annotations

from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from funcgrad import _checks
from funcgrad.train.state import TrainState

__all__ = ["SkippedSteps", "skip_nonfinite", "skipped_steps"]

_NEVER = int(jnp.iinfo(jnp.int32).max)


class SkippedSteps(NamedTuple):
    """How many steps :func:`skip_nonfinite` has skipped.

    Attributes:
      consecutive: the skipped steps since the last applied one (``int32``).
      total: every skipped step since ``init`` (``int32``).
    """

    consecutive: jax.Array
    total: jax.Array


def skip_nonfinite(
    tx: optax.GradientTransformation, max_consecutive_skips: int | None = None
) -> optax.GradientTransformationExtraArgs:
    """Wrap ``tx`` so that a step with an ``inf`` or ``NaN`` gradient changes nothing.

    When any gradient leaf holds a non-finite value, the updates are zeros and the
    wrapped optimizer's state (its slots, Adam's step count, the learning-rate
    schedule's count) is kept as it was; two counters in the state record the skip
    (read them with :func:`skipped_steps`).  Built on ``optax.apply_if_finite``, which
    checks the gradients, runs the inner update only for a finite step (``lax.cond``)
    and passes extra arguments such as ``global_step`` through.

    ``TrainState.global_step`` still counts a skipped step, as TensorFlow's
    ``LossScaleOptimizer`` increments ``iterations`` when it skips: the step happened,
    its batch was consumed; ``global_step - total`` is the number of applied updates.

    Args:
      tx: the optimizer's transformation (``opt.tx`` of an ``fg.train`` optimizer, or
        any optax ``GradientTransformation``).
      max_consecutive_skips: ``None`` (the default) skips every non-finite step.  A
        number ``n``: after ``n`` skips in a row the next non-finite update is applied
        (``optax.apply_if_finite``'s give-up rule, useful with loss scaling); it still
        counts in ``total``.

    Returns:
      An ``optax.GradientTransformationExtraArgs``; wrap it with
      ``fg.train.Optimizer(...)`` to get ``minimize`` and ``apply_gradients``.

    Raises:
      TypeError: ``max_consecutive_skips`` is not ``None`` or an integer.
      ValueError: ``max_consecutive_skips`` is negative.

    Example:
      >>> import optax
      >>> opt = fg.train.Optimizer(fg.train.skip_nonfinite(optax.sgd(0.5)))
      >>> state = opt.init(jnp.float32(1.0))
      >>> state = opt.apply_gradients([(jnp.float32(jnp.nan), None)], state)
      >>> float(state.params), fg.train.skipped_steps(state).total.tolist()
      (1.0, 1)
      >>> state = opt.apply_gradients([(jnp.float32(1.0), None)], state)
      >>> float(state.params), int(state.global_step)
      (0.5, 2)
    """
    if max_consecutive_skips is None:
        max_consecutive_skips = _NEVER
    else:
        max_consecutive_skips = _checks.as_int(
            "fg.train.skip_nonfinite(tx, max_consecutive_skips)",
            "max_consecutive_skips",
            max_consecutive_skips,
            minimum=0,
            hint="pass None to skip every non-finite step, or how many in a row to skip",
        )
    return optax.apply_if_finite(tx, max_consecutive_skips)


def _is_finite_state(node: Any) -> bool:
    return isinstance(node, optax.ApplyIfFiniteState)


def skipped_steps(state: TrainState | Any) -> SkippedSteps:
    """The skip counters of the :func:`skip_nonfinite` wrapper inside ``state``.

    Args:
      state: a ``TrainState`` (or an optax optimizer state) of an optimizer whose
        transformation contains exactly one :func:`skip_nonfinite`, at any depth of
        ``optax.chain`` and other wrappers.

    Returns:
      ``SkippedSteps(consecutive, total)``, ``int32`` scalars (batched under ``vmap``).

    Raises:
      ValueError: ``state`` holds no :func:`skip_nonfinite` state, or more than one.

    Example:
      >>> import optax
      >>> tx = fg.train.skip_nonfinite(optax.adam(0.1))
      >>> opt_state = tx.init({"w": jnp.zeros(2)})
      >>> fg.train.skipped_steps(opt_state)
      SkippedSteps(consecutive=Array(0, dtype=int32), total=Array(0, dtype=int32))
    """
    opt_state = state.opt_state if isinstance(state, TrainState) else state
    found = [
        node
        for node in jax.tree.leaves(opt_state, is_leaf=_is_finite_state)
        if _is_finite_state(node)
    ]
    if len(found) != 1:
        raise ValueError(
            f"fg.train.skipped_steps(state): expected one skip_nonfinite state in the "
            f"optimizer state, found {len(found)}; build the optimizer as "
            "fg.train.Optimizer(fg.train.skip_nonfinite(opt.tx)) and pass its TrainState."
        )
    return SkippedSteps(found[0].notfinite_count, found[0].total_notfinite)
