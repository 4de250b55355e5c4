"""TensorFlow's sampled losses: ``nce_loss`` and ``sampled_softmax_loss``.

Both evaluate TensorFlow's ``_compute_sampled_logits`` (``nn_impl.py``, TF 2.21): the
rows of the output layer ``weights`` and ``biases`` at the true labels and at the sampled
candidates are looked up in one ``embedding_lookup`` (so each table gets an
``fg.IndexedSlices`` from ``compute_gradients``), the logits are the dot products plus
the biases, an accidental hit (a sampled candidate that is one of the example's labels)
gets ``-FLT_MAX`` added when asked, and the log of each expected count is subtracted
(``subtract_log_q``).  The sampled values never carry a gradient, as in TensorFlow.

An accidental hit is TensorFlow's ``compute_accidental_hits``: it maps each sampled class
to its *last* position among the candidates, so where a class was drawn more than once
(``unique=False``) only its last copy is removed.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad._checks import as_bool
from funcgrad._checks import as_int
from funcgrad.nn import _checks
from funcgrad.nn.candidate_sampling import log_uniform_candidate_sampler
from funcgrad.nn.embedding import embedding_lookup

__all__ = ["nce_loss", "sampled_softmax_loss"]


def _sampled_values(
    caller: str,
    labels: jax.Array,
    num_true: int,
    num_sampled: int,
    num_classes: int,
    sampled_values: Any,
    key: Any,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """TensorFlow's draws as given, or the default sampler's from ``key``."""
    if sampled_values is None:
        return log_uniform_candidate_sampler(
            labels, num_true, num_sampled, True, num_classes, key=_checks.key(caller, key)
        )
    try:
        sampled, true_expected, sampled_expected = (jnp.asarray(v) for v in sampled_values)
    except (TypeError, ValueError):
        raise TypeError(
            f"{caller}: sampled_values must be the sampler's triple (sampled_candidates, "
            "true_expected_count, sampled_expected_count); pass what a candidate sampler "
            "returned."
        ) from None
    want = ((num_sampled,), labels.shape, (num_sampled,))
    got = (sampled.shape, true_expected.shape, sampled_expected.shape)
    if got != want:
        raise ValueError(
            f"{caller}: sampled_values has shapes {got}, where labels {labels.shape} and "
            f"num_sampled={num_sampled} need {want}; pass the triple a sampler returned "
            "for these labels."
        )
    sampled = _checks.integer_ids(caller, "sampled_values[0] (the candidates)", sampled)
    for k, count in ((1, true_expected), (2, sampled_expected)):
        if not jnp.issubdtype(count.dtype, jnp.floating):
            raise TypeError(
                f"{caller}: sampled_values[{k}] (an expected count) has dtype {count.dtype}; "
                "pass the float32 counts the sampler returned."
            )
    return sampled.astype(jnp.int32), true_expected, sampled_expected


def _check_layer(
    caller: str,
    weights: Any,
    biases: Any,
    inputs: jax.Array,
    labels: jax.Array,
    num_true: int,
    num_classes: int,
) -> None:
    """The output layer's shapes against the inputs', every mismatch at once."""
    w = _checks.shards(caller, weights, "weights")
    b = _checks.shards(caller, biases, "biases")
    rows, b_rows = sum(s.shape[0] for s in w), sum(s.shape[0] for s in b)
    problems = []
    if w[0].ndim != 2:
        problems.append(f"weights has rows of shape {w[0].shape[1:]}, not (dim,)")
    if b[0].ndim != 1:
        problems.append(f"biases has rows of shape {b[0].shape[1:]}, not ()")
    if b_rows != rows:
        problems.append(f"biases has {b_rows} rows, weights {rows}")
    if num_classes > rows:
        problems.append(f"num_classes={num_classes} but weights has {rows} rows")
    dim = w[0].shape[1] if w[0].ndim == 2 else "dim"
    if inputs.ndim != 2 or inputs.shape[1] != dim:
        problems.append(f"inputs has shape {inputs.shape}, not (batch, {dim})")
    batch = inputs.shape[0] if inputs.ndim else None
    if labels.shape != (batch, num_true):
        problems.append(f"labels has shape {labels.shape} with num_true={num_true}")
    if problems:
        raise ValueError(
            f"{caller}: {'; '.join(problems)}; pass weights (num_classes, dim) and biases "
            "(num_classes,), inputs (batch, dim) and labels (batch, num_true)."
        )


def _sampled_logits(
    caller: str,
    weights: Any,
    biases: Any,
    labels: Any,
    inputs: Any,
    num_sampled: int,
    num_classes: int,
    num_true: int,
    sampled_values: Any,
    remove_accidental_hits: bool,
    partition_strategy: str,
    key: Any,
) -> tuple[jax.Array, jax.Array]:
    """TensorFlow's ``_compute_sampled_logits``: ``(logits, labels)``, each
    ``(batch, num_true + num_sampled)``."""
    hint = "pass a Python int"
    num_true = as_int(caller, "num_true", num_true, minimum=1, hint=hint)
    num_sampled = as_int(caller, "num_sampled", num_sampled, minimum=1, hint=hint)
    num_classes = as_int(caller, "num_classes", num_classes, minimum=1, hint=hint)
    remove_accidental_hits = as_bool(caller, "remove_accidental_hits", remove_accidental_hits)
    inputs = jnp.asarray(inputs)
    labels = _checks.integer_ids(caller, "labels", labels)
    if labels.ndim == 1 and num_true == 1:  # TensorFlow reshapes them the same way
        labels = labels.reshape(-1, 1)
    _check_layer(caller, weights, biases, inputs, labels, num_true, num_classes)
    sampled, true_expected, sampled_expected = jax.lax.stop_gradient(
        _sampled_values(caller, labels, num_true, num_sampled, num_classes, sampled_values, key)
    )
    n = labels.size
    all_ids = jnp.concatenate([labels.reshape(-1).astype(jnp.int32), sampled])
    all_w = embedding_lookup(weights, all_ids, partition_strategy).astype(inputs.dtype)
    all_b = embedding_lookup(biases, all_ids, partition_strategy).astype(inputs.dtype)
    true_w = all_w[:n].reshape(-1, num_true, inputs.shape[1])
    true_logits = jnp.sum(inputs[:, None, :] * true_w, axis=2) + all_b[:n].reshape(-1, num_true)
    sampled_logits = inputs @ all_w[n:].T + all_b[None, n:]
    if remove_accidental_hits:
        # TensorFlow's compute_accidental_hits: a class drawn twice is hit at its last copy
        last = ~jnp.any(jnp.triu(sampled[:, None] == sampled[None, :], k=1), axis=1)
        hits = jnp.any(labels[:, :, None] == sampled[None, None, :], axis=1) & last[None, :]
        lowest = np.finfo(np.float32).min  # TensorFlow adds -FLT_MAX whatever the dtype
        sampled_logits = sampled_logits + jnp.where(hits, lowest, 0).astype(inputs.dtype)
    true_logits = true_logits - jnp.log(true_expected).astype(inputs.dtype)
    sampled_logits = sampled_logits - jnp.log(sampled_expected[None, :]).astype(inputs.dtype)
    logits = jnp.concatenate([true_logits, sampled_logits], axis=1)
    targets = jnp.concatenate(
        [jnp.full(true_logits.shape, 1.0 / num_true, inputs.dtype), jnp.zeros_like(sampled_logits)],
        axis=1,
    )
    return logits, targets


def nce_loss(
    weights: Any,
    biases: Any,
    labels: Any,
    inputs: Any,
    num_sampled: int,
    num_classes: int,
    num_true: int = 1,
    sampled_values: Any = None,
    remove_accidental_hits: bool = False,
    partition_strategy: str = "mod",
    name: str = "nce_loss",
    *,
    key: Any = None,
) -> jax.Array:
    """Noise-contrastive estimation loss per example (``tf.compat.v1.nn.nce_loss``).

    TensorFlow's numbers: the sampled logits (above) through
    ``sigmoid_cross_entropy_with_logits`` against ``1 / num_true`` for each true class and
    0 for each sampled one, summed over the row.  Without ``sampled_values`` the
    candidates come from ``log_uniform_candidate_sampler(labels, num_true, num_sampled,
    unique=True, range_max=num_classes, key=key)``, as TensorFlow's default (its
    classes sorted by falling frequency).

    Args:
      weights: the output layer ``(num_classes, dim)``, or the list of its shards.
      biases: ``(num_classes,)``, or the list of its shards.
      labels: integer classes ``(batch, num_true)``.
      inputs: ``(batch, dim)``.
      num_sampled: the number of classes to sample per batch.
      num_classes: the number of classes.
      num_true: the number of labels per example.
      sampled_values: ``None``, or a sampler's triple ``(sampled_candidates,
        true_expected_count, sampled_expected_count)`` — TensorFlow's own, to port a run.
      remove_accidental_hits: add ``-FLT_MAX`` to the logit of a sampled class that is
        one of the example's labels.
      partition_strategy: ``"mod"`` or ``"div"``, for shards.
      name: TensorFlow's op name; unused.
      key: a ``jax.random.key``, required without ``sampled_values``.

    Returns:
      The loss of each example, ``(batch,)``.

    Raises:
      TypeError: without ``sampled_values`` and without ``key``, for labels or sampled
        candidates that are not integers, expected counts that are not floats, or
        ``remove_accidental_hits`` that is no bool.
      ValueError: for weights, biases, inputs, labels or sampled values of shapes that do
        not fit together, ``num_classes`` above the rows of ``weights``, or as
        ``embedding_lookup``.

    Example:
      >>> weights, biases = jnp.ones((10, 3)) / 3, jnp.zeros(10)
      >>> inputs, labels = jnp.ones((2, 3)), jnp.array([[1], [4]])
      >>> sampled = (jnp.array([0, 4]), jnp.full((2, 1), 0.5), jnp.full(2, 0.5))
      >>> loss = fg.nn.nce_loss(weights, biases, labels, inputs, 2, 10,
      ...                       sampled_values=sampled)
      >>> np.asarray(loss, np.float64).round(4).tolist()
      [3.8928, 3.8928]
    """
    caller = "fg.nn.nce_loss(weights, biases, labels, inputs, num_sampled, num_classes)"
    _checks.op_name(caller, name)
    logits, targets = _sampled_logits(
        caller, weights, biases, labels, inputs, num_sampled, num_classes, num_true,
        sampled_values, remove_accidental_hits, partition_strategy, key,
    )  # fmt: skip
    # TensorFlow's sigmoid_cross_entropy_with_logits, its where() and all.
    positive = logits >= 0
    relu = jnp.where(positive, logits, 0)
    negative_abs = jnp.where(positive, -logits, logits)
    losses = relu - logits * targets + jnp.log1p(jnp.exp(negative_abs))
    return jnp.sum(losses, axis=1)


def sampled_softmax_loss(
    weights: Any,
    biases: Any,
    labels: Any,
    inputs: Any,
    num_sampled: int,
    num_classes: int,
    num_true: int = 1,
    sampled_values: Any = None,
    remove_accidental_hits: bool = True,
    partition_strategy: str = "mod",
    name: str = "sampled_softmax_loss",
    seed: int | None = None,
    *,
    key: Any = None,
) -> jax.Array:
    """Softmax cross entropy over the true and sampled classes
    (``tf.compat.v1.nn.sampled_softmax_loss``).

    TensorFlow's numbers: the sampled logits (above; accidental hits removed by default)
    through ``softmax_cross_entropy_with_logits`` against ``1 / num_true`` for each true
    class.  Arguments as ``nce_loss``; TensorFlow's ``seed`` is replaced by ``key``.

    Args:
      weights: the output layer ``(num_classes, dim)``, or the list of its shards.
      biases: ``(num_classes,)``, or the list of its shards.
      labels: integer classes ``(batch, num_true)``.
      inputs: ``(batch, dim)``.
      num_sampled: the number of classes to sample per batch.
      num_classes: the number of classes.
      num_true: the number of labels per example.
      sampled_values: ``None``, or a sampler's triple, as in ``nce_loss``.
      remove_accidental_hits: add ``-FLT_MAX`` to the logit of a sampled class that is
        one of the example's labels (the default here).
      partition_strategy: ``"mod"`` or ``"div"``, for shards.
      name: TensorFlow's op name; unused.
      seed: TensorFlow's seed; unused, pass ``key``.
      key: a ``jax.random.key``, required without ``sampled_values``.

    Returns:
      The loss of each example, ``(batch,)``.

    Raises:
      TypeError: as ``nce_loss``, or for a ``seed`` that is no int.
      ValueError: as ``nce_loss``.

    Example:
      >>> weights, biases = jnp.ones((10, 3)) / 3, jnp.zeros(10)
      >>> inputs, labels = jnp.ones((2, 3)), jnp.array([[1], [4]])
      >>> loss = fg.nn.sampled_softmax_loss(weights, biases, labels, inputs, 4, 10,
      ...                                   key=jax.random.key(0))
      >>> loss.shape
      (2,)
    """
    caller = "fg.nn.sampled_softmax_loss(weights, biases, labels, inputs, num_sampled, ...)"
    _checks.op_name(caller, name)
    _checks.seed(caller, seed)
    logits, targets = _sampled_logits(
        caller, weights, biases, labels, inputs, num_sampled, num_classes, num_true,
        sampled_values, remove_accidental_hits, partition_strategy, key,
    )  # fmt: skip
    return -jnp.sum(targets * jax.nn.log_softmax(logits, axis=1), axis=1)
