"""TensorFlow's candidate samplers, drawn from an explicit PRNG key.

Each returns what TensorFlow's op returns: ``(sampled_candidates, true_expected_count,
sampled_expected_count)``.  The draws follow TensorFlow's distributions (its
``RangeSampler`` subclasses in ``tensorflow/core/kernels/range_sampler.cc``) but cannot
be TensorFlow's own numbers; the expected counts are TensorFlow's formula: ``p * n`` for
``n`` draws, and with ``unique=True``, where ``num_tries`` draws were needed to find ``n``
distinct candidates, ``-expm1(num_tries * log1p(-p))`` (or ``p * n`` when no draw was
repeated), in float32 as TensorFlow computes it.

Unique draws loop until they hold ``num_sampled`` distinct classes, as TensorFlow's do.
So that no loop can run forever, each sampler says how many classes its float32 draws
can produce, and more unique candidates than that are refused on the host: the classes
of weight above 0 (``fixed_unigram``), every class below ``2**23 / log(range_max + 1)``
(``log_uniform``: above it the float32 steps of ``exp(u * log(range_max + 1))`` pass
over classes), or ``range_max``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad._checks import as_bool
from funcgrad._checks import as_int
from funcgrad._checks import is_real_number
from funcgrad.nn import _checks

__all__ = [
    "fixed_unigram_candidate_sampler",
    "log_uniform_candidate_sampler",
    "uniform_candidate_sampler",
]

#: ``(key, shape) -> int32 candidates`` and ``candidates -> float32 probability``.
Draw = Callable[[jax.Array, tuple[int, ...]], jax.Array]
Probability = Callable[[jax.Array], jax.Array]


def _true_classes(caller: str, true_classes: Any, num_true: int) -> jax.Array:
    true_classes = _checks.integer_ids(caller, "true_classes", true_classes)
    if true_classes.ndim != 2:
        raise ValueError(
            f"{caller}: true_classes has shape {true_classes.shape}; pass classes of shape "
            "(batch, num_true)."
        )
    if true_classes.shape[1] != num_true:
        raise ValueError(
            f"{caller}: true_classes has {true_classes.shape[1]} columns but num_true is "
            f"{num_true}; pass labels of shape (batch, num_true)."
        )
    return true_classes


def _counts(caller: str, num_true: Any, num_sampled: Any, unique: Any, range_max: Any) -> Any:
    """The sampler's counts as Python ints and ``unique`` as a bool."""
    hint = "pass a Python int"
    return (
        as_int(caller, "num_true", num_true, minimum=1, hint=hint),
        as_int(caller, "num_sampled", num_sampled, minimum=1, hint=hint),
        as_bool(caller, "unique", unique),
        as_int(caller, "range_max", range_max, minimum=1, hint=hint),
    )


