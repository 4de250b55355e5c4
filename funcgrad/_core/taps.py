"""Names for intermediate values: the machinery behind ``fg.tap``.

Design note
-----------
TensorFlow refers to an intermediate tensor by the tensor itself; a JAX function's
intermediates exist only while it is traced.  ``fg.tap(x, name)`` is therefore the
identity, except while ``fg.gradients`` or ``fg.tap_gradients`` traces the function:
each of those pushes a :class:`Frame` that says what its taps should do, and the
innermost frame is the one a tap answers to (so nested calls each see their own taps).
A tap can then

* record its value's shape and dtype (``seen``), so the caller can check names;
* hold its value constant (``stop``, TensorFlow's ``stop_gradients``): the gradient
  still arrives *at* the tapped value but goes no further back.  A tap of one of the
  differentiated inputs themselves is that input, so it is not held (TensorFlow's
  ``tf.gradients(a * a, a, stop_gradients=[a])`` is ``2 * a``), also where a wrapper
  (``tensorflow_conventions``, an override) traces ``f`` again (:func:`traced_again`).
  The hold is a ``stop_gradient`` under the name scope ``fg.stop_gradients:NAME``, by which
  :func:`stopped_tap` knows it again in the jaxpr;
* add a perturbation (``perturb``), a zero whose gradient is the gradient with
  respect to the tapped value (``tf.gradients(ys, intermediate)``).

The frames live in a thread-local stack: they exist only while a trace runs, and they
change what the taps do, never what any other operation does.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

import jax
import jax.numpy as jnp

from funcgrad._core import connectivity as _connectivity
from funcgrad._core import jax_internals as _jax
from funcgrad._types import PyTree


@dataclasses.dataclass
class Frame:
    """What the innermost ``gradients`` / ``tap_gradients`` call asks of the taps in ``f``."""

    caller: str
    stop: frozenset[str] = frozenset()
    perturb: dict[str, PyTree] = dataclasses.field(default_factory=dict)
    inputs: tuple[Any, ...] = ()  # the traced inputs of f, which a stop does not hold
    seen: dict[str, PyTree] = dataclasses.field(default_factory=dict)


_STATE = threading.local()
_STOP_SCOPE = "fg.stop_gradients:"


@contextmanager
def frame(f: Frame) -> Iterator[Frame]:
    """Make ``f`` the frame the taps answer to while the block runs."""
    stack = _STATE.__dict__.setdefault("frames", [])
    stack.append(f)
    try:
        yield f
    finally:
        stack.pop()


def bound(f: Callable[..., Any], tree: Any, fr: Frame) -> Callable[..., Any]:
    """``f`` as a function of the leaves of its arguments, whose taps answer to ``fr``."""

    def fun(*values: jax.Array) -> Any:
        fr.inputs = values
        with frame(fr):
            return f(*jax.tree.unflatten(tree, values))

    return fun


@contextmanager
def traced_again(outer: Sequence[Any], inner: Sequence[Any]) -> Iterator[None]:
    """While the block runs, ``inner`` stand for ``outer``: a wrapper that traces ``f``
    again (``tensorflow_conventions``, an override) keeps a tap of an input an input."""
    stack = _STATE.__dict__.get("frames")
    if not stack:
        yield
        return
    f, old = stack[-1], stack[-1].inputs
    f.inputs = (*old, *(i for o, i in zip(outer, inner, strict=True) if any(o is v for v in old)))
    try:
        yield
    finally:
        f.inputs = old


def stopped_tap(eqn: _jax.Eqn) -> str | None:
    """The name of the tap in ``stop_gradients`` that ``eqn`` holds, if it is such a hold."""
    if eqn.primitive.name != "stop_gradient":
        return None
    for name in reversed(_jax.name_scopes(eqn)):
        if name.startswith(_STOP_SCOPE):
            return name[len(_STOP_SCOPE) :]
    return None


def apply(x: PyTree, name: str) -> PyTree:
    """What ``fg.tap(x, name)`` returns in the innermost frame (``x`` outside any)."""
    stack = _STATE.__dict__.get("frames")
    if not stack:
        return x
    f = stack[-1]
    if name in f.seen:
        raise ValueError(
            f"{f.caller}: the tap name {name!r} is used twice in f; give each "
            "fg.tap(x, name) its own name."
        )
    f.seen[name] = jax.tree.map(_shape_dtype, x)
    if name in f.stop:
        with jax.named_scope(_STOP_SCOPE + name):
            x = jax.tree.map(lambda leaf: _hold(leaf, f.inputs), x)
    if name in f.perturb:
        x = jax.tree.map(_perturb, x, f.perturb[name])
    return x


def _hold(leaf: Any, inputs: tuple[Any, ...]) -> Any:
    return leaf if any(leaf is v for v in inputs) else jax.lax.stop_gradient(leaf)


def _shape_dtype(leaf: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(jnp.shape(leaf), jnp.result_type(leaf))


def _perturb(leaf: Any, eps: jax.Array) -> Any:
    return leaf + eps if _connectivity.is_differentiable(eps.dtype) else leaf


def as_names(
    caller: str, argument: str, names: str | Sequence[str] | None, *, none: bool = False
) -> list[str]:
    """``names`` (one tap name or a sequence of them) as a list, each a non-empty string;
    with ``none``, ``None`` is no name (TensorFlow's ``stop_gradients=None``)."""
    if names is None and none:
        return []
    if not isinstance(names, str | list | tuple):
        example = "names='h'" if argument == "names" else f"{argument}=['h']"
        raise TypeError(
            f"{caller}: {argument} is {names!r}, not a tap name or a list of them; pass the "
            f"names given to fg.tap(x, name), e.g. {example}."
        )
    names = [names] if isinstance(names, str) else list(names)
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise TypeError(
            f"{caller}: {argument} must hold tap names (non-empty strings), got {bad!r}; "
            "pass the names given to fg.tap(x, name)."
        )
    return names


def check_names(f: Frame, names: Sequence[str], argument: str) -> None:
    """Raise ``KeyError`` for names in ``names`` that ``f``'s function did not tap."""
    missing = [n for n in names if n not in f.seen]
    if missing:
        raise KeyError(
            f"{f.caller}: {argument} names {missing}, but f taps only "
            f"{sorted(f.seen)}; name an intermediate with fg.tap(x, name)."
        )
