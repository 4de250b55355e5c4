"""The jaxpr interpreter behind ``gradient_override_map`` and funcgrad's cuts.

Design note
-----------
TensorFlow overrides the gradient of an op by looking it up by name when the backward
graph is built.  A JAX function has no graph to patch, so funcgrad traces the function
to a jaxpr and evaluates that jaxpr again, equation by equation, re-emitting every
equation into whatever trace is current (eager, ``jit``, ``vmap``, ``grad``, ...).
:func:`evaluate` is that interpreter; a :class:`Rewriter` re-emits the equations that
match its predicate in its own way instead:

* ``gradient_override_map`` and ``tensorflow_conventions`` (``_op_gradients``) match
  equations by name (:func:`key`) and re-emit each inside a ``jax.custom_vjp``
  (:func:`with_rule`): its forward is the very same ``bind`` of the same primitive with
  the same parameters (so values are bit-identical to the function's), and its backward
  calls the rule with the op's inputs, outputs, parameters and the incoming cotangents;
* ``fg.gradients`` matches the equations ``_connectivity`` declares not differentiable
  (a ``py_func`` without ``grad``) and re-emits them with their inputs held constant.

Names an equation answers to:

* a primitive's name (``sign``, ``round``, ``max``, ...) for a first-order equation;
* for the functions in :data:`NAMED_FUNCTIONS` (``jax.nn.relu`` and friends), the name
  of the ``custom_jvp_call``, ``custom_vjp_call`` or ``jit`` equation that calls them;
  the whole call is replaced, its leading ``num_consts`` inputs get no cotangent.

What it follows (only when a sub-jaxpr holds a matching equation; otherwise the
equation is re-emitted untouched, so unaffected code stays exactly as it was):

* ``jit`` (re-built with ``jax.jit`` under the same name, ``inline`` and
  ``keep_unused``), ``eval_jaxpr`` / ``closed_call`` (inlined), ``remat2``
  (``jax.checkpoint`` with the same ``policy`` and ``prevent_cse``);
* ``scan`` (``lax.scan`` with the same length, direction and unrolling), ``cond``
  (``lax.switch`` over the rewritten branches), ``while`` (``lax.while_loop``; JAX
  cannot reverse-differentiate it, so an override there shapes only the values JAX
  computes, i.e. none, and is still counted as a match).

* the ``custom_vjp`` of an equation re-emitted with ``transparent=True``
  (``tensorflow_conventions``' rules): inlined when an equation inside matches, so a
  ``gradient_override_map`` applied on top still reaches the op, and its rule wins.

What it does not follow: the bodies of other ``custom_jvp`` / ``custom_vjp`` functions
(their own rule decides their derivative, so an override inside could never take
effect) and any other primitive with a sub-jaxpr (re-emitted as it is).

Higher orders: the forward of every ``custom_vjp`` made here (:func:`custom_op`) computes
its outputs by calling the ``custom_vjp`` itself, and hands those very outputs to the
backward.  So an outer derivative of an output used inside a rule (TensorFlow's
``op.outputs[0]``) differentiates it with the rule again, and the cotangents reaching
it from the function and from inside rules are summed before the rule applies once, as
TensorFlow sums the gradients of ``op.outputs[0]``.  With ``keep_outputs=False`` the
backward calls the op again instead (a separate node, still differentiated by the
rule): inside ``lax.scan``, JAX differentiates a kept output of a ``custom_vjp`` whose
value hinges on an exact-zero test of its inputs wrongly at the third order.

What it assumes: a rule is called only during differentiation; equations whose inputs
or outputs are all non-differentiable (integers, booleans, literals) are re-emitted
without a ``custom_vjp`` since no cotangent can reach them, but still count as matched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax import lax

from funcgrad._core import connectivity as _connectivity
from funcgrad._core import jax_internals as _jax
from funcgrad._core.jax_internals import Kind
from funcgrad._types import replace_at

#: Rule: ``rule(inputs, outputs, params, cotangents)`` returns one cotangent (or ``None``)
#: per input; ``cotangents`` has one entry per output.
Rule = Callable[[tuple[Any, ...], tuple[Any, ...], dict[str, Any], tuple[Any, ...]], Sequence[Any]]

#: Functions matched by the name of the call that wraps them, not by a primitive.
NAMED_FUNCTIONS = frozenset(
    {
        "clip",
        "elu",
        "leaky_relu",
        "relu",
        "relu6",
        "selu",
        "soft_sign",
        "softplus",
        "xlog1py",
        "xlogy",
    }
)


def read_atom(env: dict[_jax.Var, Any], var: Any) -> Any:
    """The value of a jaxpr atom: a literal's own value, or the variable's in ``env``."""
    return var.val if isinstance(var, _jax.Literal) else env[var]


def evaluate(
    jaxpr: _jax.Jaxpr,
    consts: Sequence[Any],
    args: Sequence[Any],
    emit: Callable[[_jax.Eqn, list[Any]], list[Any]] = _jax.bind_equation,
) -> list[Any]:
    """The outputs of ``jaxpr`` at ``args``, each equation re-emitted by ``emit``."""
    env: dict[_jax.Var, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        outs = emit(eqn, [read_atom(env, v) for v in eqn.invars])
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read_atom(env, v) for v in jaxpr.outvars]


@dataclasses.dataclass
class Rewriter:
    """Re-emits jaxprs; each equation that ``matches`` is re-emitted by ``replace`` instead.

    Matching equations are found inside the sub-jaxprs this module follows too (see the
    module docstring); an equation that holds none is re-emitted as it is.  With
    ``see_through``, the ``custom_vjp`` of a transparent :func:`custom_op` is followed
    too (overrides do; the cuts of ``fg.gradients`` must not undo a rule).
    """

    matches: Callable[[_jax.Eqn], bool]
    replace: Callable[[_jax.Eqn, list[Any]], list[Any]]
    see_through: bool = False

    def evaluate(self, jaxpr: _jax.Jaxpr, consts: Sequence[Any], *args: Any) -> list[Any]:
        """The outputs of ``jaxpr`` at ``args``, rewritten."""
        return evaluate(jaxpr, consts, args, self.equation)

    def closed(self, closed: _jax.Closed) -> Callable[..., list[Any]]:
        """``closed`` as a function of its inputs, rewritten."""
        return functools.partial(self.evaluate, closed.jaxpr, closed.consts)

    def reaches(self, jaxpr: _jax.Jaxpr) -> bool:
        """Whether an equation of ``jaxpr``, or of a sub-jaxpr followed, matches."""
        return any(self._reaches(eqn) for eqn in jaxpr.eqns)

    def _reaches(self, eqn: _jax.Eqn) -> bool:
        if self.matches(eqn):
            return True
        return self._follower(eqn) is not None and any(map(self.reaches, _jax.sub_jaxprs(eqn)))

    def _follower(
        self, eqn: _jax.Eqn
    ) -> Callable[[Rewriter, _jax.Eqn, list[Any]], list[Any]] | None:
        if self.see_through and is_transparent(eqn):
            return _follow_inline
        return _FOLLOW.get(_jax.kind(eqn))

    def equation(self, eqn: _jax.Eqn, invals: list[Any]) -> list[Any]:
        if self.matches(eqn):
            return self.replace(eqn, invals)
        follow = self._follower(eqn)
        if follow is not None and any(map(self.reaches, _jax.sub_jaxprs(eqn))):
            return list(follow(self, eqn, invals))
        return _jax.bind_equation(eqn, invals)


def key(eqn: _jax.Eqn) -> str:
    """The name an equation answers to in override rules."""
    called = _jax.called_name(eqn)
    return called if called in NAMED_FUNCTIONS else eqn.primitive.name


def _dtype(var: Any) -> Any:
    """A variable's dtype; tokens and other dtype-less values count as booleans."""
    return getattr(var.aval, "dtype", np.dtype(bool))


