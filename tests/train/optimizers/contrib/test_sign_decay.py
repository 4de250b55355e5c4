"""``get_linear_decay_fn``, ``get_cosine_decay_fn`` and ``get_restart_decay_fn``
(``optimizers/contrib/sign_decay.py``) against their formulas in NumPy, under jit."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

STEPS = np.arange(0, 13)


def _cosine(t, decay_steps, periods, zero_after):
    fraction = 2 * periods * np.minimum(t, decay_steps) / decay_steps
    out = 0.5 * (1 + np.cos(math.pi * fraction))
    return out if zero_after is None else np.where(fraction >= 2 * zero_after, 0.0, out)


def _restart(t, decay_steps, periods, zero_after):
    t = np.minimum(t, decay_steps)
    out = 0.5 * (1 + np.cos(math.pi * ((periods * t) % decay_steps) / decay_steps))
    if zero_after is None:
        return out
    return np.where(periods * t / decay_steps >= zero_after, 0.0, out)


@pytest.mark.parametrize(
    ("make", "want"),
    [
        (lambda: fg.train.get_linear_decay_fn(8), np.maximum(0, (8 - np.minimum(STEPS, 8)) / 8)),
        (lambda: fg.train.get_cosine_decay_fn(8), _cosine(STEPS, 8, 0.5, None)),
        (lambda: fg.train.get_cosine_decay_fn(8, 1.5, 0.5), _cosine(STEPS, 8, 1.5, 0.5)),
        (lambda: fg.train.get_restart_decay_fn(8, 2), _restart(STEPS, 8, 2, None)),
        (lambda: fg.train.get_restart_decay_fn(8, 3, 2.0), _restart(STEPS, 8, 3, 2.0)),
    ],
    ids=["linear", "cosine", "cosine_zero_after", "restart", "restart_zero_after"],
)
def test_each_decay_is_its_formula(make, want) -> None:
    fn = jax.jit(jax.vmap(make()))
    got = fn(jnp.asarray(STEPS, jnp.int32))
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(got, want, atol=1e-6)
