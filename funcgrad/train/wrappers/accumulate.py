"""Gradient accumulation: one step on the mean gradient of k micro-batches.

Two forms.  :func:`accumulate_gradients` wraps an optax transformation so that it
applies one update every ``k`` calls (each call one micro-batch, each its own jitted
step), holding a single gradient buffer in between.  :func:`minimize_in_microbatches`
runs the ``k`` micro-batches of one large batch inside a single jitted step with
``lax.scan``: only one micro-batch's activations are alive at a time, so a batch ``k``
times larger than fits in memory trains in bounded memory.

How this differs from ``optax.MultiSteps``: MultiSteps runs the inner update on every
micro-batch and keeps the result only on the k-th (``jnp.where``), so each call pays
for a full inner update and a second copy of the inner state — the extra memory and
compute of optax#472.  Here the inner update runs inside ``lax.cond`` and only on the
k-th call.  The mean is a plain sum divided by ``k`` at the end, the same arithmetic
as a step on the mean gradient, and the inner transformation sees exactly the
``(mean gradient, state, params)`` a non-accumulating step would: the tests check the
whole trajectory of every TF1 optimizer, schedules included, against those steps —
the stall of optax#1567 (accumulated training stuck where plain training improves)
cannot come from the accumulation here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from funcgrad import _checks
from funcgrad._types import PyTree
from funcgrad.train._loss_and_grads import grads_and_vars
from funcgrad.train._loss_and_grads import loss_and_grads
from funcgrad.train.optimizer import Optimizer
from funcgrad.train.state import TrainState

__all__ = ["AccumulateGradientsState", "accumulate_gradients", "minimize_in_microbatches"]

_K_HINT = "pass the number of micro-batches per update, e.g. 4 (1 means no accumulation)"


class AccumulateGradientsState(NamedTuple):
    """The state of :func:`accumulate_gradients`.

    Attributes:
      micro_step: ``int32``, the micro-batches summed in ``grad_sum`` (``0 .. k-1``).
      applied_steps: ``int32``, the updates applied so far — what the inner
        transformation receives as ``global_step``.
      grad_sum: the one gradient buffer, shaped like the parameters.
      inner_state: the wrapped transformation's state.
    """

    micro_step: jax.Array
    applied_steps: jax.Array
    grad_sum: PyTree
    inner_state: Any


def accumulate_gradients(
    tx: optax.GradientTransformation, every_k: int
) -> optax.GradientTransformationExtraArgs:
    """Wrap ``tx`` to apply one update every ``every_k`` calls, on the mean gradient.

    Calls ``1 .. k-1`` of each cycle add the gradient to one buffer and return zero
    updates (the parameters and the inner state do not change); call ``k`` passes
    ``buffer / k`` to ``tx`` and empties the buffer.  The result equals one step of
    ``tx`` on the mean of the ``k`` gradients.  For the mean over all examples, the
    ``k`` micro-batches must be of equal size and the loss a mean over examples.

    How ``global_step`` counts: ``TrainState.global_step`` counts calls of
    ``apply_gradients`` / ``minimize`` — micro-batches.  The wrapped transformation
    (and its learning-rate schedule) is given ``global_step`` = the number of updates
    applied so far (``AccumulateGradientsState.applied_steps``), so the rate follows
    applied updates, as ``global_step`` does in TensorFlow 1.x's accumulate-then-
    ``apply_gradients(global_step=...)`` recipe.

    Args:
      tx: the optimizer's transformation (``opt.tx``), or any optax one.
      every_k: the number of micro-batches per update, ``>= 1``.

    Returns:
      An ``optax.GradientTransformationExtraArgs`` whose state is an
      :class:`AccumulateGradientsState`.

    Raises:
      TypeError: ``every_k`` is not an integer.
      ValueError: ``every_k`` is below 1.

    Example:
      >>> opt = fg.train.GradientDescentOptimizer(0.5)
      >>> acc = fg.train.Optimizer(fg.train.accumulate_gradients(opt.tx, 2))
      >>> state = acc.init(jnp.float32(1.0))
      >>> state = acc.apply_gradients([(jnp.float32(1.0), None)], state)
      >>> float(state.params)
      1.0
      >>> state = acc.apply_gradients([(jnp.float32(3.0), None)], state)
      >>> float(state.params), int(state.global_step)
      (0.0, 2)
    """
    every_k = _checks.as_int(
        "fg.train.accumulate_gradients(tx, every_k)", "every_k", every_k, minimum=1, hint=_K_HINT
    )
    inner = optax.with_extra_args_support(tx)

    def init_fn(params: PyTree) -> AccumulateGradientsState:
        micro_step, applied_steps = (jnp.zeros([], jnp.int32) for _ in range(2))  # two buffers
        return AccumulateGradientsState(
            micro_step, applied_steps, jax.tree.map(jnp.zeros_like, params), inner.init(params)
        )

    def update_fn(
        updates: PyTree, state: AccumulateGradientsState, params: PyTree = None, **extra_args: Any
    ) -> tuple[PyTree, AccumulateGradientsState]:
        grad_sum = jax.tree.map(lambda s, g: s + g.astype(s.dtype), state.grad_sum, updates)
        emit = state.micro_step == every_k - 1
        if "global_step" in extra_args:
            extra_args = {**extra_args, "global_step": state.applied_steps}

        def apply(_: None) -> tuple[PyTree, Any]:
            mean = jax.tree.map(lambda s, g: (s / every_k).astype(g.dtype), grad_sum, updates)
            out, inner_state = inner.update(mean, state.inner_state, params, **extra_args)
            return optax.tree.cast_like(out, updates), inner_state

        def hold(_: None) -> tuple[PyTree, Any]:
            return jax.tree.map(jnp.zeros_like, updates), state.inner_state

        out, inner_state = jax.lax.cond(emit, apply, hold, None)
        return out, AccumulateGradientsState(
            micro_step=jnp.where(emit, 0, state.micro_step + 1),
            applied_steps=state.applied_steps + emit.astype(jnp.int32),
            grad_sum=jax.tree.map(lambda s: jnp.where(emit, jnp.zeros_like(s), s), grad_sum),
            inner_state=inner_state,
        )

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def minimize_in_microbatches(
    optimizer: Optimizer,
    loss_fn: Callable[..., Any],
    state: TrainState,
    *batch: Any,
    num_microbatches: int,
) -> tuple[TrainState, jax.Array]:
    """One ``minimize`` step on a large batch, run as ``k`` micro-batches in ``lax.scan``.

    Every array in ``batch`` is split along its leading axis into ``k`` equal
    micro-batches; a ``lax.scan`` computes each one's loss and gradient and adds the
    gradient to one buffer (the scan carry), then ``optimizer.apply_gradients`` applies
    the mean once.  Peak memory is one micro-batch's activations plus one gradient
    buffer, instead of the whole batch's activations.  ``global_step`` increases by one
    per call (one update).  A leaf whose gradient is ``None`` (the loss does not reach
    it) is skipped as ``apply_gradients`` skips it; to train a subset of the
    parameters, hold the others with ``fg.stop_gradient`` inside ``loss_fn``.

    Over an optimizer wrapped in :func:`accumulate_gradients` ``(tx, k)``, each call
    is one ``apply_gradients`` — one of the wrapper's ``k`` calls, exactly as
    ``minimize`` on the same batch: the parameters move on every ``k``-th call, by one
    step on the mean gradient of those ``k`` batches (``k * num_microbatches``
    micro-batches).  Use that to train on a batch ``k`` times larger than one call
    holds; without the wrapper, every call is one update.

    Args:
      optimizer: any ``fg.train`` optimizer, possibly wrapped in
        :func:`accumulate_gradients`.
      loss_fn: ``loss_fn(params, *micro_batch)`` returns a scalar, the mean loss over
        the micro-batch's examples.
      state: the ``TrainState``.
      *batch: the batch arrays, each with the same leading (example) axis.
      num_microbatches: ``k >= 1``, which divides the batch size.

    Returns:
      ``(new_state, loss)``: ``loss`` is the mean of the micro-batch losses at the
      parameters before the step — the loss on the whole batch.

    Raises:
      TypeError: ``num_microbatches`` is not an integer.
      ValueError: ``num_microbatches`` is below 1, ``batch`` is empty,
        or a batch array's leading axis is not a multiple of it.

    Example:
      >>> opt = fg.train.GradientDescentOptimizer(0.1)
      >>> state = opt.init(jnp.float32(0.0))
      >>> x = jnp.array([1.0, 2.0, 3.0, 4.0])
      >>> loss_fn = lambda w, x: jnp.mean((w - x) ** 2)
      >>> state, loss = fg.train.minimize_in_microbatches(
      ...     opt, loss_fn, state, x, num_microbatches=2)
      >>> float(loss), round(float(state.params), 6)
      (7.5, 0.5)
    """
    caller = (
        "fg.train.minimize_in_microbatches(optimizer, loss_fn, state, *batch, num_microbatches)"
    )
    k = _checks.as_int(caller, "num_microbatches", num_microbatches, minimum=1, hint=_K_HINT)
    micro = _split_batch(caller, batch, k)

    def loss_and_grads_of(micro_batch: tuple[Any, ...]) -> tuple[jax.Array, list[Any]]:
        return loss_and_grads(caller, loss_fn, state.params, micro_batch, optimizer.var_list)

    def body(grad_sum: PyTree, micro_batch: tuple[Any, ...]) -> tuple[PyTree, jax.Array]:
        loss, grads = loss_and_grads_of(micro_batch)
        return jax.tree.map(jnp.add, grad_sum, grads), loss

    _, shapes = jax.eval_shape(loss_and_grads_of, jax.tree.map(lambda m: m[0], micro))
    zeros = jax.tree.map(lambda g: jnp.zeros(g.shape, g.dtype), shapes)
    grad_sum, losses = jax.lax.scan(body, zeros, micro)
    gvs = grads_and_vars(jax.tree.map(lambda g: g / k, grad_sum), state.params)
    return optimizer.apply_gradients(gvs, state), jnp.mean(losses)


def _split_batch(caller: str, batch: tuple[Any, ...], k: int) -> tuple[Any, ...]:
    """Each leaf of ``batch`` reshaped from ``(n, ...)`` to ``(k, n // k, ...)``."""
    leaves = jax.tree.leaves(batch)
    sizes = [jnp.shape(x)[0] if jnp.ndim(x) else None for x in leaves]
    if not leaves or any(n is None or n % k for n in sizes):
        raise ValueError(
            f"{caller}: every batch array needs a leading axis divisible by "
            f"num_microbatches={k}, got leading sizes {sizes}; pass a batch of k * m "
            "examples or choose a k that divides the batch size."
        )
    return jax.tree.map(lambda x: jnp.reshape(x, (k, x.shape[0] // k, *x.shape[1:])), batch)