def _sample(
    caller: str,
    true_classes: Any,
    counts: tuple[int, int, bool, int],
    drawable: tuple[int, str],
    key: Any,
    draw: Draw,
    probability: Probability,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The triple, from ``counts`` (:func:`_counts`); ``drawable`` is how many classes
    the draws can produce and which they are, in words."""
    num_true, num_sampled, unique, _ = counts
    true_classes = _true_classes(caller, true_classes, num_true)
    key = _checks.key(caller, key)
    if unique and num_sampled > drawable[0]:
        raise ValueError(
            f"{caller}: {num_sampled} unique candidates cannot come from the {drawable[0]} "
            f"classes that can be drawn ({drawable[1]}), so the draw would never end; "
            f"sample at most {drawable[0]}, or pass unique=False."
        )
    if unique:
        sampled, tries = _draw_unique(key, num_sampled, draw)
    else:
        sampled, tries = draw(key, (num_sampled,)), jnp.int32(num_sampled)
    return (
        sampled,
        expected_count(probability(true_classes), tries, num_sampled),
        expected_count(probability(sampled), tries, num_sampled),
    )


def expected_count(p: jax.Array, num_tries: Any, num_sampled: int) -> jax.Array:
    """TensorFlow's ``ExpectedCountHelper``: how often a class of probability ``p`` is
    expected among ``num_sampled`` candidates that took ``num_tries`` draws."""
    tries = jnp.asarray(num_tries)
    repeated = -jnp.expm1(tries.astype(jnp.float32) * jnp.log1p(-p))
    return jnp.where(tries == num_sampled, p * jnp.float32(num_sampled), repeated)


def _unigram_weights(caller: str, unigrams: Any, distortion: Any) -> np.ndarray:
    """``unigrams ** distortion`` on the host (float64), after the checks TensorFlow's
    sampler leaves to chance: a negative, NaN or infinite count, or no weight at all,
    would draw the wrong classes or give NaN expected counts."""
    if isinstance(unigrams, jax.core.Tracer) or isinstance(distortion, jax.core.Tracer):
        raise TypeError(
            f"{caller}: unigrams or distortion is traced; TensorFlow takes them as "
            "attributes - pass a list or NumPy array of counts and a Python float."
        )
    if not is_real_number(distortion) or not math.isfinite(distortion):
        raise TypeError(
            f"{caller}: distortion={distortion!r} is not a finite number; pass the power "
            "of the counts as a float (1.0 for none, word2vec's 0.75)."
        )
    try:
        counts = np.asarray(unigrams, np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"{caller}: unigrams={unigrams!r} is not a list of counts; pass one number "
            "per class after the reserved ones."
        ) from None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        weights = counts ** float(distortion)
    bad = np.flatnonzero(~np.isfinite(counts) | (counts < 0) | ~np.isfinite(weights))
    if counts.ndim != 1 or not counts.size or bad.size or not np.any(weights > 0):
        raise ValueError(
            f"{caller}: unigrams of shape {counts.shape}"
            + (f" holds {counts[bad[0]]} at position {bad[0]}" if bad.size else "")
            + f" (with distortion={distortion}); pass one finite count of at least 0 per "
            "class after the reserved ones, some of them above 0."
        )
    return weights


def log_uniform_probability(classes: jax.Array, range_max: int) -> jax.Array:
    """TensorFlow's ``LogUniformSampler::Probability``, in float32."""
    log_range = jnp.log1p(jnp.float32(range_max))
    return jnp.log1p(1.0 / (classes.astype(jnp.float32) + 1.0)) / log_range


def _draw_unique(key: jax.Array, n: int, draw: Draw) -> tuple[jax.Array, jax.Array]:
    """``n`` distinct candidates, drawn one at a time as TensorFlow does, and how many
    draws that took."""

    def step(carry: tuple[jax.Array, jax.Array, jax.Array]) -> Any:
        picked, count, tries = carry
        value = draw(jax.random.fold_in(key, tries), ())
        new = ~jnp.any(picked == value)
        picked = jnp.where(new, picked.at[count].set(value), picked)
        return picked, count + new.astype(jnp.int32), tries + 1

    start = (jnp.full((n,), -1, jnp.int32), jnp.int32(0), jnp.int32(0))
    picked, _, tries = jax.lax.while_loop(lambda c: c[1] < n, step, start)
    return picked, tries


def log_uniform_candidate_sampler(
    true_classes: Any,
    num_true: int,
    num_sampled: int,
    unique: bool,
    range_max: int,
    seed: int | None = None,
    name: str | None = None,
    *,
    key: Any = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Candidates from Zipf's law (``tf.random.log_uniform_candidate_sampler``).

    Class ``k`` of ``[0, range_max)`` has probability
    ``(log(k + 2) - log(k + 1)) / log(range_max + 1)``: classes sorted by falling
    frequency, as word2vec's vocabulary is.  TensorFlow's ``seed`` is replaced by ``key``.

    Args:
      true_classes: the labels, integers ``(batch, num_true)``.
      num_true: the number of labels per example.
      num_sampled: how many candidates to draw.
      unique: draw distinct candidates (TensorFlow redraws until it has ``num_sampled``).
      range_max: the number of classes.
      seed: TensorFlow's seed; unused, pass ``key``.
      name: TensorFlow's op name; unused.
      key: a ``jax.random.key``, required.

    Returns:
      ``(sampled_candidates, true_expected_count, sampled_expected_count)``: int32
      ``(num_sampled,)``, float32 ``(batch, num_true)`` and float32 ``(num_sampled,)``.

    Raises:
      TypeError: without a key, for labels that are not integers, ``unique`` that is not
        a bool, or counts that are not ints.
      ValueError: for labels not ``(batch, num_true)``, counts below 1, or more unique
        candidates than the draws can produce (they would loop forever).

    Example:
      >>> labels = jnp.array([[0], [7]])
      >>> sampled, true_ec, sampled_ec = fg.nn.log_uniform_candidate_sampler(
      ...     labels, 1, 4, True, 10, key=jax.random.key(0))
      >>> sampled.shape, true_ec.shape, sampled_ec.shape
      ((4,), (2, 1), (4,))
      >>> bool(jnp.all((0 <= sampled) & (sampled < 10))), len(set(sampled.tolist()))
      (True, 4)
    """
    caller = "fg.nn.log_uniform_candidate_sampler(true_classes, num_true, ...)"
    _checks.op_name(caller, name)
    _checks.seed(caller, seed)
    counts = _counts(caller, num_true, num_sampled, unique, range_max)
    range_max = counts[3]
    log_range = jnp.log1p(jnp.float32(range_max))
    # Every class below 2**23 / log(range_max + 1) is reached by a float32 draw.
    reached = min(range_max, int(2**23 / math.log1p(range_max)) - 2)
    why = f"range_max={range_max}"
    if reached < range_max:
        why = f"the classes below {reached}, which float32 draws of the law surely reach"

    def draw(k: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        u = jax.random.uniform(k, shape, jnp.float32)
        return (jnp.floor(jnp.exp(u * log_range)).astype(jnp.int32) - 1) % range_max

    def probability(classes: jax.Array) -> jax.Array:
        return log_uniform_probability(classes, range_max)

    return _sample(caller, true_classes, counts, (reached, why), key, draw, probability)


def uniform_candidate_sampler(
    true_classes: Any,
    num_true: int,
    num_sampled: int,
    unique: bool,
    range_max: int,
    seed: int | None = None,
    name: str | None = None,
    *,
    key: Any = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Candidates drawn uniformly from ``[0, range_max)`` (``tf.random.uniform_candidate_sampler``).

    Args and returns as ``log_uniform_candidate_sampler``; every class has probability
    ``1 / range_max``.

    Args:
      true_classes: the labels, integers ``(batch, num_true)``.
      num_true: the number of labels per example.
      num_sampled: how many candidates to draw.
      unique: draw distinct candidates.
      range_max: the number of classes.
      seed: TensorFlow's seed; unused, pass ``key``.
      name: TensorFlow's op name; unused.
      key: a ``jax.random.key``, required.

    Returns:
      ``(sampled_candidates, true_expected_count, sampled_expected_count)``.

    Raises:
      TypeError: as ``log_uniform_candidate_sampler``.
      ValueError: as ``log_uniform_candidate_sampler``.

    Example:
      >>> _, true_ec, _ = fg.nn.uniform_candidate_sampler(
      ...     jnp.array([[3]]), 1, 5, False, 10, key=jax.random.key(0))
      >>> true_ec.tolist()                                  # 5 draws, p = 0.1
      [[0.5]]
    """
    caller = "fg.nn.uniform_candidate_sampler(true_classes, num_true, ...)"
    _checks.op_name(caller, name)
    _checks.seed(caller, seed)
    counts = _counts(caller, num_true, num_sampled, unique, range_max)
    range_max = counts[3]

    def draw(k: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        return jax.random.randint(k, shape, 0, range_max, jnp.int32)

    def probability(classes: jax.Array) -> jax.Array:
        return jnp.full(classes.shape, 1.0 / range_max, jnp.float32)

    drawable = (range_max, f"range_max={range_max}")
    return _sample(caller, true_classes, counts, drawable, key, draw, probability)


def fixed_unigram_candidate_sampler(
    true_classes: Any,
    num_true: int,
    num_sampled: int,
    unique: bool,
    range_max: int,
    vocab_file: str = "",
    distortion: float = 1.0,
    num_reserved_ids: int = 0,
    num_shards: int = 1,
    shard: int = 0,
    unigrams: Any = (),
    seed: int | None = None,
    name: str | None = None,
    *,
    key: Any = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Candidates drawn by given counts (``tf.random.fixed_unigram_candidate_sampler``).

    Class ``k`` has probability ``w_k / sum(w)`` with ``w = unigrams ** distortion``,
    after ``num_reserved_ids`` classes of weight 0, as TensorFlow's
    ``FixedUnigramSampler``.  Read a ``vocab_file`` yourself (its last column) and pass
    the counts as ``unigrams``; TensorFlow's ``num_shards`` / ``shard`` are not taken.

    Args:
      true_classes: the labels, integers ``(batch, num_true)``.
      num_true: the number of labels per example.
      num_sampled: how many candidates to draw.
      unique: draw distinct candidates.
      range_max: the number of classes: ``num_reserved_ids + len(unigrams)``.
      vocab_file: must be empty; pass ``unigrams``.
      distortion: the power the counts are raised to (word2vec's 0.75).
      num_reserved_ids: classes of weight 0 before the first count.
      num_shards: must be 1.
      shard: must be 0.
      unigrams: the count (or probability) of each class after the reserved ones.
      seed: TensorFlow's seed; unused, pass ``key``.
      name: TensorFlow's op name; unused.
      key: a ``jax.random.key``, required.

    Returns:
      ``(sampled_candidates, true_expected_count, sampled_expected_count)``.

    Raises:
      TypeError: as ``log_uniform_candidate_sampler``, or for traced ``unigrams`` or a
        ``distortion`` that is not a finite number.
      ValueError: for a ``vocab_file``, shards, ``range_max`` other than the number of
        weights, ``unigrams`` that are negative, NaN or all zero (or zero under a negative
        ``distortion``), or as ``log_uniform_candidate_sampler`` (unique draws count the
        classes of weight above 0).

    Example:
      >>> sampled, true_ec, _ = fg.nn.fixed_unigram_candidate_sampler(
      ...     jnp.array([[1]]), 1, 4, False, 3, unigrams=[1.0, 3.0], num_reserved_ids=1,
      ...     key=jax.random.key(0))
      >>> bool(jnp.all(sampled > 0)), true_ec.tolist()        # p(1) = 1/4, 4 draws
      (True, [[1.0]])
    """
    caller = "fg.nn.fixed_unigram_candidate_sampler(true_classes, num_true, ...)"
    _checks.op_name(caller, name)
    _checks.seed(caller, seed)
    counts = _counts(caller, num_true, num_sampled, unique, range_max)
    if vocab_file or num_shards != 1 or shard != 0:
        raise ValueError(
            f"{caller}: vocab_file={vocab_file!r}, num_shards={num_shards}, shard={shard}; "
            "read the vocabulary's counts yourself and pass them as unigrams=, unsharded."
        )
    reserved = as_int(caller, "num_reserved_ids", num_reserved_ids, minimum=0, hint="pass an int")
    host = _unigram_weights(caller, unigrams, distortion)
    if reserved + host.size != counts[3]:
        raise ValueError(
            f"{caller}: range_max={counts[3]} but {reserved} reserved ids and "
            f"{host.size} unigrams; range_max must be num_reserved_ids + len(unigrams)."
        )
    # Gumbel noise in float32 spans about 20.4: no draw reaches a class e**20 lighter.
    reached = int(np.count_nonzero(host >= host.max() * math.exp(-20.0)))
    why = "weight above 0, and at least e**-20 of the largest, which float32 draws reach"
    unigram = jnp.asarray(unigrams, jnp.float32).reshape(-1) ** jnp.float32(distortion)
    weights = jnp.concatenate([jnp.zeros(reserved, jnp.float32), unigram])
    weights = weights / jnp.sum(weights)

    def draw(k: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        return jax.random.categorical(k, jnp.log(weights), shape=shape).astype(jnp.int32)

    def probability(classes: jax.Array) -> jax.Array:
        return jnp.take(weights, classes, mode="fill", fill_value=0.0)

    return _sample(caller, true_classes, counts, (reached, why), key, draw, probability)
