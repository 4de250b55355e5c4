"""Tables read only through gathers of whole rows: TensorFlow's ``IndexedSlices`` gradients.

Design note
-----------
TensorFlow gives a variable read by ``tf.gather`` / ``tf.nn.embedding_lookup`` an
``IndexedSlices`` gradient: one row of values per gathered id (the cotangent of the
gather's output), the ids, and the table's shape; several lookups of one table are
concatenated; a variable read any other way as well gets a dense gradient.  funcgrad
finds the same reads in the jaxpr of the loss, so no user code changes.

What it treats as a whole-row read of a table ``E`` of shape ``(V, *row)`` (an input of
the jaxpr, as operand 0 of the equation):

* ``gather`` with no operand batching dims, ``slice_sizes == (1, *row)`` and dimension
  0 in ``start_index_map`` — ``jnp.take(E, ids, axis=0)``, ``E[ids]``, ``E.at[ids].get()``,
  flax's ``nn.Embed``, equinox's ``nn.Embedding`` under ``jax.vmap``, ``lax.gather`` of
  rows.  Start indices of the other (full-size) dimensions are clamped to 0 by the
  gather; in ``FILL_OR_DROP`` mode a nonzero one would fill, so there only
  ``start_index_map == (0,)`` counts.  The ids are the start indices of dimension 0
  (after JAX's wrapping of negative ids), flattened in row-major order as TensorFlow's
  ``_GatherGrad`` flattens them; the values are the output cotangent with its batch
  axes first, reshaped to ``(n, *row)``.
* ``dynamic_slice`` with ``slice_sizes == (1, *row)`` — ``E[i]`` for a traced scalar
  ``i`` (``tf.gather`` of a scalar id): one id, one row.

What it follows: ``jit`` equations (``jnp.take`` is one) whose inputs include a table
are inlined and searched; inside ``shard_map``, the ``pvary`` that marks a replicated
table as varying before a gather is the table still (its reads' perturbations vary as
their outputs do, so no cotangent is summed across devices).  Any other use of a
table — a matmul, ``E.sum()``, a gather of columns (TensorFlow's ``tf.gather`` with
``axis=1`` is dense too), a static slice
``E[3]``, a cast, a use inside ``scan`` / ``cond`` / ``while`` / ``custom_jvp`` /
``custom_vjp`` / ``checkpoint``, or the table returned as an output — makes that
table's gradient dense, as TensorFlow sums an ``IndexedSlices`` with a dense gradient
into a dense one.

How it differentiates: :func:`find` lists the reads; :meth:`SparseReads.evaluate`
re-emits the jaxpr with each read's output ``y`` replaced by ``y + d`` for an extra
input ``d`` (zeros of ``y``'s shape), and records each read's ids.  The caller
differentiates with respect to the ``d``s instead of the tables: the cotangent of ``d``
is the cotangent of the gather's output, so no table-sized gradient is ever built and
a step costs the batch, not the table.  A read whose output does not reach the loss
contributes no rows (as in TensorFlow, where its gather has no gradient path).

What it assumes: the number of ids is static (it is in every jaxpr).  Ids outside
``[0, V)`` cannot be checked inside ``jax.jit``; :func:`check_ids` raises for concrete
ones, and ``IndexedSlices.to_dense`` drops them, so none writes into another row.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core

from funcgrad._core import rewrite as _rewrite
from funcgrad.indexed_slices import IndexedSlices

#: Re-emits one equation (the cut rewriter's, or a plain bind).
Emit = Callable[[core.JaxprEqn, list[Any]], list[Any]]
_CALLS = frozenset({"jit", "pjit"})


@dataclasses.dataclass(frozen=True)
class Read:
    """One whole-row read: which table, and the shape and dtype of what it reads."""

    table: int  # the input position of the table
    shape: tuple[int, ...]  # of the read's output
    dtype: Any
    order: tuple[int, ...]  # the output's axes, batch axes first (row-major ids)
    vma: tuple[str, ...]  # the mesh axes the output varies over, inside shard_map

    def zeros(self) -> Any:
        """The perturbation of this read's output: zeros that vary as the output does."""
        zeros = jnp.zeros(self.shape, self.dtype)
        return lax.pcast(zeros, self.vma, to="varying") if self.vma else zeros


