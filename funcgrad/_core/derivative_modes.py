"""Which differentiation path a function's jaxpr allows — for ``higher_order`` and ``testing``.

Three questions, each answered from a jaxpr at trace time:

* :func:`has_custom_vjp`: does a ``custom_vjp`` call appear anywhere, sub-jaxprs
  included?  Forward mode cannot enter one whose rule runs under ``jvp``, so callers
  then use reverse mode.
* :func:`elementwise_mixers`: is the function elementwise, does ``f(x)[i]`` depend on
  ``x[i]`` alone?  Each value is tracked as *constant* (independent of ``x``),
  *aligned* (``x``'s shape, element ``i`` from ``x[i]`` only) or *mixed*.  Elementwise
  primitives keep values aligned; ``broadcast_in_dim``/``reshape``/``squeeze`` do when
  the shape does not change; ``jit``, ``custom_jvp``/``custom_vjp`` bodies, ``cond``
  branches and ``scan``/``while`` carries (to a fixed point) are followed.  Integer and
  boolean values carry no derivative and count as constant, so a predicate such as
  ``all(x > 0)`` does not mix.  Anything else that touches an aligned value mixes: the
  rule is conservative (a reshape and back, or a stack then a sum, is refused).
* :func:`jet_blocker`: can ``jax.experimental.jet`` push a Taylor series through it
  faithfully, and if not, which primitive stops it?
"""

from __future__ import annotations

import math
from typing import Any

from funcgrad._core import connectivity as _connectivity
from funcgrad._core import jax_internals as _jax
from funcgrad._core.jax_internals import Kind

__all__ = ["elementwise_mixers", "has_custom_vjp", "jet_blocker"]

# Primitives that map equal-shaped inputs to an output element by element.
_ELEMENTWISE = frozenset(
    (
        *("abs", "acos", "acosh", "add", "add_any", "and", "asin", "asinh", "atan", "atan2"),
        *("atanh", "bessel_i0e", "bessel_i1e", "cbrt", "ceil", "clamp", "clz", "complex"),
        *("conj", "convert_element_type", "copy", "copy_p", "cos", "cosh", "digamma", "div"),
        *("eq", "erf", "erf_inv", "erfc", "exp", "exp2", "expm1", "floor", "ge", "gt"),
        *("igamma", "igamma_grad_a", "igammac", "imag", "integer_pow", "is_finite", "le"),
        *("lgamma", "log", "log1p", "log2", "logistic", "lt", "max", "min", "mul", "ne"),
        *("neg", "nextafter", "not", "one_minus_square", "or", "polygamma", "polynomial"),
        *("population_count", "pow", "real"),
        *("random_gamma_grad", "reduce_precision", "regularized_incomplete_beta", "rem"),
        *("round", "rsqrt", "select_n", "shift_left", "shift_right_arithmetic", "sign"),
        *("shift_right_logical", "sin", "sinh", "sqrt", "square", "stop_gradient", "sub"),
        *("tan", "tanh", "xor", "zeta"),
    )
)
# jet rules that do not broadcast a scalar operand.
_NO_BROADCAST = frozenset({"max", "min", "clamp"})
# Shape primitives that are the identity when the shape does not change.
_SAME_SHAPE = frozenset({"broadcast_in_dim", "reshape", "squeeze"})
_CONST, _ALIGNED, _MIXED = 0, 1, 2  # depends on no / only its own / other elements of x


def has_custom_vjp(jaxpr: _jax.Jaxpr) -> bool:
    """Whether a ``custom_vjp`` call appears in ``jaxpr`` or any of its sub-jaxprs."""
    return any(
        _jax.kind(eqn) is Kind.CUSTOM_VJP or any(map(has_custom_vjp, _jax.sub_jaxprs(eqn)))
        for eqn in jaxpr.eqns
    )


def jet_blocker(jaxpr: _jax.Jaxpr) -> str | None:
    """The first primitive ``jet`` cannot propagate faithfully, or ``None``.

    ``jet`` has no rule for loops and many other primitives; it evaluates the *primal*
    of a ``custom_jvp``/``custom_vjp`` function, ignoring its rule; and its rules for
    ``max``, ``min`` and ``clamp`` fail on a scalar operand (``jnp.clip(x, 0.0, 1.0)``).
    """
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if not any(map(_connectivity.carries_gradient, eqn.invars)):
            continue  # no series reaches it: jet evaluates it as it is
        if _jax.kind(eqn).is_custom_rule or not _jax.has_jet_rule(eqn.primitive):
            return name
        shapes = {getattr(v.aval, "shape", None) for v in [*eqn.invars, *eqn.outvars]}
        if name in _NO_BROADCAST and len(shapes) > 1:
            return f"{name} of a scalar and an array"
        blocker = next(filter(None, map(jet_blocker, _jax.sub_jaxprs(eqn))), None)
        if blocker is not None:
            return blocker
    return None


