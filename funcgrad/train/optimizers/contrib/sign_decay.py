"""``tf.contrib.opt``'s sign decays (``sign_decay.py``, r1.15): the ``sign_decay_fn`` of
AddSign and PowerSign, each a function of ``global_step`` returning a float32 scalar."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from funcgrad._types import Schedule

__all__ = ["get_cosine_decay_fn", "get_linear_decay_fn", "get_restart_decay_fn"]


def get_linear_decay_fn(decay_steps: int) -> Schedule:
    """``tf.contrib.opt.get_linear_decay_fn``: ``max(0, (decay_steps - t) / decay_steps)``.

    Args:
      decay_steps: the number of steps to decay over.

    Returns:
      ``sign_decay_fn(global_step)``, a float32 scalar.

    Example:
      >>> fn = fg.train.get_linear_decay_fn(4)
      >>> [float(fn(jnp.int32(t))) for t in (0, 1, 4, 9)]
      [1.0, 0.75, 0.0, 0.0]
    """

    def linear_decay_fn(global_step: jax.Array) -> jax.Array:
        global_step = jnp.minimum(global_step, decay_steps)
        remaining_steps = jnp.int32(decay_steps) - jnp.asarray(global_step).astype(jnp.int32)
        decayed = remaining_steps.astype(jnp.float32) / jnp.float32(decay_steps)
        return jnp.maximum(jnp.float32(0.0), decayed)

    return linear_decay_fn


def get_cosine_decay_fn(
    decay_steps: int, num_periods: float = 0.5, zero_after: float | None = None
) -> Schedule:
    """``tf.contrib.opt.get_cosine_decay_fn``: ``0.5 (1 + cos(2 pi num_periods t /
    decay_steps))``, ``t`` held at ``decay_steps``; 0 from ``2 num_periods t / decay_steps
    >= 2 zero_after`` on when ``zero_after`` is given.

    Args:
      decay_steps: the number of steps to decay over.
      num_periods: the periods of the cosine (0.5 ends at 0).
      zero_after: ``None``, or the fraction of periods after which the decay is 0.

    Returns:
      ``sign_decay_fn(global_step)``, a float32 scalar.

    Example:
      >>> fn = fg.train.get_cosine_decay_fn(4)
      >>> [round(float(fn(jnp.int32(t))), 4) for t in (0, 2, 4)]
      [1.0, 0.5, 0.0]
    """

    def cosine_decay_fn(global_step: jax.Array) -> jax.Array:
        global_step = jnp.minimum(global_step, decay_steps)
        completed_fraction = jnp.asarray(global_step).astype(jnp.float32) / jnp.float32(decay_steps)
        fraction = 2.0 * num_periods * completed_fraction
        decayed = 0.5 * (1.0 + jnp.cos(jnp.float32(math.pi) * fraction))
        if zero_after is not None:
            decayed = jnp.where(jnp.greater_equal(fraction, 2 * zero_after), 0.0, decayed)
        return decayed

    return cosine_decay_fn


def get_restart_decay_fn(
    decay_steps: int, num_periods: float = 1, zero_after: float | None = None
) -> Schedule:
    """``tf.contrib.opt.get_restart_decay_fn``: ``0.5 (1 + cos(pi ((num_periods t) mod
    decay_steps) / decay_steps))``, ``t`` held at ``decay_steps``; 0 from ``num_periods
    t / decay_steps >= zero_after`` on when ``zero_after`` is given.

    Args:
      decay_steps: the number of steps to decay over.
      num_periods: the number of restarts.
      zero_after: ``None``, or the number of periods after which the decay is 0.

    Returns:
      ``sign_decay_fn(global_step)``, a float32 scalar.

    Example:
      >>> fn = fg.train.get_restart_decay_fn(4, num_periods=2)
      >>> [round(float(fn(jnp.int32(t))), 4) for t in (0, 1, 2, 3)]
      [1.0, 0.5, 1.0, 0.5]
    """

    def restart_decay_fn(global_step: jax.Array) -> jax.Array:
        global_step = jnp.minimum(global_step, decay_steps)
        num = jnp.mod(num_periods * jnp.asarray(global_step).astype(jnp.float32), decay_steps)
        fraction = num / jnp.float32(decay_steps)
        decayed = 0.5 * (1.0 + jnp.cos(jnp.float32(math.pi) * fraction))
        if zero_after is not None:
            tmp = jnp.asarray(num_periods * global_step).astype(jnp.float32) / jnp.float32(
                decay_steps
            )
            decayed = jnp.where(jnp.greater_equal(tmp, zero_after), 0.0, decayed)
        return decayed

    return restart_decay_fn