@dataclasses.dataclass
class SparseReads:
    """The tables of a jaxpr read only through whole-row gathers, and their reads in order."""

    closed: core.ClosedJaxpr
    tables: list[int]
    reads: list[Read]

    def evaluate(
        self, args: Sequence[Any], deltas: Sequence[Any], emit: Emit
    ) -> tuple[list[Any], list[Any]]:
        """The jaxpr's outputs with ``deltas[k]`` added to read ``k``'s output, and each
        read's ids; every other equation is re-emitted by ``emit``."""
        tables = {self.closed.jaxpr.invars[t]: t for t in self.tables}
        ids: list[Any] = []
        it = iter(deltas)

        def on_read(eqn: core.JaxprEqn, invals: list[Any]) -> list[Any]:
            ids.append(_row_ids(eqn, invals))
            return [_rewrite.bind_equation(eqn, invals)[0] + next(it)]

        jaxpr = self.closed.jaxpr
        outs = _run(jaxpr, self.closed.consts, list(args), tables, on_read, emit)
        return outs, ids

    def slices(
        self, primals: Sequence[Any], ids: list[Any], cotangents: dict[int, Any]
    ) -> dict[int, IndexedSlices | None]:
        """One ``IndexedSlices`` per table from its reads' ``cotangents`` (by read number;
        a read left out does not reach the loss), ``None`` where no read does."""
        out: dict[int, IndexedSlices | None] = {}
        for t in self.tables:
            shape = tuple(primals[t].shape)
            mine = [k for k, r in enumerate(self.reads) if r.table == t and k in cotangents]
            if not mine:
                out[t] = None
                continue
            values = [
                jnp.reshape(jnp.transpose(cotangents[k], self.reads[k].order), (-1, *shape[1:]))
                for k in mine
            ]
            dtype = functools.reduce(np.promote_types, [ids[k].dtype for k in mine])
            indices = [ids[k].astype(dtype) for k in mine]  # lookups by ids of two dtypes
            out[t] = IndexedSlices(
                jnp.concatenate(values) if len(values) > 1 else values[0],
                jnp.concatenate(indices) if len(indices) > 1 else indices[0],
                shape,
            )
        return out


def find(closed: core.ClosedJaxpr, candidates: Sequence[int]) -> SparseReads:
    """The ``candidates`` (input positions) that ``closed`` reads only through whole-row
    gathers, with the reads of those tables in evaluation order."""
    jaxpr = closed.jaxpr
    tables = {jaxpr.invars[t]: t for t in candidates if jaxpr.invars[t].aval.ndim >= 1}
    found: list[Read] = []
    dense: set[int] = set()
    _scan(jaxpr, tables, found, dense)
    sparse = [t for t in tables.values() if t not in dense]
    return SparseReads(closed, sparse, [r for r in found if r.table in sparse])


def check_all_ids(caller: str, grads: Sequence[Any], names: Sequence[str]) -> None:
    """:func:`check_ids` for each ``IndexedSlices`` of ``grads``, named by ``names``."""
    for g, name in zip(grads, names, strict=True):
        if isinstance(g, IndexedSlices):
            check_ids(caller, name, g)


def check_ids(caller: str, name: str, slices: IndexedSlices) -> None:
    """Raise ``ValueError`` for a concrete id outside the table (nothing under a trace)."""
    if isinstance(slices.indices, jax.core.Tracer):
        return
    ids = np.asarray(slices.indices)
    rows = slices.dense_shape[0]
    bad = ids[(ids < 0) | (ids >= rows)]
    if bad.size:
        raise ValueError(
            f"{caller}: id {int(bad[0])} gathers a row of {name}, a table of {rows} rows "
            f"(shape {slices.dense_shape}); JAX's gather would clamp or fill it silently "
            f"where TensorFlow raises - keep every id in [0, {rows})."
        )


# --- the analysis ---------------------------------------------------------------------


def _uses(eqn: core.JaxprEqn, tables: dict[Any, int]) -> list[tuple[int, int]]:
    """``(position, table)`` for each input of ``eqn`` that is a table."""
    return [
        (k, tables[v]) for k, v in enumerate(eqn.invars) if isinstance(v, core.Var) and v in tables
    ]


def _inner_tables(eqn: core.JaxprEqn, uses: list[tuple[int, int]]) -> dict[Any, int]:
    inner = eqn.params["jaxpr"].jaxpr
    return {inner.invars[k]: t for k, t in uses}


def _aliases(eqn: core.JaxprEqn, uses: list[tuple[int, int]]) -> dict[Any, int]:
    """The outputs of a ``pvary`` that are tables (``shard_map`` marks a replicated table
    as varying before a gather with varying ids; the values are the table's)."""
    return {eqn.outvars[k]: t for k, t in uses}


