"""Calling the user's loss function and differentiating it, for every ``fg.train`` step.

Design note
-----------
This is the one place that calls ``loss_fn``: ``Optimizer.compute_gradients`` and
``minimize`` and the scale helpers (``minimize_in_microbatches``,
``shard_map_minimize``) all come here.  It follows the conventions users bring:

* JAX's: ``loss_fn(params, *args, **kwargs)``; with ``has_aux=True`` it returns
  ``(loss, aux)`` and only ``loss`` is differentiated (``jax.value_and_grad``'s
  ``has_aux``); ``aux`` must hold arrays, as there.
* TensorFlow's: the gradient of a non-scalar loss is that of its sum
  (``tf.gradients``), weighted by ``grad_loss`` when given — TensorFlow's argument of
  that name, the loss's cotangent, of the loss's shape and dtype.

What it refuses: a loss that is a tuple, list, dict or any other container without
``has_aux=True``.  ``tf.gradients``' rule would sum every output, so the gradient of
``(loss, aux)`` would silently be that of ``loss + sum(aux)``; instead the error says
what came back and names ``has_aux=True``.

What it differentiates: the selected variables only (``funcgrad.train._variables``;
``var_list``).  Every other leaf — a function in an equinox module, an integer, a
variable left out by ``var_list`` — is put back into ``params`` as a constant, so it
never reaches the differentiation, and its gradient is ``None``.  ``None`` also comes
back for a selected variable the loss does not reach (``fg.value_and_gradients``' rule).

What ``compute_gradients`` gets: with ``indexed_slices``, a variable the loss reads only
through gathers of whole rows has an ``fg.IndexedSlices`` gradient, as ``tf.gradients``
gives (``funcgrad._core.sparse_reads``); a concrete id outside its table is an error that
names the variable.  The scale helpers stay dense.

An empty batch of ids: JAX folds a gather of no rows (``E[ids]``, ``jnp.take``) into a
constant, so the loss's jaxpr does not read the table at all, where TensorFlow's graph
keeps the gather and gives the table an empty ``IndexedSlices`` (with which Adam's sparse
rule still decays its slots).  So where a variable comes back unconnected and an
argument of the loss holds an array with no element, the loss is traced once more with
each such array given one element in its empty dimensions (:func:`_empty_reads`): a
variable that this batch of one reads only by whole rows that reach the loss gets an
empty ``IndexedSlices``.  A loss that does not run at that batch keeps its ``None``.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad._core import sparse_reads
from funcgrad._core.connectivity import connected_equations
from funcgrad._core.connectivity import is_differentiable
from funcgrad._core.differentiate import differentiate
from funcgrad._core.differentiate import trace
from funcgrad._core.taps import Frame
from funcgrad._core.taps import bound
from funcgrad._types import PyTree
from funcgrad._types import is_array
from funcgrad._types import non_arrays
from funcgrad._types import replace_at
from funcgrad.diagnostics import explain_unconnected
from funcgrad.diagnostics import format_unconnected
from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train import _var_list
from funcgrad.train._var_list import VarList
from funcgrad.train._variables import Flat
from funcgrad.train.names import variable_names

#: The fix named when a loss without ``has_aux`` returns a container.
HAS_AUX_FIX = (
    "if it returns (loss, aux), pass has_aux=True (only the loss is differentiated); "
    "otherwise return the loss alone (add several losses with +)"
)


class _Spec:
    """A leaf shown as its dtype and shape (``float32[3]``) in an error message."""

    def __init__(self, x: Any) -> None:
        self.text = f"{jnp.result_type(x)}{list(jnp.shape(x))}"

    def __repr__(self) -> str:
        return self.text


class LossCall(NamedTuple):
    """A loss function and how an ``fg.train`` method was asked to call and
    differentiate it (``*args``, ``**kwargs``, ``var_list``, ``grad_loss``, ``has_aux``)."""

    loss_fn: Callable[..., Any]
    args: Sequence[Any]
    kwargs: dict[str, Any]
    var_list: Any
    grad_loss: Any
    has_aux: bool
    #: ``compute_gradients`` asks for ``fg.IndexedSlices`` where ``tf.gradients`` gives them.
    indexed_slices: bool = False


def describe(value: Any) -> str:
    """``value`` for an error message: its type and structure, arrays as ``float32[3]``."""
    if value is None or is_array(value):
        return repr(value if value is None else _Spec(value))
    shown = jax.tree.map(lambda x: _Spec(x) if is_array(x) else x, value)
    return f"a {type(value).__name__} {shown!r}"


def _check_loss(caller: str, loss: Any, said: str, fix: str, grad_loss: Any) -> None:
    """Raise unless ``loss`` is one array (and ``grad_loss`` matches it); ``said`` names
    where the loss came from ("loss_fn returned")."""
    if loss is None:
        raise TypeError(
            f"{caller}: {said} None; return the loss from loss_fn (a missing return statement?)."
        )
    if not is_array(loss) and jax.tree_util.treedef_is_leaf(jax.tree.structure(loss)):
        raise TypeError(
            f"{caller}: {said} {describe(loss)}, not an array; return the loss as an array."
        )
    if not is_array(loss):
        raise ValueError(f"{caller}: {said} {describe(loss)}, not one loss array; {fix}.")
    if grad_loss is None:
        return
    problems = []
    if jnp.shape(grad_loss) != jnp.shape(loss):
        problems.append(f"grad_loss has shape {jnp.shape(grad_loss)}, the loss {jnp.shape(loss)}")
    dtype = getattr(grad_loss, "dtype", None)
    if dtype is not None and dtype != jnp.result_type(loss):
        problems.append(f"grad_loss has dtype {dtype}, the loss {jnp.result_type(loss)}")
    if problems:
        raise ValueError(
            f"{caller}: {'; '.join(problems)}; pass grad_loss with the loss's shape and "
            "dtype (TensorFlow's cotangent of the loss), or None for ones."
        )


def _checked_output(
    caller: str, out: Any, has_aux: bool, fix: str, grad_loss: Any
) -> tuple[Any, Any] | Any:
    """``loss_fn``'s output after the checks above: the loss, or the pair ``(loss, aux)``."""
    if not has_aux:
        _check_loss(caller, out, "loss_fn returned", fix, grad_loss)
        return out
    if not (isinstance(out, tuple | list) and len(out) == 2):
        raise TypeError(
            f"{caller}: has_aux=True, so loss_fn must return a pair (loss, aux); it "
            f"returned {describe(out)}; return (loss, aux), or drop has_aux."
        )
    loss, aux = out
    said = "the loss in loss_fn's (loss, aux) is"
    _check_loss(caller, loss, said, "put one loss array first", grad_loss)
    bad = non_arrays(aux, "aux")
    if bad:
        raise TypeError(
            f"{caller}: {'; '.join(bad)}; aux passes through the differentiation, so it "
            "must hold arrays only — return anything else outside the loss function."
        )
    return loss, aux


