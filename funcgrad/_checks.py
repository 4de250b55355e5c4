"""Argument checks shared by every public function, in funcgrad's one error voice.

Every message starts at the call (``fg.train.Checkpointer(directory, max_to_keep)``,
plain text, no backticks), says what was given and ends with the next step.  A wrong
type is a ``TypeError``, a wrong value a ``ValueError``; where several arguments can be
wrong at once, every problem is collected and raised once.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

import jax
import numpy as np


def as_int(caller: str, name: str, value: Any, *, minimum: int | None = None, hint: str) -> int:
    """``value`` as a Python ``int``: a Python, NumPy or concrete JAX integer, not a bool.

    Raises ``TypeError`` for anything else and ``ValueError`` below ``minimum``; both
    messages end with ``hint``, the next step.
    """
    is_bool = isinstance(value, bool | np.bool_) or (
        isinstance(value, np.ndarray | jax.Array) and value.dtype == bool
    )
    try:
        number = None if is_bool else operator.index(value)
    except TypeError:
        number = None
    need = "an integer" if minimum is None else f"an integer >= {minimum}"
    if number is None:
        raise TypeError(f"{caller}: {name} must be {need}, got {value!r}; {hint}.")
    if minimum is not None and number < minimum:
        raise ValueError(f"{caller}: {name} must be {need}, got {number}; {hint}.")
    return number


def as_bool(caller: str, name: str, value: Any) -> bool:
    """``value`` as a Python ``bool``: ``True`` or ``False`` (or a NumPy bool); anything
    else, a truthy string or number included, is a ``TypeError``."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{caller}: {name} must be True or False, got {value!r}; pass a bool.")
    return bool(value)


def is_integer(value: Any, *, arrays: bool = True) -> bool:
    """Whether ``value`` is an integer, not a bool: a Python or NumPy integer, or (with
    ``arrays``) an array of an integer dtype, concrete or traced."""
    if isinstance(value, bool | np.bool_):
        return False
    if isinstance(value, int | np.integer):
        return True
    dtype = getattr(value, "dtype", None)
    return arrays and dtype is not None and np.issubdtype(dtype, np.integer)


def is_real_number(value: Any) -> bool:
    """Whether ``value`` is a Python or NumPy real number (integer or floating), not a bool."""
    return not isinstance(value, bool) and isinstance(value, int | float | np.integer | np.floating)


def did_you_mean(name: str, valid: Iterable[str]) -> str:
    """`` (did you mean 'X'?)`` for the closest of ``valid``, case-insensitively, or ``""``.

    Closest is the fewest edits (insertions, deletions, substitutions and swaps of two
    neighbours), at most a third of the name's length; among equals, the one of the
    name's length (a swap or a slip of the finger), then the first given.
    """
    wanted = name.lower()
    best: tuple[int, int, int] | None = None
    choice = ""
    for order, v in enumerate(valid):
        distance = _edits(wanted, v.lower())
        key = (distance, abs(len(v) - len(name)), order)
        if distance <= max(1, len(name) // 3) and (best is None or key < best):
            best, choice = key, v
    return f" (did you mean {choice!r}?)" if best is not None else ""


def _edits(a: str, b: str) -> int:
    """The optimal-string-alignment distance between ``a`` and ``b``."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], previous2[j - 2] + 1)
        previous2, previous = previous, row
    return previous[-1]


#: TensorFlow 1.x's arguments of ``tf.gradients`` that choose how its graph is built and
#: run, never the numbers, and why funcgrad takes none of them.
TF_GRAPH_ARGUMENTS = {
    "gate_gradients": "it orders TensorFlow's backward graph, and XLA schedules the whole step",
    "aggregation_method": "it chooses how TensorFlow adds gradients, and XLA adds them",
    "colocate_gradients_with_ops": "it places TensorFlow's ops on devices, and XLA places them",
    "name": "there is no graph operation to name",
}


def refuse_keywords(caller: str, given: Iterable[str], call: str) -> None:
    """A ``TypeError`` for keyword arguments a function does not take, if any is
    ``given``: TensorFlow's graph arguments with the reason, others as Python names them;
    the message ends with ``call``, the call to write instead."""
    problems = [
        f"{k}= is TensorFlow's argument and is not taken: {TF_GRAPH_ARGUMENTS[k]}"
        if k in TF_GRAPH_ARGUMENTS
        else f"it takes no keyword argument {k!r}"
        for k in given
    ]
    raise_collected(caller, problems, f"drop it: {call}", TypeError)


def raise_collected(caller: str, problems: list[str], hint: str, error: type = ValueError) -> None:
    """Raise ``error`` listing every problem at once, if there is any."""
    if problems:
        raise error(f"{caller}: {'; '.join(problems)}; {hint}.")


def check_function(caller: str, f: Any, example: str) -> None:
    """Raise ``TypeError`` unless ``f`` is callable; the message ends with ``example``."""
    if not callable(f):
        raise TypeError(
            f"{caller}: f must be a function, got {type(f).__name__}; pass the function "
            f"first, e.g. {example}."
        )
