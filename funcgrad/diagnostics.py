"""Why a gradient is ``None``: each unconnected input traced to the lines that cut it.

``fg.gradients`` answers ``None`` for an input that no differentiable path joins to the
outputs, as ``tf.gradients`` does, but neither says where the path was cut.
:func:`explain_unconnected` does, from the same analysis of ``f``'s jaxpr
(``funcgrad._core.connectivity``): for each unconnected input, whether ``f`` uses it at all
and which cuts stand on its paths, each with the line of the user's code that made it
(JAX records a traceback with every equation it traces).  It all happens at trace time:
nothing is added to any compiled program.
"""

from __future__ import annotations

import dataclasses
import os
import sysconfig
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import jax
import jaxlib

from funcgrad import _checks
from funcgrad._core import connectivity as _connectivity
from funcgrad._core import differentiate as _differentiate
from funcgrad._core import jax_internals as _jax
from funcgrad._core import taps as _taps
from funcgrad._core.jax_internals import Kind
from funcgrad._types import PyTree

__all__ = ["Cut", "Unconnected", "explain_unconnected", "format_unconnected"]

NOT_USED = "not used by f"
INTEGER_DTYPE = "integer dtype"
EVERY_PATH_CUT = "every path is cut"

# Frames in these trees are not the user's: JAX, funcgrad itself, and the standard
# library except for the packages installed in it (site-packages may lie inside it).
_INTERNAL = tuple(
    os.path.join(os.path.dirname(path), "") for path in (jax.__file__, jaxlib.__file__, __file__)
)
_STDLIB = tuple({os.path.join(sysconfig.get_path(k), "") for k in ("stdlib", "platstdlib")})
_INSTALLED = tuple({os.path.join(sysconfig.get_path(k), "") for k in ("purelib", "platlib")})


@dataclasses.dataclass(frozen=True)
class Cut:
    """One cut between an input and the outputs: what cut the path, and on which line.

    Attributes:
      primitive: the JAX primitive that cuts (``"stop_gradient"``, ``"floor"``,
        ``"round"``, ``"convert_element_type"``, ``"argmax"``, ``"gt"``...), or
        ``"tap"`` for a tap named in ``stop_gradients`` and ``"py_func"`` for an
        ``fg.py_func`` without ``grad``.
      source: the line of the user's code that made it, ``"file.py:LINE"`` (the first
        frame of JAX's traceback outside JAX, funcgrad and the standard library; for a
        primitive inside a function of ``jax.numpy`` the line that called it), or
        ``"unknown"`` when JAX recorded no traceback.
      detail: what the primitive alone does not say: ``"to int32"`` for an output that
        cannot carry a gradient, ``"'h' in stop_gradients"`` for a tap, ``"without
        grad"`` for a ``py_func``; ``""`` otherwise.

    Example:
      >>> cut = fg.Cut("convert_element_type", "model.py:12", "to int32")
      >>> str(cut)
      'convert_element_type to int32 at model.py:12'
    """

    primitive: str
    source: str
    detail: str = ""

    def __str__(self) -> str:
        what = f"{self.primitive} {self.detail}" if self.detail else self.primitive
        return f"{what} at {self.source}"


@dataclasses.dataclass(frozen=True)
class Unconnected:
    """Why an input gets no gradient (``None`` from ``fg.gradients``).

    Attributes:
      reason: one of ``"not used by f"`` (no output that is differentiated depends on
        the input at all), ``"integer dtype"`` (integer and boolean inputs are never
        differentiated) and ``"every path is cut"``.
      cuts: for ``"every path is cut"``, the cuts on the input's paths to the outputs,
        in program order, each path followed up to the first value on it that has a
        gradient (a cut after that value does not stand between the input and a
        gradient); empty otherwise.

    Example:
      >>> why = fg.Unconnected("every path is cut", (fg.Cut("floor", "model.py:3"),))
      >>> str(why)
      'every path is cut by floor at model.py:3'
    """

    reason: str
    cuts: tuple[Cut, ...] = ()

    def __str__(self) -> str:
        if not self.cuts:
            return self.reason
        return f"{self.reason} by {', '.join(map(str, self.cuts))}"