def _loss_of(
    caller: str,
    loss_fn: Callable[..., Any],
    flat: Flat,
    chosen: Sequence[int],
    call: tuple[Sequence[Any], dict[str, Any]],
    has_aux: bool,
    grad_loss: Any,
    fix: str,
) -> Callable[..., Any]:
    """``loss_fn`` as a function of the chosen variables (leaf indices ``chosen``), its
    output checked; ``call`` holds the further positional and keyword arguments."""
    args, kwargs = call

    def loss_of(*values: Any) -> Any:
        params = jax.tree.unflatten(flat.treedef, replace_at(flat.leaves, chosen, values))
        return _checked_output(caller, loss_fn(params, *args, **kwargs), has_aux, fix, grad_loss)

    return loss_of


def value_and_grads(
    caller: str,
    loss_fn: Callable[..., Any],
    flat: Flat,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    selected: Sequence[bool],
    *,
    has_aux: bool = False,
    grad_loss: Any = None,
    fix: str = HAS_AUX_FIX,
    indexed_slices: bool = False,
) -> tuple[Any, list[Any], Callable[[], str]]:
    """``loss_fn(params, *args, **kwargs)`` and one gradient per variable of ``flat``.

    ``selected`` flags the variables to differentiate (``var_list``); the others get
    ``None``.  Returns ``(loss, grads, why)`` or, with ``has_aux``,
    ``((loss, aux), grads, why)``; ``why()`` says where the paths from each selected
    variable to the loss are cut, as one line (``fg.format_unconnected``), for
    TensorFlow's "No gradients provided" error — traced only if called.  ``fix`` is the
    next step named when the loss is a container.  With ``indexed_slices``, a variable
    read only through gathers of whole rows gets an ``fg.IndexedSlices`` (as
    ``tf.gradients`` gives), and a concrete id outside its table is an error naming it.
    """
    chosen = [i for i, s in zip(flat.at, selected, strict=True) if s]
    values = [flat.leaves[i] for i in chosen]
    args_kwargs = (args, kwargs)
    loss_of = _loss_of(caller, loss_fn, flat, chosen, args_kwargs, has_aux, grad_loss, fix)
    leaves = [jnp.asarray(v) for v in values]
    wrt = [is_differentiable(v.dtype) for v in leaves]
    # Taps in loss_fn belong to this call, as inside fg.value_and_gradients.
    fun_tree = jax.tree.structure(tuple(leaves))
    fun = bound(loss_of, fun_tree, Frame(caller))
    result = differentiate(caller, fun, leaves, wrt, grad_loss, has_aux, indexed_slices)
    out = (result.ys, result.aux) if has_aux else result.ys
    grads = result.grads
    names = [n for n, s in zip(variable_names(flat.params), selected, strict=True) if s]
    if indexed_slices:
        unconnected = [j for j, g in enumerate(grads) if g is None and wrt[j] and leaves[j].ndim]
        if unconnected and any(_is_empty(x) for x in jax.tree.leaves(args_kwargs)):
            padded = jax.tree.map(_one_element, args_kwargs)
            probe = _loss_of(caller, loss_fn, flat, chosen, padded, has_aux, None, fix)
            probe_fun = bound(probe, fun_tree, Frame(caller))
            empty = _empty_reads(caller, probe_fun, leaves, unconnected, has_aux)
            grads = [empty.get(j, g) for j, g in enumerate(grads)]
        sparse_reads.check_all_ids(caller, grads, names)

    def why() -> str:
        loss_only = (lambda *v: loss_of(*v)[0]) if has_aux else loss_of
        explained = explain_unconnected(loss_only, values, grad_ys=grad_loss)
        return format_unconnected(explained, names)

    it = iter(grads)
    return out, [next(it) if s else None for s in selected], why


