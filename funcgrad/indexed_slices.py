"""``fg.IndexedSlices``: TensorFlow's sparse gradient of a table read by row gathers.

A pytree: ``values`` and ``indices`` are its leaves, ``dense_shape`` (a tuple of ints) is
static, so one goes through ``jax.jit``, ``jax.vmap``, ``jax.lax.scan`` and optax's tree
functions as any other gradient does.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad._checks import is_real_number

__all__ = ["IndexedSlices"]

_CALL = "fg.IndexedSlices(values, indices, dense_shape)"


@jax.tree_util.register_pytree_node_class
class IndexedSlices:
    """TensorFlow's ``tf.IndexedSlices``: rows ``values`` of a ``dense_shape`` array at ``indices``.

    The gradient of a table that a loss reads only through gathers of whole rows
    (``jnp.take(E, ids, axis=0)``, ``E[ids]``, an embedding layer): one row of
    ``values`` per gathered id, duplicate ids kept as separate rows.  The dense gradient
    it stands for is ``to_dense()``: zeros of ``dense_shape`` with each row of ``values``
    added at its index (duplicates summed).

    What TensorFlow code does with one works here: ``-s``, scaling by a number
    (``0.5 * s``, ``s * 0.5``, ``s / 2``: the values scaled, the indices kept) and
    ``s.to_dense()`` where TensorFlow writes ``tf.convert_to_tensor(s)``;
    ``jnp.asarray(s)`` and ``np.asarray(s)`` give the dense array too.  Adding two of
    them raises ``TypeError`` as TensorFlow's ``+`` does.  Unlike TensorFlow's,
    ``dense_shape`` is a static tuple of ints, not a tensor.  Tree functions
    (``jax.tree_util.tree_map``, optax's) see ``indices`` as a leaf like ``values``: do
    arithmetic on ``s.values`` and keep ``s.indices``.

    Args:
      values: the rows, shaped ``(n,) + dense_shape[1:]``.
      indices: the row of each value, an integer array of shape ``(n,)``.
      dense_shape: the shape of the dense array (the table), a tuple of ints.

    Raises:
      TypeError: ``values`` or ``indices`` is not an array, ``indices`` is not
        integer, or ``dense_shape`` is not a sequence of ints.
      ValueError: ``dense_shape`` has a negative size, or the shapes do not fit
        together.

    Example:
      >>> s = fg.IndexedSlices(jnp.array([[1.0, 2.0], [3.0, 4.0]]), jnp.array([2, 2]), (3, 2))
      >>> s.to_dense().tolist()
      [[0.0, 0.0], [0.0, 0.0], [4.0, 6.0]]
      >>> (0.5 * s).values.tolist(), (0.5 * s).indices.tolist()
      ([[0.5, 1.0], [1.5, 2.0]], [2, 2])
    """

    values: Any
    indices: Any
    dense_shape: tuple[int, ...]

    def __init__(self, values: Any, indices: Any, dense_shape: Any) -> None:
        self.values = _as_array("values", values)
        self.indices = _as_array("indices", indices)
        self.dense_shape = _as_shape(dense_shape)
        _check_fit(self.values, self.indices, self.dense_shape)

    # -- pytree --------------------------------------------------------------------------
    def tree_flatten(self) -> tuple[tuple[Any, Any], tuple[int, ...]]:
        return (self.values, self.indices), self.dense_shape

    @classmethod
    def tree_unflatten(cls, dense_shape: tuple[int, ...], leaves: Any) -> IndexedSlices:
        # Leaves may be anything a tree function puts there (None, shape structs,
        # sharding specs): no checks here.
        new = object.__new__(cls)
        new.values, new.indices = leaves
        new.dense_shape = dense_shape
        return new

    # -- what TensorFlow's IndexedSlices has ---------------------------------------------
    @property
    def dtype(self) -> np.dtype[Any]:
        """The dtype of ``values`` (and of the dense array)."""
        return np.dtype(self.values.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        """The dense shape, as TensorFlow's ``IndexedSlices.shape``."""
        return self.dense_shape

    def to_dense(self) -> jax.Array:
        """The dense array: zeros of ``dense_shape`` with each row of ``values`` added at its index.

        TensorFlow's ``tf.convert_to_tensor(s)`` (an unsorted segment sum: duplicate
        indices summed).  An index outside ``[0, dense_shape[0])`` adds nothing (a negative
        one included: it does not count from the end).

        Returns:
          An array of shape ``dense_shape`` and the dtype of ``values``.

        Example:
          >>> s = fg.IndexedSlices(jnp.array([1.0, 2.0, 3.0]), jnp.array([0, 2, 0]), (4,))
          >>> s.to_dense().tolist()
          [4.0, 0.0, 2.0, 0.0]
        """
        rows = self.dense_shape[0]
        # JAX wraps a negative index as NumPy does; TensorFlow's ids have no such form.
        ids = jnp.where(self.indices < 0, rows, self.indices)
        zeros = jnp.zeros(self.dense_shape, self.values.dtype)
        return zeros.at[ids].add(self.values, mode="drop")

    def __jax_array__(self) -> jax.Array:
        return self.to_dense()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.to_dense(), dtype=dtype)

    def __neg__(self) -> IndexedSlices:
        return IndexedSlices(-self.values, self.indices, self.dense_shape)

    def __mul__(self, other: Any) -> IndexedSlices:
        return IndexedSlices(self.values * _scalar("*", other), self.indices, self.dense_shape)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> IndexedSlices:
        return IndexedSlices(self.values / _scalar("/", other), self.indices, self.dense_shape)

    def __add__(self, other: Any) -> Any:
        raise _no_arithmetic("+", other)

    def __radd__(self, other: Any) -> Any:
        raise _no_arithmetic("+", other)

    def __sub__(self, other: Any) -> Any:
        raise _no_arithmetic("-", other)

    def __rsub__(self, other: Any) -> Any:
        raise _no_arithmetic("-", other)

    def __repr__(self) -> str:
        return (
            f"IndexedSlices(values={self.values!r}, indices={self.indices!r}, "
            f"dense_shape={self.dense_shape!r})"
        )


