"""Which variable each ``(gradient, variable)`` pair of ``apply_gradients`` belongs to.

Design note
-----------
TensorFlow's ``apply_gradients`` takes any pairs — a subset, in any order, such as
``[(g, v) for g, v in gvs if g is not None]`` — and each pair finds its variable
because ``v`` *is* the variable object.  Here the variable in a pair is the value of a
leaf of ``state.params``, and values get copied on the way: ``jax.jit`` returns new
arrays, ``np.asarray`` makes NumPy copies, pairs passed to a jitted function become new
tracers, and one array object may sit at two leaves (``{"a": z, "b": z}``).  A copy is
not the variable, and two variables may hold equal values, so a pair never finds its
variable by value.  It finds it by what cannot be copied wrongly:

1. **By the pair's own name.**  ``compute_gradients`` returns each pair as a
   :class:`Pair`: a 2-tuple that also carries its variable's place (its index in
   flatten order, its name, the number of variables) as pytree metadata, so the place
   survives ``jax.jit`` (in and out), ``jax.tree.map`` and ``jax.device_get``.  Such a
   pair finds its variable in any subset and any order.  Its variable, when it is an
   array of ``state.params``, must be that variable; when it is a concrete copy it must
   hold that variable's values (a pair of an older state holds others).
2. **By identity**: a plain pair (rebuilt, ``(clip(g), v)``) whose variable is exactly
   one variable object of ``state.params`` — any subset, any order.  This is what eager
   code and a step that computes and applies inside one ``jax.jit`` give.
3. **By position, where shapes and dtypes prove it**: any other plain pair — variable
   ``None``, a copy, a NumPy array, a tracer of another ``jit`` argument, an array
   object at several leaves — only in the full list, one pair per variable in
   ``compute_gradients``' order, its variable of its position's shape and dtype (and,
   when both are concrete, values).  A copy placed so whose shape and dtype another
   pair placed by position shares (its variable a copy or ``None``) could have been
   swapped unnoticed, so both are refused; ``None`` variables alone state the order.
4. Anything else is an error that names each pair: one that matches no variable,
   several, a variable another pair already named, or a place it cannot be checked at.
   Ambiguity is never resolved by guessing.

Before all this, a list whose pairs hold a variable of ``state.params`` where the
gradient goes, and none where the variable goes, is refused: TensorFlow's roles swapped,
``zip(variables, grads)`` (TensorFlow raises "Trying to update a Tensor").  A pair that
holds variables in both places, ``(w, w)``, names its variable (a decay step).  The
errors are short and name the docs section that states these rules (``docs/train.md``,
"Filtered and reordered pairs").

``None`` gradients are skipped; when no pair carries a gradient, TensorFlow's
``"No gradients provided for any variable"`` error is raised — built by
:func:`no_gradients`, the one place that message is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from funcgrad._types import is_array
from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train._loss_and_grads import describe

_PAIRS_FIX = (
    "pass the list compute_gradients returns, or any subset of its pairs, e.g. "
    "[(g, v) for g, v in gvs if g is not None]"
)
_RULES = 'see "Filtered and reordered pairs" in docs/train.md'

#: ``(index, name, count)``: a variable's index in flatten order, its name, and the
#: number of variables of the parameters it belongs to.
Where = tuple[int, str, int]


class Pair(tuple[Any, Any]):
    """A ``(gradient, variable)`` pair as ``compute_gradients`` returns it.

    A tuple of two — it unpacks, indexes, compares and prints as one — that also knows
    its variable's place, :data:`Where`, as its pytree metadata: ``jax.jit``,
    ``jax.tree.map`` and ``jax.device_get`` keep it.
    """

    where: Where

    def __new__(cls, gradient: Any, variable: Any, where: Where) -> Pair:
        pair = super().__new__(cls, (gradient, variable))
        pair.where = where
        return pair

    def __getnewargs__(self) -> tuple[Any, Any, Where]:
        return (self[0], self[1], self.where)


def _unflatten(where: Where, children: Iterable[Any]) -> Pair:
    gradient, variable = children
    return Pair(gradient, variable, where)


jax.tree_util.register_pytree_with_keys(
    Pair,
    lambda p: (tuple(zip(map(jax.tree_util.SequenceKey, (0, 1)), p, strict=True)), p.where),
    _unflatten,
    lambda p: (tuple(p), p.where),
)


def named(
    grads: Sequence[Any], variables: Sequence[Any], names: Sequence[str]
) -> list[tuple[Any, Any]]:
    """``compute_gradients``' pairs: one :class:`Pair` per variable, in order."""
    n = len(variables)
    return [
        Pair(g, v, (i, name, n))
        for i, (g, v, name) in enumerate(zip(grads, variables, names, strict=True))
    ]


