"""Which inputs of a jaxpr reach which outputs through a differentiable path.

Design note
-----------
``tf.gradients`` answers ``None`` for an input that no differentiable path joins to the
outputs; JAX answers zeros.  funcgrad recovers TensorFlow's answer at trace time, from
the jaxpr of the function, with one backward pass in the manner of dead-code
elimination: starting from the outputs we differentiate, each equation marks its
inputs *needed* when one of its needed outputs depends on them differentiably.  An
input of the jaxpr is connected when it ends up needed.

What it follows:

* every first-order primitive, by data dependency (an output depends on all inputs);
* sub-jaxprs (read through ``jax_internals``): ``jit``, ``eval_jaxpr``
  (``closed_call``), ``remat``/``checkpoint``, ``shard_map``, one-to-one; ``cond`` as the
  union over its branches; ``scan`` and ``while`` to a fixed point over the loop carry
  (the predicate of a ``while`` and the index of a ``cond`` never carry a gradient);
* ``custom_jvp_call`` and ``custom_vjp_call`` by plain data dependency through their
  primal jaxpr, without cuts: a custom rule may differentiate straight through a
  ``round`` or ``stop_gradient`` of the primal (a straight-through estimator), so only
  the primal's data flow bounds it.

What it treats as a cut:

* any value whose dtype is not inexact (integers, booleans, PRNG keys): casts to them,
  comparisons, ``argmax``/``argmin``, bit operations all land here;
* ``stop_gradient``, ``floor``, ``ceil``, ``round`` and ``integer_pow`` with exponent 0
  (a constant ``1``), whose JAX derivative is identically zero;
* a function made by :func:`not_differentiable` (a ``py_func`` without ``grad``): a
  ``custom_vjp`` whose backward pass raises, which TensorFlow would declare
  ``NotDifferentiable``.  Differentiating through it with ``jax.grad`` raises; here it is
  a cut, and :func:`is_cut` lets an evaluator hold its inputs constant.

Every cut is decided by :func:`is_cut`, per equation; nothing depends on who traces.

Why an input is not connected: the same one pass can record (:func:`input_reach`), per
value, whether *any* data path joins it to the outputs (``used``) and which cuts stand
on those paths (``cuts``): the equations above — an :func:`is_cut` equation, or one whose
used outputs cannot carry a gradient that its input could (a cast to an integer, a
comparison, ``argmax``) — each named by its :data:`Site` (the call equations holding it,
then itself).  A path is followed only up to its first connected value: past it, a cut
no longer stands between the input and a gradient.  The index of a ``cond`` and the
predicate of a ``while`` are data paths here (they decide every output), and carry no
gradient.  Recording only adds to what the pass passes back; what is connected is
decided as without it.

The same pass also tells which equations have a connected output, at any depth
(:func:`connected_equations`, each named by its :data:`Site`): how ``sparse_reads``
knows, without tracing again, which gathers of a table reach the loss.

``sign`` is *not* a cut: TensorFlow registers a zero gradient for ``Sign``, so its
input stays connected and the gradient is zeros, as there.

What it assumes: an equation with a sub-jaxpr it does not follow (``jax_internals``'
opaque and unknown kinds) is conservatively taken as connecting every input to every
output; erring that way gives zeros where
TensorFlow would give ``None``, never ``None`` where a gradient exists.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from funcgrad._core import jax_internals as _jax
from funcgrad._core.jax_internals import Kind

_CUTS = frozenset({"stop_gradient", "floor", "ceil", "round"})


#: Where a cut is: the equation that cuts, after the call equations (``jit``, ``scan``,
#: ``cond``, ...) that hold it, outermost first.
Site = tuple[_jax.Eqn, ...]


@dataclasses.dataclass(frozen=True)
class Reach:
    """How a value reaches the differentiated outputs.

    ``connected``: through a path that carries a gradient.  ``used``: through any data
    path.  ``cuts``: the cuts on its paths that stand between it and a gradient, each
    path followed up to the first connected value on it (recorded only by
    :func:`input_reach`).
    """

    connected: bool = False
    used: bool = False
    cuts: frozenset[Site] = frozenset()

    def __or__(self, other: Reach) -> Reach:
        return Reach(
            self.connected or other.connected, self.used or other.used, self.cuts | other.cuts
        )


_UNREACHED = Reach()
_CONNECTED = Reach(True, True)


@dataclasses.dataclass(frozen=True)
class _Pass:
    """Where the backward pass is: whether cuts apply, whether it records, the site; and
    where it collects the sites of the equations with a connected output (if it does)."""

    cuts: bool
    record: bool
    site: Site = ()
    connected: set[Site] | None = dataclasses.field(default=None, compare=False)

    def inside(self, eqn: _jax.Eqn, *, custom: bool = False) -> _Pass:
        """The pass inside ``eqn``'s sub-jaxpr (a custom rule's: without cuts)."""
        return _Pass(self.cuts and not custom, self.record, (*self.site, eqn), self.connected)


class _RaisingBackward:
    """The backward pass of a :func:`not_differentiable` function: raises its message."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __call__(self, residuals: Any, cotangents: Any) -> Any:
        raise LookupError(self.message)