def _as_array(name: str, value: Any) -> Any:
    if isinstance(value, jax.Array | np.ndarray | np.generic):
        return value
    if isinstance(value, list | tuple | int | float):
        return jnp.asarray(value)
    raise TypeError(
        f"{_CALL}: {name} must be an array, got {type(value).__name__}; pass a JAX or NumPy array."
    )


def _as_shape(dense_shape: Any) -> tuple[int, ...]:
    try:
        shape = tuple(dense_shape)
    except TypeError:
        shape = None
    if shape is None or not all(
        isinstance(d, int | np.integer) and not isinstance(d, bool) for d in shape
    ):
        raise TypeError(
            f"{_CALL}: dense_shape must be a tuple of ints, got {dense_shape!r}; pass the "
            "table's shape, e.g. table.shape."
        )
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(
            f"{_CALL}: dense_shape {shape} has a negative size; pass the table's shape, "
            "e.g. table.shape."
        )
    return shape


def _check_fit(values: Any, indices: Any, dense_shape: tuple[int, ...]) -> None:
    if not jnp.issubdtype(indices.dtype, jnp.integer):
        raise TypeError(
            f"{_CALL}: indices has dtype {indices.dtype}; row indices must be integers "
            "- cast them, e.g. indices.astype(jnp.int32)."
        )
    problems = []
    if indices.ndim != 1:
        problems.append(f"indices has shape {indices.shape}, not (n,)")
    if not dense_shape:
        problems.append("dense_shape is () (a scalar has no rows)")
    elif values.shape[1:] != dense_shape[1:] or (
        indices.ndim == 1 and values.shape[:1] != indices.shape
    ):
        problems.append(
            f"values has shape {values.shape}; with {indices.shape[:1]} indices and "
            f"dense_shape {dense_shape} it must be {indices.shape[:1] + dense_shape[1:]}"
        )
    if problems:
        raise ValueError(
            f"{_CALL}: {'; '.join(problems)}; give one row of values per index, each "
            "shaped like a row of the dense array."
        )


def _no_arithmetic(op: str, other: Any) -> TypeError:
    return TypeError(
        f"IndexedSlices {op} {type(other).__name__}: TensorFlow's IndexedSlices has no "
        f"{op}; use the dense arrays (s.to_dense() {op} t.to_dense()), or keep a sum of "
        "two IndexedSlices of one table sparse by concatenating their values and indices "
        "into one fg.IndexedSlices, as tf.gradients does for two lookups of one table."
    )


def _scalar(op: str, other: Any) -> Any:
    if is_real_number(other) or (
        isinstance(other, jax.Array | np.ndarray | np.generic) and np.ndim(other) == 0
    ):
        return other
    raise TypeError(
        f"IndexedSlices {op} {type(other).__name__}: only a scalar scales an IndexedSlices "
        f"(its values); for anything else use the dense array, s.to_dense() {op} x."
    )
