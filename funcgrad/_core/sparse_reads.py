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
* such a read of *rows of tables* (a :data:`View`): a ``slice`` of rows (step 1, every
  column), the parts of a ``split`` along the rows, and a ``concatenate`` along the rows
  of such pieces of tables alone — a partitioned variable restored whole and cut back
  into its parts (``jnp.array_split(E, n)``), or shards concatenated for one gather.
  Each position reads a row of one table.  A position in another table's piece reads
  nothing of a table, nor does one past the rows in a gather that fills zeros there
  (``mode="fill", fill_value=0``, JAX's padded lookup): where the positions are known
  those rows are left out, as TensorFlow's ``dynamic_partition`` leaves them; traced,
  they are rows of zeros at id ``rows`` (one past the table), which ``to_dense`` and
  every optimizer drop.  A read of no ids (an empty batch, where JAX left the gather
  in the jaxpr) gives its table an ``IndexedSlices`` of no rows.

What it follows, as TensorFlow 1.x's control flow (``control_flow_v1``, what TF1
programs ran) gives ``IndexedSlices``:

* ``jit`` equations (``jnp.take`` is one) and ``checkpoint`` (``remat2``, re-emitted with
  its ``policy``) holding a table: their reads are the function's;
* ``scan`` (``lax.scan``, ``fori_loop`` with static bounds) taking a table as a
  constant — ``tf.while_loop``: one row per id per iteration (duplicates kept), then one
  row of zeros at id 0, the row TF1's ``IndexedSlices`` accumulator of a loop starts
  with (so a sparse rule touches row 0 with a zero gradient, as TF1 does);
* ``cond`` (``lax.cond`` / ``switch``) — ``tf.cond``: a branch that reads the table
  gives its rows when taken and every row of the table with zeros when not (TF1's
  ``Switch`` gradient); with static shapes, each branch pads the other branches'
  slots with zero rows at ids already touched (a row of the taken branch, or 0 where
  another branch's every-row slot touches all), which no sparse rule tells apart;
* inside ``shard_map``, the ``pvary`` that marks a replicated table as varying before a
  gather is the table still (its reads' perturbations vary as their outputs do, so no
  cotangent is summed across devices);
* a cast of the whole table to another floating dtype (``E.astype(jnp.bfloat16)[ids]``,
  flax's ``nn.Embed(dtype=jnp.bfloat16)``, Keras's mixed-precision reads) is the table
  still: TensorFlow's ``Cast`` gradient casts an ``IndexedSlices``' values back to the
  table's dtype and keeps it, and so does funcgrad.

Any other use of a table — a matmul, ``E.sum()``, a gather of columns (TensorFlow's
``tf.gather`` with ``axis=1`` is dense too), a static row ``E[3]``, a slice with a step
or of columns, a concatenation with an array that is no table, a cast to an
integer or complex dtype, a cast used any other way (a tied output layer), the table
as a scan's carry or sequence, a use inside ``while`` (which JAX does not
reverse-differentiate) / ``custom_jvp`` / ``custom_vjp``, or the table returned as an
output — makes that table's gradient dense, as TensorFlow sums an ``IndexedSlices``
with a dense gradient into a dense one.

How it differentiates: :func:`find` lists the parts of each gradient (reads and rows
of zeros); :meth:`SparseReads.evaluate` re-emits the jaxpr with each read's output ``y``
replaced by ``y + d`` for an extra input ``d`` (zeros of ``y``'s shape, stacked over the
iterations of the scans around it), and records each part's ids.  The caller
differentiates with respect to the ``d``s instead of the tables: the cotangent of ``d``
is the cotangent of the gather's output, so no table-sized gradient is ever built and
a step costs the batch, not the table.  A read whose output does not reach the loss
contributes no rows (as in TensorFlow, where its gather has no gradient path), nor do
the rows of zeros it alone brings.  Which reads reach it is read off the same
connectivity pass that finds the connected inputs: each read keeps its ``site`` (the
call equations holding it, then itself), so the two calls of one jitted lookup, which
hold one cached jaxpr, are told apart.

