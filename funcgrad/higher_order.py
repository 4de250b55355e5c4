"""Second and higher derivatives: ``tf.hessians``, Hessian-vector products, Taylor mode.

Nesting :func:`funcgrad.gradients` already gives any derivative, with TensorFlow's
``None`` once a derivative no longer depends on its input.  This module adds the three
things nesting does badly:

* :func:`hessians` (``tf.hessians``) and :func:`hvp` are forward-over-reverse:
  ``jax.jvp`` of the reverse-mode gradient.  Forward mode cannot pass through a rule of
  a ``jax.custom_vjp`` (which ``fg.custom_gradient``, ``fg.gradient_override_map`` and
  ``fg.py_func(grad=...)`` are built on) once that rule itself runs under ``jvp``, so
  when ``f``'s jaxpr holds a ``custom_vjp`` anywhere both switch to reverse-over-reverse.
* :func:`nth_derivative` propagates a truncated Taylor series through ``f`` once
  (``jax.experimental.jet``) instead of nesting ``grad`` ``n`` times, whose cost grows
  with every order.  Functions ``jet`` cannot take fall back to nested differentiation.

Which path a function takes is read from its jaxpr at trace time, so everything here
works, unchanged, under ``jax.jit`` and ``jax.vmap``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import jet

from funcgrad import _checks
from funcgrad._core import connectivity as _connectivity
from funcgrad._core import derivative_modes as _derivative_modes
from funcgrad._core import differentiate as _differentiate
from funcgrad._core import jax_internals as _jax
from funcgrad._types import ArrayLike
from funcgrad._types import UnconnectedGradients
from funcgrad._types import replace_at
from funcgrad.gradients import gradients

__all__ = ["hessians", "hvp", "nth_derivative"]

# --- forward-over-reverse, or reverse-over-reverse through custom_vjp -------------------


@dataclasses.dataclass
class _Point:
    """``xs`` flattened, and the gradient of ``f`` as a function of its float leaves."""

    multi: bool  # xs was a list or tuple
    tree: Any
    leaves: list[jax.Array]
    wrt: list[int]  # the differentiable leaves
    grads: Callable[..., list[jax.Array]]  # (*leaves[wrt]) -> gradient leaves at wrt
    reverse: bool  # f holds a custom_vjp: differentiate the gradient in reverse mode

    @property
    def primals(self) -> list[jax.Array]:
        return [self.leaves[i] for i in self.wrt]

    def reach(self) -> list[list[bool]]:
        """For each gradient leaf: which of the ``wrt`` leaves it depends on."""
        jaxpr = _jax.trace(self.grads, *self.primals).jaxpr
        n = len(jaxpr.outvars)
        return [_connectivity.connected_inputs(jaxpr, [i == k for i in range(n)]) for k in range(n)]

    def result(self, out: list[Any]) -> Any:
        tree = jax.tree.unflatten(self.tree, out)
        return list(tree) if self.multi else tree[0]


def _point(caller: str, f: Callable[..., Any], xs: Any) -> _Point:
    multi, _, leaves, tree = _differentiate.flatten_inputs(caller, xs)
    wrt = [i for i, x in enumerate(leaves) if _connectivity.is_differentiable(x.dtype)]

    def grads(*values: jax.Array) -> list[jax.Array]:
        args = jax.tree.unflatten(tree, replace_at(leaves, wrt, values))
        out = gradients(f, list(args) if multi else args[0], unconnected_gradients="zero")
        flat = jax.tree.leaves(list(out) if multi else [out])
        return [flat[i] for i in wrt]

    closed = _jax.trace(lambda *a: f(*jax.tree.unflatten(tree, a)), *leaves)
    return _Point(multi, tree, leaves, wrt, grads, _derivative_modes.has_custom_vjp(closed.jaxpr))


def hessians(f: Callable[..., Any], xs: Any, *, unconnected_gradients: str = "none") -> Any:
    """The Hessian of the summed outputs of ``f`` with respect to each ``x`` (``tf.hessians``).

    For each ``x`` in ``xs`` this is the matrix of second derivatives of
    ``sum(f(*xs))`` with respect to that ``x`` alone (the diagonal blocks of the full
    Hessian, as TensorFlow gives), shaped ``x.shape + x.shape``.  It is computed
    forward-over-reverse (``jax.jacfwd`` of the gradient); when ``f`` contains a
    ``jax.custom_vjp`` (``fg.custom_gradient``, ``fg.gradient_override_map``,
    ``fg.py_func`` with ``grad``), reverse-over-reverse (``jax.jacrev``), because forward
    mode cannot pass through a custom rule that is itself differentiated.

    Args:
      f: a pure function of arrays returning an array or a pytree of arrays.
      xs: a list or tuple of arrays (``f(*xs)``, a list of Hessians comes back) or one
        array (``f(xs)``, one Hessian), as in :func:`funcgrad.gradients`.
      unconnected_gradients: ``"none"`` (default) gives ``None`` for an ``x`` whose
        gradient does not depend on it (``f`` constant or linear in ``x``, or ``x`` an
        integer), as nested ``tf.gradients`` does; ``"zero"`` gives zeros.

    Returns:
      One Hessian (or ``None``) per ``x``: a list when ``xs`` is a list or tuple.

    Raises:
      TypeError: an element of ``xs`` is not an array (a dict, say): ``tf.hessians``
        takes arrays; pass its leaves as separate arguments.
      ValueError: ``xs`` is empty or ``unconnected_gradients`` is not a valid value.

    Example:
      >>> f = lambda x, y: jnp.sum(x ** 3) + 2.0 * y
      >>> hx, hy = fg.hessians(f, [jnp.array([1.0, 2.0]), jnp.float32(3.0)])
      >>> hx.tolist(), hy
      ([[6.0, 0.0], [0.0, 12.0]], None)
    """
    caller = "fg.hessians(f, xs)"
    mode = _differentiate.unconnected_mode(caller, unconnected_gradients)
    _check_arrays(caller, xs)
    point = _point(caller, f, xs)
    jacobian = jax.jacrev if point.reverse else jax.jacfwd
    primals, reach = point.primals, point.reach()
    out: list[Any] = [None] * len(point.leaves)
    for k, i in enumerate(point.wrt):
        if reach[k][k]:

            def block(x: jax.Array, k: int = k) -> jax.Array:
                return point.grads(*primals[:k], x, *primals[k + 1 :])[k]

            out[i] = jacobian(block)(primals[k])
    if mode is UnconnectedGradients.ZERO:
        out = [
            jnp.zeros(x.shape * 2, x.dtype) if h is None else h
            for h, x in zip(out, point.leaves, strict=True)
        ]
    return point.result(out)


def _check_arrays(caller: str, xs: Any) -> None:
    items = list(xs) if isinstance(xs, list | tuple) else [xs]
    bad = [
        f"xs[{i}] is a {type(x).__name__}"
        for i, x in enumerate(items)
        if not jax.tree_util.treedef_is_leaf(jax.tree.structure(x))
    ]
    if bad:
        raise TypeError(
            f"{caller}: {'; '.join(bad)}; as in tf.hessians, each element of xs must be "
            "one array — pass a pytree's leaves as separate elements of xs."
        )


def hvp(f: Callable[..., Any], xs: Any, vs: Any, *, unconnected_gradients: str = "none") -> Any:
    """The Hessian of ``f``'s summed outputs times ``vs``, without forming the Hessian.

    Computes ``H @ v`` where ``H`` is the full Hessian of ``sum(f(*xs))`` with respect
    to all of ``xs`` (cross terms included), as ``jax.jvp`` of the gradient
    (forward-over-reverse), at the cost of a few gradient evaluations.  When ``f``
    contains a ``jax.custom_vjp`` it is the ``jax.vjp`` of the gradient instead
    (reverse-over-reverse; the Hessian is symmetric, so the product is the same).

    Args:
      f: a pure function of arrays returning an array or a pytree of arrays.
      xs: the point, in :func:`funcgrad.gradients`' calling convention (a list or tuple:
        ``f(*xs)``; anything else, any pytree: ``f(xs)``).
      vs: the vector, with the structure, shapes and dtypes of ``xs``.
      unconnected_gradients: ``"none"`` (default) gives ``None`` for a leaf whose
        gradient depends on none of ``xs`` (and for integer leaves); ``"zero"``, zeros.

    Returns:
      ``H @ v``, with the structure of ``xs`` (a list when ``xs`` is a list or tuple).

    Raises:
      ValueError: ``vs`` does not match ``xs`` (every mismatch is listed), ``xs`` is
        empty, or ``unconnected_gradients`` is not a valid value.
      TypeError: a leaf of ``xs`` is not an array, or ``xs`` is a list and ``vs`` not.

    Example:
      >>> f = lambda x: jnp.sum(x ** 3)
      >>> fg.hvp(f, jnp.array([1.0, 2.0]), jnp.array([1.0, 1.0])).tolist()
      [6.0, 12.0]
    """
    caller = "fg.hvp(f, xs, vs)"
    mode = _differentiate.unconnected_mode(caller, unconnected_gradients)
    point = _point(caller, f, xs)
    vectors = _check_vectors(caller, point, vs)
    primals, dots = point.primals, [vectors[i] for i in point.wrt]
    if point.reverse:
        products = jax.vjp(point.grads, *primals)[1](dots)
    else:
        products = jax.jvp(point.grads, primals, dots)[1]
    out: list[Any] = [None] * len(point.leaves)
    for i, product, reach in zip(point.wrt, products, point.reach(), strict=True):
        if any(reach):
            out[i] = product
    return point.result(_differentiate.fill(out, point.leaves, mode))


def _check_vectors(caller: str, point: _Point, vs: Any) -> list[jax.Array]:
    if point.multi and not isinstance(vs, list | tuple):
        raise TypeError(
            f"{caller}: xs is a list, so vs must be a list too; got {type(vs).__name__} — "
            "pass one vector per element of xs, in a list."
        )
    pairs, tree = jax.tree_util.tree_flatten_with_path(tuple(vs) if point.multi else (vs,))
    if tree != point.tree:
        raise ValueError(
            f"{caller}: vs has structure {tree}, but xs has structure {point.tree}; pass "
            "one vector per leaf of xs."
        )
    vectors = [jnp.asarray(v) for _, v in pairs]
    errors = [
        f"vs{jax.tree_util.keystr(path if point.multi else path[1:])}: expected shape "
        f"{x.shape} dtype {x.dtype}, got shape {v.shape} dtype {v.dtype}"
        for (path, _), x, v in zip(pairs, point.leaves, vectors, strict=True)
        if _connectivity.is_differentiable(x.dtype) and (x.shape, x.dtype) != (v.shape, v.dtype)
    ]
    if errors:
        raise ValueError(
            f"{caller}: vs does not match xs: {'; '.join(errors)}. Give each vector the "
            "shape and dtype of its point."
        )
    return vectors


# --- nth_derivative: Taylor mode, or nested grad where jet cannot go ---------------------


def _check_elementwise(caller: str, closed: _jax.Closed, x: jax.Array) -> None:
    mixers = _derivative_modes.elementwise_mixers(closed.jaxpr, x.shape)
    if mixers:
        raise ValueError(
            f"{caller}: f is not elementwise: {', '.join(mixers)} makes an "
            "element of f(x) depend on other elements of x. nth_derivative needs f(x)[i] to "
            "depend on x[i] alone; for a function of the whole array use fg.hessians, "
            "fg.hvp or nested fg.gradients, or map a scalar f over the elements with "
            "jax.vmap(fg.nth_derivative(f, n))."
        )


def _taylor(closed: _jax.Closed, n: int, x: jax.Array) -> jax.Array:
    """The n-th Taylor coefficient of ``f(x + t)`` in ``t``, times ``n!``.

    ``jet``'s default series are factorial-scaled (the k-th term is the k-th derivative),
    but it scales by ``exp(lgamma(k + 1))``, which is off by a few ulps in float32
    (40319.84 for 8!).  So the coefficients are taken unscaled and ``n!`` applied exactly.
    """
    series = [jnp.ones_like(x)] + [jnp.zeros_like(x)] * (n - 1)
    _, [terms] = jet.jet(closed, (x,), (series,), factorial_scaled=False)
    return terms[-1] * float(math.factorial(n))


def _nested(f: Callable[[jax.Array], jax.Array], n: int, x: jax.Array, reverse: bool) -> jax.Array:
    """Nested first-order derivatives: forward mode (a tangent of ones gives the
    derivative of every element at once, through loops too) or, through a
    ``custom_vjp``, which forward mode cannot enter, ``jax.grad`` vmapped over elements."""
    derivative = f
    for _ in range(n):
        derivative = jax.grad(derivative) if reverse else _forward(derivative)
    if x.ndim == 0 or not reverse:
        return derivative(x)
    return jax.vmap(derivative)(x.reshape(-1)).reshape(x.shape)


def _forward(f: Callable[[jax.Array], jax.Array]) -> Callable[[jax.Array], jax.Array]:
    return lambda x: jax.jvp(f, (x,), (jnp.ones_like(x),))[1]


def nth_derivative(f: Callable[..., jax.Array], n: int) -> Callable[..., jax.Array]:
    """The ``n``-th derivative of an elementwise (or scalar) function, by Taylor mode.

    Returns ``d(x)`` whose element ``i`` is ``d^n f(x)[i] / d x[i]^n``.  It pushes one
    truncated Taylor series through ``f`` with ``jax.experimental.jet``, which costs
    about ``n`` times one evaluation of ``f`` where nesting ``jax.grad`` ``n`` times
    costs exponentially more in trace and compile time.  The answer agrees with nested
    ``jax.grad`` (vmapped over the elements).

    ``f`` is checked when ``d`` is traced: ``f(x)`` must have ``x``'s shape, and every
    intermediate that depends on ``x`` must be computed from it element by element,
    keeping ``x``'s shape (no sums, products of matrices, reshapes, gathers, ...).

    Where ``jet`` cannot go, ``d`` silently falls back to nested first-order
    differentiation: primitives without a Taylor rule (``jnp.arctan``, ``gammaln``...),
    loops (``scan``, ``while``, ``fori_loop``), ``max``/``min``/``clamp`` with a scalar
    operand (``jnp.clip``), and ``custom_jvp``/``custom_vjp`` functions (``jax.nn.relu``,
    ``fg.custom_gradient``...), whose rules ``jet`` would ignore.  The fallback nests
    ``jax.jvp`` with a tangent of ones, or, when ``f`` holds a ``custom_vjp`` (which
    forward mode cannot enter), ``jax.grad`` vmapped over the elements.

    Args:
      f: an elementwise function of one floating array, or a function of a scalar.
      n: the order, an ``int`` ``>= 0``; ``0`` returns ``f`` itself.

    Returns:
      ``d(x)``, the ``n``-th derivative of ``f`` at ``x``, shaped like ``x``; it works
      under ``jax.jit`` and ``jax.vmap``.

    Raises:
      TypeError: ``f`` is not callable, ``n`` is not an ``int`` (``bool`` included);
        when ``d`` is called: ``x`` is not a floating array.
      ValueError: ``n`` is negative; when ``d`` is called: ``f(x)`` is not one floating
        array of ``x``'s shape, or ``f`` is not elementwise.

    Example:
      >>> d3 = fg.nth_derivative(jnp.sin, 3)  # -cos
      >>> d3(jnp.array([0.0, jnp.pi])).tolist()
      [-1.0, 1.0]
      >>> fg.nth_derivative(lambda x: x ** 4, 4)(jnp.array([2.0, 5.0])).tolist()
      [24.0, 24.0]
    """
    caller = "fg.nth_derivative(f, n)"
    if not callable(f):
        raise TypeError(
            f"{caller}: f must be a function, got {type(f).__name__}; pass the elementwise "
            "function to differentiate, e.g. fg.nth_derivative(jnp.sin, 3)."
        )
    n = _checks.as_int(caller, "n", n, minimum=0, hint="pass the order as an int (0 gives f)")
    if n == 0:
        return f

    @functools.wraps(f)
    def derivative(x: ArrayLike) -> jax.Array:
        x = _check_point(caller, x)
        closed, out = _jax.trace_with_shape(f, x)
        if not isinstance(out, jax.ShapeDtypeStruct) or (out.shape, out.dtype.kind) != (
            x.shape,
            "f",
        ):
            raise ValueError(
                f"{caller}: f(x) must be one floating array of x's shape {x.shape}, got "
                f"{jax.tree.map(lambda s: f'{s.dtype}{list(s.shape)}', out)}; nth_derivative "
                "takes elementwise functions — for others use fg.hessians, fg.hvp or nested "
                "fg.gradients."
            )
        _check_elementwise(caller, closed, x)
        if _derivative_modes.jet_blocker(closed.jaxpr) is None:
            return _taylor(closed, n, x)
        return _nested(f, n, x, reverse=_derivative_modes.has_custom_vjp(closed.jaxpr))

    return derivative


def _check_point(caller: str, x: Any) -> jax.Array:
    if not isinstance(x, jax.Array | float | int) and not hasattr(x, "__array__"):
        raise TypeError(
            f"{caller}: x must be an array, got {type(x).__name__}; pass a floating array, "
            "e.g. jnp.asarray(x, jnp.float32)."
        )
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(
            f"{caller}: x has dtype {x.dtype}; derivatives need a real floating dtype — "
            "cast it with x.astype(jnp.float32)."
        )
    return x
