"""TensorFlow's per-element update formulas, shared by the dense and the sparse rules — private.

Design note
-----------
What it follows: ``tensorflow/core/kernels/training_ops.cc`` — ``ApplyFtrl`` /
``ApplyFtrlV2`` (and their ``SparseApply`` forms, the same formula per row) and the
proximal step of ``ApplyProximalGradientDescent`` / ``ApplyProximalAdagrad``.  Each
returns the *new* value of the variable, as the kernels assign it; the optax
transformations of :mod:`funcgrad.train.optimizers.transforms` subtract the old value to make an
update, and the sparse rules of :mod:`funcgrad.train.optimizers._sparse_rules` write the new rows.

What it assumes: the inputs are arrays of one floating dtype (float32 or wider; callers
widen ``bfloat16`` first) and the hyperparameters are numbers or scalars of that dtype.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def proximal(w: jax.Array, g: jax.Array, alpha: jax.Array, l1: float, l2: float) -> jax.Array:
    """The proximal step for step size ``alpha``: the new ``w``."""
    prox = w - alpha * g
    return jnp.sign(prox) * jnp.maximum(jnp.abs(prox) - alpha * l1, 0) / (1 + alpha * l2)


def ftrl(
    g: jax.Array,
    w: jax.Array,
    n: jax.Array,
    z: jax.Array,
    lr: jax.Array,
    p: float,
    l1: float,
    l2: float,
    l2_shrinkage: float,
    beta: float,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """FTRL-Proximal (``ApplyFtrlV2``) with ``p = -learning_rate_power``: new ``w, n, z``."""

    def power(x: jax.Array) -> jax.Array:
        return jnp.sqrt(x) if p == 0.5 else x**p

    n_t = n + g * g
    z_t = z + (g + 2 * l2_shrinkage * w) - (power(n_t) - power(n)) / lr * w
    quadratic = power(n_t) / lr + 2 * (l2 + beta / (2 * jnp.maximum(lr, 1e-36)))
    w_t = jnp.where(jnp.abs(z_t) > l1, (l1 * jnp.sign(z_t) - z_t) / quadratic, 0)
    return w_t, n_t, z_t
