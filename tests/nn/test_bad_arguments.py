"""fg.nn: each table keeps its IndexedSlices and its optimizer's sparse rule, under jax.jit
too; the samplers' distributions; every bad input's error.  The numbers themselves are
TensorFlow's in tests/parity/test_nn_parity.py."""

import inspect

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


# --- bad inputs: one for every argument of every public function -------------------------

LABELS, X = jnp.array([[1], [2]]), jnp.ones((2, 3))
DRAWN = (jnp.array([0, 4]), jnp.ones((2, 1)), jnp.ones(2))
B = jnp.zeros(10)
KEY = jax.random.key(0)
COUNTS = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]  # 8 unigrams after 2 reserved ids


def _lookup(**kw):
    return lambda: fg.nn.embedding_lookup(**{"params": TABLE, "ids": jnp.array([1]), **kw})


def _sparse(**kw):
    return lambda: fg.nn.embedding_lookup_sparse(
        **{
            "params": TABLE,
            "sp_ids": SP._replace(values=np.abs(SP.values)),
            "sp_weights": None,
            **kw,
        }
    )


def _safe(**kw):
    return lambda: fg.nn.safe_embedding_lookup_sparse(
        **{"embedding_weights": TABLE, "sparse_ids": SP, **kw}
    )


def _loss(loss, **kw):
    args = {"weights": TABLE, "biases": B, "labels": LABELS, "inputs": X, "num_sampled": 2,
            "num_classes": 10, "sampled_values": DRAWN, **kw}  # fmt: skip
    return lambda: getattr(fg.nn, loss)(**args)


def _sampler(sampler, **kw):
    args = {"true_classes": LABELS, "num_true": 1, "num_sampled": 2, "unique": True,
            "range_max": 10, "key": KEY, **kw}  # fmt: skip
    if sampler == "fixed_unigram_candidate_sampler":
        args = {"unigrams": COUNTS, "num_reserved_ids": 2, **args}
    return lambda: getattr(fg.nn, sampler)(**args)


def _loss_cases(loss):
    return {
        "weights": (
            _loss(loss, weights=TABLE[:, :2]),
            ValueError, r"inputs has shape \(2, 3\), not \(batch, 2\)",
        ),
        "biases": (
            _loss(loss, biases=jnp.zeros((10, 1))),
            ValueError, r"biases has rows of shape \(1,\), not \(\); .* biases \(num_classes,\)",
        ),
        "labels": (
            _loss(loss, labels=LABELS.astype(jnp.float32)),
            TypeError, "labels has dtype float32; pass integer ids",
        ),
        "inputs": (
            _loss(loss, inputs=jnp.ones(2)),
            ValueError, r"inputs has shape \(2,\), not \(batch, 3\)",
        ),
        "num_sampled": (
            _loss(loss, num_sampled=0),
            ValueError, "num_sampled must be an integer >= 1",
        ),
        "num_classes": (
            _loss(loss, num_classes=11),
            ValueError, "num_classes=11 but weights has 10 rows",
        ),
        "num_true": (
            _loss(loss, num_true=2),
            ValueError, r"labels has shape \(2, 1\) with num_true=2",
        ),
        "sampled_values": (
            _loss(loss, sampled_values=(DRAWN[0].astype(jnp.float32), *DRAWN[1:])),
            TypeError, r"sampled_values\[0\] \(the candidates\) has dtype float32; pass integer",
        ),
        "remove_accidental_hits": (
            _loss(loss, remove_accidental_hits="yes"),
            TypeError, "remove_accidental_hits must be True or False",
        ),
        "partition_strategy": (
            _loss(loss, partition_strategy="modulo"),
            ValueError, "partition_strategy='modulo' is none of",
        ),
        "name": (
            _loss(loss, name=3),
            TypeError, "name=3 is not a string; pass TensorFlow's op name",
        ),
        "key": (
            _loss(loss, sampled_values=None, key=3),
            TypeError, "key=3 is no PRNG key; pass jax.random.key",
        ),
    }  # fmt: skip