class _Backward:
    """The backward pass of a :func:`custom_op`; ``transparent`` ones overrides see through."""

    def __init__(
        self,
        op: Callable[..., Any],
        backward: Callable[..., Sequence[Any]],
        transparent: bool,
        keep_outputs: bool,
    ) -> None:
        self.op = op
        self.backward = backward
        self.transparent = transparent
        self.keep_outputs = keep_outputs

    def __call__(self, residuals: tuple[Any, ...], cotangents: Any) -> tuple[Any, ...]:
        values, outs = residuals if self.keep_outputs else (residuals, None)
        outs = self.op(*values) if outs is None else outs
        return tuple(self.backward(values, outs, cotangents))


def custom_op(
    name: str,
    impl: Callable[..., Sequence[Any]],
    backward: Callable[[tuple[Any, ...], tuple[Any, ...], Any], Sequence[Any]],
    *,
    transparent: bool = False,
    keep_outputs: bool = True,
) -> Callable[..., tuple[Any, ...]]:
    """``impl`` (values -> tuple of outputs) as a ``jax.custom_vjp`` named ``name``.

    ``backward(values, outputs, cotangents)`` returns one cotangent per value.  The
    ``outputs`` it gets are the op's own, kept from the forward (see the module
    docstring on higher orders) or, without ``keep_outputs``, computed again by the op.
    """

    def original(*values: Any) -> tuple[Any, ...]:
        return tuple(impl(*values))

    original.__name__ = original.__qualname__ = name
    op = jax.custom_vjp(original)

    def forward(*values: Any) -> tuple[tuple[Any, ...], Any]:
        outs = op(*values)
        return outs, ((values, outs) if keep_outputs else values)

    op.defvjp(forward, _Backward(op, backward, transparent, keep_outputs))
    return op


