"""``tf.gradients`` for pure functions: cotangents, ``None`` for unconnected inputs, taps.

funcgrad differentiates a *function* rather than a graph: ``gradients(f, xs)`` is
TensorFlow's ``tf.gradients(f(xs), xs)``.  This module is the public face; the
differentiation itself is ``funcgrad._core`` (which inputs reach the outputs is decided
from ``f``'s jaxpr at trace time, so everything works inside ``jax.jit`` and
``jax.vmap``) and the taps' machinery is ``funcgrad._core.taps``.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import TypedDict
from typing import Unpack

import jax
import jax.numpy as jnp

from funcgrad import _checks
from funcgrad._core import connectivity as _connectivity
from funcgrad._core import differentiate as _differentiate
from funcgrad._core import sparse_reads as _sparse_reads
from funcgrad._core import taps as _taps
from funcgrad._types import Cotangent
from funcgrad._types import PyTree
from funcgrad._types import UnconnectedGradients
from funcgrad._types import non_arrays

__all__ = [
    "UnconnectedGradients",
    "gradients",
    "stop_gradient",
    "tap",
    "tap_gradients",
    "value_and_gradients",
]


def stop_gradient(tree: PyTree) -> PyTree:
    """Hold every leaf of ``tree`` constant for differentiation (``tf.stop_gradient``).

    Args:
      tree: an array or any pytree of arrays.

    Returns:
      ``tree`` with the same values; no gradient flows back through it.

    Raises:
      TypeError: a leaf of ``tree`` is not an array.

    Example:
      >>> a, b = jnp.float32(1.0), jnp.float32(2.0)
      >>> fg.gradients(lambda a, b: fg.stop_gradient(a * b) + b, [a, b])
      [None, Array(1., dtype=float32)]
    """
    bad = non_arrays(tree, "tree")
    if bad:
        raise TypeError(
            f"fg.stop_gradient(tree): {'; '.join(bad)}; pass an array or a pytree of arrays."
        )
    return jax.tree.map(jax.lax.stop_gradient, tree)


def tap(x: PyTree, name: str) -> PyTree:
    """Name an intermediate value of a function, so gradients can refer to it.

    Outside ``fg.gradients`` / ``fg.tap_gradients`` a tap is the identity.  Inside, the
    tapped value can be held constant (``gradients(..., stop_gradients=[name])``,
    TensorFlow's ``stop_gradients``) or differentiated against
    (``tap_gradients(f, xs, [name])``, as ``tf.gradients(ys, intermediate)``).  Taps
    belong to the innermost ``gradients`` call tracing them; a name may be tapped only
    once per call of ``f``.

    Args:
      x: the value to name: an array or a pytree of arrays.
      name: a non-empty string.

    Returns:
      ``x`` unchanged.

    Raises:
      TypeError: ``name`` is not a non-empty string.
      ValueError: ``name`` is tapped twice in one traced call of ``f``.

    Example:
      >>> def f(x):
      ...     h = fg.tap(x * x, "h")
      ...     return 3.0 * h
      >>> f(jnp.float32(2.0))
      Array(12., dtype=float32)
      >>> fg.tap_gradients(f, jnp.float32(2.0), ["h"])
      {'h': Array(3., dtype=float32)}
    """
    if not isinstance(name, str) or not name:
        raise TypeError(
            f"fg.tap(x, name): name must be a non-empty string, got {name!r}; name the "
            "value, e.g. fg.tap(h, 'hidden')."
        )
    return _taps.apply(x, name)


class _Options(TypedDict, total=False):
    """The keyword options that :func:`gradients` and :func:`value_and_gradients` share."""

    unconnected_gradients: str
    stop_gradients: str | Sequence[str] | None
    has_aux: bool
    indexed_slices: bool


def _gradients(
    caller: str,
    f: Callable[..., Any],
    xs: Any,
    grad_ys: PyTree,
    *,
    unconnected_gradients: str = "none",
    stop_gradients: str | Sequence[str] | None = (),
    has_aux: bool = False,
    indexed_slices: bool = False,
    **tensorflow_only: Any,
) -> tuple[_differentiate.Result, Any]:
    _checks.refuse_keywords(caller, tensorflow_only, caller)
    _check_callable(caller, f)
    mode = _differentiate.unconnected_mode(caller, unconnected_gradients)
    stop = _taps.as_names(caller, "stop_gradients", stop_gradients, none=True)
    multi, args, leaves, tree = _differentiate.flatten_inputs(caller, xs)
    frame = _taps.Frame(caller, stop=frozenset(stop))
    fun = _taps.bound(f, tree, frame)
    wrt = [_connectivity.is_differentiable(x.dtype) for x in leaves]
    result = _differentiate.differentiate(
        caller, fun, leaves, wrt, grad_ys, has_aux, indexed_slices
    )
    _taps.check_names(frame, stop, "stop_gradients")
    if indexed_slices:
        paths = jax.tree_util.tree_flatten_with_path(args if multi else xs)[0]
        names = [f"xs{jax.tree_util.keystr(p)}" for p, _ in paths]
        _sparse_reads.check_all_ids(caller, result.grads, names)
    grads = jax.tree.unflatten(tree, _differentiate.fill(result.grads, leaves, mode))
    return result, list(grads) if multi else grads[0]


def _check_callable(caller: str, f: Any) -> None:
    if not callable(f):
        raise TypeError(
            f"{caller}: f must be a function, got {type(f).__name__}; pass the function "
            "to differentiate first, e.g. fg.gradients(lambda x: x ** 2, x)."
        )


def gradients(
    f: Callable[..., Any],
    xs: Any,
    grad_ys: PyTree = None,
    *,
    unconnected_gradients: str = "none",
    stop_gradients: str | Sequence[str] | None = (),
    has_aux: bool = False,
    indexed_slices: bool = False,
    **tensorflow_only: Any,
) -> Any:
    """The gradient of the sum of ``f``'s outputs with respect to ``xs`` (``tf.gradients``).

    Computes ``d(sum_i <grad_ys_i, ys_i>) / d xs`` where ``ys = f(*xs)``.  Inputs that
    no differentiable path joins to ``ys`` get ``None`` (as in TensorFlow), decided at
    trace time, so the ``None`` pattern is the same under ``jax.jit``.

    Args:
      f: a pure function of JAX arrays returning an array or a pytree of arrays.
      xs: a list or tuple: ``f(*xs)`` is differentiated and a **list** with one gradient
        per element comes back.  Anything else (an array, a dict, any pytree):
        ``f(xs)``, and one gradient comes back.  Each gradient has its input's structure.
      grad_ys: cotangents for the outputs (TensorFlow's initial gradients), with ``ys``'s
        structure, shapes and dtypes; ``None``, or a ``None`` leaf, means ones.
      unconnected_gradients: ``"none"`` (default) gives ``None`` for an unconnected
        leaf; ``"zero"`` gives zeros of its shape and dtype.  Integer and boolean leaves
        are never differentiated and are treated as unconnected.
      stop_gradients: names of taps (``fg.tap``) in ``f`` to hold constant, as
        TensorFlow's ``stop_gradients``: the gradient reaches a stopped value but goes
        no further back (a stopped tap of an input itself is that input, so its
        gradient is the partial derivative, as ``tf.gradients(a * a + 2 * a, a,
        stop_gradients=[a])`` is).
      has_aux: ``f`` returns ``(ys, aux)``; the result is then ``(grads, aux)``.
      indexed_slices: give a leaf of ``xs`` that ``f`` reads only through gathers of
        whole rows (``jnp.take(E, ids, axis=0)``, ``E[ids]``, an embedding layer) an
        ``fg.IndexedSlices``, where ``tf.gradients`` gives one: one row per gathered
        id, duplicates kept, several lookups concatenated.  Default ``False``: dense
        gradients, as ``jax.grad`` gives.  (See the "Embeddings and sparse gradients"
        page.)
      **tensorflow_only: none is taken.  ``tf.gradients``' ``gate_gradients``,
        ``aggregation_method``, ``colocate_gradients_with_ops`` and ``name`` choose how
        TensorFlow builds and runs its graph, never the numbers: each is a ``TypeError``
        that says why and to drop it.

    Returns:
      The gradients (a list when ``xs`` is a list or tuple), or ``(grads, aux)``.

    Raises:
      ValueError: ``xs`` is empty, ``grad_ys`` does not match the outputs,
        ``unconnected_gradients`` is not ``"none"`` or ``"zero"``, or (with
        ``indexed_slices``, outside ``jax.jit``) a gathered id lies outside its table.
      TypeError: ``f`` is not callable, a leaf of ``xs`` or of ``f``'s outputs is
        not an array (``f`` returning ``None`` included), or a keyword argument is not
        taken (TensorFlow's graph arguments among them).
      KeyError: ``stop_gradients`` names a tap ``f`` does not have.

    Example:
      >>> a, b = jnp.float32(1.0), jnp.float32(2.0)
      >>> fg.gradients(lambda a, b: 5 * a + b, [a, b])
      [Array(5., dtype=float32), Array(1., dtype=float32)]
      >>> fg.gradients(lambda a, b: 2.0 * a, [a, b], unconnected_gradients="zero")
      [Array(2., dtype=float32), Array(0., dtype=float32)]
      >>> table = jnp.ones((5, 2))
      >>> g = fg.gradients(lambda t: (3.0 * t[jnp.array([4, 1, 4])]).sum(), table,
      ...                  indexed_slices=True)
      >>> g.indices.tolist(), g.values.tolist(), g.dense_shape
      ([4, 1, 4], [[3.0, 3.0], [3.0, 3.0], [3.0, 3.0]], (5, 2))
    """
    result, grads = _gradients(
        "fg.gradients(f, xs)",
        f,
        xs,
        grad_ys,
        unconnected_gradients=unconnected_gradients,
        stop_gradients=stop_gradients,
        has_aux=has_aux,
        indexed_slices=indexed_slices,
        **tensorflow_only,
    )
    return (grads, result.aux) if has_aux else grads


def value_and_gradients(
    f: Callable[..., Any], xs: Any, grad_ys: PyTree = None, **options: Unpack[_Options]
) -> tuple[Any, Any]:
    """``f``'s outputs and ``gradients(f, xs, ...)``, from one evaluation of ``f``.

    Takes the same arguments as :func:`gradients`: ``f``, ``xs``, ``grad_ys`` and the
    keyword options ``unconnected_gradients``, ``stop_gradients``, ``has_aux`` and
    ``indexed_slices``.

    Returns:
      ``(ys, grads)``; with ``has_aux=True``, ``((ys, aux), grads)`` as
      ``jax.value_and_grad`` does.

    Example:
      >>> ys, grads = fg.value_and_gradients(lambda x: x ** 2, jnp.float32(3.0))
      >>> ys, grads
      (Array(9., dtype=float32), Array(6., dtype=float32))
    """
    result, grads = _gradients("fg.value_and_gradients(f, xs)", f, xs, grad_ys, **options)
    return ((result.ys, result.aux) if options.get("has_aux") else result.ys), grads


def tap_gradients(
    f: Callable[..., Any],
    xs: Any,
    names: str | Sequence[str],
    grad_ys: PyTree = None,
    *,
    unconnected_gradients: str = "none",
    stop_gradients: str | Sequence[str] | None = (),
) -> dict[str, Cotangent]:
    """The gradient of ``f``'s outputs with respect to tapped intermediate values.

    TensorFlow's ``tf.gradients(ys, intermediate)``: ``f`` names intermediates with
    ``fg.tap(value, name)``, and this returns ``d(sum <grad_ys, ys>) / d value`` for each
    requested name, holding ``xs`` fixed.  ``xs`` follows :func:`gradients`' calling
    convention.

    Args:
      f: a pure function that taps the requested names.
      xs: the inputs, as in :func:`gradients`.
      names: one tap name or a sequence of them.
      grad_ys: cotangents for the outputs, as in :func:`gradients`.
      unconnected_gradients: ``"none"`` or ``"zero"``, for a tap the outputs do not
        depend on.
      stop_gradients: tap names whose values are held constant, as TensorFlow's
        ``stop_gradients`` (``None``, TensorFlow's default, holds none): the gradient
        reaches a stopped tap but goes no further back, so a requested name that is
        also stopped gets its partial derivative.

    Returns:
      ``{name: gradient}``, each gradient shaped like its tapped value.

    Raises:
      KeyError: a name is not tapped by ``f`` (the message lists the taps it has).
      TypeError: ``f`` is not callable, ``names`` is not a name or a list of names
        (``None``), or a name is not a non-empty string.

    Example:
      >>> def f(w1, w2):
      ...     h = fg.tap(3.0 * w1, "h")
      ...     return h * w2
      >>> fg.tap_gradients(f, [jnp.float32(1.0), jnp.float32(2.0)], "h")
      {'h': Array(2., dtype=float32)}

      TensorFlow's ``tf.gradients(a + b, [a, b], stop_gradients=[a, b])``, where
      ``b = 2 * a``: each partial derivative, not the total one.

      >>> def g(x):
      ...     a = fg.tap(x, "a")
      ...     b = fg.tap(2.0 * a, "b")
      ...     return a + b
      >>> fg.tap_gradients(g, jnp.float32(3.0), ["a", "b"], stop_gradients=["a", "b"])
      {'a': Array(1., dtype=float32), 'b': Array(1., dtype=float32)}
    """
    caller = "fg.tap_gradients(f, xs, names)"
    _check_callable(caller, f)
    mode = _differentiate.unconnected_mode(caller, unconnected_gradients)
    wanted = _taps.as_names(caller, "names", names)
    stop = frozenset(_taps.as_names(caller, "stop_gradients", stop_gradients, none=True))
    _, _, leaves, tree = _differentiate.flatten_inputs(caller, xs)
    record = _taps.Frame(caller)

    def traced(*values: jax.Array) -> Any:
        with _taps.frame(record):
            return f(*jax.tree.unflatten(tree, values))

    jax.eval_shape(traced, *leaves)
    _taps.check_names(record, wanted, "names")
    _taps.check_names(record, sorted(stop), "stop_gradients")
    shapes = {n: record.seen[n] for n in wanted}
    eps_leaves, eps_tree = jax.tree.flatten(shapes)
    eps = [jnp.zeros(s.shape, s.dtype) for s in eps_leaves]

    def fun(*values: jax.Array) -> Any:
        perturb = jax.tree.unflatten(eps_tree, values[: len(eps)])
        with _taps.frame(_taps.Frame(caller, stop=stop, perturb=perturb)):
            return f(*jax.tree.unflatten(tree, values[len(eps) :]))

    wrt = [_connectivity.is_differentiable(e.dtype) for e in eps] + [False] * len(leaves)
    result = _differentiate.differentiate(caller, fun, eps + leaves, wrt, grad_ys, has_aux=False)
    grads = _differentiate.fill(result.grads[: len(eps)], eps, mode)
    return dict(jax.tree.unflatten(eps_tree, grads))