def _sampler_cases(sampler):
    return {
        "true_classes": (
            _sampler(sampler, true_classes=LABELS.astype(jnp.float32)),
            TypeError, "true_classes has dtype float32; pass integer ids",
        ),
        "num_true": (
            _sampler(sampler, num_true=2),
            ValueError, "true_classes has 1 columns but num_true is 2",
        ),
        "num_sampled": (
            _sampler(sampler, num_sampled=2.5),
            TypeError, "num_sampled must be an integer >= 1",
        ),
        "unique": (
            _sampler(sampler, unique="no"),
            TypeError, "unique must be True or False, got 'no'",
        ),
        "range_max": (
            _sampler(sampler, range_max=0),
            ValueError, "range_max must be an integer >= 1",
        ),
        "seed": (
            _sampler(sampler, seed="s"),
            TypeError, r"seed must be an integer, got 's'; .* key=jax.random.key\(seed\)",
        ),
        "name": (_sampler(sampler, name=3), TypeError, "name=3 is not a string"),
        "key": (
            _sampler(sampler, key=None),
            TypeError, r"no key given; .* pass key=jax.random.key\(0\)",
        ),
    }  # fmt: skip


#: For each public function of fg.nn, one bad value of each of its arguments:
#: ``{function: {argument: (call, error, match)}}``.
BAD_ARGUMENTS = {
    "SparseTensor": {
        "indices": (
            _sparse(sp_ids=SP._replace(indices=SP.indices * 1.0)),
            TypeError, r"sp_ids.indices has dtype float32; pass integer coordinates",
        ),
        "values": (
            _sparse(sp_ids=SP._replace(values=SP.values * 1.0)),
            TypeError, r"sp_ids.values has dtype float\d+; pass integer ids",
        ),
        "dense_shape": (
            _sparse(sp_ids=SP._replace(dense_shape=(4.0, 3))),
            TypeError, r"sp_ids.dense_shape is \(4.0, 3\); .* pass it as a tuple of Python ints",
        ),
    },
    "embedding_lookup": {
        "params": (
            _lookup(params=[]),
            ValueError, "params is an empty list; pass the table or its shards",
        ),
        "ids": (
            _lookup(ids=jnp.array([1.0])),
            TypeError, "ids has dtype float32; pass integer ids",
        ),
        "partition_strategy": (
            _lookup(partition_strategy="modulo"),
            ValueError, r"partition_strategy='modulo' is none of \['mod', 'div'\]",
        ),
        "name": (_lookup(name=3), TypeError, "name=3 is not a string"),
        "validate_indices": (
            _lookup(validate_indices="yes"),
            TypeError, "validate_indices must be True or False",
        ),
        "max_norm": (
            _lookup(max_norm=-1.0),
            ValueError, r"max_norm=-1.0 clips no row .* pass the largest L2 norm",
        ),
    },
    "embedding_lookup_sparse": {
        "params": (
            _sparse(params=[TABLE[:3], TABLE[3:]]),
            ValueError, r"params has shards of \[3, 7\] rows; .* split 10 rows as \[5, 5\]",
        ),
        "sp_ids": (
            _sparse(sp_ids={"ids": 1}),
            TypeError, "sp_ids must be an fg.nn.SparseTensor or a jax.experimental.sparse.BCOO",
        ),
        "sp_weights": (
            _sparse(sp_weights=fg.nn.SparseTensor(SP.indices[:2], WEIGHTS.values[:2], (4, 3))),
            ValueError, "give one weight per id",
        ),
        "partition_strategy": (
            _sparse(partition_strategy="modulo"),
            ValueError, "partition_strategy='modulo' is none of",
        ),
        "name": (_sparse(name=3), TypeError, "name=3 is not a string"),
        "combiner": (
            _sparse(combiner="maen"),
            ValueError, r"combiner='maen' is none of .*did you mean 'mean'",
        ),
        "max_norm": (
            _sparse(max_norm="big"),
            TypeError, "max_norm='big' is not a number; pass the largest L2 norm",
        ),
    },
    "safe_embedding_lookup_sparse": {
        "embedding_weights": (_safe(embedding_weights=[]), ValueError, "params is an empty list"),
        "sparse_ids": (
            _safe(sparse_ids={"ids": 1}),
            TypeError, "sp_ids must be an fg.nn.SparseTensor",
        ),
        "sparse_weights": (
            _safe(sparse_weights=fg.nn.SparseTensor(SP.indices[:2], WEIGHTS.values[:2], (4, 3))),
            ValueError, "give one weight per id",
        ),
        "combiner": (
            _safe(combiner="avg"),
            ValueError, r"combiner='avg' is none of \['mean', 'sqrtn', 'sum'\]",
        ),
        "default_id": (
            _safe(default_id=10),
            ValueError, r"default_id must be below 10, got 10; pass the id .* in \[0, 10\)",
        ),
        "name": (_safe(name=3), TypeError, "name=3 is not a string"),
        "partition_strategy": (
            _safe(partition_strategy="modulo"),
            ValueError, "partition_strategy='modulo' is none of",
        ),
        "max_norm": (_safe(max_norm=float("nan")), ValueError, "max_norm=nan clips no row"),
    },
    "nce_loss": _loss_cases("nce_loss"),
    "sampled_softmax_loss": {
        **_loss_cases("sampled_softmax_loss"),
        "seed": (
            _loss("sampled_softmax_loss", seed=1.5),
            TypeError, r"seed must be an integer, got 1.5; .* key=jax.random.key\(seed\)",
        ),
    },
    "log_uniform_candidate_sampler": _sampler_cases("log_uniform_candidate_sampler"),
    "uniform_candidate_sampler": _sampler_cases("uniform_candidate_sampler"),
    "fixed_unigram_candidate_sampler": {
        **_sampler_cases("fixed_unigram_candidate_sampler"),
        "range_max": (
            _sampler("fixed_unigram_candidate_sampler", range_max=11),
            ValueError, r"range_max=11 but 2 reserved ids and 8 unigrams; range_max must be",
        ),
        "vocab_file": (
            _sampler("fixed_unigram_candidate_sampler", vocab_file="vocab.csv"),
            ValueError, "read the vocabulary's counts yourself and pass them as unigrams=",
        ),
        "distortion": (
            _sampler("fixed_unigram_candidate_sampler", distortion=float("nan")),
            TypeError, "distortion=nan is not a finite number",
        ),
        "num_reserved_ids": (
            _sampler("fixed_unigram_candidate_sampler", num_reserved_ids=-1),
            ValueError, "num_reserved_ids must be an integer >= 0",
        ),
        "num_shards": (
            _sampler("fixed_unigram_candidate_sampler", num_shards=2),
            ValueError, "num_shards=2, shard=0; .* unsharded",
        ),
        "shard": (
            _sampler("fixed_unigram_candidate_sampler", shard=1),
            ValueError, "num_shards=1, shard=1; .* unsharded",
        ),
        "unigrams": (
            _sampler("fixed_unigram_candidate_sampler", unigrams=[1.0, -2.0, *COUNTS[2:]]),
            ValueError, r"unigrams of shape \(8,\) holds -2.0 at position 1 .* at least 0",
        ),
    },
}  # fmt: skip


