"""fg.nn: one bad value for every argument of every public function, each a clear error
that names the fix; the list follows fg.nn.__all__ and the signatures."""

import inspect

import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from tests.nn._helpers import DRAWN
from tests.nn._helpers import KEY
from tests.nn._helpers import LABELS
from tests.nn._helpers import SP
from tests.nn._helpers import TABLE
from tests.nn._helpers import WEIGHTS
from tests.nn._helpers import B
from tests.nn._helpers import X

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
