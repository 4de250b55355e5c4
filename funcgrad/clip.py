"""TensorFlow's clipping functions, with TensorFlow's formulas, edge cases and gradients.

Each function evaluates the same expression as ``tensorflow/python/ops/clip_ops.py``, so
values, zeros, ``inf`` and ``NaN`` come out as TensorFlow's do.  Gradients follow
TensorFlow's too: ``tf.minimum`` / ``tf.maximum`` give a tie to their first argument
(JAX splits it in half), so this module uses the two with TensorFlow's derivative, the
one rule of ``_MaximumMinimumGrad`` in ``funcgrad._core.tf_gradients``: ``clip_by_value``
passes the gradient on the closed interval ``[lo, hi]`` and ``clip_by_norm`` at
``norm == clip_norm`` differentiates as in TensorFlow.  Arguments known when a function
is called (Python numbers, NumPy arrays) are checked then; traced values cannot raise and
follow TensorFlow's formula as they are.
``clip_by_norm``, ``global_norm`` and ``clip_by_global_norm`` take an
``fg.IndexedSlices`` as TensorFlow's do: the norm of its ``values`` (duplicate rows
included, so not the norm of its dense array), and the result keeps its indices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad._core import tf_gradients
from funcgrad._types import ArrayLike
from funcgrad._types import is_array
from funcgrad.indexed_slices import IndexedSlices

__all__ = [
    "clip_by_average_norm",
    "clip_by_global_norm",
    "clip_by_norm",
    "clip_by_value",
    "global_norm",
]

_STATIC = (bool, int, float, np.ndarray, np.generic)


_minimum = tf_gradients.maximum_minimum("Minimum")
_maximum = tf_gradients.maximum_minimum("Maximum")


def _array(caller: str, name: str, value: ArrayLike) -> jax.Array:
    """``value`` as an array; anything that is not an array or a number is a TypeError."""
    if not is_array(value):
        raise TypeError(
            f"{caller}: {name} must be an array or a number, got {value!r}; pass numbers, "
            "e.g. 1.0, not strings or containers."
        )
    return jnp.asarray(value)


def _values(t: Any) -> Any:
    """An ``IndexedSlices``' values (what TensorFlow's clipping reads), else ``t``."""
    return t.values if isinstance(t, IndexedSlices) else t


def _like(t: Any, values: jax.Array) -> Any:
    """``values`` in ``t``'s form: an ``IndexedSlices`` with ``t``'s indices, or as is."""
    return (
        IndexedSlices(values, t.indices, t.dense_shape) if isinstance(t, IndexedSlices) else values
    )


def _floating(caller: str, name: str, t: ArrayLike) -> jax.Array:
    t = _array(caller, name, t)
    if not jnp.issubdtype(t.dtype, jnp.floating):
        raise TypeError(
            f"{caller}: {name} has dtype {t.dtype}, but clipping by a norm needs a floating "
            f"dtype; cast it first, e.g. {name}.astype(jnp.float32)."
        )
    return t


def _clip_norm(caller: str, clip_norm: ArrayLike, dtype: jnp.dtype) -> jax.Array:
    """``clip_norm`` as a scalar of ``dtype``; a static one must be finite and >= 0."""
    _array(caller, "clip_norm", clip_norm)
    if jnp.ndim(clip_norm) != 0:
        raise ValueError(
            f"{caller}: clip_norm must be a scalar, got shape {jnp.shape(clip_norm)}; "
            "pass one number, the largest norm you allow."
        )
    if isinstance(clip_norm, _STATIC) and not (np.isfinite(clip_norm) and clip_norm >= 0):
        raise ValueError(
            f"{caller}: clip_norm must be finite and >= 0, got {clip_norm!r}; pass the "
            "largest norm you allow (0.0 clips everything to zero)."
        )
    return jnp.asarray(clip_norm).astype(dtype)


def _t_list(
    caller: str, t_list: Sequence[ArrayLike | IndexedSlices | None]
) -> list[jax.Array | None]:
    """The entries of ``t_list`` as arrays (``None`` kept), all of one floating dtype."""
    if not isinstance(t_list, list | tuple):
        raise TypeError(
            f"{caller}: t_list must be a list or tuple of arrays (None entries allowed), got "
            f"{type(t_list).__name__}; for a pytree pass jax.tree.leaves(tree)."
        )
    values = [
        None if t is None else _array(caller, f"t_list[{i}]", _values(t))
        for i, t in enumerate(t_list)
    ]
    dtypes = {f"t_list[{i}]": v.dtype for i, v in enumerate(values) if v is not None}
    bad = {k: str(d) for k, d in dtypes.items() if not jnp.issubdtype(d, jnp.floating)}
    if bad or len(set(dtypes.values())) > 1:
        listing = bad or {k: str(d) for k, d in dtypes.items()}
        raise TypeError(
            f"{caller}: the entries of t_list must share one floating dtype, as in "
            f"TensorFlow; got {listing}. Cast them to one dtype, e.g. .astype(jnp.float32)."
        )
    return values


def clip_by_value(t: ArrayLike, lo: ArrayLike, hi: ArrayLike) -> jax.Array:
    """Clip ``t`` elementwise to ``[lo, hi]`` (``tf.clip_by_value``).

    As TensorFlow: ``maximum(minimum(t, hi), lo)``, NaN stays NaN, and the gradient passes
    to ``t`` on the closed interval ``lo <= t <= hi`` (bounds included; JAX's
    ``jnp.clip`` gives half of it at a bound), to ``hi`` where ``t > hi`` and to ``lo``
    where ``t < lo`` or ``t`` is NaN.

    Args:
      t: an array of any numeric dtype.
      lo: the lower bound, a scalar or an array that broadcasts to ``t``'s shape.
      hi: the upper bound, likewise.

    Returns:
      An array with ``t``'s shape and dtype.

    Raises:
      ValueError: if ``lo`` or ``hi`` does not broadcast to ``t``'s shape, or, where both
        are known when called, ``lo > hi`` somewhere or either is NaN.
      TypeError: if a bound is a float and ``t`` an integer array, or a bound is an array
        of another dtype than ``t``.

    Example:
      >>> t = jnp.array([-2.0, -1.0, 0.5, 1.0, 3.0])
      >>> fg.clip_by_value(t, -1.0, 1.0).tolist()
      [-1.0, -1.0, 0.5, 1.0, 1.0]
      >>> jax.grad(lambda t: fg.clip_by_value(t, -1.0, 1.0).sum())(t).tolist()
      [0.0, 1.0, 1.0, 1.0, 0.0]
    """
    caller = "fg.clip_by_value(t, lo, hi)"
    t = _array(caller, "t", t)
    lo, hi = _bound(caller, "lo", lo, t), _bound(caller, "hi", hi, t)
    if isinstance(lo, _STATIC) and isinstance(hi, _STATIC):
        lo_np, hi_np = np.asarray(lo), np.asarray(hi)
        if np.isnan(lo_np).any() or np.isnan(hi_np).any() or (lo_np > hi_np).any():
            raise ValueError(
                f"{caller}: needs lo <= hi and no NaN bound, got lo={lo!r}, hi={hi!r}; "
                "swap the bounds or fix the NaN."
            )
    lo_t = jnp.broadcast_to(jnp.asarray(lo, t.dtype), t.shape)
    hi_t = jnp.broadcast_to(jnp.asarray(hi, t.dtype), t.shape)
    return _maximum(_minimum(t, hi_t), lo_t)


def _bound(caller: str, name: str, bound: ArrayLike, t: jax.Array) -> ArrayLike:
    """Check that ``bound`` broadcasts to ``t`` and converts to its dtype without loss."""
    _array(caller, name, bound)
    if jnp.broadcast_shapes(jnp.shape(bound), t.shape) != t.shape:
        raise ValueError(
            f"{caller}: {name} has shape {jnp.shape(bound)}, which does not broadcast to "
            f"t's shape {t.shape}; pass a scalar or an array that broadcasts to it."
        )
    weak = isinstance(bound, bool | int | float) or getattr(bound, "weak_type", False)
    is_float = jnp.issubdtype(jnp.result_type(bound), jnp.inexact)
    if weak and is_float and not jnp.issubdtype(t.dtype, jnp.inexact):
        raise TypeError(
            f"{caller}: {name}={bound!r} is a float but t has dtype {t.dtype}; cast t to a "
            "float dtype first, e.g. t.astype(jnp.float32), as TensorFlow asks."
        )
    if not weak and jnp.result_type(bound) != t.dtype:
        raise TypeError(
            f"{caller}: {name} has dtype {jnp.result_type(bound)} but t has dtype {t.dtype}; "
            f"cast the bound, e.g. {name}.astype(t.dtype)."
        )
    return bound


def clip_by_norm(
    t: ArrayLike | IndexedSlices, clip_norm: ArrayLike, axes: int | Sequence[int] | None = None
) -> Any:
    """Scale ``t`` down so that its L2 norm is at most ``clip_norm`` (``tf.clip_by_norm``).

    TensorFlow's formula: ``t * clip_norm / maximum(l2norm(t), clip_norm)``, where the norm
    is taken over ``axes`` (all by default, else each slice along the other axes is clipped
    on its own). A zero ``t`` stays zero with gradient ``1``; a NaN anywhere makes every
    output NaN, an ``inf`` entry becomes NaN and the others zero, as in TensorFlow.

    Args:
      t: a floating array, or an ``fg.IndexedSlices``: its ``values`` are clipped (the
        norm of the values, duplicate rows included; ``axes`` are axes of ``values``),
        as TensorFlow does.
      clip_norm: the largest norm allowed, a scalar; a traced negative one counts as zero,
        as in TensorFlow.
      axes: an axis or a sequence of axes to take the norm over; ``None`` for all.

    Returns:
      The clipped array, with ``t``'s shape and dtype (an ``IndexedSlices`` with ``t``'s
      indices for an ``IndexedSlices``).

    Raises:
      TypeError: if ``t`` is not floating, or ``axes`` holds something else than ints.
      ValueError: if ``clip_norm`` is not a scalar, is known and negative or not finite,
        or ``axes`` names an axis ``t`` does not have (or one twice).

    Example:
      >>> fg.clip_by_norm(jnp.array([3.0, 4.0]), 1.0)
      Array([0.6, 0.8], dtype=float32)
      >>> fg.clip_by_norm(jnp.array([[3.0, 4.0], [0.3, 0.4]]), 1.0, axes=1)
      Array([[0.6, 0.8],
             [0.3, 0.4]], dtype=float32)
    """
    caller = "fg.clip_by_norm(t, clip_norm, axes)"
    x = _floating(caller, "t", _values(t))
    clip_norm = _maximum(_clip_norm(caller, clip_norm, x.dtype), jnp.zeros((), x.dtype))
    l2sum = jnp.sum(x * x, axis=_axes(caller, axes, x.ndim), keepdims=True)
    positive = l2sum > 0
    l2norm = jnp.where(positive, jnp.sqrt(jnp.where(positive, l2sum, 1)), l2sum)
    return _like(t, x * clip_norm / _maximum(l2norm, clip_norm))


def _axes(caller: str, axes: int | Sequence[int] | None, ndim: int) -> tuple[int, ...] | None:
    if axes is None:
        return None
    listed = [axes] if isinstance(axes, int | np.integer) else list(axes)
    if not all(isinstance(a, int | np.integer) and not isinstance(a, bool) for a in listed):
        raise TypeError(f"{caller}: axes must be an int or a sequence of ints, got {axes!r}.")
    if not all(-ndim <= a < ndim for a in listed) or len({a % ndim for a in listed}) < len(listed):
        raise ValueError(
            f"{caller}: axes={axes!r} must name distinct axes of t, which has {ndim}; "
            f"use values in [{-ndim}, {ndim - 1}]."
        )
    return tuple(int(a) % ndim for a in listed)


def global_norm(t_list: Sequence[ArrayLike | IndexedSlices | None]) -> jax.Array:
    """The L2 norm of all entries of ``t_list`` together (``tf.linalg.global_norm``).

    ``sqrt(sum(l2norm(t) ** 2 for t in t_list))``, computed as TensorFlow does (twice the
    sum of ``tf.nn.l2_loss``); ``None`` entries are skipped, and an empty list or one of
    only ``None`` has norm ``0.0``. Its gradient at an all-zero list is NaN, as in
    TensorFlow.

    Args:
      t_list: a list or tuple of floating arrays of one dtype, ``fg.IndexedSlices``
        (the norm of their ``values``, duplicate rows included, as in TensorFlow) or
        ``None``.

    Returns:
      A scalar of the entries' dtype (``float32`` when there is none).

    Raises:
      TypeError: if ``t_list`` is not a list or tuple, or its entries are not floating
        arrays of one dtype.

    Example:
      >>> float(fg.global_norm([jnp.array([3.0]), None, jnp.array([[4.0]])]))
      5.0
    """
    values = [v for v in _t_list("fg.global_norm(t_list)", t_list) if v is not None]
    if not values:
        return jnp.zeros((), jnp.float32)
    half_squared_norms = jnp.stack([jnp.sum(v * v * 0.5) for v in values])
    return jnp.sqrt(jnp.sum(half_squared_norms) * 2)


def clip_by_global_norm(
    t_list: Sequence[ArrayLike | IndexedSlices | None],
    clip_norm: ArrayLike,
    use_norm: ArrayLike | None = None,
) -> tuple[list[Any], jax.Array]:
    """Scale every entry by one factor so that their global norm is at most ``clip_norm``.

    ``tf.clip_by_global_norm``: each entry becomes
    ``t * clip_norm / maximum(global_norm, clip_norm)``, in TensorFlow's form
    ``t * clip_norm * minimum(1 / global_norm, 1 / clip_norm)``. ``None`` entries stay
    ``None``. When the global norm is ``inf`` or NaN, every entry becomes NaN (TensorFlow's
    signal that something went wrong).

    Args:
      t_list: a list or tuple of floating arrays of one dtype, ``fg.IndexedSlices``
        (their ``values`` count and are scaled, their indices kept, as in TensorFlow)
        or ``None``.
      clip_norm: the largest global norm allowed, a scalar.
      use_norm: the global norm to use instead of computing it (a scalar).

    Returns:
      ``(clipped, norm)``: a list like ``t_list`` with the scaled entries, and the global
      norm before clipping (``use_norm`` when given).

    Raises:
      TypeError: if ``t_list`` is not a list or tuple, or its entries are not floating
        arrays of one dtype.
      ValueError: if ``clip_norm`` or ``use_norm`` is not a scalar, or ``clip_norm`` is
        known and negative or not finite.

    Example:
      >>> clipped, norm = fg.clip_by_global_norm([jnp.array([3.0]), None, jnp.array([4.0])], 1.0)
      >>> clipped, float(norm)
      ([Array([0.6], dtype=float32), None, Array([0.8], dtype=float32)], 5.0)
    """
    caller = "fg.clip_by_global_norm(t_list, clip_norm, use_norm)"
    values = _t_list(caller, t_list)
    if use_norm is None:
        norm = global_norm(values)
    else:  # a Python number becomes float32, as TensorFlow converts it
        norm = jnp.asarray(use_norm, jnp.float32 if isinstance(use_norm, float | int) else None)
    if norm.ndim != 0:
        raise ValueError(
            f"{caller}: use_norm must be a scalar, got shape {norm.shape}; pass the global "
            "norm, e.g. fg.global_norm(t_list), or None to compute it."
        )
    clip_norm = _clip_norm(caller, clip_norm, norm.dtype)
    scale = clip_norm * _minimum(1.0 / norm, 1.0 / clip_norm) + (norm - norm)
    clipped = [
        None if v is None else _like(t, v * scale.astype(v.dtype))
        for t, v in zip(t_list, values, strict=True)
    ]
    return clipped, norm


def clip_by_average_norm(t: ArrayLike, clip_norm: ArrayLike) -> jax.Array:
    """Scale ``t`` down so that its L2 norm divided by its size is at most ``clip_norm``.

    ``tf.compat.v1.clip_by_average_norm``:
    ``t * clip_norm * minimum(size(t) / l2norm(t), 1 / clip_norm)``. A zero ``t`` stays
    zero with gradient ``1``; NaN anywhere makes every output NaN, as in TensorFlow.

    Args:
      t: a floating array.
      clip_norm: the largest average norm allowed, a scalar.

    Returns:
      The clipped array, with ``t``'s shape and dtype.

    Raises:
      TypeError: if ``t`` is not floating.
      ValueError: if ``clip_norm`` is not a scalar, or is known and negative or not finite.

    Example:
      >>> fg.clip_by_average_norm(jnp.array([3.0, 4.0]), 1.0)
      Array([1.2, 1.6], dtype=float32)
    """
    caller = "fg.clip_by_average_norm(t, clip_norm)"
    t = _floating(caller, "t", t)
    clip_norm = _clip_norm(caller, clip_norm, t.dtype)
    l2sum = jnp.sum(t * t)
    # rsqrt(0) is inf as in TensorFlow, whose rsqrt gradient is 0 for a zero cotangent;
    # the inner where keeps JAX's from turning that zero into 0 * inf = NaN.
    l2norm_inv = jnp.where(l2sum == 0, jnp.inf, jax.lax.rsqrt(jnp.where(l2sum == 0, 1, l2sum)))
    n_element = jnp.asarray(t.size, t.dtype)
    return t * clip_norm * _minimum(l2norm_inv * n_element, 1.0 / clip_norm)