def test_every_argument_of_every_public_function_has_a_bad_input_case():
    """The list comes from fg.nn.__all__ and the signatures: a new function or argument
    must bring its case."""
    assert sorted(BAD_ARGUMENTS) == sorted(fg.nn.__all__)
    for name, cases in BAD_ARGUMENTS.items():
        arguments = set(inspect.signature(getattr(fg.nn, name)).parameters)
        assert set(cases) == arguments, name


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        pytest.param(*case, id=f"{function}-{argument}")
        for function, cases in BAD_ARGUMENTS.items()
        for argument, case in cases.items()
    ],
)
def test_a_bad_value_of_each_argument_is_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- more bad inputs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        pytest.param(
            lambda: fg.nn.embedding_lookup([TABLE[:5], TABLE[5:, :2]], jnp.array([1])),
            ValueError, "every shard needs the same row shape", id="row_shapes",
        ),
        pytest.param(
            lambda: fg.nn.embedding_lookup(_mod_shards(TABLE, 2), jnp.array([3, 10])),
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
        pytest.param(
            lambda: fg.nn.nce_loss(TABLE, B, LABELS, X, 2, 10),
            TypeError, r"no key given; .* pass key=jax.random.key\(0\)", id="nce_no_key",
        ),
        pytest.param(
            lambda: fg.nn.sampled_softmax_loss(TABLE, B, LABELS, X, 3, 10, sampled_values=DRAWN),
            ValueError, r"sampled_values has shapes .* need \(\(3,\), \(2, 1\), \(3,\)\)",
            id="sampled_values_shapes",
        ),
        pytest.param(
            lambda: fg.nn.nce_loss(TABLE, B, LABELS, X, 2, 10, sampled_values=3),
            TypeError, "sampled_values must be the sampler's triple", id="sampled_values_type",
        ),
        pytest.param(
            lambda: fg.nn.nce_loss(TABLE, B, LABELS, X, 2, 10,
                                   sampled_values=(DRAWN[0], DRAWN[1].astype(int), DRAWN[2])),
            TypeError, r"sampled_values\[1\] \(an expected count\) has dtype int32; pass",
            id="integer_expected_counts",
        ),
        pytest.param(
            lambda: fg.nn.log_uniform_candidate_sampler(LABELS, 1, 11, True, 10, key=KEY),
            ValueError, r"11 unique candidates cannot come from the 10 classes .*range_max=10",
            id="too_many",
        ),
        pytest.param(
            lambda: fg.nn.log_uniform_candidate_sampler(LABELS, 1, 700_000, True, 10**6, key=KEY),
            ValueError, r"the \d+ classes that can be drawn \(the classes below \d+, which float32",
            id="beyond_float32_draws",
        ),
        pytest.param(
            lambda: fg.nn.nce_loss(TABLE, jnp.zeros(9), LABELS, X, 2, 10, sampled_values=DRAWN),
            ValueError, "biases has 9 rows, weights 10", id="biases_rows",
        ),
    ],
)  # fmt: skip
def test_bad_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize(
    ("unigrams", "match"),
    [
        pytest.param([1.0, -2.0, 3.0], "holds -2.0 at position 1", id="negative"),
        pytest.param([1.0, float("nan"), 3.0], "holds nan at position 1", id="nan"),
        pytest.param([0.0, 0.0], r"unigrams of shape \(2,\) \(with distortion=1.0\)", id="zero"),
        pytest.param([[1.0, 2.0, 3.0]], r"unigrams of shape \(1, 3\)", id="matrix"),
    ],
)  # fmt: skip
def test_unigrams_that_draw_no_distribution_are_refused(unigrams, match):
    """They drew the negative class, a reserved id, or gave NaN expected counts."""
    with pytest.raises(ValueError, match=match + ".*pass one finite count of at least 0 per class"):
        fg.nn.fixed_unigram_candidate_sampler(LABELS, 1, 2, False, 3, unigrams=unigrams, key=KEY)


