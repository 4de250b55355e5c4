"""Optimizer arithmetic in float32 for low-precision parameters — private.

Design note
-----------
TensorFlow 1.x casts every hyperparameter to the variable's dtype and computes the
update in that dtype, and optax's pieces compute in the dtype of their inputs too.  For
a ``bfloat16`` variable that loses the arithmetic itself, not only precision: Adam's
``1 - beta2`` is ``1 - bfloat16(0.999) = 0``, so its second moment stays zero and the
first step is ``m / epsilon`` (TensorFlow's own bfloat16 Adam diverges this way), and a
decay of ``0.9`` becomes ``0.8984375``.  :func:`in_float32` wraps a transformation so
that its ``update`` computes in float32: the updates, the state and the params are
widened to float32 where they are a narrower float (``bfloat16``, ``float16``, ...),
and the new updates and state are cast back, leaf by leaf, to the dtypes they came in.
:func:`widen` is that cast for one array (the sparse rules widen the touched rows).

What it assumes: ``update`` returns a state of the structure it was given (every optax
transformation does).  What it keeps: the state's structure and dtypes — a
``bfloat16`` parameter keeps ``bfloat16`` slots, as in TensorFlow — and, for float32
(or wider) leaves, everything: the casts are not even emitted.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from funcgrad._types import PyTree


def widen(x: Any) -> Any:
    """``x`` in float32 when it is a floating array narrower than float32, else ``x``."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jnp.floating) and dtype.itemsize < 4:
        return x.astype(jnp.float32)
    return x


def _widen(tree: PyTree) -> PyTree:
    """``tree`` with every floating leaf narrower than float32 cast to float32."""
    return jax.tree.map(widen, tree)


def _narrow_like(tree: PyTree, like: PyTree) -> PyTree:
    """``tree`` with each array leaf cast back to the dtype of ``like``'s leaf."""

    def narrow(x: Any, old: Any) -> Any:
        dtype = getattr(old, "dtype", None)
        return x if dtype is None or x.dtype == dtype else x.astype(dtype)

    return jax.tree.map(narrow, tree, like)


def in_float32(tx: optax.GradientTransformation) -> optax.GradientTransformation:
    """``tx`` whose ``update`` computes in (at least) float32 and stores in the given dtypes."""

    def update_fn(updates: PyTree, state: Any, params: PyTree = None) -> tuple[PyTree, Any]:
        new_updates, new_state = tx.update(_widen(updates), _widen(state), _widen(params))
        return _narrow_like(new_updates, updates), _narrow_like(new_state, state)

    return optax.GradientTransformation(tx.init, update_fn)
