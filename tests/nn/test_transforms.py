"""fg.nn's lookups, samplers and sampled losses together under jax.jit and jax.vmap."""

import jax
import jax.numpy as jnp
import numpy as np

import funcgrad as fg
from tests.nn._helpers import SP
from tests.nn._helpers import TABLE
from tests.nn._helpers import mod_shards


def test_everything_works_under_jit():
    key = jax.random.key(0)
    labels = jnp.array([[2], [5]])

    @jax.jit
    def f(table, key):
        s = fg.nn.uniform_candidate_sampler(labels, 1, 3, True, 10, key=key)
        return (
            fg.nn.embedding_lookup([table[:5], table[5:]], jnp.array([9, 0]), "div"),
            fg.nn.safe_embedding_lookup_sparse(table, SP, default_id=2),
            fg.nn.nce_loss(table, jnp.zeros(10), labels, jnp.ones((2, 3)), 3, 10, key=key),
            s,
        )

    lookup, combined, loss, (sampled, true_ec, _) = f(jnp.asarray(TABLE), key)
    np.testing.assert_allclose(lookup, TABLE[[9, 0]])
    np.testing.assert_allclose(combined[1], TABLE[2])
    assert loss.shape == (2,) and np.all(np.isfinite(loss))
    assert len(set(np.asarray(sampled).tolist())) == 3 and true_ec.shape == (2, 1)


def test_lookups_and_samplers_work_under_vmap():
    shards = mod_shards(TABLE, 3)
    out = jax.vmap(lambda i: fg.nn.embedding_lookup(shards, i))(jnp.array([[1, 2], [9, 0]]))
    np.testing.assert_allclose(out, TABLE[np.array([[1, 2], [9, 0]])])
    keys = jax.random.split(jax.random.key(0), 3)
    draws = jax.vmap(
        lambda k: fg.nn.log_uniform_candidate_sampler(jnp.array([[1]]), 1, 4, True, 10, key=k)[0]
    )(keys)
    assert draws.shape == (3, 4) and all(len(set(d)) == 4 for d in np.asarray(draws).tolist())
