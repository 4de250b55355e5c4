"""TensorFlow's update kernels, each written once — private.

Design note
-----------
What it follows: the kernels of ``tensorflow/core/kernels/training_ops.cc`` (``ApplyAdam``,
``ApplyMomentum``, ``ApplyRMSProp`` / ``SparseApplyRMSProp``, ``ApplyAdagrad``,
``ApplyAdadelta``, ``ApplyFtrlV2``, ``ApplyProximalGradientDescent``,
``ApplyProximalAdagrad``, ``ApplyAdaMax``, ``ApplyAddSign``, ``ApplyPowerSign``) and the
Python sparse rules TensorFlow writes beside them (``AdamOptimizer._apply_sparse_shared``,
``LazyAdamOptimizer._apply_sparse``, ``AdaMaxOptimizer._apply_sparse_shared``), with
their order of arithmetic: that order is the float32 rounding a ported program sees.
Each function is one kernel: the rules of :mod:`funcgrad.train.optimizers.tf1`, the optax
transformations of :mod:`funcgrad.train.optimizers.transforms` and the optimizers of the
TF1 projects call it, whole or on the touched rows (:func:`on_rows`, TensorFlow's
``SparseApply*`` kernels: the dense formula per row).  Where TensorFlow itself writes a
sparse form in another order (RMSProp's, Adam's), both forms are here.

What it assumes: the inputs are arrays of one floating dtype, float32 or wider (callers
widen ``bfloat16`` first, or :func:`on_rows` widens the rows), and the hyperparameters
are numbers or scalars of that dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train._sparse import Rows
from funcgrad.train._sparse import gather
from funcgrad.train._sparse import scatter
from funcgrad.train.optimizers._float32 import widen

Array = jax.Array


def on_rows(
    kernel: Callable[..., tuple[Array, ...]], grad: IndexedSlices, var: Array, *slots: Array
) -> tuple[Array, ...]:
    """``kernel(grad, var, *slots) -> (var, *slots)`` on the rows ``grad`` touches (its ids
    unique, padding ids the table's length): gathered, computed in float32 or wider,
    scattered back in each table's dtype — TensorFlow's ``SparseApply*`` kernels."""
    rows = Rows(grad.values, jnp.asarray(grad.indices))
    tables = [var, *slots]
    got = [widen(gather(t, rows)) for t in tables]
    new = kernel(widen(rows.values).astype(got[0].dtype), *got)
    return tuple(scatter(t, rows, y) for t, y in zip(tables, new, strict=True))


def adam(
    g: Array, m: Array, v: Array, alpha: Any, beta1: Any, beta2: Any, epsilon: Any, nesterov: bool
) -> tuple[Array, Array, Array]:
    """``ApplyAdam``: the new ``m``, ``v`` and the step the variable goes down by,
    ``m alpha / (sqrt(v) + epsilon)`` (with ``use_nesterov``, ``(1 - beta1) g + beta1 m``
    for ``m``); ``alpha`` is the bias-corrected rate, ``beta1`` / ``beta2`` float32."""
    m = m + (g - m) * (1 - beta1)
    v = v + (g * g - v) * (1 - beta2)
    if nesterov:
        return ((g * (1 - beta1) + beta1 * m) * alpha) / (jnp.sqrt(v) + epsilon), m, v
    return (m * alpha) / (jnp.sqrt(v) + epsilon), m, v


def adam_sparse_moments(
    grad: IndexedSlices, m: Array, v: Array, beta1: Any, beta2: Any
) -> tuple[Array, Array]:
    """``AdamOptimizer._apply_sparse_shared``'s moments: all of ``m`` and ``v`` decayed,
    then the rows of ``grad`` added (``scatter_add``)."""
    add = {"mode": "drop", "indices_are_sorted": True}
    m = (m * beta1).at[grad.indices].add(grad.values * (1 - beta1), **add)
    v = (v * beta2).at[grad.indices].add(grad.values * grad.values * (1 - beta2), **add)
    return m, v


def lazy_adam(
    g: Array, w: Array, m: Array, v: Array, alpha: Any, beta1: Any, beta2: Any, epsilon: Any
) -> tuple[Array, Array, Array]:
    """``LazyAdamOptimizer._apply_sparse`` on the touched rows: new ``w``, ``m``, ``v``."""
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * (g * g)
    return w - alpha * m / (jnp.sqrt(v) + epsilon), m, v


def momentum(g: Array, w: Array, a: Array, lr: Any, mu: Any, nesterov: bool) -> tuple[Array, Array]:
    """``ApplyMomentum``: ``a = mu a + g``; ``w -= lr a`` (Nesterov: ``lr g + lr mu a``)."""
    a = a * mu + g
    return (w - (g * lr + a * mu * lr) if nesterov else w - lr * a), a


def rmsprop(
    g: Array, w: Array, ms: Array, mom: Array, lr: Any, rho: Any, mu: Any, epsilon: Any
) -> tuple[Array, Array, Array]:
    """``ApplyRMSProp``: new ``w``, ``ms``, ``mom``."""
    ms = ms + (g * g - ms) * (1 - rho)
    mom = mom * mu + (g * lr) / jnp.sqrt(ms + epsilon)
    return w - mom, ms, mom


def centered_rmsprop(
    g: Array, w: Array, ms: Array, mg: Array, mom: Array, lr: Any, rho: Any, mu: Any, eps: Any
) -> tuple[Array, Array, Array, Array]:
    """``ApplyCenteredRMSProp``: new ``w``, ``ms``, ``mg``, ``mom``."""
    ms = ms + (g * g - ms) * (1 - rho)
    mg = mg + (g - mg) * (1 - rho)
    mom = mom * mu + (g * lr) / jnp.sqrt(ms - mg * mg + eps)
    return w - mom, ms, mg, mom


def sparse_rmsprop(
    g: Array, w: Array, ms: Array, mom: Array, lr: Any, rho: Any, mu: Any, epsilon: Any
) -> tuple[Array, Array, Array]:
    """``SparseApplyRMSProp`` per row, in its own order: new ``w``, ``ms``, ``mom``."""
    ms = ms * rho + g * g * (1 - rho)
    mom = mom * mu + jax.lax.rsqrt(ms + epsilon) * lr * g
    return w - mom, ms, mom


def sparse_centered_rmsprop(
    g: Array, w: Array, ms: Array, mg: Array, mom: Array, lr: Any, rho: Any, mu: Any, eps: Any
) -> tuple[Array, Array, Array, Array]:
    """``SparseApplyCenteredRMSProp`` per row: new ``w``, ``ms``, ``mg``, ``mom``."""
    ms = ms * rho + g * g * (1 - rho)
    mg = mg * rho + g * (1 - rho)
    mom = mom * mu + jax.lax.rsqrt(ms - mg * mg + eps) * lr * g
    return w - mom, ms, mg, mom


def adagrad(g: Array, w: Array, n: Array, lr: Any) -> tuple[Array, Array]:
    """``ApplyAdagrad``: ``n += g^2``; ``w -= lr g / sqrt(n)``."""
    n = n + g * g
    return w - lr * g * jax.lax.rsqrt(n), n


def adadelta(
    g: Array, w: Array, n: Array, d: Array, lr: Any, rho: Any, epsilon: Any
) -> tuple[Array, Array, Array]:
    """``ApplyAdadelta``: new ``w``, the accumulated squared gradient ``n`` and update ``d``."""
    n = n * rho + g * g * (1 - rho)
    u = jnp.sqrt(d + epsilon) * jax.lax.rsqrt(n + epsilon) * g
    return w - u * lr, n, d * rho + u * u * (1 - rho)


def ftrl(
    g: Array,
    w: Array,
    n: Array,
    z: Array,
    lr: Any,
    p: float,
    l1: float,
    l2: float,
    l2_shrinkage: float,
    beta: float,
) -> tuple[Array, Array, Array]:
    """``ApplyFtrlV2`` with ``p = -learning_rate_power``: new ``w``, ``n``, ``z``."""

    def power(x: Array) -> Array:
        return jnp.sqrt(x) if p == 0.5 else x**p

    n_t = n + g * g
    z_t = z + (g + 2 * l2_shrinkage * w) - (power(n_t) - power(n)) / lr * w
    quadratic = power(n_t) / lr + 2 * (l2 + beta / (2 * jnp.maximum(lr, 1e-36)))
    w_t = jnp.where(jnp.abs(z_t) > l1, (l1 * jnp.sign(z_t) - z_t) / quadratic, 0)
    return w_t, n_t, z_t


def proximal(w: Array, g: Array, alpha: Any, l1: float, l2: float) -> Array:
    """The proximal step of ``ApplyProximalGradientDescent`` for step size ``alpha``: the
    new ``w``."""
    prox = w - alpha * g
    return jnp.sign(prox) * jnp.maximum(jnp.abs(prox) - alpha * l1, 0) / (1 + alpha * l2)


def proximal_adagrad(
    g: Array, w: Array, n: Array, lr: Any, l1: float, l2: float
) -> tuple[Array, Array]:
    """``ApplyProximalAdagrad``: the proximal step with ``lr / sqrt(n)``; new ``w``, ``n``."""
    n = n + g * g
    return proximal(w, g, lr * jax.lax.rsqrt(n), l1, l2), n


def adamax(
    g: Array, w: Array, m: Array, v: Array, rate: Any, beta1: Any, beta2: Any, epsilon: Any
) -> tuple[Array, Array, Array]:
    """``ApplyAdaMax``, ``rate`` being ``lr / (1 - beta1_power)``: new ``w``, ``m``, ``v``."""
    m = m + (g - m) * (1 - beta1)
    v = jnp.maximum(beta2 * v, jnp.abs(g))
    return w - rate * (m / (v + epsilon)), m, v


def sign_moment(g: Array, m: Array, beta: Any) -> Array:
    """``ApplyAddSign`` / ``ApplyPowerSign``'s moment: ``beta m + (1 - beta) g``."""
    return m * beta + g * (1 - beta)