What it assumes: the number of ids is static (it is in every jaxpr).  Ids outside
``[0, V)`` cannot be checked inside ``jax.jit``; :func:`check_ids` raises for concrete
ones, and ``IndexedSlices.to_dense`` drops them, so none writes into another row.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from funcgrad._core import jax_internals as _jax
from funcgrad._core import rewrite as _rewrite
from funcgrad._core.connectivity import Site
from funcgrad._core.jax_internals import Kind
from funcgrad.indexed_slices import IndexedSlices

#: Re-emits one equation (the cut rewriter's, or a plain bind).
Emit = Callable[[_jax.Eqn, list[Any]], list[Any]]


@dataclasses.dataclass(frozen=True)
class Piece:
    """Rows ``[start, stop)`` of the table at input position ``table``, of ``rows`` rows."""

    table: int
    start: int
    stop: int
    rows: int


#: The rows a value of the jaxpr holds: pieces of tables, one after the other (a table
#: itself is one whole piece; a slice, a split and a concatenation along the rows make others).
View = tuple[Piece, ...]


def _tables_in(view: View) -> tuple[int, ...]:
    """The tables of ``view``'s pieces, each once, in order."""
    return tuple(dict.fromkeys(p.table for p in view))


@dataclasses.dataclass(frozen=True)
class Read:
    """One whole-row read: which rows of which tables, and the shape and dtype of what it
    reads."""

    view: View  # the rows its positions index
    drops: bool  # a read filled with zeros past its rows, which it does not read
    shape: tuple[int, ...]  # of the read's output, in one iteration
    dtype: Any
    order: tuple[int, ...]  # the output's axes, batch axes first (row-major ids)
    vma: tuple[str, ...]  # the mesh axes the output varies over, inside shard_map
    ids: int  # how many ids one iteration reads
    id_dtype: Any
    stack: tuple[int, ...] = ()  # the lengths of the scans around it, outermost first
    # the read's equation after the call equations holding it
    site: Site = dataclasses.field(default=(), compare=False, repr=False)

    @property
    def tables(self) -> tuple[int, ...]:
        return _tables_in(self.view)

    def zeros(self) -> Any:
        """The perturbation of this read's output, one per iteration: zeros that vary as
        the output does."""
        zeros = jnp.zeros(self.stack + self.shape, self.dtype)
        return lax.pcast(zeros, self.vma, to="varying") if self.vma else zeros


@dataclasses.dataclass(frozen=True)
class Zeros:
    """Rows of zeros that TensorFlow 1.x's control flow adds to a table's gradient: a
    ``while_loop``'s accumulator row (id 0), or, from a ``cond`` branch that reads the
    table and is not taken, every row.  Present while one of its ``owners`` (the part
    numbers of the reads that bring it) reaches the loss."""

    table: int
    rows: int  # 1 (a loop's row) or the table's length (a branch's rows)
    owners: tuple[int, ...]
    stack: tuple[int, ...] = ()

    @property
    def tables(self) -> tuple[int, ...]:
        return (self.table,)


#: One piece of a table's gradient, in evaluation order.
Part = Read | Zeros


