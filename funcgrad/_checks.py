"""Argument checks shared by every public function, in funcgrad's one error voice.

Every message starts at the call (``fg.train.Checkpointer(directory, max_to_keep)``,
plain text, no backticks), says what was given and ends with the next step.  A wrong
type is a ``TypeError``, a wrong value a ``ValueError``; where several arguments can be
wrong at once, every problem is collected and raised once.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: The ranges a number is held to, by the words every message says them in.
RULES: dict[str, Callable[[float], bool]] = {
    "finite": lambda v: True,
    ">= 0": lambda v: v >= 0,
    "> 0": lambda v: v > 0,
    "<= 0": lambda v: v <= 0,
    ">= 1": lambda v: v >= 1,
    "in [0, 1)": lambda v: 0 <= v < 1,
    "in [0, 1]": lambda v: 0 <= v <= 1,
}


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


def not_names_to_numbers(mapping: Mapping[Any, Any]) -> list[str]:
    """``"'key': value"`` for each entry of ``mapping`` that is not a string to a real
    number (the entries a map of names to numbers must not have)."""
    return [
        f"{k!r}: {v!r}"
        for k, v in mapping.items()
        if not (isinstance(k, str) and is_real_number(v))
    ]


def check_numbers(caller: str, numbers: Mapping[str, tuple[Any, str]], example: str) -> None:
    """Raise unless each ``name: (value, rule)`` is a finite real number within its rule.

    ``rule`` is a key of :data:`RULES` (``"in [0, 1)"``, ``">= 0"``, ...).  Every value
    that is not a number is reported at once in a ``TypeError`` ("pass Python numbers
    (example)"), then every number out of its range or not finite in a ``ValueError``
    ("pass values in range (example)").
    """
    not_numbers = [
        f"{name} must be a number, got {value!r}"
        for name, (value, _) in numbers.items()
        if not is_real_number(value)
    ]
    raise_collected(caller, not_numbers, f"pass Python numbers ({example})", TypeError)
    out_of_range = [
        f"{name} must be finite{'' if rule == 'finite' else ' and ' + rule}, got {value!r}"
        for name, (value, rule) in numbers.items()
        if not (math.isfinite(value) and RULES[rule](value))
    ]
    raise_collected(caller, out_of_range, f"pass values in range ({example})")


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
            f"{caller}: learning_rate must be finite and >= 0, got {value}; pass a rate "
            "such as 0.01."
        )


def is_key(value: Any) -> bool:
    """Whether ``value`` is a JAX PRNG key: a typed key, or a raw ``uint32[2]`` one."""
    return isinstance(value, jax.Array) and (
        jnp.issubdtype(value.dtype, jax.dtypes.prng_key)
        or (value.dtype == jnp.uint32 and value.shape == (2,))
    )


def check_key(caller: str, name: str, value: Any, hint: str) -> None:
    """Raise ``TypeError`` unless ``value`` is a PRNG key; the message ends with ``hint``."""
    if not is_key(value):
        raise TypeError(f"{caller}: {name} must be a PRNG key, got {value!r}; {hint}.")


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
