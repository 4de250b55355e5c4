"""Applying an ``fg.IndexedSlices`` gradient to the rows it touches — private.

Design note
-----------
What it follows: TensorFlow 1.x's ``Optimizer.apply_gradients`` for an ``IndexedSlices``
gradient.  ``_apply_sparse_duplicate_indices`` sums the rows of duplicate ids first
(``_deduplicate_indexed_slices``); the optimizer's ``_apply_sparse`` (its
``SparseApply*`` kernel) then updates the variable and its slots at those rows; state
that is not a slot (Adam's ``beta1_power``, a schedule's count) advances once per step,
in ``_finish``.

How: :func:`apply` splits one step's variables in two.  Those with a dense gradient go
through the optimizer's optax ``update`` as before, with every sparse variable made a
*hole* (``funcgrad.train._variables``), so no table-sized zero gradient is built and the
sparse variables' slots are not touched; non-slot state advances there, once.  The slots
of each sparse variable are cut out of the optax state leaf by leaf — :func:`_owners`
finds which variable each state leaf belongs to with
``optax.tree_utils.tree_map_params`` — updated by the optimizer's sparse rule
(the optimizer's ``_apply_sparse``, which reads them by slot name) and put back in
place.

Duplicates: a sparse rule gets the ``IndexedSlices`` as it is, as TF's
``_apply_sparse_duplicate_indices`` does.  Most rules sum duplicates first, as TF's
default does: :func:`sum_duplicates` sums them with a ``jnp.unique`` of static size (the
number of ids), so the step compiles once for a batch shape.  GradientDescent's rule
scatters them as they are (:func:`in_table`), as TF's does.  Padding slots, and every
id outside ``[0, rows)``, carry the id ``rows``: gathering reads a clamped row (finite
values, never used) and scattering with ``mode="drop"`` writes nothing.  So an
id outside the table never writes into another row (JAX's own indexing wraps a
negative id and clamps a large one); outside ``jax.jit`` such an id is an error first.

What it assumes: the optax state's slot trees have the parameters' structure (true of
every optax transformation), and a sparse rule knows which of a variable's state leaves
is which slot from where they are in the state's flatten order (``TF1Optimizer`` reads
it off the paths it declares for its slots).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train._variables import Flat
from funcgrad.train.names import variable_names


class Rows(NamedTuple):
    """The rows of an ``IndexedSlices`` gradient: one row of ``values`` per id of
    ``indices``; padding and out-of-range ids are ``rows``, the table's length.  From
    :func:`sum_duplicates`, the ids are unique and sorted."""

    values: jax.Array
    indices: jax.Array


#: The sparse rule of one variable: ``(w, slots, gradient, name) -> [new w, *new slots]``;
#: ``name`` is the variable's (for a rule that reads it, as TF's ``var.op.name``).
LeafRule = Callable[[jax.Array, list[jax.Array], IndexedSlices, str], list[jax.Array]]
#: An optimizer's sparse rule: ``(its optax state, global_step, step options) ->
#: LeafRule``, the state and step read before the step (the learning rate, Adam's beta
#: powers); the options are what the optimizer read of every variable for this step.
SparseRule = Callable[[Any, jax.Array, Any], LeafRule]
#: The dense step of ``Optimizer``: ``(flat, trained, grads, slots, global_step, step
#: options) -> (new variables, new slots)``.
DenseStep = Callable[[Flat, list[bool], list[Any], Any, jax.Array, Any], tuple[list[Any], Any]]


def in_table(slices: IndexedSlices) -> Rows:
    """``slices``' rows as they are, duplicates kept; an id outside the table is ``rows``."""
    rows = slices.dense_shape[0]
    ids, values = (_replicated(jnp.asarray(x)) for x in (slices.indices, slices.values))
    return Rows(values, jnp.where((ids >= 0) & (ids < rows), ids, rows).astype(jnp.int32))


