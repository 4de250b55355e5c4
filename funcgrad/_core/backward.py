"""The backward pass of ``fg.gradients``, re-emitted so that XLA's CPU backend runs it fast.

Design note
-----------
``jax.vjp`` transposes a matrix product ``x @ W`` into ``ct.T @ x`` followed by a
``transpose``.  XLA folds the two into one dot that writes ``W``'s gradient directly;
for a skinny gradient — a classifier's last layer, ``784 x 10`` — its CPU kernels run that
orientation two to three times slower than the wide product they were given, which
dominates small-model training (a softmax regression step takes a third longer).

On the CPU backend, funcgrad therefore traces the backward function to a jaxpr and
re-emits it equation by equation, putting ``lax.optimization_barrier`` after each
two-dimensional ``dot_general`` whose result is skinny (one side at most 16 and at most
an eighth of the other).  The barrier keeps XLA from folding the following transpose
into the product; it changes no value (a dot computes the same sums either way) and
has JVP, transpose and batching rules, so nesting, ``jax.jvp`` and ``jax.vmap`` work
through it.  Other backends, and other equations, are emitted unchanged.

A backward product writes the gradient of an operand of a forward product, so its
result has that operand's shape (transposed, maybe): where no matrix product of the
function, at any depth, has a skinny two-dimensional operand, no backward product can
be skinny, and the backward function is called as it is, with no second trace.  (A
``custom_jvp`` rule whose tangent multiplies matrices of shapes the function does not
have could still give one; it would then keep XLA's orientation — a barrier changes
only speed, never a value.)

It assumes only that a jaxpr's equations, bound in order with their parameters, compute
what the jaxpr does (``jax.core.eval_jaxpr`` does the same).  Sub-jaxprs (``jit``,
``scan``, ...) are bound as they are, without looking inside.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import jax

from funcgrad._core import jax_internals as _jax
from funcgrad._core import rewrite as _rewrite

_SKINNY_SIDE = 16
_ASPECT = 8


def backward(
    vjp_fn: Callable[[Any], Any], cotangents: Sequence[jax.Array], forward: _jax.Jaxpr
) -> Any:
    """``vjp_fn(cotangents)``, with skinny products kept as written on the CPU backend;
    ``forward`` is the jaxpr that ``vjp_fn`` differentiates."""
    if jax.default_backend() != "cpu" or not _has_skinny_operand(forward):
        return vjp_fn(cotangents)

    # A plain function: JAX names a traced callable by its code, or else by ``str()``,
    # which for the function ``jax.vjp`` returns prints its whole linear jaxpr.
    def pullback(cts: Sequence[jax.Array]) -> Any:
        return vjp_fn(cts)

    closed, out_tree = _jax.trace_with_shape(pullback, cotangents)
    outs = _rewrite.evaluate(closed.jaxpr, closed.consts, jax.tree.leaves(cotangents), _emit)
    return jax.tree.unflatten(jax.tree.structure(out_tree), outs)


def _is_skinny(shape: tuple[int, ...]) -> bool:
    return len(shape) == 2 and min(shape) <= _SKINNY_SIDE and max(shape) >= _ASPECT * min(shape)


def _has_skinny_operand(jaxpr: _jax.Jaxpr) -> bool:
    """Whether a ``dot_general`` of ``jaxpr`` or of a jaxpr inside it has a skinny operand."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general" and any(
            _is_skinny(getattr(v.aval, "shape", ())) for v in eqn.invars
        ):
            return True
        if any(map(_has_skinny_operand, _jax.sub_jaxprs(eqn))):
            return True
    return False


def _emit(eqn: _jax.Eqn, invals: list[Any]) -> list[Any]:
    """Re-emit ``eqn``; a skinny matrix product is followed by a barrier."""
    outs = _jax.bind_equation(eqn, invals)
    if eqn.primitive.name == "dot_general" and _is_skinny(
        getattr(eqn.outvars[0].aval, "shape", ())
    ):
        outs = [jax.lax.optimization_barrier(outs[0])]
    return outs
