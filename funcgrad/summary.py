"""Gradient statistics for logging: norms, histograms, ``None`` and non-finite counts.

TensorFlow programs log gradients with ``tf.summary.histogram(name, grad)`` inside the
graph, which fails outright on the ``None`` gradient of an unconnected variable.
``gradient_summary`` computes the same statistics for a whole gradients-and-variables
list as one pytree of arrays, inside ``jax.jit`` and ``jax.vmap``; a ``None`` gradient
gets zeros and a ``True`` in ``is_none``.  ``write_gradient_summary`` then hands the
numbers to any TensorBoard writer with tensorboardX's ``add_scalar`` /
``add_histogram_raw`` methods, on the host (funcgrad itself never imports tensorboardX).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from typing import NamedTuple
from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad import _checks
from funcgrad._types import Cotangent
from funcgrad.indexed_slices import IndexedSlices

__all__ = ["GradientSummary", "SummaryWriter", "gradient_summary", "write_gradient_summary"]

_WRITER_METHODS = ("add_scalar", "add_histogram_raw")


class GradientSummary(NamedTuple):
    """Statistics of each gradient in a gradients-and-variables list (one row each).

    Every field is an array whose first axis has one entry per ``(gradient, variable)``
    pair.  The histogram and its ``min`` / ``max`` / ``sum`` / ``sum_squares`` cover the
    finite elements only; ``norm`` covers all of them, so it is ``inf`` or ``nan`` where
    the gradient is (as ``tf.norm``).  A ``None`` gradient counts as an empty one: norm
    0, no elements, and ``is_none`` set.

    Attributes:
      norm: ``(n,)`` float32, the L2 norm of each gradient.
      is_none: ``(n,)`` bool, whether the gradient is ``None``.
      nonfinite_count: ``(n,)`` int32, how many elements are ``inf`` or ``nan``.
      min: ``(n,)`` float32, the smallest finite element (0 when there is none).
      max: ``(n,)`` float32, the largest finite element (0 when there is none).
      sum: ``(n,)`` float32, the sum of the finite elements.
      sum_squares: ``(n,)`` float32, the sum of their squares.
      histogram: ``(n, bins)`` int32, counts of the finite elements in equal-width bins
        from ``min`` to ``max`` (``numpy.histogram``'s bins, last bin closed).
      bin_edges: ``(n, bins + 1)`` float32, the edges of those bins.
    """

    norm: jax.Array
    is_none: jax.Array
    nonfinite_count: jax.Array
    min: jax.Array
    max: jax.Array
    sum: jax.Array
    sum_squares: jax.Array
    histogram: jax.Array
    bin_edges: jax.Array

    @property
    def none_count(self) -> jax.Array:
        """How many gradients are ``None``."""
        return jnp.sum(self.is_none, axis=-1, dtype=jnp.int32)

    @property
    def global_norm(self) -> jax.Array:
        """The norm of all the gradients together, as ``fg.global_norm`` (``None`` skipped)."""
        return jnp.sqrt(jnp.sum(jnp.square(self.norm), axis=-1))


class SummaryWriter(Protocol):
    """The two methods of ``tensorboardX.SummaryWriter`` that the writer helper calls."""

    def add_scalar(self, tag: str, scalar_value: float, global_step: int) -> Any:
        """Records one scalar."""

    def add_histogram_raw(
        self,
        tag: str,
        min: float,
        max: float,
        num: int,
        sum: float,
        sum_squares: float,
        bucket_limits: list[float],
        bucket_counts: list[int],
        global_step: int,
    ) -> Any:
        """Records one histogram from precomputed buckets."""


def gradient_summary(
    grads_and_vars: Sequence[tuple[Cotangent, Any]], bins: int = 30
) -> GradientSummary:
    """Norm, histogram, ``None`` and non-finite counts of each gradient in a list.

    Args:
      grads_and_vars: ``(gradient, variable)`` pairs, as ``compute_gradients`` returns
        them; a gradient is a real floating-point array, an ``fg.IndexedSlices`` (its
        ``values`` are summarised, duplicate rows included, as TensorFlow's summaries
        of an embedding gradient do) or ``None``.  Only the gradients are read.
      bins: the number of histogram bins, a positive int.

    Returns:
      A ``GradientSummary``: one row of statistics per pair, all arrays, so that it can
      be returned from a jitted step.

    Raises:
      TypeError: an entry is not a ``(gradient, variable)`` pair, or a gradient is not a
        real floating-point array.
      ValueError: ``grads_and_vars`` is empty or ``bins`` is not a positive int.

    Example:
      >>> gvs = [(jnp.array([3.0, -4.0]), None), (None, jnp.zeros(2)),
      ...        (jnp.array([1.0, jnp.inf]), None)]
      >>> s = fg.gradient_summary(gvs, bins=2)
      >>> s.norm.tolist(), s.is_none.tolist(), s.nonfinite_count.tolist()
      ([5.0, 0.0, inf], [False, True, False], [0, 0, 1])
      >>> s.histogram.tolist(), s.bin_edges[0].tolist()
      ([[1, 1], [0, 0], [0, 1]], [-4.0, -0.5, 3.0])
    """
    if not grads_and_vars:
        raise ValueError(
            "fg.gradient_summary(grads_and_vars): the list is empty; pass the "
            "(gradient, variable) pairs that compute_gradients returns."
        )
    bins = _checks.as_int(
        "fg.gradient_summary(grads_and_vars, bins)",
        "bins",
        bins,
        minimum=1,
        hint="pass the number of histogram bins, e.g. 30",
    )
    rows = [
        _gradient_stats(_checked_gradient(i, pair), bins) for i, pair in enumerate(grads_and_vars)
    ]
    return jax.tree.map(lambda *xs: jnp.stack(xs), *rows)


def write_gradient_summary(
    writer: SummaryWriter,
    summary: GradientSummary,
    step: int,
    names: Sequence[str] | None = None,
    prefix: str = "gradients",
) -> None:
    """Writes a ``GradientSummary`` to a TensorBoard writer (on the host, not under jit).

    For each gradient that is not ``None`` it writes the scalars ``{prefix}/{name}/norm``
    and ``{prefix}/{name}/nonfinite_count`` and, when it has finite elements, the
    histogram ``{prefix}/{name}``; then ``{prefix}/global_norm`` and
    ``{prefix}/none_count``.

    Args:
      writer: a ``tensorboardX.SummaryWriter`` or anything with its ``add_scalar`` and
        ``add_histogram_raw`` methods.
      summary: what ``gradient_summary`` returned (a concrete value, not a tracer).
      step: the global step to record the values at.
      names: one name per gradient, e.g. ``fg.train.variable_names(params)``; by
        default the positions ``"0"``, ``"1"``, ...
      prefix: the tag prefix.

    Raises:
      TypeError: ``writer`` lacks ``add_scalar`` or ``add_histogram_raw``, ``summary``
        is not a concrete ``GradientSummary`` (a list of pairs, or a tracer inside
        ``jax.jit``), ``step`` is not an integer, ``names`` is a string or not
        strings, or ``prefix`` is not a string.  Every problem is listed at once.
      ValueError: ``names`` does not have one name per gradient.

    Example:
      >>> class Printer:
      ...     def add_scalar(self, tag, value, global_step):
      ...         print(tag, value)
      ...     def add_histogram_raw(self, tag, min, max, num, sum, sum_squares,
      ...                           bucket_limits, bucket_counts, global_step):
      ...         print(tag, bucket_counts)
      >>> s = fg.gradient_summary([(jnp.array([3.0, -4.0]), None), (None, None)], bins=2)
      >>> fg.write_gradient_summary(Printer(), s, step=0, names=["W", "b"])
      gradients/W/norm 5.0
      gradients/W/nonfinite_count 0
      gradients/W [1, 1]
      gradients/global_norm 5.0
      gradients/none_count 1
    """
    step = _check_writing(writer, summary, step, names, prefix)
    host = jax.tree.map(np.asarray, summary)
    n = len(host.norm)
    names = [str(i) for i in range(n)] if names is None else list(names)
    if len(names) != n:
        raise ValueError(
            f"fg.write_gradient_summary(..., names): {len(names)} names for {n} gradients; "
            "pass one name per (gradient, variable) pair."
        )
    for i, name in enumerate(names):
        if host.is_none[i]:
            continue
        tag = f"{prefix}/{name}"
        writer.add_scalar(f"{tag}/norm", float(host.norm[i]), step)
        writer.add_scalar(f"{tag}/nonfinite_count", int(host.nonfinite_count[i]), step)
        if host.histogram[i].sum() > 0:
            writer.add_histogram_raw(
                tag,
                min=float(host.min[i]),
                max=float(host.max[i]),
                num=int(host.histogram[i].sum()),
                sum=float(host.sum[i]),
                sum_squares=float(host.sum_squares[i]),
                bucket_limits=host.bin_edges[i, 1:].tolist(),
                bucket_counts=host.histogram[i].tolist(),
                global_step=step,
            )
    writer.add_scalar(f"{prefix}/global_norm", float(np.sqrt(np.sum(host.norm**2))), step)
    writer.add_scalar(f"{prefix}/none_count", int(host.is_none.sum()), step)


def _check_writing(writer: Any, summary: Any, step: Any, names: Any, prefix: Any) -> int:
    """``step`` as an int; a ``TypeError`` listing every argument of the wrong kind."""
    caller = "fg.write_gradient_summary(writer, summary, step, names, prefix)"
    problems = []
    missing = [m for m in _WRITER_METHODS if not callable(getattr(writer, m, None))]
    if missing:
        problems.append(f"writer (a {type(writer).__name__}) has no {' or '.join(missing)}")
    if not isinstance(summary, GradientSummary):
        problems.append(
            f"summary is a {type(summary).__name__}, not what fg.gradient_summary returns"
        )
    elif any(isinstance(leaf, jax.core.Tracer) for leaf in summary):
        problems.append("summary is traced (inside jax.jit); return it from the step first")
    try:
        step = _checks.as_int(caller, "step", step, hint="")
    except TypeError:
        problems.append(f"step must be an integer, got {step!r}")
    if isinstance(names, str) or (names is not None and not all(isinstance(n, str) for n in names)):
        problems.append(f"names must be a list of strings, got {names!r}")
    if not isinstance(prefix, str):
        problems.append(f"prefix must be a string, got {prefix!r}")
    _checks.raise_collected(
        caller,
        problems,
        "pass a tensorboardX.SummaryWriter (or an object with add_scalar and "
        "add_histogram_raw), fg.gradient_summary(grads_and_vars), an integer step and "
        "names such as fg.train.variable_names(params)",
        TypeError,
    )
    return int(step)


def _checked_gradient(i: int, pair: Any) -> jax.Array | None:
    """The gradient of entry ``i``, checked to be ``None`` or a real float array."""
    if not (isinstance(pair, tuple | list) and len(pair) == 2):
        raise TypeError(
            f"fg.gradient_summary(grads_and_vars): entry {i} is {type(pair).__name__}, "
            "not a (gradient, variable) pair; pass compute_gradients' list or "
            "list(zip(grads, variables))."
        )
    grad = pair[0]
    if grad is None:
        return None
    if isinstance(grad, IndexedSlices):  # TensorFlow summarises the values
        grad = grad.values
    dtype = getattr(grad, "dtype", None)
    if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(
            f"fg.gradient_summary(grads_and_vars): gradient {i} is "
            f"{type(grad).__name__} with dtype {dtype}; a gradient must be a real "
            "floating-point array or None."
        )
    return jnp.asarray(grad)


def _gradient_stats(grad: jax.Array | None, bins: int) -> GradientSummary:
    """One row of ``GradientSummary`` (scalars and ``(bins,)`` arrays) for one gradient."""
    is_none = grad is None
    x = jnp.zeros((0,), jnp.float32) if grad is None else grad.astype(jnp.float32).ravel()
    finite = jnp.isfinite(x)
    has_finite = jnp.any(finite)
    lo = jnp.where(has_finite, jnp.min(jnp.where(finite, x, jnp.inf), initial=jnp.inf), 0.0)
    hi = jnp.where(has_finite, jnp.max(jnp.where(finite, x, -jnp.inf), initial=-jnp.inf), 0.0)
    x_finite = jnp.where(finite, x, 0.0)
    edges = jnp.histogram_bin_edges(x_finite, bins, range=(lo, hi))
    # numpy.histogram's bins: [e_i, e_i+1) each, the last one closed.
    index = jnp.clip(jnp.searchsorted(edges, x_finite, side="right") - 1, 0, bins - 1)
    counts = jnp.zeros(bins, jnp.int32).at[index].add(finite.astype(jnp.int32))
    return GradientSummary(
        norm=jnp.sqrt(jnp.sum(jnp.square(x))),
        is_none=jnp.asarray(is_none),
        nonfinite_count=jnp.sum(~finite, dtype=jnp.int32),
        min=lo,
        max=hi,
        sum=jnp.sum(x_finite),
        sum_squares=jnp.sum(jnp.square(x_finite)),
        histogram=counts,
        bin_edges=edges,
    )