def sum_duplicates(slices: IndexedSlices) -> Rows:
    """``slices`` with the values of equal ids summed, in a static shape (TF's dedup)."""
    rows = slices.dense_shape[0]
    values, ids = in_table(slices)
    n = ids.shape[0]
    if n == 0:
        return Rows(values, ids)
    unique, inverse = jnp.unique(ids, size=n, fill_value=rows, return_inverse=True)
    values = jax.ops.segment_sum(values, inverse.reshape(n), num_segments=n)
    return Rows(values, unique)


def _replicated(x: jax.Array) -> jax.Array:
    """``x`` whole on every device where its type shards it (a data-parallel batch's
    ids, under explicit sharding): ``jnp.unique`` sorts along the ids' axis."""
    sharding = jax.typeof(x).sharding
    if any(axis is not None for axis in sharding.spec):
        whole = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec())
        return jax.sharding.reshard(x, whole)
    return x


def gather(table: jax.Array, rows: Rows) -> jax.Array:
    """The rows of ``table`` at ``rows.indices`` (padding reads a clamped row)."""
    return table.at[rows.indices].get(mode="clip", indices_are_sorted=True)


def scatter(table: jax.Array, rows: Rows, new: jax.Array) -> jax.Array:
    """``table`` with the rows at ``rows.indices`` set to ``new``; padding writes nothing."""
    return table.at[rows.indices].set(new.astype(table.dtype), mode="drop", indices_are_sorted=True)


def _owners(
    tx: optax.GradientTransformation, flat: Flat, trained: list[bool], slots: Any
) -> list[int]:
    """For each leaf of ``slots``: the index of the variable it is a slot of, or -1."""
    index = flat.like_holes(trained, [j for j, t in enumerate(trained) if t])
    owners = optax.tree_utils.tree_map_params(
        tx,
        lambda _, j: j,
        slots,
        index,
        transform_non_params=lambda node: jax.tree.map(lambda _: -1, node),
    )
    return list(jax.tree.leaves(owners))


def apply(
    tx: optax.GradientTransformation,
    rule: SparseRule,
    dense_step: DenseStep,
    init_structure: Callable[[list[bool]], Any],
    flat: Flat,
    trained: list[bool],
    grads: Sequence[Any],
    slots: Any,
    global_step: jax.Array,
    step_options: Any,
) -> tuple[list[Any], Any]:
    """One step: dense gradients through ``tx``, ``IndexedSlices`` ones by ``rule``.

    ``init_structure(mask)`` is the tree structure of ``tx.init`` over the variables
    ``mask`` selects.  Returns the new variables (one per variable) and the new optax state.
    """
    sparse = [t and isinstance(g, IndexedSlices) for g, t in zip(grads, trained, strict=True)]
    owners = _owners(tx, flat, trained, slots)
    leaves, treedef = jax.tree.flatten(slots)
    dense = [t and not s for t, s in zip(trained, sparse, strict=True)]
    dense_def = init_structure(dense)
    kept = [x for x, o in zip(leaves, owners, strict=True) if o < 0 or not sparse[o]]
    new, dense_slots = dense_step(
        flat,
        dense,
        [None if s else g for g, s in zip(grads, sparse, strict=True)],
        jax.tree.unflatten(dense_def, kept),
        global_step,
        step_options,
    )
    leaf_rule = rule(slots, global_step, step_options)
    names = variable_names(flat.params)
    updated = {}
    for j in (j for j, s in enumerate(sparse) if s):
        mine = [x for x, o in zip(leaves, owners, strict=True) if o == j]
        out = leaf_rule(flat.variables[j], mine, grads[j], names[j])
        new[j] = out[0]
        updated[j] = iter(out[1:])
    rest = iter(jax.tree.leaves(dense_slots))
    merged = [next(updated[o]) if o >= 0 and sparse[o] else next(rest) for o in owners]
    return new, jax.tree.unflatten(treedef, merged)