def explain_unconnected(
    f: Callable[..., Any],
    xs: Any,
    grad_ys: PyTree = None,
    *,
    stop_gradients: str | Sequence[str] | None = (),
) -> Any:
    """Why each input that ``fg.gradients(f, xs)`` gives ``None`` is not connected.

    ``f`` is traced once, as ``fg.gradients`` traces it, and the same connectivity
    analysis answers, for each leaf of ``xs``: ``None`` if it is connected (it has a
    gradient), else an :class:`Unconnected` record — ``"integer dtype"``, ``"not used
    by f"``, or ``"every path is cut"`` with the :class:`Cut` records on its paths (a
    ``stop_gradient``, a cast to an integer, ``floor``/``round``/``ceil``, ``argmax``, a
    comparison, a tap named in ``stop_gradients``, a ``py_func`` without ``grad``...),
    each with the line of the user's code that made it, inside ``jax.jit``, ``scan``,
    ``cond`` and ``while_loop`` too.

    An input used only where no path reaches the differentiated outputs (an ``aux``
    value, an integer output, a value computed and dropped) is ``"not used by f"``; one
    with at least one path to the outputs, all of them cut, is ``"every path is cut"``,
    listing only the cuts on those paths.  The index of a ``cond`` and the predicate of
    a ``while_loop`` count as paths (they decide the outputs): an input used only in a
    comparison there is cut by the comparison.

    It runs at trace time only and returns Python objects: call it eagerly, or inside a
    traced function (``jax.jit``, ``jax.vmap``) to print or keep what it says; nothing
    is added to the compiled program.

    Args:
      f: the function, as for ``fg.gradients``.
      xs: the inputs, in the forms ``fg.gradients`` takes.
      grad_ys: cotangents for the outputs, checked as ``fg.gradients`` checks them;
        their values do not change what is connected (a zero cotangent still connects,
        as in TensorFlow).
      stop_gradients: tap names held constant, as in ``fg.gradients``.

    Returns:
      ``xs``'s structure (a list when ``xs`` is a list or tuple) with ``None`` or an
      :class:`Unconnected` record in place of each leaf.

    Raises:
      TypeError: ``f`` is not callable, a leaf of ``xs`` or of ``f``'s outputs is not an
        array, or a name in ``stop_gradients`` is not a non-empty string.
      ValueError: ``xs`` is empty or ``grad_ys`` does not match the outputs.
      KeyError: ``stop_gradients`` names a tap ``f`` does not have.

    Example:
      >>> def f(w, b, n):
      ...     return fg.stop_gradient(w) * 2.0 + n.astype(jnp.float32)
      >>> w, b, n = jnp.float32(1.0), jnp.float32(2.0), jnp.int32(3)
      >>> fg.gradients(f, [w, b, n])
      [None, None, None]
      >>> why = fg.explain_unconnected(f, [w, b, n])
      >>> [str(u) for u in why]  # doctest: +ELLIPSIS
      ['every path is cut by stop_gradient at <doctest ...>:2', 'not used by f', 'integer dtype']
      >>> why[0].cuts[0].primitive
      'stop_gradient'
    """
    caller = "fg.explain_unconnected(f, xs)"
    _checks.check_function(caller, f, "fg.explain_unconnected(lambda x: x ** 2, x)")
    stop = _taps.as_names(caller, "stop_gradients", stop_gradients, none=True)
    multi, _, leaves, tree = _differentiate.flatten_inputs(caller, xs)
    frame = _taps.Frame(caller, stop=frozenset(stop))
    traced = _differentiate.trace(
        caller, _taps.bound(f, tree, frame), leaves, grad_ys, has_aux=False
    )
    _taps.check_names(frame, stop, "stop_gradients")
    reach = _connectivity.input_reach(traced.closed.jaxpr, traced.outputs)
    order = _program_order(traced.closed.jaxpr)
    why = [_explain(x, r, order) for x, r in zip(leaves, reach, strict=True)]
    out = jax.tree.unflatten(tree, why)
    return list(out) if multi else out[0]


