"""The learning rate as traced optimizer state: a float or a ``schedule(step)``.

Design note
-----------
TensorFlow 1.x takes the learning rate as a Python float or as a tensor computed from
``global_step`` (``tf.train.exponential_decay(..., global_step)``).  Here the rate lives
in the optimizer state (as ``optax.inject_hyperparams`` holds hyperparameters), so it
is an array inside the jitted step: a float rate can be changed with
``fg.train.set_learning_rate`` without recompiling, and a schedule is evaluated at
``global_step`` *before* the step increments it, the rate TensorFlow's
``minimize(global_step=...)`` uses.  The state holds one array for a float rate and
nothing more, so a jitted step has few inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any
from typing import NamedTuple
from typing import cast

import jax
import jax.numpy as jnp
import numpy as np
import optax

from funcgrad._types import PyTree
from funcgrad._types import Schedule

#: A learning rate: a non-negative finite number, or a schedule ``step -> rate``.
LearningRate = float | jax.Array | Schedule


def check_rate(caller: str, learning_rate: Any) -> None:
    """Raise unless ``learning_rate`` is a finite rate >= 0 or a ``schedule(step)``.

    A schedule is checked by tracing it once at an ``int32`` step (no computation runs):
    it must return one floating scalar.
    """
    if isinstance(learning_rate, jax.core.Tracer):
        return
    hint = "pass a number such as 0.01 or a schedule(step), e.g. fg.train.exponential_decay"
    if callable(learning_rate):
        check_schedule(caller, "learning_rate", learning_rate, hint)
        return
    kind = np.asarray(learning_rate).dtype.kind if not isinstance(learning_rate, str) else "U"
    if kind not in "iuf" or np.ndim(learning_rate) != 0:
        raise TypeError(
            f"{caller}: learning_rate must be a number or a schedule(step), got "
            f"{learning_rate!r}; {hint}."
        )
    value = float(np.asarray(learning_rate))
    if not math.isfinite(value) or value < 0:
        raise ValueError(
            f"{caller}: learning_rate must be finite and non-negative, got {value}; pass a "
            "rate such as 0.01."
        )


def check_schedule(caller: str, name: str, schedule: Callable[..., Any], hint: str) -> None:
    """Raise unless ``schedule(step)`` traces at an ``int32`` step to one floating scalar
    (no computation runs); ``name`` is the argument it was given as."""
    try:
        out = jax.eval_shape(schedule, jax.ShapeDtypeStruct((), jnp.int32))
    except Exception as error:
        raise TypeError(
            f"{caller}: {name} is a function that fails as schedule(step) "
            f"({type(error).__name__}: {error}); {hint}."
        ) from error
    if not (
        isinstance(out, jax.ShapeDtypeStruct)
        and out.shape == ()
        and jnp.issubdtype(out.dtype, jnp.floating)
    ):
        raise TypeError(f"{caller}: {name}(step) returns {out}, not one floating scalar; {hint}.")


class InjectLearningRateState(NamedTuple):
    """The state of an optimizer whose learning rate lives in its state.

    Attributes:
      learning_rate: the held float32 rate; ``None`` when the rate is a schedule.
      step: the number of updates, which a schedule reads when no ``global_step``
        is passed; ``None`` when the rate is a number.
      inner_state: the state of the transformation the rate drives.
    """

    learning_rate: jax.Array | None
    step: jax.Array | None
    inner_state: Any


def inject_learning_rate(
    caller: str,
    factory: Callable[[Any], optax.GradientTransformation],
    learning_rate: LearningRate,
) -> optax.GradientTransformationExtraArgs:
    """``factory(rate)`` with the rate held in the state, or scheduled at ``global_step``.

    As ``optax.inject_hyperparams`` for the one hyperparameter TensorFlow schedules,
    except that a schedule is evaluated at the ``global_step`` extra argument that
    ``Optimizer.apply_gradients`` passes (at its own update count without it).
    """
    check_rate(caller, learning_rate)
    schedule = learning_rate if callable(learning_rate) else None

    def init_fn(params: PyTree) -> InjectLearningRateState:
        if schedule is None:
            rate = jnp.array(learning_rate, jnp.float32)  # a copy: never the caller's array
            return InjectLearningRateState(rate, None, factory(rate).init(params))
        step = jnp.zeros([], jnp.int32)
        return InjectLearningRateState(None, step, factory(schedule(step)).init(params))

    def update_fn(
        updates: PyTree,
        state: InjectLearningRateState,
        params: PyTree = None,
        global_step: Any = None,
        **extra_args: Any,
    ) -> tuple[PyTree, InjectLearningRateState]:
        del extra_args
        rate, step = state.learning_rate, state.step
        if schedule is not None:
            step = cast(jax.Array, step)
            rate = jnp.asarray(schedule(step if global_step is None else global_step))
            step = optax.safe_increment(step)
        updates, inner_state = factory(rate).update(updates, state.inner_state, params)
        return updates, InjectLearningRateState(state.learning_rate, step, inner_state)

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)