@dataclasses.dataclass
class SparseReads:
    """The tables of a jaxpr read only through whole-row gathers, and the parts of their
    gradients (reads, and control flow's rows of zeros) in evaluation order."""

    closed: _jax.Closed
    tables: list[int]
    parts: list[Part]

    @property
    def reads(self) -> list[Read]:
        """The reads in order: one perturbation each."""
        return [p for p in self.parts if isinstance(p, Read)]

    def evaluate(
        self, args: Sequence[Any], deltas: Sequence[Any], emit: Emit
    ) -> tuple[list[Any], list[Any]]:
        """The jaxpr's outputs with ``deltas[k]`` added to read ``k``'s output, and the
        ids of each part; every other equation is re-emitted by ``emit``."""
        jaxpr = self.closed.jaxpr
        tables = _whole_tables(jaxpr, self.tables)
        return _run(jaxpr, self.closed.consts, list(args), tables, iter(deltas), emit)

    def slices(
        self, primals: Sequence[Any], ids: list[Any], cotangents: dict[int, Any]
    ) -> dict[int, IndexedSlices | None]:
        """One ``IndexedSlices`` per table from its reads' ``cotangents`` (by read number;
        a read left out does not reach the loss), ``None`` where no read does."""
        number = _read_numbers(self.parts)
        live = [
            number[k] in cotangents
            if isinstance(p, Read)
            else any(number[o] in cotangents for o in p.owners)
            for k, p in enumerate(self.parts)
        ]
        out: dict[int, IndexedSlices | None] = {}
        for t in self.tables:
            mine = [k for k, p in enumerate(self.parts) if t in p.tables and live[k]]
            if not any(isinstance(self.parts[k], Read) for k in mine):
                out[t] = None
                continue
            table = primals[t]
            rows = [self._rows(k, ids[k], cotangents.get(number[k]), t, table) for k in mine]
            values = [v for v, _ in rows]
            # lookups by ids of two dtypes
            dtype = functools.reduce(np.promote_types, [i.dtype for _, i in rows])
            indices = [i.astype(dtype) for _, i in rows]
            out[t] = IndexedSlices(
                jnp.concatenate(values) if len(values) > 1 else values[0],
                jnp.concatenate(indices) if len(indices) > 1 else indices[0],
                tuple(table.shape),
            )
        return out

    def _rows(self, k: int, ids: Any, cotangent: Any, t: int, table: Any) -> tuple[Any, Any]:
        """Part ``k``'s rows of table ``t``, ``(values, indices)``: its read's cotangent,
        iterations first, or zeros."""
        part, row = self.parts[k], tuple(table.shape[1:])
        positions = jnp.reshape(ids, (-1,))
        if isinstance(part, Zeros):
            return jnp.zeros((positions.shape[0], *row), table.dtype), positions
        s = len(part.stack)
        order = (*range(s), *(s + a for a in part.order))
        # a read of a cast table: TensorFlow's Cast gradient casts the values back
        values = jnp.reshape(jnp.transpose(cotangent, order), (-1, *row)).astype(table.dtype)
        whole = part.view == (Piece(t, 0, table.shape[0], table.shape[0]),)
        if whole and not part.drops:
            return values, positions
        return _own_rows(part, positions, values, t, whole)


def _table_rows(view: View, positions: Any, t: int) -> tuple[Any, Any]:
    """For positions of ``view``: the row of table ``t`` each indexes (the table's length
    where none), and whether it indexes one."""
    length = next(p.rows for p in view if p.table == t)
    rows = jnp.full(positions.shape, length, positions.dtype)
    own = jnp.zeros(positions.shape, bool)
    at = 0
    for p in view:
        if p.table == t:
            here = (positions >= at) & (positions < at + p.stop - p.start)
            rows = jnp.where(here, positions - at + p.start, rows)
            own |= here
        at += p.stop - p.start
    return rows, own


def _own_rows(read: Read, positions: Any, values: Any, t: int, whole: bool) -> tuple[Any, Any]:
    """The rows of a read of ``view`` that are table ``t``'s, ``(values, indices)``.

    A position that indexes another table's piece is none of ``t``'s, nor is one past the
    view's rows in a read that fills it with zeros: both read nothing of ``t``.  Where the
    positions are known (outside ``jax.jit``) those rows are left out, as TensorFlow's
    ``dynamic_partition`` leaves them; traced, they stay as rows of zeros at id
    ``rows`` (one past the table), which ``to_dense`` and every optimizer drop.  A
    position past the view in another read stays, at its own id in a whole table (id
    ``rows`` in a piece), for the check of ids outside the table.
    """
    rows, own = _table_rows(read.view, positions, t)
    length = sum(p.stop - p.start for p in read.view)
    inside = (positions >= 0) & (positions < length)
    keep = own | ~(inside | read.drops)
    indices = positions if whole else rows
    if not any(isinstance(x, jax.core.Tracer) for x in (positions, values)):
        mask = np.asarray(keep)
        return values[mask], indices[mask]
    own_rows = jnp.reshape(own, own.shape + (1,) * (values.ndim - 1))
    return jnp.where(own_rows, values, 0), indices