def no_gradients(caller: str, names: Sequence[str], why: str = "") -> ValueError:
    """TensorFlow's "No gradients provided for any variable" error, for ``names``.

    ``why`` is ``fg.format_unconnected``'s line (each variable and where its paths are
    cut), given where the loss function is at hand; without it the message says how to
    get one.
    """
    detail = (
        f": {why}"
        if why
        else " (fg.explain_unconnected(loss_fn, params) names the line that cuts each path)"
    )
    return ValueError(
        f"{caller}: No gradients provided for any variable, check your loss for ops that "
        f"do not support gradients, between variables {list(names)} and the loss{detail}; "
        "make the loss depend on at least one of them."
    )


def _as_pairs(caller: str, grads_and_vars: Any) -> list[Any]:
    """``grads_and_vars`` as a list of 2-tuples, or the error an optax habit gets.

    An iterator of pairs -- TensorFlow's ``zip(grads, variables)`` -- is read into a list.
    """
    if isinstance(grads_and_vars, Iterator):
        grads_and_vars = list(grads_and_vars)
    if not isinstance(grads_and_vars, list | tuple):
        raise TypeError(
            f"{caller}: grads_and_vars is {describe(grads_and_vars)}, not a list of "
            "(gradient, variable) pairs (a gradient pytree is what optax's update takes); "
            "compute the pairs with gvs = opt.compute_gradients(loss_fn, state.params, "
            "*args), then state = opt.apply_gradients(gvs, state)."
        )
    pairs = list(grads_and_vars)
    if not pairs:
        raise ValueError(f"{caller}: No variables provided: grads_and_vars is empty; {_PAIRS_FIX}.")
    bad = [k for k, p in enumerate(pairs) if not (isinstance(p, tuple | list) and len(p) == 2)]
    if bad and all(p is None or is_array(p) for p in pairs):
        raise TypeError(
            f"{caller}: grads_and_vars is a list of {len(pairs)} gradients, not (gradient, "
            "variable) pairs; pair each gradient with its variable — the variables of "
            "compute_gradients' pairs, or None in a full list in compute_gradients' order: "
            "[(g, None) for g in grads]."
        )
    if bad:
        raise TypeError(
            f"{caller}: grads_and_vars items {bad} are not (gradient, variable) pairs "
            f"(items {[describe(pairs[k]) for k in bad]}); {_PAIRS_FIX}."
        )
    return pairs


