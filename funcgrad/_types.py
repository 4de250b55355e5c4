"""The small shared vocabulary of funcgrad's signatures.

The type aliases every signature reads in, the one record a gradient function sees
(:class:`Op`), the gradient-function protocol, the unconnected-gradients enum, and the
smallest helpers everything shares: "is this an array leaf", "put these values back at
these positions", and reading or replacing the subtree of a state at a path.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import Protocol
from typing import TypeAlias
from typing import TypeVar

import jax
import numpy as np

#: Any nested structure of lists, tuples, dicts and arrays that ``jax.tree_util`` flattens.
PyTree: TypeAlias = Any
#: A cotangent: an array (or pytree of arrays) shaped like the value it is the gradient of,
#: or ``None`` where there is no gradient.
Cotangent: TypeAlias = Any
#: A learning-rate schedule: the step (an integer scalar) in, the rate out.
Schedule: TypeAlias = Callable[[jax.Array], jax.Array]
#: A learning rate: a non-negative finite number, or a schedule ``step -> rate``.
LearningRate: TypeAlias = float | jax.Array | Schedule
#: ``(gradient, variable)`` pairs, one per variable; a gradient may be ``None``.
GradsAndVars: TypeAlias = list[tuple[Any, Any]]
#: A numeric value: a JAX or NumPy array, or a Python scalar.
ArrayLike: TypeAlias = jax.typing.ArrayLike
#: A function that a wrapper returns with its own signature (``custom_gradient(f)`` is
#: called as ``f`` is).
Function = TypeVar("Function", bound=Callable[..., Any])

_ARRAY_TYPES = (jax.Array, np.ndarray, np.generic, bool, int, float, complex)


def is_array(value: Any) -> bool:
    """Whether ``value`` is an array leaf: a JAX or NumPy array or scalar, or a Python number."""
    return isinstance(value, _ARRAY_TYPES)


def non_arrays(tree: Any, name: str) -> list[str]:
    """``"name[path] is a T"`` for every leaf of ``tree`` that is not an array."""
    return [
        f"{name}{jax.tree_util.keystr(path)} is a {type(leaf).__name__}"
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
        if not is_array(leaf)
    ]


def replace_at(values: Sequence[Any], indices: Sequence[int], new: Sequence[Any]) -> list[Any]:
    """A copy of ``values`` with ``values[indices[k]]`` replaced by ``new[k]``."""
    out = list(values)
    for i, v in zip(indices, new, strict=True):
        out[i] = v
    return out


def get_path(node: Any, path: Sequence[int | str]) -> Any:
    """The subtree of ``node`` at ``path``: tuple indices, field names and dict keys,
    outermost first."""
    for step in path:
        node = (
            node[step] if isinstance(step, int) or isinstance(node, dict) else getattr(node, step)
        )
    return node


def put_path(node: Any, path: Sequence[int | str], value: Any) -> Any:
    """``node`` with the subtree at ``path`` replaced by ``value`` (tuples, NamedTuples
    and dicts are rebuilt, nothing is changed in place)."""
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(node, dict):
        return {**node, step: put_path(node[step], rest, value)}
    if isinstance(step, int):
        return (*node[:step], put_path(node[step], rest, value), *node[step + 1 :])
    return node._replace(**{step: put_path(getattr(node, step), rest, value)})


class UnconnectedGradients(enum.StrEnum):
    """What an input that does not reach the outputs gets: ``None`` or zeros.

    As TensorFlow's ``tf.UnconnectedGradients``; the plain strings ``"none"`` and
    ``"zero"`` are accepted wherever this is.

    Example:
      >>> fg.UnconnectedGradients("zero") is fg.UnconnectedGradients.ZERO
      True
    """

    NONE = "none"
    ZERO = "zero"


@dataclasses.dataclass(frozen=True)
class Op:
    """The op a gradient function differentiates, as TensorFlow's ``op`` argument.

    Registered gradients (``fg.RegisterGradient``) and ``fg.py_func``'s ``grad`` receive
    one.

    Attributes:
      type: the op's name: the key of the override mapping as written (``"Sign"`` or
        ``"sign"``), or ``"PyFunc"``.
      inputs: the op's input values (literal constants included).
      outputs: the op's output values.
      params: the op's static parameters (the JAX primitive's ``params``; for a
        ``py_func``, ``func``, ``Tout``, ``stateful``, ``vectorized`` and ``name``).

    Example:
      >>> op = fg.Op("Sign", (jnp.float32(-2.0),), (jnp.float32(-1.0),), {})
      >>> op.type, float(op.inputs[0])
      ('Sign', -2.0)
    """

    type: str
    inputs: tuple[jax.Array, ...]
    outputs: tuple[jax.Array, ...]
    params: dict[str, Any]


class GradientFunction(Protocol):
    """A gradient function: ``fn(op, grad)`` returns one cotangent per input of ``op``."""

    def __call__(self, op: Op, grad: Cotangent) -> Cotangent: ...