def _read_numbers(parts: Sequence[Part]) -> list[int]:
    """For each part, its read number (a ``Zeros`` gets the next read's)."""
    numbers, n = [], 0
    for p in parts:
        numbers.append(n)
        n += isinstance(p, Read)
    return numbers


def find(closed: _jax.Closed, candidates: Sequence[int]) -> SparseReads:
    """The ``candidates`` (input positions) that ``closed`` reads only through whole-row
    gathers, with the parts of those tables' gradients in evaluation order."""
    jaxpr = closed.jaxpr
    arrays = [t for t in candidates if getattr(jaxpr.invars[t].aval, "ndim", 0) >= 1]
    tables = _whole_tables(jaxpr, arrays)
    dense: set[int] = set()
    _search(jaxpr, tables, (), [], dense)
    sparse = {v: view for v, view in tables.items() if view[0].table not in dense}
    return SparseReads(closed, [view[0].table for view in sparse.values()], _parts(jaxpr, sparse))


def _whole_tables(jaxpr: _jax.Jaxpr, tables: Sequence[int]) -> dict[Any, View]:
    """The inputs of ``jaxpr`` at positions ``tables``, each holding its whole table."""
    avals: list[Any] = [jaxpr.invars[t].aval for t in tables]
    return {
        jaxpr.invars[t]: (Piece(t, 0, a.shape[0], a.shape[0]),)
        for t, a in zip(tables, avals, strict=True)
    }


def check_all_ids(caller: str, grads: Sequence[Any], names: Sequence[str]) -> None:
    """:func:`check_ids` for each ``IndexedSlices`` of ``grads``, named by ``names``."""
    for g, name in zip(grads, names, strict=True):
        if isinstance(g, IndexedSlices):
            check_ids(caller, name, g)


def check_ids(caller: str, name: str, slices: IndexedSlices) -> None:
    """Raise ``ValueError`` for a concrete id outside the table (nothing under a trace).

    Ids spread over the processes of a job (``jax.distributed``) are checked where they
    lie, by the job's devices, whose verdict every process reads: every process raises,
    or none; no process fetches another's ids."""
    indices, rows = slices.indices, slices.dense_shape[0]
    if isinstance(indices, jax.core.Tracer):
        return
    if isinstance(indices, jax.Array) and not indices.is_fully_addressable:
        outside = (indices < 0) | (indices >= rows)
        if not bool(jnp.any(outside)):
            return
        first = int(jnp.min(jnp.where(outside, indices, jnp.iinfo(indices.dtype).max)))
    else:
        ids = np.asarray(indices)
        bad = ids[(ids < 0) | (ids >= rows)]
        if not bad.size:
            return
        first = int(bad[0])
    raise ValueError(
        f"{caller}: id {first} gathers a row of {name}, a table of {rows} rows "
        f"(shape {slices.dense_shape}); JAX's gather would clamp or fill it silently "
        f"where TensorFlow raises - keep every id in [0, {rows})."
    )


# --- the analysis ---------------------------------------------------------------------


def _uses(eqn: _jax.Eqn, tables: dict[Any, View]) -> list[tuple[int, View]]:
    """``(position, view)`` for each input of ``eqn`` that holds rows of tables."""
    return [
        (k, tables[v]) for k, v in enumerate(eqn.invars) if isinstance(v, _jax.Var) and v in tables
    ]


def _inner(jaxpr: _jax.Jaxpr, uses: list[tuple[int, View]], skip: int = 0) -> dict[Any, View]:
    """The tables of a sub-jaxpr whose inputs are the equation's from position ``skip``."""
    return {jaxpr.invars[k - skip]: t for k, t in uses}