def match(
    caller: str, grads_and_vars: Any, variables: Sequence[Any], names: Sequence[str]
) -> list[Any]:
    """One gradient per variable (``None`` where no pair gives one), matched by the
    rules above, checked for shape and cast to the variable's dtype."""
    pairs = _as_pairs(caller, grads_and_vars)
    objects: dict[int, list[int]] = {}
    for i, v in enumerate(variables):
        objects.setdefault(id(v), []).append(i)
    _refuse_swapped(caller, pairs, objects, names)
    owner: list[int | None] = [None] * len(variables)
    by_position: list[int] = []
    problems: list[str] = []
    for k, pair in enumerate(pairs):
        found = [] if pair[1] is None else objects.get(id(pair[1]), [])
        j, problem = _place(k, pair, found, variables, names)
        if j is None and not problem:
            j, problem = _position(k, pair, found, len(pairs), variables, names)
            by_position += [] if problem else [k]
        if problem or j is None:
            problems.append(problem)
        elif owner[j] is not None:
            problems.append(
                f"pairs {owner[j]} and {k} both name variable {names[j]!r} (sum their "
                "gradients into one pair)"
            )
        else:
            owner[j] = k
    problems += _swappable(pairs, by_position, variables, names)
    if problems:
        traced = any(isinstance(p[1], jax.core.Tracer) for p in pairs)
        where = " (under jax.jit, filter them inside the jitted function)" if traced else ""
        raise ValueError(
            f"{caller}: {len(pairs)} pairs for {len(variables)} variables {list(names)} match "
            f"no variable one-to-one: {'; '.join(problems)}; pass the pairs "
            f"compute_gradients returned for state.params{where}, any subset in any order, "
            f"or {_RULES}."
        )
    _check_matched(caller, pairs, owner, variables, names)
    return [
        None if k is None or pairs[k][0] is None else _cast(pairs[k][0], variables[j])
        for j, k in enumerate(owner)
    ]


def _refuse_swapped(
    caller: str, pairs: list[Any], objects: dict[int, list[int]], names: Sequence[str]
) -> None:
    """Raise if pairs hold a variable of ``state.params`` where the gradient goes and
    none where the variable goes: ``zip(variables, grads)``."""
    swapped = {
        k: names[objects[id(p[0])][0]]
        for k, p in enumerate(pairs)
        if not isinstance(p, Pair) and id(p[0]) in objects and id(p[1]) not in objects
    }
    if swapped:
        raise ValueError(
            f"{caller}: pairs {list(swapped)} hold variables {list(swapped.values())} of "
            "state.params where the gradient goes; write the pairs gradient first: "
            "zip(grads, variables)."
        )


def _place(
    k: int, pair: Any, found: list[int], variables: Sequence[Any], names: Sequence[str]
) -> tuple[int | None, str]:
    """The variable pair ``k`` names by its own name or identity, or a problem;
    ``(None, "")`` when only its position can place it."""
    if not isinstance(pair, Pair):
        return (found[0], "") if len(found) == 1 else (None, "")
    index, name, count = pair.where
    if count != len(variables) or names[index] != name:
        return None, (
            f"pair {k} belongs to variable {name!r} (number {index} of {count}), which is "
            "not a variable of state.params"
        )
    variable, own = pair[1], variables[index]
    if found and index not in found:
        return None, f"pair {k} belongs to variable {name!r} but holds {names[found[0]]!r}"
    if variable is not None and not found and not _holds(variable, own):
        return None, (
            f"pair {k}'s variable ({describe(variable)}) is not an array of state.params: "
            f"it belongs to variable {name!r} but does not hold its values (a pair of "
            "another state?)"
        )
    return index, ""


def _holds(copy: Any, variable: Any) -> bool:
    """Whether ``copy`` has ``variable``'s shape and dtype, and its values where both
    are concrete (a tracer has none to compare)."""
    if jnp.shape(copy) != jnp.shape(variable) or jnp.result_type(copy) != jnp.result_type(variable):
        return False
    if isinstance(copy, jax.core.Tracer) or isinstance(variable, jax.core.Tracer):
        return True
    return bool(jnp.array_equal(copy, variable, equal_nan=True))


def _cast(gradient: Any, variable: Any) -> Any:
    """``gradient`` in ``variable``'s dtype; an ``IndexedSlices`` stays one (its values cast)."""
    dtype = jnp.result_type(variable)
    if isinstance(gradient, IndexedSlices):
        return IndexedSlices(gradient.values.astype(dtype), gradient.indices, gradient.dense_shape)
    return jnp.asarray(gradient, dtype)


