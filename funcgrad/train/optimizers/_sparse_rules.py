"""The TF1 optimizers' sparse rules (``_apply_sparse``) on the touched rows — private.

Design note
-----------
What it follows: each optimizer's ``_apply_sparse`` / ``_resource_apply_sparse`` in
``tensorflow/python/training/*.py`` (TF 2.21) and the ``SparseApply*`` kernels of
``tensorflow/core/kernels/training_ops.cc`` they call, on rows whose duplicate ids are
summed first (TF's ``_apply_sparse_duplicate_indices``) — but GradientDescent's, which
scatters them as they are, as TF's ``_resource_apply_sparse_duplicate_indices`` does.
Every rule but Adam's changes only the touched rows of the variable and of its slots,
and is written per row (:func:`rowwise`).  Adam's
``_apply_sparse_shared`` decays all of ``m`` and ``v`` and then moves every row of the
variable: it is dense in cost, as in TensorFlow; ``tf.contrib.opt.LazyAdamOptimizer``
is the row-only form.  Where a sparse kernel orders its arithmetic differently from
the dense one (RMSProp's ``ms * rho + g^2 (1 - rho)``), the sparse order is kept.

Each factory takes the optimizer's hyperparameters and returns ``rule(opt_state, lr)``;
:func:`with_rate` turns it into a :data:`~funcgrad.train._sparse.SparseRule` by reading
the learning rate of the step (the held rate, or the schedule at ``global_step``).

What it assumes: the optax state layout of the classes in ``optimizers.tf1`` — the
order of a variable's slots (Momentum ``[a]``, RMSProp ``[ms, mom]`` or centered
``[mg, ms, mom]``, Adam ``[m, v]`` with its beta powers at ``inner_state[0]``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train._sparse import LeafRule
from funcgrad.train._sparse import SparseRule
from funcgrad.train._sparse import gather
from funcgrad.train._sparse import in_table
from funcgrad.train._sparse import scatter
from funcgrad.train._sparse import sum_duplicates
from funcgrad.train.optimizers import _kernels
from funcgrad.train.optimizers._float32 import widen

#: ``rule(opt_state, lr) -> LeafRule``: a sparse rule before the rate is read.
RateRule = Callable[[Any, jax.Array], LeafRule]

Array = jax.Array


def rowwise(update: Callable[..., tuple[jax.Array, ...]], lr: jax.Array) -> LeafRule:
    """The :data:`~funcgrad.train._sparse.LeafRule` that applies
    ``update(lr, w, g, *slots) -> (w, *slots)`` to the touched rows only, their
    duplicates summed: gathered, computed in float32 or wider, scattered back."""

    def leaf(
        w: jax.Array, slots: list[jax.Array], slices: IndexedSlices, name: str
    ) -> list[jax.Array]:
        rows = sum_duplicates(slices)
        tables = [w, *slots]
        got = [widen(gather(t, rows)) for t in tables]
        g = widen(rows.values).astype(got[0].dtype)
        new = update(lr.astype(got[0].dtype), got[0], g, *got[1:])
        return [scatter(t, rows, y) for t, y in zip(tables, new, strict=True)]

    return leaf


def with_rate(learning_rate: Any, rule: RateRule) -> SparseRule:
    """``rule`` with the learning rate of the step read from the state or the schedule."""

    def sparse_rule(opt_state: Any, global_step: jax.Array) -> LeafRule:
        rate = opt_state.learning_rate
        if rate is None:
            rate = learning_rate(global_step)
        return rule(opt_state, jnp.asarray(rate, jnp.float32))

    return sparse_rule


def gradient_descent() -> RateRule:
    """``_resource_apply_sparse_duplicate_indices``: ``var[i] += -g * lr``, each row
    scattered as it is (duplicates are not summed first)."""

    def rule(_: Any, lr: Array) -> LeafRule:
        def leaf(w: Array, slots: list[Array], slices: IndexedSlices, name: str) -> list[Array]:
            values, ids = in_table(slices)
            delta = -values * lr.astype(values.dtype)
            return [w.at[ids].add(delta.astype(w.dtype), mode="drop")]

        return leaf

    return rule


def momentum(mu: float, nesterov: bool) -> RateRule:
    """``SparseApplyMomentum``: ``a = mu a + g``; ``w -= lr a`` (Nesterov: ``lr g + lr mu a``)."""

    def update(lr: Array, w: Array, g: Array, a: Array) -> tuple[Array, ...]:
        a = a * mu + g
        return (w - (g * lr + a * mu * lr) if nesterov else w - lr * a), a

    return lambda _, lr: rowwise(update, lr)


def rmsprop(decay: float, mu: float, epsilon: float, centered: bool) -> RateRule:
    """``SparseApplyRMSProp`` / ``SparseApplyCenteredRMSProp``."""

    def plain(lr: Array, w: Array, g: Array, ms: Array, mom: Array) -> tuple[Array, ...]:
        ms = ms * decay + g * g * (1 - decay)
        mom = mom * mu + jax.lax.rsqrt(ms + epsilon) * lr * g
        return w - mom, ms, -mom  # funcgrad holds the momentum with the rate's sign

    def centered_(
        lr: Array, w: Array, g: Array, mg: Array, ms: Array, mom: Array
    ) -> tuple[Array, ...]:
        ms = ms * decay + g * g * (1 - decay)
        mg = mg * decay + g * (1 - decay)
        mom = mom * mu + jax.lax.rsqrt(ms - mg * mg + epsilon) * lr * g
        return w - mom, mg, ms, -mom

    def rule(_: Any, lr: Array) -> LeafRule:
        if centered:
            return rowwise(lambda lr, w, g, mg, ms, mom: centered_(lr, w, g, mg, ms, -mom), lr)
        return rowwise(lambda lr, w, g, ms, mom: plain(lr, w, g, ms, -mom), lr)

    return rule


def adagrad() -> RateRule:
    """``SparseApplyAdagrad``: ``n += g^2``; ``w -= lr g / sqrt(n)``."""

    def update(lr: Array, w: Array, g: Array, n: Array) -> tuple[Array, ...]:
        n = n + g * g
        return w - lr * g * jax.lax.rsqrt(n), n

    return lambda _, lr: rowwise(update, lr)


def adadelta(rho: float, epsilon: float) -> RateRule:
    """``SparseApplyAdadelta``."""

    def update(lr: Array, w: Array, g: Array, n: Array, d: Array) -> tuple[Array, ...]:
        n = n * rho + g * g * (1 - rho)
        u = jnp.sqrt(d + epsilon) * jax.lax.rsqrt(n + epsilon) * g
        return w - u * lr, n, d * rho + u * u * (1 - rho)

    return lambda _, lr: rowwise(update, lr)


def ftrl(p: float, l1: float, l2: float, l2_shrinkage: float, beta: float) -> RateRule:
    """``SparseApplyFtrl`` / ``SparseApplyFtrlV2``: the dense formula on the touched rows."""

    def update(lr: Array, w: Array, g: Array, n: Array, z: Array) -> tuple[Array, ...]:
        return _kernels.ftrl(g, w, n, z, lr, p, l1, l2, l2_shrinkage, beta)

    return lambda _, lr: rowwise(update, lr)


def proximal_gradient_descent(l1: float, l2: float) -> RateRule:
    """``SparseApplyProximalGradientDescent``."""
    return lambda _, lr: rowwise(lambda lr, w, g: (_kernels.proximal(w, g, lr, l1, l2),), lr)


def proximal_adagrad(l1: float, l2: float) -> RateRule:
    """``SparseApplyProximalAdagrad``: the proximal step with ``lr / sqrt(n)``."""

    def update(lr: Array, w: Array, g: Array, n: Array) -> tuple[Array, ...]:
        n = n + g * g
        return _kernels.proximal(w, g, lr * jax.lax.rsqrt(n), l1, l2), n

    return lambda _, lr: rowwise(update, lr)


def _adam_rate(opt_state: Any, lr: Array) -> Array:
    """``lr * sqrt(1 - beta2_power) / (1 - beta1_power)``, from the powers before the step."""
    adam = opt_state.inner_state[0]
    return lr * jnp.sqrt(1 - adam.beta2_power) / (1 - adam.beta1_power)


def adam(beta1: float, beta2: float, epsilon: float) -> RateRule:
    """``AdamOptimizer._apply_sparse_shared``: ``m`` and ``v`` decayed everywhere, the
    scattered rows added, every row of the variable moved (dense in cost, as TF)."""
    b1, b2 = jnp.float32(beta1), jnp.float32(beta2)

    def rule(opt_state: Any, lr: Array) -> LeafRule:
        alpha = _adam_rate(opt_state, lr)

        def leaf(w: Array, slots: list[Array], slices: IndexedSlices, name: str) -> list[Array]:
            rows = sum_duplicates(slices)
            m, v = (widen(s) for s in slots)
            g = widen(rows.values).astype(m.dtype)
            add = {"mode": "drop", "indices_are_sorted": True}
            m = (m * b1.astype(m.dtype)).at[rows.indices].add(g * (1 - b1).astype(m.dtype), **add)
            v = (
                (v * b2.astype(v.dtype))
                .at[rows.indices]
                .add(g * g * (1 - b2).astype(v.dtype), **add)
            )
            new = widen(w) - alpha.astype(m.dtype) * m / (jnp.sqrt(v) + epsilon)
            return [x.astype(old.dtype) for x, old in zip((new, m, v), (w, *slots), strict=True)]

        return leaf

    return rule


def lazy_adam(beta1: float, beta2: float, epsilon: float) -> RateRule:
    """``tf.contrib.opt.LazyAdamOptimizer._apply_sparse``: ``m``, ``v`` and the variable
    change in the touched rows only."""
    b1, b2 = jnp.float32(beta1), jnp.float32(beta2)

    def update(lr: Array, w: Array, g: Array, m: Array, v: Array) -> tuple[Array, ...]:
        m = b1.astype(m.dtype) * m + (1 - b1).astype(m.dtype) * g
        v = b2.astype(v.dtype) * v + (1 - b2).astype(v.dtype) * (g * g)
        return w - lr * m / (jnp.sqrt(v) + epsilon), m, v

    return lambda opt_state, lr: rowwise(update, _adam_rate(opt_state, lr))