def format_unconnected(explanations: PyTree, names: Sequence[str] | None = None) -> str:
    """One line of text for the unconnected inputs in :func:`explain_unconnected`'s answer.

    ``"NAME: WHY"`` for each :class:`Unconnected` leaf, joined by ``"; "`` (connected
    leaves are left out), ready for an error message such as TensorFlow's "No gradients
    provided for any variable".

    Args:
      explanations: what :func:`explain_unconnected` returned (any structure of ``None``
        and :class:`Unconnected` leaves).
      names: one name per leaf, in ``jax.tree_util`` flatten order (``None`` leaves
        included), e.g. ``fg.train.variable_names(params)``; by default the leaf's path,
        ``xs[0]``, ``xs['w']``.

    Returns:
      The text; ``""`` when every input is connected.

    Raises:
      TypeError: a leaf is neither ``None`` nor :class:`Unconnected`, or a name is not a
        string.
      ValueError: ``names`` does not have one name per leaf.

    Example:
      >>> why = fg.explain_unconnected(lambda w, b: jnp.floor(w) + 1.0, [jnp.ones(2), jnp.ones(2)])
      >>> fg.format_unconnected(why, ["W", "b"])  # doctest: +ELLIPSIS
      'W: every path is cut by floor at <doctest ...>:1; b: not used by f'
    """
    caller = "fg.format_unconnected(explanations, names)"
    flat, _ = jax.tree_util.tree_flatten_with_path(
        explanations, is_leaf=lambda v: v is None or isinstance(v, Unconnected)
    )
    bad = [
        f"explanations{jax.tree_util.keystr(path)} is a {type(v).__name__}"
        for path, v in flat
        if v is not None and not isinstance(v, Unconnected)
    ]
    _checks.raise_collected(
        caller, bad, "pass what fg.explain_unconnected returned", error=TypeError
    )
    if names is None:
        names = [f"xs{jax.tree_util.keystr(path)}" for path, _ in flat]
    names = list(names)
    _checks.raise_collected(
        caller,
        [
            f"names[{i}] is a {type(n).__name__}"
            for i, n in enumerate(names)
            if not isinstance(n, str)
        ],
        "pass one string per input",
        error=TypeError,
    )
    if len(names) != len(flat):
        raise ValueError(
            f"{caller}: got {len(names)} names for {len(flat)} inputs; pass one name per "
            "leaf of explanations, in jax.tree_util flatten order."
        )
    return "; ".join(f"{n}: {v}" for n, (_, v) in zip(names, flat, strict=True) if v is not None)


def _explain(x: jax.Array, reach: _connectivity.Reach, order: dict[int, int]) -> Unconnected | None:
    if not _connectivity.is_differentiable(x.dtype):
        return Unconnected(INTEGER_DTYPE)
    if reach.connected:
        return None
    if not reach.used:
        return Unconnected(NOT_USED)
    cuts: list[Cut] = []
    for site in sorted(reach.cuts, key=lambda s: [order[id(e)] for e in s]):
        cut = _cut(site)
        if cut not in cuts:
            cuts.append(cut)
    return Unconnected(EVERY_PATH_CUT, tuple(cuts))


def _cut(site: _connectivity.Site) -> Cut:
    """The record of one cut: its innermost equation, and the user's line."""
    eqn = site[-1]
    source = next(filter(None, map(_user_line, reversed(site))), "unknown")
    tap = _taps.stopped_tap(eqn)
    name = eqn.primitive.name
    if tap is not None:
        return Cut("tap", source, f"{tap!r} in stop_gradients")
    if not _connectivity.is_cut(eqn):  # an output that cannot carry the gradient
        avals: list[Any] = [v.aval for v in eqn.outvars if not _connectivity.carries_gradient(v)]
        return Cut(name, source, f"to {avals[0].dtype}")
    if _jax.kind(eqn) is Kind.CUSTOM_VJP:  # its backward pass raises: a py_func without grad
        return Cut("py_func", source, "without grad")
    if name == "integer_pow":
        return Cut(name, source, "with exponent 0")
    return Cut(name, source)


def _user_line(eqn: _jax.Eqn) -> str | None:
    """``"file.py:LINE"`` of the first frame of ``eqn``'s traceback in the user's code."""
    for file_name, line in _jax.source_frames(eqn):
        if _is_user_file(file_name):
            return f"{os.path.basename(file_name)}:{line}"
    return None


def _is_user_file(name: str) -> bool:
    if name.startswith(_INTERNAL):
        return False
    return name.startswith(_INSTALLED) or not name.startswith(_STDLIB)


def _program_order(jaxpr: _jax.Jaxpr) -> dict[int, int]:
    """Each equation's place in a pre-order walk of ``jaxpr`` and its sub-jaxprs, by id."""
    order: dict[int, int] = {}

    def walk(j: _jax.Jaxpr) -> None:
        for eqn in j.eqns:
            order.setdefault(id(eqn), len(order))
            for sub in _jax.sub_jaxprs(eqn):
                walk(sub)

    walk(jaxpr)
    return order