def not_differentiable(fun: Callable[..., Any], message: str) -> Callable[..., Any]:
    """``fun`` as a function that differentiation treats as TensorFlow's ``NotDifferentiable``.

    Values are ``fun``'s.  :func:`connected_inputs` cuts every path through it, and
    ``jax.grad`` (or any reverse-mode derivative) that reaches it raises ``LookupError``
    with ``message``.
    """

    @jax.custom_vjp
    def op(*xs: Any) -> Any:
        return fun(*xs)

    def forward(*xs: Any) -> tuple[Any, None]:
        return op(*xs), None  # ``op``, not ``fun``: an outer derivative differentiates this

    op.defvjp(forward, _RaisingBackward(message))
    return op


def is_cut(eqn: _jax.Eqn) -> bool:
    """Whether ``eqn`` cuts every differentiable path through it (outside custom rules)."""
    name = eqn.primitive.name
    if name in _CUTS or (name == "integer_pow" and eqn.params.get("y") == 0):
        return True
    return isinstance(_jax.custom_vjp_backward(eqn), _RaisingBackward)


@functools.cache
def is_differentiable(dtype: np.dtype) -> bool:
    """Whether values of ``dtype`` carry gradients (floating and complex dtypes)."""
    return bool(jax.dtypes.issubdtype(dtype, np.inexact))


def connected_inputs(
    jaxpr: _jax.Jaxpr, outputs: Sequence[bool], *, cuts: bool = True
) -> list[bool]:
    """For each input of ``jaxpr``: does it reach an output flagged in ``outputs``?

    Args:
      jaxpr: an open jaxpr (its ``constvars`` are constants, never connected).
      outputs: one flag per ``jaxpr.outvars``: the outputs being differentiated.
      cuts: whether ``stop_gradient``-like primitives cut the path (``False`` inside
        custom-derivative functions, where only data flow bounds the rule).

    Returns:
      One flag per ``jaxpr.invars``.
    """
    start = [_CONNECTED if flag else _UNREACHED for flag in outputs]
    return [r.connected for r in _backward(jaxpr, start, _Pass(cuts, record=False))]


def connected_equations(jaxpr: _jax.Jaxpr, outputs: Sequence[bool]) -> tuple[list[bool], set[Site]]:
    """:func:`connected_inputs` (with cuts), and the :data:`Site` of each equation, at any
    depth, with an output that reaches an output flagged in ``outputs``.

    An equation inside a sub-jaxpr is named by the call equations holding it, so one
    jitted function called twice has a site per call.
    """
    start = [_CONNECTED if flag else _UNREACHED for flag in outputs]
    sites: set[Site] = set()
    reach = _backward(jaxpr, start, _Pass(cuts=True, record=False, connected=sites))
    return [r.connected for r in reach], sites


def input_reach(jaxpr: _jax.Jaxpr, outputs: Sequence[bool]) -> list[Reach]:
    """For each input of ``jaxpr``: how it reaches the outputs flagged in ``outputs``.

    The same pass as :func:`connected_inputs` (whose answer is each ``.connected``),
    recording besides which inputs some data path joins to the outputs (``.used``) and
    the cuts on those paths (``.cuts``).
    """
    start = [_CONNECTED if flag else _UNREACHED for flag in outputs]
    return _backward(jaxpr, start, _Pass(cuts=True, record=True))


def carries_gradient(var: _jax.Var | _jax.Literal) -> bool:
    """Whether a jaxpr variable can carry a gradient (not a literal, dropped or integer)."""
    if isinstance(var, _jax.Literal) or _jax.is_dropped(var):
        return False
    return is_differentiable(getattr(var.aval, "dtype", np.dtype(bool)))


def _backward(jaxpr: _jax.Jaxpr, outputs: Sequence[Reach], where: _Pass) -> list[Reach]:
    """The one backward pass: each equation passes its outputs' reach to its inputs."""
    reach: dict[_jax.Var, Reach] = {}
    for var, r in zip(jaxpr.outvars, outputs, strict=True):
        _merge(reach, var, r, where)
    for eqn in reversed(jaxpr.eqns):
        outs = [reach.get(v, _UNREACHED) for v in eqn.outvars]
        if where.connected is not None and any(r.connected for r in outs):
            where.connected.add((*where.site, eqn))
        if any(r.used for r in outs):
            for var, r in zip(eqn.invars, _equation_inputs(eqn, outs, where), strict=True):
                _merge(reach, var, r, where)
    return [reach.get(v, _UNREACHED) for v in jaxpr.invars]