def _is_empty(x: Any) -> bool:
    """Whether ``x`` is an array of a NumPy dtype with no element (an empty batch)."""
    return is_array(x) and isinstance(jnp.result_type(x), np.dtype) and 0 in jnp.shape(x)


def _one_element(x: Any) -> Any:
    """``x`` given one element (zero) in each empty dimension, if it is empty."""
    return jnp.zeros([d or 1 for d in jnp.shape(x)], jnp.result_type(x)) if _is_empty(x) else x


def _empty_reads(
    caller: str,
    fun: Callable[..., Any],
    leaves: list[jax.Array],
    candidates: list[int],
    has_aux: bool,
) -> dict[int, IndexedSlices]:
    """An empty ``fg.IndexedSlices`` for each of ``leaves[candidates]`` that ``fun`` (the
    loss at a batch of one) reads only by whole rows reaching the loss; none if it does
    not run."""
    try:
        traced = trace(caller, fun, leaves, None, has_aux)
    except Exception:  # the loss does not run at a batch of one: nothing to learn from it
        return {}
    reach, _ = connected_equations(traced.closed.jaxpr, traced.outputs)
    tables = [j for j in candidates if reach[j]]
    found = sparse_reads.find(traced.closed, tables)
    out = {}
    for t in found.tables:
        ids = next(r.id_dtype for r in found.reads if t in r.tables)
        x = leaves[t]
        out[t] = IndexedSlices(jnp.zeros((0, *x.shape[1:]), x.dtype), jnp.zeros(0, ids), x.shape)
    return out


#: The fix named by the scale helpers, which take no ``has_aux``.
_NO_AUX_FIX = (
    "this helper takes no has_aux: pass a loss function that returns the loss alone, "
    "e.g. lambda params, *batch: loss_fn(params, *batch)[0]"
)


def loss_and_grads(
    caller: str,
    loss_fn: Callable[..., Any],
    params: PyTree,
    batch: Sequence[Any],
    var_list: VarList,
) -> tuple[jax.Array, list[Any]]:
    """``loss_fn(params, *batch)`` and one gradient per variable, as the scale helpers
    need them: ``None`` where ``var_list`` leaves a variable out or the loss does not
    reach it."""
    flat = Flat(params)
    selected = _var_list.select(caller, params, var_list)
    loss, grads, _ = value_and_grads(caller, loss_fn, flat, batch, {}, selected, fix=_NO_AUX_FIX)
    return loss, grads


def grads_and_vars(grads: Sequence[Any], params: PyTree) -> list[tuple[Any, Any]]:
    """``(gradient, variable)`` pairs, one per variable of ``params``, ``None`` kept."""
    return list(zip(grads, Flat(params).variables, strict=True))