def _scan(jaxpr: core.Jaxpr, tables: dict[Any, int], found: list[Read], dense: set[int]) -> None:
    """Append the row reads of ``tables`` in ``jaxpr`` to ``found``; add to ``dense`` each
    table used any other way."""
    tables = dict(tables)
    for eqn in jaxpr.eqns:
        uses = _uses(eqn, tables)
        if not uses:
            continue
        if len(uses) == 1 and uses[0][0] == 0 and _is_row_read(eqn):
            out: Any = eqn.outvars[0].aval
            vma = tuple(sorted(getattr(getattr(out, "manual_axis_type", None), "varying", ())))
            found.append(Read(uses[0][1], tuple(out.shape), out.dtype, _batch_first(eqn), vma))
        elif eqn.primitive.name == "pvary":
            tables.update(_aliases(eqn, uses))
        elif eqn.primitive.name in _CALLS:
            _scan(eqn.params["jaxpr"].jaxpr, _inner_tables(eqn, uses), found, dense)
        else:
            dense.update(t for _, t in uses)
    for v in jaxpr.outvars:
        if isinstance(v, core.Var) and v in tables:
            dense.add(tables[v])


def _is_row_read(eqn: core.JaxprEqn) -> bool:
    """Whether ``eqn`` reads whole rows of its operand 0 (see the module docstring)."""
    operand: Any = eqn.invars[0].aval
    shape = tuple(operand.shape)
    row = (1, *shape[1:])
    name = eqn.primitive.name
    if name == "dynamic_slice":
        return tuple(eqn.params["slice_sizes"]) == row
    if name != "gather":
        return False
    dn = eqn.params["dimension_numbers"]
    if dn.operand_batching_dims or tuple(eqn.params["slice_sizes"]) != row:
        return False
    if 0 not in dn.start_index_map:
        return False
    fills = eqn.params["mode"] == lax.GatherScatterMode.FILL_OR_DROP
    return not fills or tuple(dn.start_index_map) == (0,)


# --- the evaluation -------------------------------------------------------------------


def _run(
    jaxpr: core.Jaxpr,
    consts: Sequence[Any],
    args: Sequence[Any],
    tables: dict[Any, int],
    on_read: Emit,
    emit: Emit,
) -> list[Any]:
    """``jaxpr`` at ``args``: row reads of ``tables`` by ``on_read``, ``jit`` equations
    holding a table inlined, everything else by ``emit`` (the order of :func:`_scan`)."""
    env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    tables = dict(tables)
    for eqn in jaxpr.eqns:
        invals = [_rewrite.read_atom(env, v) for v in eqn.invars]
        uses = _uses(eqn, tables)
        if not uses:
            outs = emit(eqn, invals)
        elif len(uses) == 1 and uses[0][0] == 0 and _is_row_read(eqn):
            outs = on_read(eqn, invals)
        elif eqn.primitive.name == "pvary":
            tables.update(_aliases(eqn, uses))
            outs = emit(eqn, invals)
        else:  # a jit holding a table (``find`` left no other use)
            inner = eqn.params["jaxpr"]
            sub = _inner_tables(eqn, uses)
            outs = _run(inner.jaxpr, inner.consts, invals, sub, on_read, emit)
        env.update(zip(eqn.outvars, outs, strict=True))
    return [_rewrite.read_atom(env, v) for v in jaxpr.outvars]


def _row_ids(eqn: core.JaxprEqn, invals: list[Any]) -> Any:
    """The row id of each row a read gathers, flattened in row-major order: clamped into
    the table where the read clamps (``dynamic_slice``, a gather in ``CLIP`` mode), as
    is the row it reads and the row ``jax.grad`` gives the gradient."""
    operand: Any = eqn.invars[0].aval
    rows = operand.shape[0]
    if eqn.primitive.name == "dynamic_slice":
        return jnp.clip(jnp.reshape(invals[1], (1,)), 0, rows - 1)
    position = eqn.params["dimension_numbers"].start_index_map.index(0)
    ids = jnp.reshape(invals[1][..., position], (-1,))
    return jnp.clip(ids, 0, rows - 1) if eqn.params["mode"] == lax.GatherScatterMode.CLIP else ids


def _batch_first(eqn: core.JaxprEqn) -> tuple[int, ...]:
    """A read's output axes reordered batch axes first, then the row's (offset) axes."""
    out: Any = eqn.outvars[0].aval
    ndim = out.ndim
    if eqn.primitive.name == "dynamic_slice":
        return tuple(range(ndim))
    offset = list(eqn.params["dimension_numbers"].offset_dims)
    return tuple([a for a in range(ndim) if a not in offset] + offset)