def _is_alias(eqn: _jax.Eqn) -> bool:
    """Whether ``eqn``'s outputs are its table inputs still: a ``pvary`` (``shard_map``
    marks a replicated table as varying before a gather with varying ids) or a cast
    between floating dtypes (TensorFlow's ``Cast`` gradient keeps an ``IndexedSlices``)."""
    name = eqn.primitive.name
    if name == "pvary":
        return True
    if name != "convert_element_type":
        return False
    source: Any = eqn.invars[0].aval
    return all(jnp.issubdtype(d, jnp.floating) for d in (source.dtype, eqn.params["new_dtype"]))


def _views(eqn: _jax.Eqn, uses: list[tuple[int, View]]) -> dict[Any, View] | None:
    """The outputs of ``eqn`` that hold rows of tables still, or ``None`` where it uses its
    table inputs otherwise: an alias (:func:`_is_alias`), a slice or a split of rows, or a
    concatenation of rows of tables alone (TensorFlow's partitioned variable)."""
    name = eqn.primitive.name
    if _is_alias(eqn):
        return {eqn.outvars[k]: view for k, view in uses}
    if name == "concatenate":
        if eqn.params["dimension"] != 0 or len(uses) != len(eqn.invars):
            return None
        return {eqn.outvars[0]: _merged([p for _, view in uses for p in view])}
    if name == "split" and eqn.params["axis"] == 0:
        ends = np.cumsum(eqn.params["sizes"]).tolist()
        starts = [0, *ends[:-1]]
        view = uses[0][1]
        return {v: _sliced(view, a, b) for v, a, b in zip(eqn.outvars, starts, ends, strict=True)}
    if name == "slice":
        operand: Any = eqn.invars[0].aval
        start, limit = eqn.params["start_indices"], eqn.params["limit_indices"]
        strides = eqn.params["strides"]
        rows_only = not any(start[1:]) and tuple(limit[1:]) == tuple(operand.shape[1:])
        if rows_only and (strides is None or set(strides) == {1}):
            return {eqn.outvars[0]: _sliced(uses[0][1], start[0], limit[0])}
    return None


def _sliced(view: View, start: int, stop: int) -> View:
    """Rows ``[start, stop)`` of ``view``."""
    out, at = [], 0
    for p in view:
        lo, hi = max(start - at, 0), min(stop - at, p.stop - p.start)
        if lo < hi:
            out.append(Piece(p.table, p.start + lo, p.start + hi, p.rows))
        at += p.stop - p.start
    return tuple(out)


def _merged(pieces: list[Piece]) -> View:
    """``pieces`` one after the other, neighbouring rows of one table joined."""
    out: list[Piece] = []
    for p in pieces:
        if out and out[-1].table == p.table and out[-1].stop == p.start:
            p = Piece(p.table, out[-1].start, p.stop, p.rows)
            out.pop()
        out.append(p)
    return tuple(out)


def _followed(eqn: _jax.Eqn, uses: list[tuple[int, View]]) -> bool:
    """Whether the reads inside ``eqn`` are found: a ``jit``, a ``checkpoint``, a ``cond``,
    or a ``scan`` that takes the tables as constants (not as a carry or a sequence)."""
    k = _jax.kind(eqn)
    if k is Kind.SCAN:
        return all(i < _jax.scan(eqn).n_consts for i, _ in uses)
    return k in (Kind.JIT, Kind.REMAT, Kind.COND)


def _parts(jaxpr: _jax.Jaxpr, tables: dict[Any, View]) -> list[Part]:
    """The parts of ``tables``' gradients in ``jaxpr`` (no table of which is dense)."""
    parts: list[Part] = []
    _search(jaxpr, tables, (), parts, set())
    return parts


