"""fg.nn: each table keeps its IndexedSlices and its optimizer's sparse rule, under jax.jit
too; the samplers' distributions; every bad input's error.  The numbers themselves are
TensorFlow's in tests/parity/test_nn_parity.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse

import funcgrad as fg
from funcgrad.nn import candidate_sampling

TABLE = (np.arange(30, dtype=np.float32).reshape(10, 3) - 14.0) / 10


def _mod_shards(table, n):
    return [jnp.asarray(table[p::n]) for p in range(n)]


# --- the IndexedSlices and the sparse rules ------------------------------------------------


def _lookup_loss(shards, ids):
    return jnp.sum(fg.nn.embedding_lookup(list(shards), ids, "mod", max_norm=2.0) ** 2)


@pytest.mark.parametrize("n", [1, 3])
def test_each_shard_gets_the_indexed_slices_of_its_own_ids(n):
    shards = _mod_shards(TABLE, n)
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
    sharded = run(_lookup_loss, _mod_shards(TABLE, 3))
    for p in range(3):
        np.testing.assert_allclose(sharded[p], whole[p::3], rtol=1e-6, atol=1e-7)
    assert not np.allclose(whole, TABLE)


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_outside_jit_each_shard_gets_exactly_its_own_ids(strategy):
    """As TensorFlow's dynamic_partition gives them: a shard no id reaches gets an empty
    IndexedSlices (it was blamed for an id one past its end)."""
    shards = _mod_shards(TABLE, 3) if strategy == "mod" else jnp.split(TABLE, [4, 7])

    def loss(shards, ids):
        return jnp.sum(fg.nn.embedding_lookup(list(shards), ids, strategy) ** 2)

    ids = jnp.array([0, 1, 3, 0])  # mod: shards 0, 1, 0, 0 (rows 0, 0, 1, 0); div: shard 0
    gvs = fg.train.GradientDescentOptimizer(0.1).compute_gradients(loss, shards, ids)
    want = [[0, 1, 0], [0], []] if strategy == "mod" else [[0, 1, 3, 0], [], []]
    assert [g.indices.tolist() for g, _ in gvs] == want
    for (g, _), table in zip(gvs, shards, strict=True):
        assert g.values.shape == (len(g.indices), 3)
        np.testing.assert_allclose(g.values, 2 * np.asarray(table)[np.asarray(g.indices)])


SP = fg.nn.SparseTensor(
    np.array([[0, 0], [0, 1], [0, 2], [2, 0], [3, 0], [3, 1]]),
    np.array([3, 7, 3, -1, 0, 5]),
    (4, 3),
)
WEIGHTS = SP._replace(values=np.array([0.5, 2.0, 1.5, 1.0, 3.0, -0.25], np.float32))


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


@pytest.mark.parametrize("loss_fn", [fg.nn.nce_loss, fg.nn.sampled_softmax_loss])
def test_sampled_losses_keep_the_indexed_slices(loss_fn):
    params = {"w": _mod_shards(TABLE, 2), "b": jnp.zeros(10), "x": jnp.ones((2, 3))}
    labels = jnp.array([[1], [8]])

    def loss(p, key):
        return jnp.sum(loss_fn(p["w"], p["b"], labels, p["x"], 4, 10, key=key))

    gvs = fg.train.GradientDescentOptimizer(0.1).compute_gradients(loss, params, jax.random.key(3))
    kinds = [type(g).__name__ for g, _ in gvs]
    assert kinds == ["IndexedSlices", "IndexedSlices", "IndexedSlices", "ArrayImpl"]  # b, w, x
    sampled, _, _ = fg.nn.log_uniform_candidate_sampler(
        labels, 1, 4, True, 10, key=jax.random.key(3)
    )
    assert set(np.asarray(gvs[0][0].indices).tolist()) == {1, 8, *np.asarray(sampled).tolist()}


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
    shards = _mod_shards(TABLE, 3)
    out = jax.vmap(lambda i: fg.nn.embedding_lookup(shards, i))(jnp.array([[1, 2], [9, 0]]))
    np.testing.assert_allclose(out, TABLE[np.array([[1, 2], [9, 0]])])
    keys = jax.random.split(jax.random.key(0), 3)
    draws = jax.vmap(
        lambda k: fg.nn.log_uniform_candidate_sampler(jnp.array([[1]]), 1, 4, True, 10, key=k)[0]
    )(keys)
    assert draws.shape == (3, 4) and all(len(set(d)) == 4 for d in np.asarray(draws).tolist())


def test_an_id_outside_the_table_reads_nan_under_jit():
    out = jax.jit(lambda ids: fg.nn.embedding_lookup(_mod_shards(TABLE, 2), ids))(
        jnp.array([10, 1])
    )
    assert np.all(np.isnan(out[0])) and np.allclose(out[1], TABLE[1])


# --- the samplers -----------------------------------------------------------------------------


UNIGRAMS = np.array([4.0, 1.0, 9.0, 2.0, 0.0, 7.0])


@pytest.mark.parametrize("sampler", ["log_uniform", "uniform", "fixed_unigram"])
def test_sampler_draws_follow_tensorflows_distribution(sampler):
    range_max, n = 8, 40_000
    draw = getattr(fg.nn, f"{sampler}_candidate_sampler")
    options = {"unigrams": UNIGRAMS, "num_reserved_ids": 2, "distortion": 0.5}
    options = options if sampler == "fixed_unigram" else {}
    sampled, _, sampled_ec = draw(
        jnp.array([[0]]), 1, n, False, range_max, **options, key=jax.random.key(1)
    )
    freq = np.bincount(np.asarray(sampled), minlength=range_max) / n
    k = np.arange(range_max)
    p = {
        "log_uniform": np.log((k + 2) / (k + 1)) / np.log(range_max + 1),
        "uniform": np.full(range_max, 1 / 8),
        "fixed_unigram": np.sqrt(np.r_[0, 0, UNIGRAMS]) / np.sqrt(UNIGRAMS).sum(),
    }[sampler]
    np.testing.assert_allclose(freq, p, atol=0.01)  # ~4 standard deviations at n = 40,000
    np.testing.assert_allclose(sampled_ec, p[sampled] * n, rtol=1e-5)


def test_unique_draws_are_distinct_and_share_one_number_of_tries():
    labels = jnp.array([[0, 1], [5, 9]])
    sampled, true_ec, sampled_ec = fg.nn.log_uniform_candidate_sampler(
        labels, 2, 6, True, 10, key=jax.random.key(4)
    )
    assert len(set(np.asarray(sampled).tolist())) == 6
    p = np.asarray(candidate_sampling.log_uniform_probability(sampled, 10), np.float64)
    tries = np.log1p(-np.asarray(sampled_ec, np.float64)) / np.log1p(-p)
    assert np.allclose(tries, np.rint(tries[0]), atol=1e-3) and tries[0] > 6
    want = candidate_sampling.expected_count(
        candidate_sampling.log_uniform_probability(labels, 10), int(np.rint(tries[0])), 6
    )
    np.testing.assert_allclose(true_ec, want)


def test_expected_count_is_tensorflows_formula():
    p = jnp.array([0.5, 0.01], jnp.float32)
    np.testing.assert_allclose(candidate_sampling.expected_count(p, 4, 4), [2.0, 0.04])
    np.testing.assert_allclose(
        candidate_sampling.expected_count(p, 7, 4), 1 - (1 - np.array([0.5, 0.01])) ** 7, rtol=1e-6
    )


# --- bad inputs -------------------------------------------------------------------------------

LABELS, X = jnp.array([[1], [2]]), jnp.ones((2, 3))
DRAWN = (jnp.array([0, 4]), jnp.ones((2, 1)), jnp.ones(2))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        pytest.param(
            lambda: fg.nn.embedding_lookup_sparse(TABLE, SP, None, combiner="maen"),
            ValueError, r"combiner='maen' is none of .*did you mean 'mean'", id="combiner",
        ),
        pytest.param(
            lambda: fg.nn.safe_embedding_lookup_sparse(TABLE, SP, combiner="avg"),
            ValueError, r"combiner='avg' is none of \['mean', 'sqrtn', 'sum'\]", id="safe_combiner",
        ),
        pytest.param(
            lambda: fg.nn.embedding_lookup(TABLE, jnp.array([1]), "modulo"),
            ValueError, r"partition_strategy='modulo' is none of \['mod', 'div'\]", id="strategy",
        ),
        pytest.param(
            lambda: fg.nn.embedding_lookup([TABLE[:3], TABLE[3:]], jnp.array([1])),
            ValueError, r"shards of \[3, 7\] rows; .* split 10 rows as \[5, 5\]", id="uneven",
        ),
        pytest.param(
            lambda: fg.nn.embedding_lookup([TABLE[:5], TABLE[5:, :2]], jnp.array([1])),
            ValueError, "every shard needs the same row shape", id="row_shapes",
        ),
        pytest.param(
            lambda: fg.nn.embedding_lookup([], jnp.array([1])),
            ValueError, "params is an empty list", id="no_shards",
        ),
        pytest.param(
            lambda: fg.nn.embedding_lookup(TABLE, jnp.array([1.0])),
            TypeError, "pass integer ids", id="float_ids",
        ),
        pytest.param(
            lambda: fg.nn.embedding_lookup(_mod_shards(TABLE, 2), jnp.array([3, 10])),
            ValueError, r"id 10 is outside the table of 10 rows", id="id_outside",
        ),
        pytest.param(
            lambda: fg.nn.embedding_lookup_sparse(TABLE, {"ids": 1}, None),
            TypeError, "must be an fg.nn.SparseTensor or a jax.experimental.sparse.BCOO",
            id="not_sparse",
        ),
        pytest.param(
            lambda: fg.nn.embedding_lookup_sparse(
                TABLE, SP, fg.nn.SparseTensor(SP.indices[:2], WEIGHTS.values[:2], (4, 3))
            ),
            ValueError, "give one weight per id", id="weights_elsewhere",
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
        pytest.param(
            lambda: fg.nn.nce_loss(TABLE, jnp.zeros(10), LABELS, X, 2, 10),
            TypeError, r"no key given; .* pass key=jax.random.key\(0\)", id="nce_no_key",
        ),
        pytest.param(
            lambda: fg.nn.sampled_softmax_loss(TABLE, jnp.zeros(10), LABELS, X, 2, 10, key=3),
            TypeError, r"key=3 is no PRNG key", id="not_a_key",
        ),
        pytest.param(
            lambda: fg.nn.uniform_candidate_sampler(LABELS, 1, 2, True, 10),
            TypeError, "no key given", id="sampler_no_key",
        ),
        pytest.param(
            lambda: fg.nn.nce_loss(TABLE, jnp.zeros(10), LABELS, jnp.ones((3, 3)), 2, 10,
                                   sampled_values=DRAWN),
            ValueError, r"pass inputs \(batch, dim\) and labels \(batch, num_true\)",
            id="labels_and_inputs",
        ),
        pytest.param(
            lambda: fg.nn.sampled_softmax_loss(TABLE, jnp.zeros(10), LABELS, X, 3, 10,
                                               sampled_values=DRAWN),
            ValueError, r"sampled_values has shapes .* need \(\(3,\), \(2, 1\), \(3,\)\)",
            id="sampled_values_shapes",
        ),
        pytest.param(
            lambda: fg.nn.nce_loss(TABLE, jnp.zeros(10), LABELS, X, 2, 10, sampled_values=3),
            TypeError, "sampled_values must be the sampler's triple", id="sampled_values_type",
        ),
        pytest.param(
            lambda: fg.nn.log_uniform_candidate_sampler(LABELS, 1, 11, True, 10,
                                                        key=jax.random.key(0)),
            ValueError, "11 unique candidates cannot come from range_max=10", id="too_many",
        ),
        pytest.param(
            lambda: fg.nn.log_uniform_candidate_sampler(LABELS, 2, 3, True, 10,
                                                        key=jax.random.key(0)),
            ValueError, "true_classes has 1 columns but num_true is 2", id="num_true",
        ),
        pytest.param(
            lambda: fg.nn.fixed_unigram_candidate_sampler(LABELS, 1, 2, True, 10,
                                                          vocab_file="vocab.csv"),
            ValueError, "read the vocabulary's counts yourself and pass them as unigrams=",
            id="vocab_file",
        ),
        pytest.param(
            lambda: fg.nn.fixed_unigram_candidate_sampler(LABELS, 1, 2, True, 10,
                                                          unigrams=[1.0, 2.0]),
            ValueError, r"range_max=10 but 0 reserved ids and 2 unigrams", id="unigrams",
        ),
        pytest.param(
            lambda: fg.nn.log_uniform_candidate_sampler(LABELS, 1, 2.5, True, 10,
                                                        key=jax.random.key(0)),
            TypeError, "num_sampled must be an integer >= 1", id="num_sampled",
        ),
    ],
)  # fmt: skip
def test_bad_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call()
