"""The differentiation core behind ``fg.gradients``, ``fg.hessians`` and the gradient functions.

Design note
-----------
funcgrad differentiates a *function* rather than a graph: ``gradients(f, xs)`` is
TensorFlow's ``tf.gradients(f(xs), xs)``.  :func:`differentiate` traces the function
once to a jaxpr; ``_connectivity`` decides from that jaxpr which inputs reach the
outputs through a differentiable path; the same jaxpr is then evaluated under
``jax.vjp`` with only those inputs as variables, and the backward pass runs through
``_backward``.  Equations that ``_connectivity`` declares not differentiable (a
``py_func`` without ``grad``) are re-emitted with their inputs held constant
(``_rewrite``), so no cotangent reaches their raising backward pass.  Everything
happens at trace time, so it all works, unchanged, inside ``jax.jit`` and ``jax.vmap``.

The rest is the vocabulary every entry point shares: the ``xs`` calling convention
(:func:`flatten_inputs`), ``unconnected_gradients`` (:func:`unconnected_mode`,
:func:`fill`), and the one check of a gradient function's result against the inputs
it differentiates (:func:`input_cotangents`), used by ``custom_gradient``, registered
gradients and ``py_func``'s ``grad`` alike.

What it assumes: ``f`` is pure (it is traced once and evaluated again); cotangents
follow the dtype rule of :func:`input_cotangents`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from funcgrad._core import backward as _backward
from funcgrad._core import connectivity as _connectivity
from funcgrad._core import host_errors as _host_errors
from funcgrad._core import jax_internals as _jax
from funcgrad._core import rewrite as _rewrite
from funcgrad._core import sparse_reads as _sparse_reads
from funcgrad._types import PyTree
from funcgrad._types import UnconnectedGradients
from funcgrad._types import is_array
from funcgrad._types import non_arrays
from funcgrad._types import replace_at


def unconnected_mode(caller: str, value: Any) -> UnconnectedGradients:
    """``unconnected_gradients`` as the enum; anything else is a ``ValueError``."""
    try:
        return UnconnectedGradients(value)
    except ValueError:
        raise ValueError(
            f"{caller}: unconnected_gradients must be one of "
            f"{[m.value for m in UnconnectedGradients]}, got {value!r}; pass 'none' for None "
            "or 'zero' for zeros."
        ) from None


def flatten_inputs(caller: str, xs: Any) -> tuple[bool, tuple[Any, ...], list[jax.Array], Any]:
    """Split ``xs`` into the call convention, the argument tuple and its array leaves.

    A list or tuple ``xs`` is ``f(*xs)`` (``multi``); anything else is ``f(xs)``.
    """
    multi = isinstance(xs, list | tuple)
    if multi and not xs:
        raise ValueError(f"{caller}: xs is empty; pass at least one value to differentiate.")
    args = tuple(xs) if multi else (xs,)
    bad = non_arrays(args if multi else xs, "xs")
    if bad:
        raise TypeError(
            f"{caller}: {'; '.join(bad)}; every leaf of xs must be an array — pass the "
            "arrays to differentiate and close over everything else in f."
        )
    flat, tree = jax.tree.flatten(args)
    leaves = [v if isinstance(v, jax.Array) else jnp.asarray(v) for v in flat]
    return multi, args, leaves, tree


def fill(grads: list[Any], like: list[jax.Array], mode: UnconnectedGradients) -> list[Any]:
    """``grads`` with each ``None`` made zeros like its input, when ``mode`` asks for zeros."""
    if mode is UnconnectedGradients.NONE:
        return grads
    return [jnp.zeros_like(x) if g is None else g for g, x in zip(grads, like, strict=True)]


def _check_outputs(caller: str, ys: PyTree) -> None:
    if ys is None:
        raise TypeError(
            f"{caller}: f returned None; return the value to differentiate (a missing "
            "return statement?)."
        )
    bad = non_arrays(ys, "ys")
    if bad:
        raise TypeError(
            f"{caller}: f returned {'; '.join(bad)}; f must return an array or a pytree "
            "of arrays (with has_aux=True, a pair (ys, aux))."
        )


def _output_cotangents(caller: str, grad_ys: PyTree, ys: PyTree, avals: list[Any]) -> list[Any]:
    """One cotangent per output leaf, checked against the outputs (``None`` means ones)."""
    paths, ys_tree = jax.tree_util.tree_flatten_with_path(ys)
    if grad_ys is None:
        given: list[Any] = [None] * len(avals)
    else:
        given, tree = jax.tree_util.tree_flatten(grad_ys, is_leaf=lambda v: v is None)
        if tree != ys_tree:  # type: ignore[operator]
            raise ValueError(
                f"{caller}: grad_ys has structure {tree}, but f's outputs have structure "
                f"{ys_tree}; pass one cotangent per output (None for ones)."
            )
    errors: list[str] = []
    cts: list[jax.Array | None] = []
    for (path, _), aval, g in zip(paths, avals, given, strict=True):
        if g is None:
            cts.append(None)
            continue
        dtype = getattr(g, "dtype", None)
        g = jnp.asarray(g, dtype=aval.dtype if dtype is None else None)
        if g.shape != aval.shape or g.dtype != aval.dtype:
            errors.append(
                f"ys{jax.tree_util.keystr(path)}: expected shape {aval.shape} dtype "
                f"{aval.dtype}, got shape {g.shape} dtype {g.dtype}"
            )
        cts.append(g)
    if errors:
        raise ValueError(
            f"{caller}: grad_ys does not match f's outputs: {'; '.join(errors)}; pass "
            "each cotangent with its output's shape and dtype, or None for ones."
        )
    return cts


@dataclasses.dataclass
class Result:
    """What :func:`differentiate` computes."""

    ys: PyTree
    aux: PyTree
    grads: list[Any]  # one per primal: an array, or None where unconnected


@dataclasses.dataclass
class Traced:
    """``fun`` traced once: its jaxpr, the structure of its outputs, the checked ``grad_ys``."""

    closed: _jax.Closed
    ys_tree: Any
    aux_tree: Any
    cotangents: list[Any]  # one per ys leaf, None for ones
    differentiable: list[bool]  # one per ys leaf: does it carry a gradient?

    @property
    def outputs(self) -> list[bool]:
        """One flag per output of the jaxpr: the outputs to differentiate (no aux)."""
        return self.differentiable + [False] * self.aux_tree.num_leaves


def trace(
    caller: str, fun: Callable[..., Any], primals: list[jax.Array], grad_ys: PyTree, has_aux: bool
) -> Traced:
    """Trace ``fun(*primals)``, which returns ``ys`` (or ``(ys, aux)``), to a jaxpr."""
    trees: dict[str, Any] = {}

    def flat_fun(*leaves: jax.Array) -> list[Any]:
        out = fun(*leaves)
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(
                    f"{caller}: has_aux=True, so f must return a pair (ys, aux); got "
                    f"{type(out).__name__} — return (ys, aux), or drop has_aux."
                )
            ys, aux = out
        else:
            ys, aux = out, None
        _check_outputs(caller, ys)
        ys_leaves, trees["ys"] = jax.tree.flatten(ys)
        aux_leaves, trees["aux"] = jax.tree.flatten(aux)
        return [*ys_leaves, *aux_leaves]

    closed = _jax.trace(flat_fun, *primals)
    n_ys = trees["ys"].num_leaves
    ys_avals = closed.out_avals[:n_ys]
    ys_shape = jax.tree.unflatten(trees["ys"], range(n_ys))
    cts = _output_cotangents(caller, grad_ys, ys_shape, ys_avals)
    differentiable = [_connectivity.is_differentiable(a.dtype) for a in ys_avals]
    return Traced(closed, trees["ys"], trees["aux"], cts, differentiable)


@_host_errors.raised_as_kept()
def differentiate(
    caller: str,
    fun: Callable[..., Any],
    primals: list[jax.Array],
    wrt: list[bool],
    grad_ys: PyTree,
    has_aux: bool,
    indexed_slices: bool = False,
) -> Result:
    """The vector-Jacobian product of ``fun`` at ``primals`` over its connected inputs.

    ``fun(*primals)`` returns ``ys`` (or ``(ys, aux)``).  It is traced once to a jaxpr
    (:func:`trace`); that jaxpr is analysed for connectivity and then evaluated under
    ``jax.vjp`` with only the connected primals flagged in ``wrt`` as variables.  With
    ``indexed_slices``, a variable read only through gathers of whole rows is no
    variable: its reads' outputs are differentiated instead, and it gets an
    ``IndexedSlices`` (``sparse_reads``).  Evaluated eagerly, a ``py_func`` that raises
    reaches the caller as its own ``fg.PyFuncError``.
    """
    traced = trace(caller, fun, primals, grad_ys, has_aux)
    closed, differentiable, cts = traced.closed, traced.differentiable, traced.cotangents
    n_ys = len(differentiable)
    reach, connected = _connectivity.connected_equations(closed.jaxpr, traced.outputs)
    variables = [i for i, (r, w) in enumerate(zip(reach, wrt, strict=True)) if r and w]
    sparse = _sparse_reads.find(closed, variables if indexed_slices else [])
    dense = [i for i in variables if i not in sparse.tables]
    inputs = [primals[i] for i in dense] + [r.zeros() for r in sparse.reads]
    evaluate = _evaluator(closed, sparse)

    def run(*values: jax.Array) -> tuple[list[jax.Array], tuple[list[Any], list[Any]]]:
        args = replace_at(primals, dense, values[: len(dense)])
        outs, ids = evaluate(args, values[len(dense) :])
        return [o for o, d in zip(outs, differentiable, strict=False) if d], (outs, ids)

    # every dense variable, and each read whose output reaches the differentiated outputs
    live = [*range(len(dense))]
    live += [len(dense) + k for k, r in enumerate(sparse.reads) if r.site in connected]

    def on_live(*values: jax.Array) -> tuple[list[jax.Array], tuple[list[Any], list[Any]]]:
        return run(*replace_at(inputs, live, values))

    grads: list[Any] = [None] * len(primals)
    if live:
        with _closures_refused(caller):
            ys, vjp_fn, (outs, ids) = jax.vjp(on_live, *(inputs[i] for i in live), has_aux=True)
        # Ones are made like each output, so that inside shard_map they vary as it does.
        cts = [
            jnp.ones_like(y) if c is None else c
            for y, c in zip(
                ys, [c for c, d in zip(cts, differentiable, strict=True) if d], strict=True
            )
        ]
        got = _backward.backward(vjp_fn, cts, closed.jaxpr)
        grads = replace_at(grads, dense, got[: len(dense)])
        n = len(dense)
        reads = {i - n: g for i, g in zip(live[n:], got[n:], strict=True)}
        for t, g in sparse.slices(primals, ids, reads).items():
            grads[t] = g
    else:
        outs, _ = run(*inputs)[1]
    return Result(
        ys=jax.tree.unflatten(traced.ys_tree, outs[:n_ys]),
        aux=jax.tree.unflatten(traced.aux_tree, outs[n_ys:]),
        grads=grads,
    )


@contextlib.contextmanager
def _closures_refused(caller: str) -> Iterator[None]:
    """JAX's error for a custom gradient that closes over a differentiated value, with the fix.

    JAX raises its ``CustomVJPException`` (a private class, so matched by name) when a
    ``jax.custom_vjp`` closes over a value that is being differentiated instead of
    taking it as an argument.
    """
    try:
        yield
    except Exception as error:
        if type(error).__name__ != "CustomVJPException":
            raise
        raise closure_error(
            f"{caller}: a custom gradient in the function (fg.custom_gradient or jax.custom_vjp)"
        ) from error


def closure_error(subject: str) -> ValueError:
    """The error for a custom gradient (``subject``) that captures a value being
    differentiated, with the fix."""
    return ValueError(
        f"{subject} closes over a value that is being differentiated -- "
        "TensorFlow's habit of an inner tf.custom_gradient that uses a tensor of the "
        "outer function -- and JAX differentiates a custom gradient only with respect "
        "to its arguments; pass that value to the custom-gradient function as an "
        "argument, and return None as its cotangent from grad_fn for TensorFlow's "
        "answer (a captured tensor gets no gradient through the function)."
    )


def _evaluator(
    closed: _jax.Closed, sparse: _sparse_reads.SparseReads
) -> Callable[[list[Any], Sequence[Any]], tuple[list[Any], list[Any]]]:
    """``closed`` as a function of its inputs and the reads' perturbations, returning its
    outputs and the reads' ids; equations that are cuts get their inputs held constant."""
    rewriter = _rewrite.Rewriter(_connectivity.is_cut, _hold_inputs)
    cuts = rewriter.reaches(closed.jaxpr)
    if sparse.tables:
        emit = rewriter.equation if cuts else _jax.bind_equation
        return lambda args, deltas: sparse.evaluate(args, deltas, emit)
    plain = rewriter.closed(closed) if cuts else closed
    return lambda args, deltas: (plain(*args), [])