def _search(
    jaxpr: _jax.Jaxpr,
    tables: dict[Any, View],
    site: Site,
    parts: list[Part],
    dense: set[int],
) -> None:
    """Append the parts of ``tables``' gradients in ``jaxpr`` (inside the call equations
    ``site``) to ``parts``; add to ``dense`` each table used any other way."""
    tables = dict(tables)
    for eqn in jaxpr.eqns:
        uses = _uses(eqn, tables)
        if not uses:
            continue
        views = None if _is_read(eqn, uses) else _views(eqn, uses)
        if _is_read(eqn, uses):
            parts.append(_read(eqn, uses[0][1], site))
        elif views is not None:
            tables.update(views)
        elif not _followed(eqn, uses):
            dense.update(t for _, view in uses for t in _tables_in(view))
        elif _jax.kind(eqn) is Kind.SCAN:
            start, body = len(parts), _jax.scan(eqn).body.jaxpr
            _search(body, _inner(body, uses), (*site, eqn), parts, dense)
            parts.extend(_zeros(eqn, uses, parts, start, site))
        elif _jax.kind(eqn) is Kind.COND:
            for branch in _jax.cond_branches(eqn):
                start = len(parts)
                _search(branch.jaxpr, _inner(branch.jaxpr, uses, 1), (*site, eqn), parts, dense)
                parts.extend(_zeros(eqn, uses, parts, start, site))
        else:
            inner = _jax.call(eqn).body.jaxpr
            _search(inner, _inner(inner, uses), (*site, eqn), parts, dense)
    for v in jaxpr.outvars:
        if isinstance(v, _jax.Var) and v in tables:
            dense.update(_tables_in(tables[v]))


def _scan_lengths(site: Site) -> tuple[int, ...]:
    """The lengths of the scans among the call equations ``site``, outermost first."""
    return tuple(_jax.scan(e).length for e in site if _jax.kind(e) is Kind.SCAN)


def _read(eqn: _jax.Eqn, view: View, site: Site) -> Read:
    out: Any = eqn.outvars[0].aval
    indices: Any = eqn.invars[1].aval
    vma = tuple(sorted(getattr(getattr(out, "manual_axis_type", None), "varying", ())))
    ids = 1 if eqn.primitive.name == "dynamic_slice" else math.prod(indices.shape[:-1])
    order = _batch_first(eqn)
    stack = _scan_lengths(site)
    drops = eqn.primitive.name == "gather" and _fills_zeros(eqn)
    return Read(
        view, drops, tuple(out.shape), out.dtype, order, vma, ids, indices.dtype, stack,
        (*site, eqn),
    )  # fmt: skip


def _zeros(
    eqn: _jax.Eqn,
    uses: list[tuple[int, View]],
    parts: list[Part],
    start: int,
    site: Site,
) -> list[Zeros]:
    """TensorFlow 1.x's rows of zeros for each table read in ``parts[start:]``, the
    reads of a ``scan``'s body (a ``while_loop``'s accumulator row) or of a ``cond``'s
    branch (the whole table, when the branch is not taken); ``eqn`` is inside the call
    equations ``site``."""
    out = []
    pieces = {p.table: p for _, view in uses for p in view}
    for t, piece in pieces.items():
        owners = tuple(
            j
            for j in range(start, len(parts))
            if isinstance(parts[j], Read) and t in parts[j].tables
        )
        if owners:
            rows = 1 if _jax.kind(eqn) is Kind.SCAN else piece.rows
            out.append(Zeros(t, rows, owners, _scan_lengths(site)))
    return out


def _is_read(eqn: _jax.Eqn, uses: list[tuple[int, View]]) -> bool:
    """Whether ``eqn`` reads whole rows of one view of tables (its operand 0) and uses no
    other."""
    return len(uses) == 1 and uses[0][0] == 0 and _is_row_read(eqn)


