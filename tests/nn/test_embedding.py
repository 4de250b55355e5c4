"""fg.nn's embedding lookups: each table keeps its IndexedSlices and its optimizer's sparse
rule, under jax.jit too; their bad inputs.  The numbers themselves are TensorFlow's in
tests/parity/test_nn_parity.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse

import funcgrad as fg
from tests.nn._helpers import SP
from tests.nn._helpers import TABLE
from tests.nn._helpers import WEIGHTS
from tests.nn._helpers import mod_shards


def _lookup_loss(shards, ids):
    return jnp.sum(fg.nn.embedding_lookup(list(shards), ids, "mod", max_norm=2.0) ** 2)


@pytest.mark.parametrize("n", [1, 3])
def test_each_shard_gets_the_indexed_slices_of_its_own_ids(n):
    shards = mod_shards(TABLE, n)
    ids = jnp.array([6, 1, 7, 5, 1])
    gvs = fg.train.GradientDescentOptimizer(0.1).compute_gradients(_lookup_loss, shards, ids)
    dense = jax.grad(_lookup_loss)(shards, ids)
    for p, ((g, _), want) in enumerate(zip(gvs, dense, strict=True)):
        assert isinstance(g, fg.IndexedSlices)
        own = {int(i) // n for i in ids if int(i) % n == p}
        assert set(np.asarray(g.indices).tolist()) == own  # no row another shard reads
        np.testing.assert_allclose(g.to_dense(), want, rtol=1e-6)


def test_sharded_training_is_the_single_tables_under_every_sparse_rule():
    """Momentum's sparse rule moves only the touched rows: 3 jitted steps over 3 shards,
    one of them reached by no id in the second step, equal those over the whole table."""
    batches = jnp.array([[6, 1, 7, 5], [1, 4, 7, 7], [9, 2, 0, 3]])  # step 2: no id % 3 == 2
    opt = fg.train.MomentumOptimizer(0.1, momentum=0.9)

    def run(loss, params):
        step = jax.jit(lambda s, ids: opt.minimize(loss, s, ids)[0])
        state = opt.init(params)
        for ids in batches:
            state = step(state, ids)
        return state.params

    whole = run(lambda p, ids: _lookup_loss([p], ids), jnp.asarray(TABLE))
    sharded = run(_lookup_loss, mod_shards(TABLE, 3))
    for p in range(3):
        np.testing.assert_allclose(sharded[p], whole[p::3], rtol=1e-6, atol=1e-7)
    assert not np.allclose(whole, TABLE)


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_outside_jit_each_shard_gets_exactly_its_own_ids(strategy):
    """As TensorFlow's dynamic_partition gives them: a shard no id reaches gets an empty
    IndexedSlices (it was blamed for an id one past its end)."""
    shards = mod_shards(TABLE, 3) if strategy == "mod" else jnp.split(TABLE, [4, 7])

    def loss(shards, ids):
        return jnp.sum(fg.nn.embedding_lookup(list(shards), ids, strategy) ** 2)

    ids = jnp.array([0, 1, 3, 0])  # mod: shards 0, 1, 0, 0 (rows 0, 0, 1, 0); div: shard 0
    gvs = fg.train.GradientDescentOptimizer(0.1).compute_gradients(loss, shards, ids)
    want = [[0, 1, 0], [0], []] if strategy == "mod" else [[0, 1, 3, 0], [], []]
    assert [g.indices.tolist() for g, _ in gvs] == want
    for (g, _), table in zip(gvs, shards, strict=True):
        assert g.values.shape == (len(g.indices), 3)
        np.testing.assert_allclose(g.values, 2 * np.asarray(table)[np.asarray(g.indices)])


@pytest.mark.parametrize(
    ("combine", "rows"),
    [
        pytest.param(
            lambda t: fg.nn.embedding_lookup_sparse(t, SP._replace(values=np.abs(SP.values)), None),
            {3, 7, 1, 0, 5},
            id="embedding_lookup_sparse",
        ),
        pytest.param(
            lambda t: fg.nn.safe_embedding_lookup_sparse(t, SP, WEIGHTS, combiner="sqrtn"),
            {3, 7, 0},  # -1 and the weight below 0 pruned; the empty rows read id 0
            id="safe_embedding_lookup_sparse",
        ),
    ],
)
def test_sparse_lookups_keep_the_indexed_slices(combine, rows):
    def loss(t):
        return jnp.sum(jnp.sin(combine(t)))

    ((g, _),) = fg.train.AdagradOptimizer(0.1).compute_gradients(loss, jnp.asarray(TABLE))
    assert isinstance(g, fg.IndexedSlices)
    assert set(np.asarray(g.indices).tolist()) == rows
    np.testing.assert_allclose(g.to_dense(), jax.grad(loss)(jnp.asarray(TABLE)), rtol=1e-6)


def test_bcoo_and_sparse_tensor_give_the_same_combination():
    ids = jnp.array([3, 7, 3, 1])
    indices = jnp.array([[0, 0], [0, 1], [0, 2], [2, 0]])
    padded = jnp.concatenate([indices, jnp.array([[4, 3]])])  # BCOO's padding: outside
    bcoo = sparse.BCOO((jnp.concatenate([ids, jnp.array([0])]), padded), shape=(4, 3))
    got = fg.nn.embedding_lookup_sparse(TABLE, bcoo, None, combiner="sqrtn")
    want = fg.nn.embedding_lookup_sparse(
        TABLE, fg.nn.SparseTensor(indices, ids, (4, 3)), None, combiner="sqrtn"
    )
    np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(got[0], (2 * TABLE[3] + TABLE[7]) / np.sqrt(3), rtol=1e-6)


def test_an_id_outside_the_table_reads_nan_under_jit():
    out = jax.jit(lambda ids: fg.nn.embedding_lookup(mod_shards(TABLE, 2), ids))(jnp.array([10, 1]))
    assert np.all(np.isnan(out[0])) and np.allclose(out[1], TABLE[1])


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        pytest.param(
            lambda: fg.nn.embedding_lookup([TABLE[:5], TABLE[5:, :2]], jnp.array([1])),
            ValueError, "every shard needs the same row shape", id="row_shapes",
        ),
        pytest.param(
            lambda: fg.nn.embedding_lookup(mod_shards(TABLE, 2), jnp.array([3, 10])),
            ValueError, r"id 10 is outside the table of 10 rows", id="id_outside",
        ),
        pytest.param(
            lambda: fg.nn.embedding_lookup_sparse(
                TABLE, fg.nn.SparseTensor(np.zeros((1, 3), int), np.array([1]), (1, 1, 1)), None
            ),
            ValueError, r"dense_shape \(1, 1, 1\); pass ids of rank 2", id="rank_3",
        ),
        pytest.param(
            lambda: fg.nn.embedding_lookup_sparse(
                TABLE, fg.nn.SparseTensor(SP.indices, SP.values, (4,)), None
            ),
            ValueError, r"pass indices \(n, rank\), values \(n,\)", id="shape_and_indices",
        ),
    ],
)  # fmt: skip
def test_bad_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_an_empty_batch_of_ids_gives_empty_results(variant):
    """As TensorFlow's: no rows from embedding_lookup, a row of zeros per empty row of the
    sparse lookups (it raised "attempt to get argmax of an empty sequence")."""
    empty = fg.nn.SparseTensor(np.zeros((0, 2), np.int64), np.zeros(0, np.int64), (2, 3))

    def lookups(shards):
        return (
            fg.nn.embedding_lookup(shards, jnp.zeros((0, 2), jnp.int32)),
            fg.nn.embedding_lookup_sparse(shards, empty, None),
            fg.nn.safe_embedding_lookup_sparse(shards, empty),
        )

    rows, combined, safe = variant(lookups)(mod_shards(TABLE, 3))
    assert rows.shape == (0, 2, 3)
    np.testing.assert_array_equal(combined, np.zeros((2, 3)))
    np.testing.assert_array_equal(safe, np.zeros((2, 3)))
    grads = jax.grad(lambda ss: sum(jnp.sum(x) for x in lookups(ss)))(mod_shards(TABLE, 3))
    assert all(not np.any(g) for g in grads)
