"""fg.nn's candidate samplers: their draws follow TensorFlow's distributions and expected
counts; their bad inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from funcgrad.nn import candidate_sampling
from tests.nn._helpers import KEY
from tests.nn._helpers import LABELS

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


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
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