def _fills_zeros(eqn: _jax.Eqn) -> bool:
    """Whether a gather fills what lies past its operand's rows with zeros: it reads
    nothing there (``lax.gather(..., mode="fill", fill_value=0)``, JAX's padded lookup)."""
    fill = eqn.params["fill_value"]
    return (
        eqn.params["mode"] == lax.GatherScatterMode.FILL_OR_DROP and fill is not None and fill == 0
    )


def _is_row_read(eqn: _jax.Eqn) -> bool:
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
    jaxpr: _jax.Jaxpr,
    consts: Sequence[Any],
    args: Sequence[Any],
    tables: dict[Any, View],
    deltas: Iterator[Any],
    emit: Emit,
) -> tuple[list[Any], list[Any]]:
    """``jaxpr`` at ``args`` with the next of ``deltas`` added to each row read of
    ``tables``, and the ids of each part (the order of :func:`_search`); equations
    holding a table are followed, everything else is re-emitted by ``emit``."""
    env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    tables = dict(tables)
    ids: list[Any] = []
    for eqn in jaxpr.eqns:
        invals = [_rewrite.read_atom(env, v) for v in eqn.invars]
        uses = _uses(eqn, tables)
        views = None if not uses or _is_read(eqn, uses) else _views(eqn, uses)
        if not uses:
            outs = emit(eqn, invals)
        elif _is_read(eqn, uses):
            ids.append(_row_ids(eqn, invals))
            outs = [_jax.bind_equation(eqn, invals)[0] + next(deltas)]
        elif views is not None:
            tables.update(views)
            outs = emit(eqn, invals)
        else:  # ``find`` left no other use
            follow = _FOLLOW.get(_jax.kind(eqn), _run_call)
            outs, got = follow(eqn, invals, uses, deltas, emit)
            ids.extend(got)
        env.update(zip(eqn.outvars, outs, strict=True))
    return [_rewrite.read_atom(env, v) for v in jaxpr.outvars], ids


#: ``follow(eqn, invals, uses, deltas, emit) -> (outputs, ids of its parts)``.
Follow = Callable[
    [_jax.Eqn, list[Any], list[tuple[int, int]], Iterator[Any], Emit],
    tuple[list[Any], list[Any]],
]


def _own(deltas: Iterator[Any], parts: list[Part]) -> list[Any]:
    """The perturbations of the reads among ``parts``, taken from ``deltas``."""
    return [next(deltas) for p in parts if isinstance(p, Read)]


def _run_call(
    eqn: _jax.Eqn, invals: list[Any], uses: Any, deltas: Iterator[Any], emit: Emit
) -> tuple[list[Any], list[Any]]:
    """A ``jit``, inlined."""
    inner = _jax.call(eqn).body
    return _run(inner.jaxpr, inner.consts, invals, _inner(inner.jaxpr, uses), deltas, emit)


def _run_remat(
    eqn: _jax.Eqn, invals: list[Any], uses: Any, deltas: Iterator[Any], emit: Emit
) -> tuple[list[Any], list[Any]]:
    """A ``checkpoint``, again with its ``policy``: the reads' ids are outputs too."""
    call = _jax.call(eqn)
    inner = call.body
    tables = _inner(inner.jaxpr, uses)
    own = _own(deltas, _parts(inner.jaxpr, tables))

    def fun(invals: list[Any], own: list[Any]) -> tuple[list[Any], list[Any]]:
        return _run(inner.jaxpr, inner.consts, invals, tables, iter(own), emit)

    return call.staged(fun)(invals, own)


def _run_scan(
    eqn: _jax.Eqn, invals: list[Any], uses: Any, deltas: Iterator[Any], emit: Emit
) -> tuple[list[Any], list[Any]]:
    """A ``scan`` whose body reads tables: one perturbation and one set of ids per
    iteration (stacked), then each table's accumulator row (id 0)."""
    loop = _jax.scan(eqn)
    body = loop.body
    tables = _inner(body.jaxpr, uses)
    parts = _parts(body.jaxpr, tables)
    consts, init, xs = loop.split(invals)

    def step(carry: list[Any], x: tuple[list[Any], list[Any]]) -> tuple[list[Any], Any]:
        xs, own = x
        args = [*consts, *carry, *xs]
        outs, ids = _run(body.jaxpr, body.consts, args, tables, iter(own), emit)
        return outs[: loop.n_carry], (outs[loop.n_carry :], ids)

    carry, (ys, ids) = loop.run(step, init, (xs, _own(deltas, parts)))
    rows = [jnp.zeros((1,), jnp.int32) for _ in _zeros(eqn, uses, parts, 0, ())]
    return [*carry, *ys], [*ids, *rows]