def _hold_inputs(eqn: _jax.Eqn, invals: list[Any]) -> list[Any]:
    return _jax.bind_equation(eqn, [jax.lax.stop_gradient(v) for v in invals])


# --- the one check of a gradient function's result ------------------------------------


def input_cotangents(caller: str, got: Any, inputs: Sequence[Any], *, bare: bool) -> list[Any]:
    """A gradient function's result as one checked cotangent per input.

    ``got`` is one cotangent per input: a list or tuple of them, or a bare value when
    there is one input (always bare when ``bare``, as ``tf.custom_gradient``'s single
    argument may itself be a list).  The dtype rule, the same everywhere: ``None`` (whole
    or as a pytree leaf) is a zero; a cotangent must have its input's structure and
    shape and is cast to its input's floating dtype, as TensorFlow casts a gradient to
    its variable's type; a complex cotangent of a real input is an error (the cast would
    drop its imaginary part); an integer or boolean input gets ``None``.
    """
    grads = _per_input(caller, got, len(inputs), bare=bare)
    errors: list[str] = []

    def one(path: Any, g: Any, x: Any) -> Any:
        if g is None:
            return jax.tree.map(_zero, x)
        where = f"cotangent[{path[0].idx}]{jax.tree_util.keystr(tuple(path[1:]))}"
        if not is_array(x):
            errors.append(f"{where} is an array, the input a {type(x).__name__}")
            return None
        g = jnp.asarray(g)
        dtype = jnp.result_type(x)
        if g.shape != jnp.shape(x):
            errors.append(f"{where} has shape {g.shape}, the input {jnp.shape(x)}")
        elif jnp.iscomplexobj(g) and not jnp.issubdtype(dtype, jnp.complexfloating):
            errors.append(f"{where} is complex ({g.dtype}), the input {dtype}")
        elif _connectivity.is_differentiable(dtype):
            return g.astype(dtype)
        return None

    try:
        out = jax.tree_util.tree_map_with_path(
            one, list(grads), list(inputs), is_leaf=lambda v: v is None
        )
    except ValueError as e:
        raise ValueError(
            f"{caller}: the gradient's structure does not match the inputs' ({e}); return "
            "one cotangent per input, structured like it (None for zero)."
        ) from None
    if errors:
        raise ValueError(
            f"{caller}: the gradient does not match the inputs: {'; '.join(errors)}; "
            "return one cotangent per input with its shape (None for zero)."
        )
    return list(out)


def _zero(x: Any) -> Any:
    dtype = jnp.result_type(x)
    return jnp.zeros(jnp.shape(x), dtype) if _connectivity.is_differentiable(dtype) else None


def _per_input(caller: str, grads: Any, n: int, *, bare: bool) -> list[Any]:
    """The gradient function's result as a list with one cotangent per input."""
    if n == 1 and (bare or not isinstance(grads, list | tuple)):
        return [grads]
    if isinstance(grads, list | tuple) and len(grads) == n:
        return list(grads)
    got = f"{len(grads)} cotangents" if isinstance(grads, list | tuple) else "one cotangent"
    raise ValueError(
        f"{caller}: returned {got} for {n} inputs; return a list or tuple with one "
        "cotangent per input (None for zero)."
    )
