"""TensorFlow's embedding lookups: one table or a list of shards, dense or sparse ids.

Each function evaluates what ``tensorflow/python/ops/embedding_ops.py`` (TF 2.21) does, so
the values and the gradients are TensorFlow's.  Every read of a table is a gather of whole
rows, so ``compute_gradients`` gives each table (each shard) an ``fg.IndexedSlices``, as
``tf.gradients`` does.

TensorFlow sends each shard its own ids (``dynamic_partition``, sizes known only when the
step runs); JAX's shapes are static.  So a lookup over shards reads them as one table:
each id's shard and row become its position in the shards one after the other, and one
gather of whole rows reads those positions of their concatenation (which XLA leaves
unbuilt when the shards are the slices of one array, as a restored partitioned variable
is).  A pruned entry reads the position one past the end, which that gather fills with
zeros and reads nothing of.  ``funcgrad._core.sparse_reads`` gives each shard the rows of
its own ids: eagerly exactly TensorFlow's; under ``jax.jit`` with rows of zeros at id
``rows`` (one past the shard) in place of the other shards' ids, which ``to_dense`` and
every optimizer drop.
"""

from __future__ import annotations

import math
import operator
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import sparse

from funcgrad._checks import as_bool
from funcgrad._checks import as_int
from funcgrad.clip import clip_by_norm
from funcgrad.nn import _checks

__all__ = [
    "SparseTensor",
    "embedding_lookup",
    "embedding_lookup_sparse",
    "safe_embedding_lookup_sparse",
]

_STRATEGIES = ("mod", "div")
_COMBINERS = ("mean", "sqrtn", "sum")


class SparseTensor(NamedTuple):
    """TensorFlow's ``tf.SparseTensor``: ``values[k]`` sits at ``indices[k]`` of ``dense_shape``.

    Attributes:
      indices: ``(n, rank)`` integer coordinates (TensorFlow's int64 ``indices``); an entry
        outside ``dense_shape`` is padding and is ignored, as in ``jax.experimental.sparse``.
      values: ``(n,)`` the ids (or the weights).
      dense_shape: the dense shape, static Python ints.

    Example:
      >>> sp = fg.nn.SparseTensor(jnp.array([[0, 0], [0, 1], [2, 0]]), jnp.array([3, 1, 3]),
      ...                         (3, 2))
      >>> sp.dense_shape
      (3, 2)
    """

    indices: Any
    values: Any
    dense_shape: tuple[int, ...]


def _check_range(caller: str, ids: jax.Array, keep: jax.Array, rows: int) -> None:
    """Raise for a concrete id outside ``[0, rows)`` where ``keep`` (nothing under a trace)."""
    if isinstance(ids, jax.core.Tracer) or isinstance(keep, jax.core.Tracer):
        return
    values = np.asarray(ids)[np.asarray(keep)]
    bad = values[(values < 0) | (values >= rows)]
    if bad.size:
        raise ValueError(
            f"{caller}: id {int(bad[0])} is outside the table of {rows} rows; TensorFlow "
            f"raises for it (under jax.jit its row reads NaN) - keep every id in [0, {rows})."
        )


