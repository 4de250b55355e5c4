"""The learning rate: held in the optimizer state, scaling the updates, changed between steps.

TensorFlow 1.x takes the learning rate as a Python float or as a tensor computed from
``global_step`` (``tf.train.exponential_decay(..., global_step)``).  Here the rate lives
in the optimizer state (as ``optax.inject_hyperparams`` holds hyperparameters), so it
is an array inside the jitted step: a float rate can be changed with
:func:`set_learning_rate` without recompiling — TensorFlow's placeholder learning rate,
fed a new value each run — and a schedule is evaluated at ``global_step`` *before* the
step increments it, the rate TensorFlow's ``minimize(global_step=...)`` uses.  The state
holds one array for a float rate and nothing more, so a jitted step has few inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import NamedTuple
from typing import cast

import jax
import jax.numpy as jnp
import optax

from funcgrad import _checks
from funcgrad._types import LearningRate
from funcgrad._types import PyTree
from funcgrad.train import _habits
from funcgrad.train.state import TrainState

__all__ = ["InjectLearningRateState", "scale_by_learning_rate", "set_learning_rate"]


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
    ``Optimizer.apply_gradients`` passes (at its own update count without it) — or not at
    all when the extra argument ``step_options`` holds the step's ``learning_rate``, which
    an optimizer computed once for every part of its step.
    """
    _checks.check_rate(caller, learning_rate)
    schedule = learning_rate if callable(learning_rate) else None

    def init_fn(params: PyTree) -> InjectLearningRateState:
        if schedule is None:
            rate = jnp.array(learning_rate, jnp.float32)  # a copy: never the caller's array
            return InjectLearningRateState(rate, None, factory(rate).init(params))
        step = jnp.zeros([], jnp.int32)
        # The rate drives the updates only: the state is made without calling the
        # schedule (a learning_rate_decay_fn is called once per step, by the step).
        unused = jnp.zeros([], jnp.float32)
        return InjectLearningRateState(None, step, factory(unused).init(params))

    def update_fn(
        updates: PyTree,
        state: InjectLearningRateState,
        params: PyTree = None,
        global_step: Any = None,
        step_options: Any = None,
        **extra_args: Any,
    ) -> tuple[PyTree, InjectLearningRateState]:
        del extra_args
        rate, step = state.learning_rate, state.step
        if schedule is not None:
            step = cast(jax.Array, step)
            if step_options is not None and "learning_rate" in step_options:
                rate = step_options["learning_rate"]
            else:
                rate = jnp.asarray(schedule(step if global_step is None else global_step))
            step = optax.safe_increment(step)
        updates, inner_state = factory(rate).update(updates, state.inner_state, params)
        return updates, InjectLearningRateState(state.learning_rate, step, inner_state)

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def scale_by_learning_rate(
    learning_rate: float | jax.Array, *, flip_sign: bool = True
) -> optax.GradientTransformation:
    """Multiply the updates by ``-learning_rate``, cast to each update's dtype.

    As ``optax.scale_by_learning_rate`` for a number, except that the rate is cast to
    each leaf's dtype first (as TensorFlow casts ``learning_rate`` to the variable's
    dtype), so ``bfloat16`` and ``float32`` leaves can share one float32 rate under
    strict dtype promotion.

    Args:
      learning_rate: the rate, a number or a scalar array (possibly traced).
      flip_sign: multiply by ``-learning_rate`` (a descent step) when true.

    Returns:
      A stateless ``optax.GradientTransformation``.

    Example:
      >>> tx = fg.train.scale_by_learning_rate(0.5)
      >>> g = {"a": jnp.array([2.0], jnp.bfloat16), "b": jnp.array([4.0])}
      >>> updates, _ = tx.update(g, tx.init(g))
      >>> updates["a"].dtype, updates["b"].tolist()
      (dtype(bfloat16), [-2.0])
    """
    sign = -1 if flip_sign else 1

    def update_fn(updates: PyTree, state: Any, params: PyTree = None) -> tuple[PyTree, Any]:
        del params
        rate = sign * jnp.asarray(learning_rate)
        return jax.tree.map(lambda g: g * rate.astype(g.dtype), updates), state

    return optax.GradientTransformation(lambda _: optax.EmptyState(), update_fn)


def _is_injected(node: Any) -> bool:
    return isinstance(node, InjectLearningRateState | optax.InjectStatefulHyperparamsState)