def _position(
    k: int,
    pair: Any,
    found: list[int],
    n_pairs: int,
    variables: Sequence[Any],
    names: Sequence[str],
) -> tuple[int | None, str]:
    """Place pair ``k`` at its own position, where the full list allows it."""
    if len(found) > 1 and (n_pairs != len(variables) or k not in found):
        return None, (
            f"pair {k}'s variable is the same array object as variables "
            f"{[names[j] for j in found]}, so it could be any of them"
        )
    if n_pairs != len(variables) and pair[1] is None:
        return None, f"pair {k}'s variable is None, which places a pair only in the full list"
    if n_pairs != len(variables):
        return None, f"pair {k}'s variable ({describe(pair[1])}) is not an array of state.params"
    if pair[1] is not None and not _holds(pair[1], variables[k]):
        swapped = is_array(pair[0]) and _holds(pair[0], variables[k])
        return None, (
            f"pair {k}'s variable ({describe(pair[1])}) is not a copy of {names[k]!r} "
            f"({describe(variables[k])}), the variable at its position"
            f"{' but its gradient is: write zip(grads, variables)' if swapped else ''}"
        )
    return k, ""


def _swappable(
    pairs: list[Any], by_position: list[int], variables: Sequence[Any], names: Sequence[str]
) -> list[str]:
    """Pairs placed by position whose variables could have been swapped unnoticed:
    variables of one shape and dtype, one of them a copy (``None`` alone states the
    order)."""
    kinds: dict[tuple[tuple[int, ...], Any], list[int]] = {}
    for k in by_position:
        kinds.setdefault((jnp.shape(variables[k]), jnp.result_type(variables[k])), []).append(k)
    return [
        f"pairs {ks} are placed by position only (their variables are not the arrays of "
        f"state.params, nor carry a name), and variables {[names[k] for k in ks]} all are "
        f"{jnp.dtype(dtype).name}{list(shape)}, so a reordered list would go unnoticed"
        for (shape, dtype), ks in kinds.items()
        if len(ks) > 1 and any(pairs[k][1] is not None for k in ks)
    ]


def _check_matched(
    caller: str,
    pairs: list[Any],
    owner: list[int | None],
    variables: Sequence[Any],
    names: Sequence[str],
) -> None:
    """Raise if a matched pair's gradient is not of its variable's shape (its variable
    is, once matched), or if a gradient cannot be cast to its variable's dtype without
    losing its meaning (a boolean gradient, or a complex one for a real variable)."""
    matched = [(names[j], variables[j], pairs[k]) for j, k in enumerate(owner) if k is not None]
    shapes = [
        f"the gradient of {name!r} has shape {jnp.shape(g)}, the variable {jnp.shape(variable)}"
        for name, variable, (g, _) in matched
        if g is not None and jnp.shape(g) != jnp.shape(variable)
    ]
    if shapes:
        raise ValueError(
            f"{caller}: {'; '.join(shapes)}; keep each gradient in its variable's shape, or "
            f"pass the pairs compute_gradients returned (any subset, any order)."
        )
    dtypes = [
        f"the gradient of {name!r} is {jnp.result_type(g).name}, the variable "
        f"{jnp.result_type(variable).name}"
        for name, variable, (g, _) in matched
        if g is not None and _lossy(jnp.result_type(g), jnp.result_type(variable))
    ]
    if dtypes:
        raise TypeError(
            f"{caller}: {'; '.join(dtypes)}; a cast would drop the imaginary part or "
            "make True a 1.0, so pass a floating-point gradient — jnp.real(g) for the real "
            "part of a complex one, g.astype(jnp.float32) for a mask meant as 0 and 1."
        )


def _lossy(have: Any, want: Any) -> bool:
    """Whether casting a gradient of dtype ``have`` to ``want`` loses its meaning."""
    complex_ = jnp.issubdtype(have, jnp.complexfloating)
    return bool(have == jnp.bool_ or (complex_ and not jnp.issubdtype(want, jnp.complexfloating)))
