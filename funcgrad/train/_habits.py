"""The errors that TensorFlow 1.x and optax habits get from ``fg.train``.

Design note
-----------
A user who knows ``tf.train`` or optax writes what worked there: the parameters where
the ``TrainState`` goes (optax keeps parameters and optimizer state apart), TensorFlow's
``global_step`` tensor as the second argument of ``apply_gradients``,
``minimize(loss, global_step=gs)``, or one optimizer's state stepped by another.
Unchecked, the first fails deep inside (``'dict' object has no attribute 'params'``)
and the last *runs*: an SGD step on a state that Adam's ``init`` made trains with the
wrong rule and silently carries Adam's slots along.  Each check here runs once per
call in Python (at trace time under ``jax.jit``, so a compiled step pays nothing), and
each message shows the funcgrad call to write instead.

What it assumes: an optimizer's state always has the structure its ``tx.init`` gives
(optax transformations keep their state's structure from step to step, as ``jit`` and
``scan`` require), so comparing structures — never values — tells whose state it is.
Two optimizers with the same kind of state (two Adams) are not told apart.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from funcgrad import _checks
from funcgrad.train.state import TrainState


class _Required:
    """The default of ``apply_gradients``' ``state``, so that a call without it reaches
    the check that says what to pass (TensorFlow passes ``global_step=`` there)."""

    def __repr__(self) -> str:
        return "<required>"


#: The default of a required ``state`` argument (see ``_Required``).
NO_STATE: Any = _Required()

#: TensorFlow 1.x's arguments of compute_gradients / minimize / apply_gradients that
#: have no meaning here, with the reason.
_TF_ONLY = {
    "global_step": "the TrainState counts the steps itself: state.global_step goes up by "
    "one with every apply_gradients and minimize",
    "gate_gradients": "JAX has no gradient gating to choose",
    "aggregation_method": "XLA chooses how gradients are added",
    "colocate_gradients_with_ops": "XLA places the gradient computation",
    "name": "there are no graph operations to name",
}


#: Options of other optimizers than the one called, with the reason (refused unless the
#: loss function names the keyword itself: a ``**kwargs`` would swallow it silently).
_ELSEWHERE = {
    "decay_var_list": "it is the option of the optimizers with decoupled weight decay "
    "(fg.train.AdamWOptimizer, MomentumWOptimizer), and this one decays no variable",
}


def check_state(caller: str, state: Any, call: str) -> None:
    """Raise unless ``state`` is a ``TrainState``; the message shows ``call``."""
    if isinstance(state, TrainState):
        return
    if _checks.is_integer(state) and np.ndim(state) == 0:
        raise TypeError(
            f"{caller}: state is the integer {state!r}, not a fg.train.TrainState — "
            "TensorFlow's global_step? Here the state holds the step and every update "
            f"counts it: {call}."
        )
    raise TypeError(
        f"{caller}: state is a {type(state).__name__}, not a fg.train.TrainState (the "
        "parameters?); make the state once with state = opt.init(params) and pass it: "
        f"{call}."
    )


def wrapper_state(caller: str, state: Any, call: str, kind: type, optimizer: str) -> Any:
    """``state.opt_state``, after checking that ``state`` is a ``TrainState`` whose
    ``opt_state`` is a ``kind``, the state of the wrapping ``optimizer`` (its name)."""
    check_state(caller, state, call)
    if not isinstance(state.opt_state, kind):
        raise ValueError(
            f"{caller}: state.opt_state is a {type(state.opt_state).__name__}, not the "
            f"{kind.__name__} a {optimizer}'s init makes: this state was made by another "
            f"optimizer; make it with state = opt.init(params), opt the {optimizer}."
        )
    return state.opt_state


def check_params(caller: str, params: Any, call: str) -> None:
    """Raise when a ``TrainState`` is passed where the parameters go."""
    if isinstance(params, TrainState):
        raise TypeError(f"{caller}: params is a fg.train.TrainState; pass its parameters: {call}.")


def _takes_keyword(fn: Callable[..., Any], name: str, *, by_name: bool = False) -> bool:
    """Whether ``fn`` accepts the keyword ``name`` — by name only with ``by_name``, else
    also through ``**kwargs`` (``True`` when it cannot be told)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(
        (p.kind is p.VAR_KEYWORD and not by_name)
        or (p.name == name and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        for p in parameters
    )


def refuse_keywords(
    caller: str, loss_fn: Callable[..., Any] | None, kwargs: dict[str, Any], call: str
) -> None:
    """Raise for keywords meant for TensorFlow (``global_step=``) that ``loss_fn`` does not take.

    Keywords go to ``loss_fn``; one of TensorFlow's names that ``loss_fn`` does not
    accept was meant for TensorFlow.  ``loss_fn=None`` (``apply_gradients``): every
    keyword is refused.
    """
    problems = [
        f"{k}= is TensorFlow's argument, and {_TF_ONLY[k]}"
        for k in kwargs
        if k in _TF_ONLY and (loss_fn is None or not _takes_keyword(loss_fn, k))
    ]
    problems += [
        f"{k}= is not taken here: {_ELSEWHERE[k]}"
        for k in kwargs
        if k in _ELSEWHERE and (loss_fn is None or not _takes_keyword(loss_fn, k, by_name=True))
    ]
    if loss_fn is None:
        known = {**_TF_ONLY, **_ELSEWHERE}
        problems += [f"it takes no keyword argument {k!r}" for k in kwargs if k not in known]
    if problems:
        raise TypeError(f"{caller}: {'; '.join(problems)}; drop it: {call}.")


def _kinds(opt_state: Any) -> str:
    """The kinds of optimizer state in ``opt_state``, for an error message."""
    if isinstance(opt_state, dict):
        return f"a dict of slots keyed {sorted(opt_state)}"
    found = re.findall(r"namedtuple\[(\w+)\]", str(jax.tree.structure(opt_state)))
    return ", ".join(dict.fromkeys(found)) or f"a {type(opt_state).__name__}"


def check_slots(caller: str, slots: Any, structure: Any, call: str) -> None:
    """Raise unless ``slots`` has ``structure``, the tree structure of ``tx.init``'s state."""
    if jax.tree.structure(slots) == structure:
        return
    expected = jax.tree.unflatten(structure, [0] * structure.num_leaves)
    if isinstance(slots, dict) and not isinstance(expected, dict):
        raise ValueError(
            f"{caller}: state.opt_state holds {_kinds(slots)} — the state of an "
            "fg.train.OptimizerGroup; step it with the group's optimizers, e.g. "
            f"group[{next(iter(sorted(slots)), 'key')!r}].minimize(loss_fn, state, *args)."
        )
    raise ValueError(
        f"{caller}: state.opt_state was not made by this optimizer: it holds "
        f"{_kinds(slots)}, this optimizer's state holds {_kinds(expected)}; step a state "
        f"with the optimizer whose init made it ({call}), or, for several optimizers over "
        "the same variables, make one shared state with fg.train.OptimizerGroup."
    )