def _assign(ids: jax.Array, sizes: list[int], strategy: str) -> tuple[jax.Array, jax.Array]:
    """TensorFlow's shard of each id and its row in that shard."""
    n, total = len(sizes), sum(sizes)
    if strategy == "mod":
        return ids % n, ids // n
    per, extras = total // n, total % n
    if per == 0:  # fewer rows than shards: every id has a shard of its own
        return ids, jnp.zeros_like(ids)
    shard = jnp.maximum(ids // (per + 1), (ids - extras) // per)
    return shard, jnp.where(shard < extras, ids % (per + 1), (ids - extras) % per)


def _gather_rows(table: jax.Array, positions: jax.Array) -> jax.Array:
    """``table[positions]`` by one gather of whole rows, also of no rows (where
    ``jnp.take`` leaves no gather to differentiate); a position past the end reads zeros
    and nothing of the table."""
    dims = lax.GatherDimensionNumbers(
        offset_dims=tuple(range(1, table.ndim)), collapsed_slice_dims=(0,), start_index_map=(0,)
    )
    return lax.gather(
        table, positions[:, None], dims, (1, *table.shape[1:]), mode="fill", fill_value=0
    )


def _lookup(
    caller: str,
    params: Any,
    ids: Any,
    partition_strategy: str,
    max_norm: Any,
    keep: jax.Array | None = None,
) -> jax.Array:
    """``embedding_lookup``'s rows for flat ``ids``; zeros where ``keep`` is False."""
    strategy = _checks.choice(caller, "partition_strategy", partition_strategy, _STRATEGIES)
    max_norm = _checks.max_norm(caller, max_norm)
    shards = _checks.shards(caller, params)
    ids = _checks.integer_ids(caller, "ids", ids)
    keep = jnp.ones(ids.shape, bool) if keep is None else keep
    sizes = [s.shape[0] for s in shards]
    total = sum(sizes)
    _check_range(caller, ids, keep, total)
    ids = ids.astype(ids.dtype if ids.dtype.itemsize >= 4 else jnp.int32)  # room for total
    shard, rows = _assign(ids, sizes, strategy)
    inside = (ids >= 0) & (ids < total)
    starts = jnp.asarray(np.cumsum([0, *sizes[:-1]]), ids.dtype)
    positions = jnp.where(keep & inside, jnp.take(starts, shard, mode="clip") + rows, total)
    out = _gather_rows(shards[0] if len(shards) == 1 else jnp.concatenate(shards), positions)
    out = jnp.where((inside | ~keep).reshape(ids.shape + (1,) * (out.ndim - 1)), out, jnp.nan)
    if max_norm is not None:  # each row on its own, as TensorFlow's _clip
        out = clip_by_norm(out, max_norm, axes=tuple(range(1, out.ndim)))
    return out.astype(shards[0].dtype)


def embedding_lookup(
    params: Any,
    ids: Any,
    partition_strategy: str = "mod",
    name: str | None = None,
    validate_indices: bool = True,
    max_norm: Any = None,
) -> jax.Array:
    """The rows of a table, or of its shards, at ``ids`` (``tf.compat.v1.nn.embedding_lookup``).

    ``params`` is one table or the list of its shards, split as TensorFlow's partitioners
    split a table of ``V`` rows in ``n`` (the first ``V % n`` shards one row longer).
    With ``"mod"``, id ``i`` is row ``i // n`` of shard ``i % n``; with ``"div"``, the
    shards hold consecutive ranges of ids.  ``max_norm`` clips each looked-up row to that
    L2 norm, as TensorFlow does (``tf.clip_by_norm`` over the row's axes).

    Every read is a gather of whole rows, so ``compute_gradients`` gives the table (each
    shard) an ``fg.IndexedSlices``.  A partitioned variable restored whole is looked up
    as ``embedding_lookup(jnp.array_split(table, n), ids)`` inside the loss: one gather of
    the table, whose gradient stays the rows of the ids.  Separate shard arrays are
    copied into one for the gather.

    Args:
      params: an array of shape ``(V, *row)``, or a list of shards ``(V_p, *row)``.
      ids: integer ids, any shape.
      partition_strategy: ``"mod"`` (TensorFlow's default) or ``"div"``.
      name: TensorFlow's op name; unused.
      validate_indices: unused, as in TensorFlow.
      max_norm: ``None``, or the largest L2 norm of a looked-up row.

    Returns:
      An array of shape ``ids.shape + row``.  An id outside ``[0, V)`` raises when the ids
      are known; under ``jax.jit`` its row is NaN (``jnp.take``'s fill).

    Raises:
      ValueError: for an unknown ``partition_strategy``, shards not split as TensorFlow
        splits a table, a known id outside the table, or ``max_norm`` not above 0.
      TypeError: for ids that are not integers, shards of different dtypes, a
        ``max_norm`` that is no number, a ``name`` that is no string or a
        ``validate_indices`` that is no bool.

    Example:
      >>> table = jnp.arange(10.0).reshape(5, 2)            # rows 0..4
      >>> shards = [table[0::2], table[1::2]]               # "mod": 3 and 2 rows
      >>> fg.nn.embedding_lookup(shards, jnp.array([4, 1])).tolist()
      [[8.0, 9.0], [2.0, 3.0]]
      >>> shards = [table[:3], table[3:]]                   # "div"
      >>> fg.nn.embedding_lookup(shards, jnp.array([4, 1]), "div").tolist()
      [[8.0, 9.0], [2.0, 3.0]]
    """
    caller = "fg.nn.embedding_lookup(params, ids)"
    _checks.op_name(caller, name)
    as_bool(caller, "validate_indices", validate_indices)
    ids = _checks.integer_ids(caller, "ids", ids)
    flat = _lookup(caller, params, ids.reshape(-1), partition_strategy, max_norm)
    return flat.reshape(ids.shape + flat.shape[1:])


def _coo(caller: str, name: str, sp: Any) -> tuple[jax.Array, jax.Array, tuple[int, ...]]:
    """``(indices, values, dense_shape)`` of a ``SparseTensor`` or a ``BCOO``."""
    if isinstance(sp, sparse.BCOO):
        if sp.n_batch or sp.n_dense:
            raise ValueError(
                f"{caller}: {name} is a BCOO with batch or dense dimensions; pass "
                "jax.experimental.sparse.BCOO.fromdense(x) with n_batch=0 and n_dense=0."
            )
        return sp.indices, sp.data, tuple(sp.shape)
    if not isinstance(sp, SparseTensor):
        raise TypeError(
            f"{caller}: {name} must be an fg.nn.SparseTensor or a "
            f"jax.experimental.sparse.BCOO, got {type(sp).__name__}; wrap TensorFlow's "
            "fields as fg.nn.SparseTensor(indices, values, dense_shape)."
        )
    try:
        shape = tuple(operator.index(d) for d in sp.dense_shape)
    except (jax.errors.ConcretizationTypeError, TypeError):
        raise TypeError(
            f"{caller}: {name}.dense_shape is {sp.dense_shape!r}; the output's shape depends "
            "on it, so pass it as a tuple of Python ints (not traced)."
        ) from None
    indices, values = jnp.asarray(sp.indices), jnp.asarray(sp.values)
    if not jnp.issubdtype(indices.dtype, jnp.integer):
        raise TypeError(
            f"{caller}: {name}.indices has dtype {indices.dtype}; pass integer coordinates "
            "(TensorFlow's are int64)."
        )
    if indices.ndim != 2 or indices.shape[1] != len(shape) or values.shape != indices.shape[:1]:
        raise ValueError(
            f"{caller}: {name} has indices of shape {indices.shape}, values of shape "
            f"{values.shape} and dense_shape {shape}; pass indices (n, rank), values (n,)."
        )
    return indices, values, shape


def _entries(
    caller: str, sp_ids: Any, sp_weights: Any, rank: int | None
) -> tuple[jax.Array, jax.Array, jax.Array | None, jax.Array, tuple[int, ...]]:
    """``(segments, ids, weights, inside, dense_shape)``: each entry's output row (the
    row-major index of all its coordinates but the last), id, weight, and whether it lies
    inside ``dense_shape`` (the rest is padding)."""
    indices, ids, shape = _coo(caller, "sp_ids", sp_ids)
    if (rank is not None and len(shape) != rank) or len(shape) < 2:
        want = "2" if rank is not None else "2 or more"
        raise ValueError(f"{caller}: sp_ids has dense_shape {shape}; pass ids of rank {want}.")
    weights = None
    if sp_weights is not None:
        w_indices, weights, w_shape = _coo(caller, "sp_weights", sp_weights)
        if w_indices.shape != indices.shape or w_shape != shape:
            raise ValueError(
                f"{caller}: sp_weights (indices {w_indices.shape}, dense_shape {w_shape}) "
                f"does not match sp_ids (indices {indices.shape}, dense_shape {shape}); "
                "give one weight per id, at the id's coordinates."
            )
    inside = jnp.all((indices >= 0) & (indices < jnp.array([shape], indices.dtype)), axis=1)
    strides = np.cumprod((*shape[1:-1], 1)[::-1])[::-1].astype(np.int32)
    segments = indices[:, :-1].astype(jnp.int32) @ jnp.asarray(strides)
    return segments, _checks.integer_ids(caller, "sp_ids.values", ids), weights, inside, shape


def _combine(
    caller: str,
    params: Any,
    segments: jax.Array,
    ids: jax.Array,
    weights: jax.Array | None,
    keep: jax.Array,
    num_segments: int,
    combiner: str,
    partition_strategy: str,
    max_norm: Any,
) -> jax.Array:
    """TensorFlow's ``embedding_lookup_sparse_impl`` over the entries ``keep`` selects."""
    combiner = _checks.choice(caller, "combiner", combiner, _COMBINERS)
    rows = _lookup(caller, params, ids, partition_strategy, max_norm, keep)
    w = jnp.ones(ids.shape, rows.dtype) if weights is None else weights.astype(rows.dtype)
    w = jnp.where(keep, w, 0).reshape(w.shape + (1,) * (rows.ndim - 1))
    total = jax.ops.segment_sum(rows * w, segments, num_segments)
    if combiner == "sum":
        return total
    norm = w if combiner == "mean" else w * w
    norm = jax.ops.segment_sum(norm, segments, num_segments)
    if combiner == "sqrtn":
        norm = jnp.sqrt(norm)
    return jnp.where(norm == 0, 0, total / jnp.where(norm == 0, 1, norm))


def embedding_lookup_sparse(
    params: Any,
    sp_ids: Any,
    sp_weights: Any,
    partition_strategy: str = "mod",
    name: str | None = None,
    combiner: str | None = "mean",
    max_norm: Any = None,
) -> jax.Array:
    """One combined embedding per row of sparse ids (``tf.compat.v1.nn.embedding_lookup_sparse``).

    Row ``r`` of the result combines the rows of ``params`` at the ids of row ``r`` of
    ``sp_ids``: ``"sum"`` of ``weight * row``, their ``"mean"`` (divided by the sum of the
    weights) or ``"sqrtn"`` (divided by the square root of the sum of the squared
    weights); without weights every weight is 1.  A row with no ids (or weights summing
    to 0) is zeros.  ``params`` and ``partition_strategy`` are ``embedding_lookup``'s.

    TensorFlow's result has ``max(row) + 1`` rows (the rows after the last one with an id
    are missing); this one always has ``dense_shape[0]``, the missing rows zeros.

    Args:
      params: a table ``(V, *row)`` or the list of its shards.
      sp_ids: the ids, an ``fg.nn.SparseTensor`` or a ``jax.experimental.sparse.BCOO`` of
        dense shape ``(batch, max_ids)``; entries outside the dense shape (a BCOO's
        padding) are ignored.
      sp_weights: ``None``, or the weights at the same coordinates (same kind).
      partition_strategy: ``"mod"`` or ``"div"``, for shards.
      name: TensorFlow's op name; unused.
      combiner: ``"sum"``, ``"mean"`` (the default; also for ``None``, as in TensorFlow)
        or ``"sqrtn"``.
      max_norm: ``None``, or the largest L2 norm of a looked-up row (before weighting).

    Returns:
      An array ``(batch, *row)``.

    Raises:
      ValueError: for an unknown ``combiner`` or ``partition_strategy``, ids not of rank 2,
        weights at other coordinates, or a known id outside the table.
      TypeError: for sparse ids that are neither a ``SparseTensor`` nor a ``BCOO``, ids
        or coordinates that are not integers, a traced ``dense_shape``, or as
        ``embedding_lookup``.

    Example:
      >>> table = jnp.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
      >>> sp_ids = fg.nn.SparseTensor(jnp.array([[0, 0], [0, 1], [1, 0]]),
      ...                             jnp.array([0, 2, 1]), (2, 2))
      >>> fg.nn.embedding_lookup_sparse(table, sp_ids, None, combiner="sum").tolist()
      [[3.0, 2.0], [0.0, 1.0]]
      >>> weights = sp_ids._replace(values=jnp.array([3.0, 1.0, 2.0]))
      >>> fg.nn.embedding_lookup_sparse(table, sp_ids, weights).tolist()  # mean
      [[1.25, 0.5], [0.0, 1.0]]
    """
    caller = "fg.nn.embedding_lookup_sparse(params, sp_ids, sp_weights)"
    _checks.op_name(caller, name)
    segments, ids, weights, inside, shape = _entries(caller, sp_ids, sp_weights, rank=2)
    combiner = "mean" if combiner is None else combiner
    return _combine(
        caller, params, segments, ids, weights, inside, shape[0], combiner, partition_strategy,
        max_norm,
    )  # fmt: skip


def safe_embedding_lookup_sparse(
    embedding_weights: Any,
    sparse_ids: Any,
    sparse_weights: Any = None,
    combiner: str = "mean",
    default_id: int | None = None,
    name: str | None = None,
    partition_strategy: str = "div",
    max_norm: Any = None,
) -> jax.Array:
    """``embedding_lookup_sparse`` that prunes what it cannot use
    (``tf.compat.v1.nn.safe_embedding_lookup_sparse``).

    As TensorFlow does: ids below 0 are dropped, and so (for ``"mean"`` and ``"sqrtn"``)
    are entries whose weight is not above 0; a row left empty looks up ``default_id``
    with weight 1, or is zeros when ``default_id`` is ``None`` (its lookup of id 0 then
    still reaches the table's gradient as a zero row, as in TensorFlow).  Ids of rank
    above 2 are combined over their last dimension: the result has shape
    ``dense_shape[:-1] + row``.  The default strategy is ``"div"``, TensorFlow's here.

    Args:
      embedding_weights: a table ``(V, *row)`` or the list of its shards.
      sparse_ids: an ``fg.nn.SparseTensor`` or a ``jax.experimental.sparse.BCOO`` of ids.
      sparse_weights: ``None``, or the weights at the same coordinates.
      combiner: ``"sum"``, ``"mean"`` (the default) or ``"sqrtn"``.
      default_id: ``None``, or the id an empty row looks up.
      name: TensorFlow's op name; unused.
      partition_strategy: ``"div"`` (the default here) or ``"mod"``.
      max_norm: ``None``, or the largest L2 norm of a looked-up row.

    Returns:
      An array ``dense_shape[:-1] + row``.

    Raises:
      ValueError: as ``embedding_lookup_sparse``, or for a ``default_id`` outside the table.
      TypeError: as ``embedding_lookup_sparse``.

    Example:
      >>> table = jnp.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
      >>> sp_ids = fg.nn.SparseTensor(jnp.array([[0, 0], [0, 1], [2, 0]]),
      ...                             jnp.array([2, -1, -1]), (3, 2))
      >>> fg.nn.safe_embedding_lookup_sparse(table, sp_ids).tolist()
      [[2.0, 2.0], [0.0, 0.0], [0.0, 0.0]]
      >>> fg.nn.safe_embedding_lookup_sparse(table, sp_ids, default_id=1).tolist()
      [[2.0, 2.0], [0.0, 1.0], [0.0, 1.0]]
    """
    caller = "fg.nn.safe_embedding_lookup_sparse(embedding_weights, sparse_ids)"
    _checks.op_name(caller, name)
    segments, ids, weights, inside, shape = _entries(caller, sparse_ids, sparse_weights, None)
    combiner = _checks.choice(caller, "combiner", combiner, _COMBINERS)
    if default_id is not None:
        table_rows = sum(s.shape[0] for s in _checks.shards(caller, embedding_weights))
        hint = f"pass the id an empty row looks up, in [0, {table_rows}), or None"
        default_id = as_int(caller, "default_id", default_id, minimum=0, hint=hint)
        if default_id >= table_rows:
            raise ValueError(
                f"{caller}: default_id must be below {table_rows}, got {default_id}; {hint}."
            )
    keep = inside & (ids >= 0)
    if weights is not None and combiner != "sum":
        keep &= weights > 0
    rows = math.prod(shape[:-1])
    empty = jax.ops.segment_sum(keep.astype(jnp.int32), segments, rows) == 0
    fill = jnp.full((rows,), 0 if default_id is None else default_id, ids.dtype)
    result = _combine(
        caller,
        embedding_weights,
        jnp.concatenate([segments, jnp.arange(rows, dtype=segments.dtype)]),
        jnp.concatenate([ids, fill]),
        None if weights is None else jnp.concatenate([weights, jnp.ones(rows, weights.dtype)]),
        jnp.concatenate([keep, empty]),
        rows,
        combiner,
        partition_strategy,
        max_norm,
    )
    if default_id is None:
        result = jnp.where(empty.reshape((rows,) + (1,) * (result.ndim - 1)), 0, result)
    return result.reshape(shape[:-1] + result.shape[1:])