@contextlib.contextmanager
def reverse_mode_only(subject: str) -> Iterator[None]:
    """JAX's refusal of forward mode through a ``custom_vjp`` made inside, with the fix.

    Forward mode reaches the ``custom_vjp`` while ``subject`` runs when it is called
    under ``jax.jvp`` (``jax.jacfwd``, ``jax.hessian``'s outer pass) and not inside a
    ``jax.jit`` of its own; there JAX refuses at compile time, with its own words.
    """
    try:
        yield
    except TypeError as e:
        if "can't apply forward-mode autodiff" not in str(e):
            raise
        raise TypeError(
            f"{subject}: its gradient is a vector-Jacobian product (a jax.custom_vjp), "
            "which forward-mode differentiation (jax.jvp, jax.jacfwd, jax.hessian) cannot "
            "enter. Take second derivatives with fg.hessians or fg.hvp (reverse over "
            "reverse) and Jacobians with jax.jacrev."
        ) from None


def is_transparent(eqn: _jax.Eqn) -> bool:
    """Whether ``eqn`` calls a :func:`custom_op` made with ``transparent=True``."""
    backward = _jax.custom_vjp_backward(eqn)
    return isinstance(backward, _Backward) and backward.transparent


def with_rule(
    name: str, eqn: _jax.Eqn, invals: list[Any], rule: Rule, *, transparent: bool = False
) -> list[Any]:
    """``eqn`` inside a ``jax.custom_vjp`` named ``name``: same forward, ``rule`` backward."""
    hidden = _jax.rule_consts(eqn)
    dynamic = [
        i for i, v in enumerate(eqn.invars) if not isinstance(v, _jax.Literal) and i >= hidden
    ]
    wrt = [i for i in dynamic if _connectivity.is_differentiable(_dtype(eqn.invars[i]))]
    if not wrt or not any(_connectivity.is_differentiable(_dtype(v)) for v in eqn.outvars):
        return _jax.bind_equation(eqn, invals)

    # Every dynamic input is an argument (integer ones get None), so that the backward
    # never closes over a value of the trace the equation was re-emitted in.
    def impl(*values: Any) -> list[Any]:
        return _jax.bind_equation(eqn, replace_at(invals, dynamic, values))

    def backward(values: tuple[Any, ...], outs: tuple[Any, ...], cts: Any) -> list[Any]:
        full = replace_at(invals, dynamic, values)
        grads = rule(tuple(full[hidden:]), outs, dict(eqn.params), tuple(cts))
        return [grads[i - hidden] if i in wrt else None for i in dynamic]

    op = custom_op(name, impl, backward, transparent=transparent)
    return list(op(*(invals[i] for i in dynamic)))


# --- following sub-jaxprs ---------------------------------------------------------------


def _follow_call(rw: Rewriter, eqn: _jax.Eqn, invals: list[Any]) -> list[Any]:
    """A ``jit``, ``eval_jaxpr`` or ``checkpoint``, staged again as the equation was."""
    call = _jax.call(eqn)
    return list(call.staged(rw.closed(call.body))(*invals))


def _follow_inline(rw: Rewriter, eqn: _jax.Eqn, invals: list[Any]) -> list[Any]:
    """A call's body, inlined (a transparent ``custom_vjp``)."""
    return rw.closed(_jax.call(eqn).body)(*invals)


def _follow_scan(rw: Rewriter, eqn: _jax.Eqn, invals: list[Any]) -> list[Any]:
    loop = _jax.scan(eqn)
    consts, init, xs = loop.split(invals)
    fun = rw.closed(loop.body)

    def body(carry: list[Any], x: list[Any]) -> tuple[list[Any], list[Any]]:
        outs = fun(*consts, *carry, *x)
        return outs[: loop.n_carry], outs[loop.n_carry :]

    carry, ys = loop.run(body, init, xs)
    return [*carry, *ys]


def _follow_cond(rw: Rewriter, eqn: _jax.Eqn, invals: list[Any]) -> list[Any]:
    branches = [rw.closed(b) for b in _jax.cond_branches(eqn)]
    return list(lax.switch(invals[0], branches, *invals[1:]))


def _follow_while(rw: Rewriter, eqn: _jax.Eqn, invals: list[Any]) -> list[Any]:
    loop = _jax.while_loop(eqn)
    cond_consts, body_consts, init = loop.split(invals)
    cond_fun, body_fun = rw.closed(loop.cond), rw.closed(loop.body)
    return list(
        lax.while_loop(
            lambda carry: cond_fun(*cond_consts, *carry)[0],
            lambda carry: body_fun(*body_consts, *carry),
            init,
        )
    )


_FOLLOW: dict[Kind, Callable[[Rewriter, _jax.Eqn, list[Any]], list[Any]]] = {
    Kind.JIT: _follow_call,
    Kind.CALL: _follow_call,
    Kind.REMAT: _follow_call,
    Kind.SCAN: _follow_scan,
    Kind.COND: _follow_cond,
    Kind.WHILE: _follow_while,
}