def _replace_rate(node: Any, learning_rate: float | jax.Array) -> Any | None:
    """``node`` with its float learning rate replaced, or ``None`` if it holds none."""
    if _holds_schedule(node):
        return None
    if isinstance(node, InjectLearningRateState):
        return node._replace(learning_rate=jnp.array(learning_rate, jnp.float32))
    rates = node.hyperparams
    if "learning_rate" not in rates:
        return None
    rate = jnp.array(learning_rate, jnp.result_type(rates["learning_rate"]))
    return node._replace(hyperparams={**rates, "learning_rate": rate})


def _holds_schedule(node: Any) -> bool:
    """Whether an injected-rate state takes its rate from a schedule (an optax
    schedule would overwrite a set rate at the next step)."""
    if isinstance(node, InjectLearningRateState):
        return node.learning_rate is None
    return "learning_rate" in node.hyperparams_states


def set_learning_rate(state: TrainState, learning_rate: float | jax.Array) -> TrainState:
    """A copy of ``state`` whose optimizer uses a new (float) learning rate.

    The rate is an array in ``state.opt_state`` (an :class:`InjectLearningRateState`,
    or the ``hyperparams`` of ``optax.inject_hyperparams``), so a jitted step keeps its
    compiled code: TensorFlow's ``tf.placeholder`` learning rate, fed a new value each
    run.  The new rate keeps the held rate's dtype.

    Args:
      state: a ``TrainState`` of one of ``fg.train``'s optimizers built with a float
        learning rate, or of ``fg.train.Optimizer(optax.inject_hyperparams(...)(
        learning_rate=0.1))`` — alone or inside an ``optax.chain``.  In an
        :class:`~funcgrad.train.OptimizerGroup`'s state, every optimizer's rate is
        set, and one of them with a schedule is an error.
      learning_rate: the new rate, finite and >= 0.

    Returns:
      ``state`` with every held float ``learning_rate`` replaced.

    Raises:
      TypeError: ``state`` is not a ``TrainState``.
      ValueError: the rate is negative or not finite, or ``state.opt_state`` holds no
        float learning rate, or holds a schedule (a schedule computes its rate from
        the step, so setting it would be undone at the next step).

    Example:
      >>> opt = fg.train.GradientDescentOptimizer(0.1)
      >>> state = fg.train.set_learning_rate(opt.init(jnp.float32(1.0)), 0.5)
      >>> state = opt.apply_gradients([(jnp.float32(1.0), None)], state)
      >>> float(state.params)
      0.5
      >>> import optax
      >>> adam = fg.train.Optimizer(optax.inject_hyperparams(optax.adam)(learning_rate=0.1))
      >>> state = fg.train.set_learning_rate(adam.init(jnp.float32(1.0)), 0.01)
      >>> state.opt_state.hyperparams["learning_rate"]
      Array(0.01, dtype=float32)
    """
    caller = "fg.train.set_learning_rate(state, learning_rate)"
    _habits.check_state(caller, state, "state = fg.train.set_learning_rate(state, 0.01)")
    _checks.check_rate(caller, learning_rate)
    found, schedules = [], []

    def replace(path: Any, node: Any) -> Any:
        if not _is_injected(node):
            return node
        new = _replace_rate(node, learning_rate)
        if new is not None:
            found.append(path)
        elif _holds_schedule(node):
            schedules.append(path)
        return node if new is None else new

    opt_state = jax.tree_util.tree_map_with_path(replace, state.opt_state, is_leaf=_is_injected)
    if not found:
        raise ValueError(
            f"{caller}: state.opt_state holds no float learning rate (a schedule, or an "
            "optax transformation with its rate built in); build the optimizer with a "
            "float learning_rate, e.g. fg.train.AdamOptimizer(0.001) or "
            "fg.train.Optimizer(optax.inject_hyperparams(optax.adam)(learning_rate=0.001))."
        )
    if schedules:
        where = ", ".join(f"state.opt_state{jax.tree_util.keystr(p)}" for p in schedules)
        raise ValueError(
            f"{caller}: {where} holds a learning-rate schedule, which computes its rate from "
            "the step, so a rate set here would be undone at the next step, while the "
            "other optimizers' rates would change; build that optimizer with a float "
            "learning_rate to set all rates, or change its schedule."
        )
    return state._replace(opt_state=opt_state)
