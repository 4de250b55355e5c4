"""What several of fg.nn's test modules share: a small table and its shards, a sparse
batch of ids and its weights, and the arguments of a sampled loss."""

import jax
import jax.numpy as jnp
import numpy as np

import funcgrad as fg

TABLE = (np.arange(30, dtype=np.float32).reshape(10, 3) - 14.0) / 10

SP = fg.nn.SparseTensor(
    np.array([[0, 0], [0, 1], [0, 2], [2, 0], [3, 0], [3, 1]]),
    np.array([3, 7, 3, -1, 0, 5]),
    (4, 3),
)
WEIGHTS = SP._replace(values=np.array([0.5, 2.0, 1.5, 1.0, 3.0, -0.25], np.float32))
LABELS, X = jnp.array([[1], [2]]), jnp.ones((2, 3))
DRAWN = (jnp.array([0, 4]), jnp.ones((2, 1)), jnp.ones(2))
B = jnp.zeros(10)
KEY = jax.random.key(0)


def mod_shards(table, n):
    return [jnp.asarray(table[p::n]) for p in range(n)]