def _run_cond(
    eqn: _jax.Eqn, invals: list[Any], uses: Any, deltas: Iterator[Any], emit: Emit
) -> tuple[list[Any], list[Any]]:
    """A ``cond`` whose branches read tables.  Every branch gives the ids of every
    branch's parts: its own; for another branch's reads, id 0 (their values are zero,
    and that branch's rows of zeros touch every row); for its own rows of zeros, a row
    its reads touch; for another branch's, every row."""
    branches = _jax.cond_branches(eqn)
    tables = [_inner(b.jaxpr, uses, 1) for b in branches]
    parts = [_parts(b.jaxpr, t) for b, t in zip(branches, tables, strict=True)]
    zeros = [_zeros(eqn, uses, ps, 0, ()) for ps in parts]
    own = [_own(deltas, ps) for ps in parts]

    def branch(b: int) -> Callable[..., tuple[list[Any], list[Any]]]:
        def fun(operands: list[Any], own: list[list[Any]]) -> tuple[list[Any], list[Any]]:
            closed = branches[b]
            outs, ids = _run(closed.jaxpr, closed.consts, operands, tables[b], iter(own[b]), emit)
            got: list[Any] = []
            for c, (ps, zs) in enumerate(zip(parts, zeros, strict=True)):
                if c == b:
                    got += ids + [jnp.full(_shape(z), _touched(ps, ids, z.table)) for z in zs]
                else:
                    got += [jnp.zeros(_shape(q), _id_dtype(q)) for q in ps]
                    got += [
                        jnp.broadcast_to(jnp.arange(z.rows, dtype=jnp.int32), _shape(z)) for z in zs
                    ]
            return outs, got

        return fun

    return lax.switch(invals[0], [branch(b) for b in range(len(branches))], invals[1:], own)


def _shape(part: Part) -> tuple[int, ...]:
    """The shape of a part's ids."""
    return (*part.stack, part.ids if isinstance(part, Read) else part.rows)


def _id_dtype(part: Part) -> Any:
    return part.id_dtype if isinstance(part, Read) else np.dtype(np.int32)


def _touched(parts: list[Part], ids: list[Any], table: int) -> Any:
    """An id of ``table`` that ``parts`` touch (their first), as int32; 0 when they
    read no row."""
    for p, i in zip(parts, ids, strict=True):
        if table not in p.tables or not i.size:
            continue
        flat = jnp.reshape(i, (-1,))
        if isinstance(p, Zeros):
            return flat[0].astype(jnp.int32)
        rows, own = _table_rows(p.view, flat, table)
        return jnp.where(jnp.any(own), rows[jnp.argmax(own)], 0).astype(jnp.int32)
    return jnp.zeros((), jnp.int32)


_FOLLOW: dict[Kind, Follow] = {Kind.REMAT: _run_remat, Kind.SCAN: _run_scan, Kind.COND: _run_cond}


def _row_ids(eqn: _jax.Eqn, invals: list[Any]) -> Any:
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


def _batch_first(eqn: _jax.Eqn) -> tuple[int, ...]:
    """A read's output axes reordered batch axes first, then the row's (offset) axes."""
    out: Any = eqn.outvars[0].aval
    ndim = out.ndim
    if eqn.primitive.name == "dynamic_slice":
        return tuple(range(ndim))
    offset = list(eqn.params["dimension_numbers"].offset_dims)
    return tuple([a for a in range(ndim) if a not in offset] + offset)