def elementwise_mixers(jaxpr: _jax.Jaxpr, shape: tuple[int, ...]) -> list[str]:
    """The primitives that make ``jaxpr``'s one output mix elements of its one input.

    Empty when the function is elementwise (always, for an input of at most one
    element).
    """
    mixers: list[str] = []
    if math.prod(shape) > 1 and _propagate(jaxpr, [_ALIGNED], shape, mixers) == [_MIXED]:
        return list(dict.fromkeys(mixers))
    return []


def _propagate(
    jaxpr: _jax.Jaxpr, ins: list[int], shape: tuple[int, ...], mixers: list[str]
) -> list[int]:
    """How each output of ``jaxpr`` depends on the elements of ``x`` (of ``shape``).

    ``ins`` says it for the inputs; the name of each primitive that makes an element
    depend on other elements of ``x`` is appended to ``mixers``.
    """
    states = dict(zip(jaxpr.invars, ins, strict=True))

    def read(var: Any) -> int:
        return _CONST if isinstance(var, _jax.Literal) else states.get(var, _CONST)

    for eqn in jaxpr.eqns:
        outs = _equation_states(eqn, [read(v) for v in eqn.invars], shape, mixers)
        for var, state in zip(eqn.outvars, outs, strict=True):
            # Integers and booleans carry no derivative: where(all(x > 0), ...) still is
            # elementwise for differentiation.
            states[var] = state if _connectivity.carries_gradient(var) else _CONST
    return [read(v) for v in jaxpr.outvars]


def _equation_states(
    eqn: _jax.Eqn, ins: list[int], shape: tuple[int, ...], mixers: list[str]
) -> list[int]:
    name, n_out = eqn.primitive.name, len(eqn.outvars)
    if max(ins, default=_CONST) != _ALIGNED:
        return [max(ins, default=_CONST)] * n_out
    if all(getattr(v.aval, "shape", None) == shape for v in eqn.outvars) and (
        name in _ELEMENTWISE
        or (name in _SAME_SHAPE and getattr(eqn.invars[0].aval, "shape", None) == shape)
    ):
        return [_ALIGNED] * n_out
    k = _jax.kind(eqn)
    if k.is_call:
        return _propagate(_jax.call(eqn).body.jaxpr, ins, shape, mixers)
    if k is Kind.COND:
        outs = [_propagate(b.jaxpr, ins[1:], shape, mixers) for b in _jax.cond_branches(eqn)]
        return [max(column) for column in zip(*outs, strict=True)]
    if k is Kind.WHILE:
        loop = _jax.while_loop(eqn)
        _, consts, carry = loop.split(ins)
        return _loop_states(eqn, loop.body.jaxpr, (consts, carry, []), shape, mixers)
    if k is Kind.SCAN:
        scan = _jax.scan(eqn)
        return _loop_states(eqn, scan.body.jaxpr, scan.split(ins), shape, mixers)
    mixers.append(name)
    return [_MIXED] * n_out


def _loop_states(
    eqn: _jax.Eqn,
    body: _jax.Jaxpr,
    loop_ins: tuple[list[int], list[int], list[int]],
    shape: tuple[int, ...],
    mixers: list[str],
) -> list[int]:
    """A ``while`` or ``scan``: the carry to a fixed point; scanned-over values mix."""
    consts, carry, xs = loop_ins
    if any(s != _CONST for s in xs):
        mixers.append(eqn.primitive.name)
        return [_MIXED] * len(eqn.outvars)
    while True:
        outs = _propagate(body, consts + carry + xs, shape, mixers)
        grown = [max(a, b) for a, b in zip(carry, outs, strict=False)]
        if grown == carry:
            break
        carry = grown
    ys = outs[len(carry) :]
    if any(s != _CONST for s in ys):
        mixers.append(eqn.primitive.name)
        ys = [_MIXED] * len(ys)
    return carry + ys