def _merge(reach: dict[_jax.Var, Reach], var: Any, r: Reach, where: _Pass) -> None:
    if not r.used or isinstance(var, _jax.Literal):
        return
    if not carries_gradient(var):  # an integer value is used, never connected
        if not where.record:
            return
        r = Reach(False, True, r.cuts)
    old = reach.get(var)
    if old is None:
        reach[var] = r
    elif where.record:  # without recording, ``old`` is already connected
        reach[var] = old | r


def _equation_inputs(eqn: _jax.Eqn, outs: list[Reach], where: _Pass) -> list[Reach]:
    """How each input of one equation reaches the outputs, given how its outputs do."""
    if where.cuts and is_cut(eqn):
        return _across(eqn, outs, where, cut=True)
    k = _jax.kind(eqn)
    if k.is_call:
        body = _jax.call(eqn).body.jaxpr
        return _backward(body, outs, where.inside(eqn, custom=k.is_custom_rule))
    if k is Kind.COND:
        operands = [_UNREACHED] * (len(eqn.invars) - 1)
        for branch in _jax.cond_branches(eqn):
            ins = _backward(branch.jaxpr, outs, where.inside(eqn))
            operands = [a | b for a, b in zip(operands, ins, strict=True)]
        return [_behind(outs), *operands]  # the index decides every output, with no gradient
    if k is Kind.SCAN:
        return _scan_inputs(eqn, outs, where)
    if k is Kind.WHILE:
        return _while_inputs(eqn, outs, where)
    return _across(eqn, outs, where, cut=False)


def _across(eqn: _jax.Eqn, outs: list[Reach], where: _Pass, cut: bool) -> list[Reach]:
    """What each input of ``eqn`` gets when every output depends on every input.

    The equation is a cut for an input when ``cut`` says so or when a used output cannot
    carry the gradient that the input could (a cast to an integer, a comparison).
    """
    connected = not cut and any(r.connected for r in outs)
    if not where.record:
        return [_CONNECTED if connected else _UNREACHED] * len(eqn.invars)
    behind = _behind(outs)
    passed = Reach(connected, behind.used, behind.cuts)
    used_types = [carries_gradient(v) for r, v in zip(outs, eqn.outvars, strict=True) if r.used]
    if not cut and all(used_types):
        return [passed] * len(eqn.invars)
    stopped = Reach(connected, True, behind.cuts | {(*where.site, eqn)})
    return [stopped if carries_gradient(v) else passed for v in eqn.invars]


def _behind(outs: Sequence[Reach]) -> Reach:
    """The reach of a value that every one of ``outs`` depends on, through a cut.

    Cuts further on are passed back only from values that are not connected: past a
    connected value, a cut no longer stands between the value and a gradient.
    """
    used = [r for r in outs if r.used]
    return Reach(False, bool(used), frozenset().union(*(r.cuts for r in used if not r.connected)))


def _scan_inputs(eqn: _jax.Eqn, outs: list[Reach], where: _Pass) -> list[Reach]:
    loop = _jax.scan(eqn)
    carry_out, ys = list(outs[: loop.n_carry]), outs[loop.n_carry :]
    while True:
        ins = _backward(loop.body.jaxpr, carry_out + ys, where.inside(eqn))
        carry_in = loop.split(ins)[1]
        grown = [a | b for a, b in zip(carry_out, carry_in, strict=True)]
        if grown == carry_out:
            return ins
        carry_out = grown


def _while_inputs(eqn: _jax.Eqn, outs: list[Reach], where: _Pass) -> list[Reach]:
    """A ``while``'s inputs: the body to a fixed point over the carry; when recording,
    the predicate too, which decides every output but carries no gradient."""
    loop = _jax.while_loop(eqn)
    inside = where.inside(eqn)
    predicate = _behind(outs)
    carry, cond_consts = list(outs), [_UNREACHED] * loop.n_cond
    while True:
        ins = _backward(loop.body.jaxpr, carry, inside)
        grown = [a | b for a, b in zip(carry, ins[loop.n_body :], strict=True)]
        if where.record:
            cond_ins = _backward(loop.cond.jaxpr, [predicate], inside)
            cond_consts = cond_ins[: loop.n_cond]
            grown = [a | b for a, b in zip(grown, cond_ins[loop.n_cond :], strict=True)]
        if grown == carry:
            return cond_consts + ins[: loop.n_body] + carry
        carry = grown