def test_zero_counts_under_a_negative_distortion_are_refused():
    with pytest.raises(ValueError, match=r"holds 0.0 at position 1 \(with distortion=-0.5\)"):
        fg.nn.fixed_unigram_candidate_sampler(
            LABELS, 1, 2, False, 3, unigrams=[1.0, 0.0, 2.0], distortion=-0.5, key=KEY
        )


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize(
    ("counts", "drawable"),
    [
        pytest.param([4.0, 0.0, 1.0, 0.0], 2, id="zero_counts"),
        pytest.param([1e10, 1.0, 1.0, 1.0], 1, id="beyond_float32_draws"),
    ],
)
def test_more_unique_candidates_than_drawable_classes_are_refused_not_drawn_forever(
    counts, drawable, jit
):
    """Two reserved ids and zero counts leave too few classes for 3 unique draws: the
    while loop never ended, eagerly and under jax.jit."""

    def draw(key):
        return fg.nn.fixed_unigram_candidate_sampler(
            LABELS, 1, 3, True, 6, unigrams=counts, num_reserved_ids=2, key=key
        )

    with pytest.raises(
        ValueError,
        match=rf"3 unique candidates cannot come from the {drawable} classes .*"
        rf"sample at most {drawable}, or pass unique=False",
    ):
        (jax.jit(draw) if jit else draw)(KEY)
    sampled, _, _ = fg.nn.fixed_unigram_candidate_sampler(
        LABELS, 1, drawable, True, 6, unigrams=counts, num_reserved_ids=2, key=KEY
    )
    assert (
        sorted(np.asarray(sampled).tolist()) == [2 + k for k in np.flatnonzero(counts)][:drawable]
    )


@pytest.mark.parametrize("loss", [fg.nn.nce_loss, fg.nn.sampled_softmax_loss])
def test_an_output_layer_of_the_wrong_shape_is_named_with_the_fix(loss):
    """They were JAX's concatenate and reshape errors."""
    with pytest.raises(
        ValueError,
        match=r"biases has rows of shape \(1,\), not \(\); inputs has shape \(2, 4\), "
        r"not \(batch, 3\); pass weights \(num_classes, dim\) and biases \(num_classes,\)",
    ):
        loss(TABLE, jnp.zeros((10, 1)), LABELS, jnp.ones((2, 4)), 2, 10, sampled_values=DRAWN)


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

    rows, combined, safe = variant(lookups)(_mod_shards(TABLE, 3))
    assert rows.shape == (0, 2, 3)
    np.testing.assert_array_equal(combined, np.zeros((2, 3)))
    np.testing.assert_array_equal(safe, np.zeros((2, 3)))
    grads = jax.grad(lambda ss: sum(jnp.sum(x) for x in lookups(ss)))(_mod_shards(TABLE, 3))
    assert all(not np.any(g) for g in grads)
