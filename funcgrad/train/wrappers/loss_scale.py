r"""``LossScaleOptimizer``: TensorFlow 1.x's loss scaling over any ``fg.train`` optimizer.

Mixed precision computes activations in float16, whose smallest subnormal is
:math:`2^{-24} \approx 6 \times 10^{-8}`: a backward-pass value below half of it rounds to
zero, and a gradient made of such values is zero.  Loss scaling multiplies the loss's
cotangent by a large factor :math:`S` before the backward pass, so those values stay in
range, and divides the gradients by :math:`S` after it.  Mathematically nothing changes.

This is ``tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer``
(``tensorflow/python/training/experimental/loss_scale_optimizer.py``) with the rule of
its ``DynamicLossScale`` or ``FixedLossScale`` (``.../experimental/loss_scale.py``).
The scale and its counter are TensorFlow's variables ``current_loss_scale`` and
``good_steps``; here they are a :class:`LossScaleState` in ``TrainState.opt_state``, so
checkpoints, ``jax.jit`` and ``jax.lax.scan`` see one pytree as before.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad import _checks
from funcgrad._types import GradsAndVars
from funcgrad._types import PyTree
from funcgrad._types import is_array
from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train import _habits
from funcgrad.train import _pairs
from funcgrad.train._loss_and_grads import LossCall
from funcgrad.train._var_list import VarList
from funcgrad.train.group import OptimizerGroup
from funcgrad.train.names import variable_names
from funcgrad.train.optimizer import Optimizer
from funcgrad.train.state import TrainState
from funcgrad.train.wrappers._wrapper import Wrapper

__all__ = ["LossScaleOptimizer", "LossScaleState"]

_FLOAT32_MAX = float(np.finfo(np.float32).max)


class LossScaleState(NamedTuple):
    """``TrainState.opt_state`` of a :class:`LossScaleOptimizer`.

    Attributes:
      loss_scale: the scale :math:`S`, a ``float32`` scalar (TensorFlow's
        ``current_loss_scale``).
      good_steps: the finite steps since the scale last changed or a step was
        skipped, an ``int32`` scalar (TensorFlow's ``good_steps``, an ``int64`` there);
        it stays 0 for a fixed scale.
      inner_state: the wrapped optimizer's ``opt_state`` (its slots).
    """

    loss_scale: jax.Array
    good_steps: jax.Array
    inner_state: Any


@jax.custom_jvp
def _scale_cotangent(loss: jax.Array, scale: jax.Array) -> jax.Array:
    """``loss`` itself, whose derivative is multiplied by ``scale`` (cast to its dtype).

    The backward pass of ``loss * scale`` without computing the product: the loss
    returned stays unscaled, and a scaled loss too large for float16 is never formed.
    """
    del scale
    return loss


@_scale_cotangent.defjvp
def _scale_cotangent_jvp(
    primals: tuple[jax.Array, jax.Array], tangents: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array, jax.Array]:
    loss, scale = primals
    return loss, tangents[0] * scale.astype(tangents[0].dtype)


def _with_scaled_cotangent(loss: Any, scale: jax.Array) -> Any:
    """``loss`` with its cotangent scaled; anything but a float array passes unchanged,
    for the loss checks of ``funcgrad.train._loss_and_grads`` to name."""
    if is_array(loss) and jnp.issubdtype(jnp.result_type(loss), jnp.inexact):
        return _scale_cotangent(jnp.asarray(loss), scale)
    return loss


def _scaled_loss_fn(
    loss_fn: Callable[..., Any], scale: jax.Array, has_aux: bool
) -> Callable[..., Any]:
    """``loss_fn`` with the cotangent of its loss (not of ``aux``) scaled by ``scale``."""

    def scaled(params: PyTree, *args: Any, **kwargs: Any) -> Any:
        out = loss_fn(params, *args, **kwargs)
        if has_aux and isinstance(out, tuple | list) and len(out) == 2:
            return (_with_scaled_cotangent(out[0], scale), out[1])
        return out if has_aux else _with_scaled_cotangent(out, scale)

    return scaled


def _unscaled(grad: Any, inverse: jax.Array) -> Any:
    """``grad`` times ``inverse`` (``1 / scale`` in float32), TensorFlow's
    ``_unscale_grads``: the product in the wider of float32 and the gradient's dtype,
    rounded back to the gradient's dtype (TensorFlow's float32 gradients need no
    rounding)."""
    if grad is None:
        return None
    if isinstance(grad, IndexedSlices):  # stays sparse, as TF's `g * inv` keeps it
        return IndexedSlices(_unscaled(grad.values, inverse), grad.indices, grad.dense_shape)
    wide = jnp.float32 if jnp.dtype(grad.dtype).itemsize < 4 else grad.dtype
    return (grad.astype(wide) * inverse.astype(wide)).astype(grad.dtype)


def _all_finite(grads: Sequence[Any]) -> jax.Array:
    """Whether every gradient that is not ``None`` is finite: TensorFlow's ``_is_all_finite``."""
    checks = [
        jnp.all(jnp.isfinite(g.values if isinstance(g, IndexedSlices) else g))
        for g in grads
        if g is not None
    ]
    return functools.reduce(jnp.logical_and, checks, jnp.bool_(True))


class LossScaleOptimizer(Wrapper):
    r"""TensorFlow 1.x's ``MixedPrecisionLossScaleOptimizer`` over any ``fg.train`` optimizer.

    A step computes the gradients of ``loss_fn`` with the loss's cotangent multiplied
    by the scale :math:`S` (TensorFlow's ``loss * loss_scale``; the loss returned stays
    unscaled), multiplies each gradient by :math:`1/S`, and applies them with the
    wrapped optimizer.  With ``dynamic=True`` (TensorFlow's ``DynamicLossScale``), a
    step whose gradients are all finite is applied and

    .. math::
      n \leftarrow n + 1; \quad \text{if } n \ge N:\;
        S \leftarrow m S \text{ (if finite)},\; n \leftarrow 0

    while a step with an ``inf`` or ``NaN`` gradient is skipped — the parameters, the
    wrapped optimizer's slots and ``global_step`` stay as they were, as TensorFlow's
    train op does not increment ``global_step`` — and

    .. math::
      S \leftarrow \max(S / m,\ 1), \quad n \leftarrow 0

    with :math:`n` the ``good_steps`` counter, :math:`N` = ``growth_steps`` and
    :math:`m` = ``multiplier``, in float32 as in TensorFlow.  With ``dynamic=False``
    (TensorFlow's ``FixedLossScale``), :math:`S` never changes and every step is
    applied, non-finite or not.  The scale and the counter live in the state
    (:class:`LossScaleState`); read the scale with :meth:`loss_scale`.

    Differences from TensorFlow:

    * :meth:`compute_gradients` takes the ``TrainState``, not ``state.params``: the
      scale is in the state (TensorFlow reads it from a graph variable).
    * Gradients of float16 or bfloat16 variables (TensorFlow's optimizer takes
      float32 ones only) are unscaled in float32 and rounded back to their dtype; a
      gradient below float16's range is then zero again, so keep the variables in
      float32 and cast them inside ``loss_fn`` (float32 master weights).
    * :func:`~funcgrad.train.skip_nonfinite` counts a skipped step in
      ``global_step``; this optimizer, as TensorFlow 1.x's, does not.

    The scale helpers ``minimize_in_microbatches`` and ``shard_map_minimize``, and
    ``fg.train.OptimizerGroup``, take the optimizers this one wraps, not this one; to
    scale a group's losses, wrap its members: ``LossScaleOptimizer(group["D"])``
    (see :meth:`init`).

    Args:
      opt: the ``fg.train`` optimizer to wrap: one of the TF1 optimizers, an
        ``fg.train.Optimizer(tx)`` of any optax transformation (wrapped in
        ``accumulate_gradients`` or ``skip_nonfinite`` or not), or an optimizer of an
        ``OptimizerGroup``.
      dynamic: adjust the scale (``DynamicLossScale``); ``False`` keeps it fixed
        (``FixedLossScale``).
      initial_scale: the scale to start with (the fixed scale with
        ``dynamic=False``), a number in ``[1, float32 max]``.  The default, 2**15, is
        TensorFlow's: a scale too large is lowered at once, one too small is raised
        only every ``growth_steps`` steps.
      growth_steps: :math:`N`, the finite steps in a row after which the scale grows
        (TensorFlow's ``increment_period``), an integer ``>= 1``.
      multiplier: :math:`m`, by which the scale grows and shrinks, a number in
        ``(1, float32 max]``.

    Attributes:
      optimizer: the wrapped optimizer.
      dynamic, initial_scale, growth_steps, multiplier: as given.

    Raises:
      TypeError: ``opt`` is not an ``fg.train`` optimizer (an optax transformation,
        an ``OptimizerGroup``, a ``LossScaleOptimizer``), ``dynamic`` is not a bool, or
        a number is not a number.
      ValueError: a number is out of range, or ``growth_steps`` or ``multiplier`` is
        changed with ``dynamic=False``, which has no use for them.

    Example:
      >>> opt = fg.train.LossScaleOptimizer(
      ...     fg.train.GradientDescentOptimizer(0.5), initial_scale=8.0, growth_steps=2)
      >>> state = opt.init(jnp.float32(1.0))
      >>> state, loss = opt.minimize(lambda w, x: w * x, state, jnp.float32(jnp.inf))
      >>> float(state.params), float(opt.loss_scale(state)), int(state.global_step)
      (1.0, 4.0, 0)
      >>> for _ in range(2):
      ...     state, loss = opt.minimize(lambda w, x: w * x, state, jnp.float32(1.0))
      >>> float(state.params), float(opt.loss_scale(state)), int(state.global_step)
      (0.0, 8.0, 2)
    """

    state_type = LossScaleState

    def __init__(
        self,
        opt: Optimizer,
        dynamic: bool = True,
        initial_scale: float = 2.0**15,
        growth_steps: int = 2000,
        multiplier: float = 2.0,
    ) -> None:
        caller = (
            "fg.train.LossScaleOptimizer(opt, dynamic, initial_scale, growth_steps, multiplier)"
        )
        _check_opt(caller, opt)
        wrong_types = [
            f"{name}={value!r} is not {kind}"
            for name, value, kind, ok in [
                ("dynamic", dynamic, "True or False", isinstance(dynamic, bool)),
                ("initial_scale", initial_scale, "a number", _checks.is_real_number(initial_scale)),
                (
                    "growth_steps",
                    growth_steps,
                    "an integer",
                    _checks.is_integer(growth_steps, arrays=False),
                ),
                ("multiplier", multiplier, "a number", _checks.is_real_number(multiplier)),
            ]
            if not ok
        ]
        if wrong_types:
            raise TypeError(
                f"{caller}: {'; '.join(wrong_types)}; pass e.g. LossScaleOptimizer(opt, "
                "dynamic=True, initial_scale=2.0**15, growth_steps=2000, multiplier=2.0)."
            )
        problems = []
        if not (math.isfinite(initial_scale) and 1 <= initial_scale <= _FLOAT32_MAX):
            problems.append(
                f"initial_scale={initial_scale!r} is not in [1, float32 max] (TensorFlow's "
                "loss scales are float32, and at least 1)"
            )
        if growth_steps < 1 or growth_steps > np.iinfo(np.int32).max:
            problems.append(f"growth_steps={growth_steps!r} is not in [1, 2**31 - 1]")
        if not (math.isfinite(multiplier) and 1 < multiplier <= _FLOAT32_MAX):
            problems.append(f"multiplier={multiplier!r} is not in (1, float32 max]")
        if not dynamic and (growth_steps != 2000 or multiplier != 2.0):
            problems.append(
                "growth_steps and multiplier adjust a dynamic scale, and dynamic=False "
                "keeps the scale fixed (drop them, or pass dynamic=True)"
            )
        if problems:
            raise ValueError(f"{caller}: {'; '.join(problems)}; pass values in range.")
        super().__init__(opt)
        self.dynamic = dynamic
        self.initial_scale = float(initial_scale)
        self.growth_steps = int(growth_steps)
        self.multiplier = float(multiplier)

    def init(self, params: PyTree) -> TrainState:
        """A fresh state: the wrapped optimizer's, with the scale around its slots.

        The wrapped optimizer's ``init`` makes the parameters, slots and
        ``global_step``; ``opt_state`` becomes
        ``LossScaleState(initial_scale, 0, slots)``.  For an optimizer of an
        ``OptimizerGroup``, the slots are the whole group's (its ``init`` is the
        group's): optimizers of one group wrapped alike can then step that one state,
        and they share one loss scale — as two TensorFlow optimizers given the same
        ``DynamicLossScale`` object do.

        Args:
          params: the parameters, any pytree the wrapped optimizer takes.

        Returns:
          ``TrainState(params, LossScaleState(float32 scale, int32 0, slots), int32 0)``.

        Raises:
          TypeError: ``params`` is a ``TrainState``; as the wrapped optimizer's ``init``.

        Example:
          >>> opt = fg.train.LossScaleOptimizer(fg.train.AdamOptimizer(0.1))
          >>> state = opt.init({"w": jnp.zeros(2)})
          >>> float(state.opt_state.loss_scale), int(state.opt_state.good_steps)
          (32768.0, 0)
        """
        return super().init(params)

    def _own_state(self, params: PyTree, inner: TrainState) -> LossScaleState:
        scale = jnp.asarray(self.initial_scale, jnp.float32)
        return LossScaleState(scale, jnp.zeros([], jnp.int32), inner.opt_state)

    def loss_scale(self, state: TrainState) -> jax.Array:
        """The current loss scale of ``state``: TensorFlow's ``opt._loss_scale()``.

        Args:
          state: a ``TrainState`` this optimizer made.

        Returns:
          A ``float32`` scalar (batched under ``vmap``).

        Raises:
          TypeError: ``state`` is not a ``TrainState``.
          ValueError: ``state`` was not made by a ``LossScaleOptimizer``.

        Example:
          >>> opt = fg.train.LossScaleOptimizer(fg.train.AdamOptimizer(), initial_scale=1024)
          >>> opt.loss_scale(opt.init(jnp.zeros(3)))
          Array(1024., dtype=float32)
        """
        caller = self._caller("loss_scale(state)")
        return _loss_scale_state(caller, state, "scale = opt.loss_scale(state)").loss_scale

    # fmt: off
    def compute_gradients(
        self, loss_fn: Callable[..., Any], state: TrainState, /, *args: Any,
        var_list: VarList = None, grad_loss: Any = None, has_aux: bool = False, **kwargs: Any,
    ) -> GradsAndVars | tuple[GradsAndVars, Any]:
        # fmt: on
        """The unscaled ``(gradient, variable)`` pairs of ``loss_fn`` at ``state.params``.

        As TensorFlow's ``compute_gradients``: the loss's cotangent (``grad_loss``, or
        ones) is multiplied by the scale in ``state``, and each gradient by the
        reciprocal of the scale — the pairs are the unscaled gradients, ready for any
        processing (clipping sees the true norms) and for :meth:`apply_gradients`,
        which decides whether to apply them.  A gradient may be ``inf`` or ``NaN``
        where the scaled backward pass overflowed.

        Args:
          loss_fn: ``loss_fn(params, *args, **kwargs)`` returns the loss (or
            ``(loss, aux)`` with ``has_aux``).
          state: the ``TrainState`` (not ``state.params``: the scale is in the state).
          *args: further arguments of ``loss_fn`` (the batch).
          var_list: which variables to differentiate, as
            :meth:`funcgrad.train.Optimizer.compute_gradients` takes it.
          grad_loss: the cotangent of the loss; the scale multiplies it.
          has_aux: ``loss_fn`` returns ``(loss, aux)``; only ``loss`` is scaled and
            differentiated.
          **kwargs: keyword arguments of ``loss_fn``.

        Returns:
          A list of ``(gradient, variable)`` pairs, the variables those of
          ``state.params``; with ``has_aux``, ``(pairs, aux)``.

        Raises:
          TypeError: ``state`` is not a ``TrainState`` (the parameters, as other
            optimizers take them).
          ValueError: ``state`` was not made by a ``LossScaleOptimizer``; as
            :meth:`funcgrad.train.Optimizer.compute_gradients`.

        Example:
          >>> opt = fg.train.LossScaleOptimizer(fg.train.AdamOptimizer(), initial_scale=4)
          >>> state = opt.init({"w": jnp.float32(3.0)})
          >>> opt.compute_gradients(lambda p: p["w"] ** 2, state)
          [(Array(6., dtype=float32), Array(3., dtype=float32))]
        """
        caller = self._caller("compute_gradients(loss_fn, state, *args)")
        call = "gvs = opt.compute_gradients(loss_fn, state, *args)"
        if not isinstance(state, TrainState):
            raise TypeError(
                f"{caller}: state is a {type(state).__name__}, not a fg.train.TrainState; "
                "a LossScaleOptimizer reads the loss scale from the state, so pass the "
                f"state itself, not state.params: {call}."
            )
        self._check_state(caller, state, call)
        loss = LossCall(loss_fn, args, kwargs, var_list, grad_loss, has_aux, indexed_slices=True)
        return self._pairs(caller, call, loss, state.params, state)

    def apply_gradients(
        self,
        grads_and_vars: Iterable[tuple[Any, Any]],
        state: TrainState = _habits.NO_STATE,
        /,
        **tf_arguments: Any,
    ) -> TrainState:
        """Apply unscaled ``(gradient, variable)`` pairs if they are all finite; adjust
        the scale.

        The pairs are matched to ``state.params`` as by
        :meth:`funcgrad.train.Optimizer.apply_gradients` (any subset, by the pairs'
        names or identity; a rebuilt full list, by position).  With a dynamic scale, a
        pair holding ``inf`` or ``NaN`` skips the step — parameters, the wrapped
        optimizer's slots and ``global_step`` unchanged — and lowers the scale; a
        finite step is applied by the wrapped optimizer (``global_step`` += 1) and
        counts toward growth.  With a fixed scale every step is applied.

        Args:
          grads_and_vars: the pairs :meth:`compute_gradients` returned, processed or not.
          state: the ``TrainState`` to update.
          **tf_arguments: none is taken; TensorFlow's ``global_step=`` and ``name=``
            get an error that shows the call to write.

        Returns:
          The new ``TrainState``.

        Raises:
          TypeError: ``state`` is missing or not a ``TrainState``; ``grads_and_vars`` is
            not a list of pairs; a keyword argument.
          ValueError: ``state`` was not made by a ``LossScaleOptimizer``; a pair matches
            no variable; every gradient is ``None``.

        Example:
          >>> opt = fg.train.LossScaleOptimizer(fg.train.GradientDescentOptimizer(1.0))
          >>> state = opt.init(jnp.float32(1.0))
          >>> state = opt.apply_gradients([(jnp.float32(jnp.nan), state.params)], state)
          >>> float(state.params), float(opt.loss_scale(state)), int(state.global_step)
          (1.0, 16384.0, 0)
        """
        return super().apply_gradients(grads_and_vars, state, **tf_arguments)

    # fmt: off
    def minimize(
        self, loss_fn: Callable[..., Any], state: TrainState, /, *args: Any,
        var_list: VarList = None, grad_loss: Any = None, has_aux: bool = False, **kwargs: Any,
    ) -> tuple[TrainState, Any]:
        # fmt: on
        """One step: :meth:`compute_gradients`, then :meth:`apply_gradients`.

        Args:
          loss_fn: ``loss_fn(params, *args, **kwargs)`` returns the loss (or
            ``(loss, aux)`` with ``has_aux``).
          state: the ``TrainState``.
          *args: further arguments of ``loss_fn`` (the batch).
          var_list: which variables to train.
          grad_loss: the cotangent of the loss; the scale multiplies it.
          has_aux: ``loss_fn`` returns ``(loss, aux)``.
          **kwargs: keyword arguments of ``loss_fn``.

        Returns:
          ``(new_state, loss)`` or ``(new_state, (loss, aux))``: the loss as
          ``loss_fn`` returned it — unscaled — at the parameters before the step.

        Raises:
          TypeError: ``state`` is not a ``TrainState``; ``global_step=``.
          ValueError: as :meth:`compute_gradients` and :meth:`apply_gradients`.

        Example:
          >>> opt = fg.train.LossScaleOptimizer(fg.train.GradientDescentOptimizer(0.25))
          >>> state = opt.init(jnp.float32(2.0))
          >>> state, loss = opt.minimize(lambda w, x: w * x, state, jnp.float32(4.0))
          >>> float(loss), float(state.params), int(state.opt_state.good_steps)
          (8.0, 1.0, 1)
        """
        return super().minimize(
            loss_fn, state, *args, var_list=var_list, grad_loss=grad_loss, has_aux=has_aux, **kwargs
        )

    # The hooks of Optimizer's steps: the loss's cotangent scaled by the state's scale,
    # the gradients unscaled, a non-finite step skipped, the scale adjusted.

    def _scaled_loss(
        self, loss_fn: Callable[..., Any], state: Any, has_aux: bool
    ) -> Callable[..., Any]:
        if state is None:  # a wrapper's compute_gradients(loss_fn, params) around this one
            raise TypeError(
                "fg.train.LossScaleOptimizer: compute_gradients got the parameters alone, "
                "and the loss scale is in the state; compute the gradients with the "
                "LossScaleOptimizer itself: gvs = scaled.compute_gradients(loss_fn, state)."
            )
        inner = super()._scaled_loss(loss_fn, state, has_aux)
        return _scaled_loss_fn(inner, state.opt_state.loss_scale, has_aux)

    def _unscaled(self, grads: list[Any], state: Any) -> list[Any]:
        inverse = 1 / state.opt_state.loss_scale  # once, as TF's _unscale_grads
        return super()._unscaled([_unscaled(g, inverse) for g in grads], state)

    def _apply(self, caller: str, call: str, grads: list[Any], state: TrainState) -> TrainState:
        """One step of the wrapped optimizer by unscaled ``grads`` (one per variable),
        skipped when one is not finite; the scale adjusted."""
        if all(g is None for g in grads):
            raise _pairs.no_gradients(caller, variable_names(state.params))
        ls_state = state.opt_state

        def step(inner: TrainState) -> TrainState:
            return self.optimizer._apply(caller, call, grads, inner)

        if self.dynamic:
            finite = _all_finite(grads)
            new = jax.lax.cond(finite, step, lambda s: s, self._inner(state))
            scale, good_steps = self._adjusted(ls_state, finite)
        else:
            new = step(self._inner(state))
            scale, good_steps = ls_state.loss_scale, ls_state.good_steps
        return self._outer(state, new, loss_scale=scale, good_steps=good_steps)

    def _adjusted(self, ls_state: LossScaleState, finite: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The scale and counter after a step, by ``DynamicLossScale.update``'s rule."""
        multiplier = jnp.float32(self.multiplier)
        scale = ls_state.loss_scale
        good_steps = ls_state.good_steps + 1
        grow = good_steps >= self.growth_steps
        grown = scale * multiplier
        scale = jnp.where(
            finite,
            jnp.where(grow & jnp.isfinite(grown), grown, scale),
            jnp.maximum(scale / multiplier, jnp.float32(1)),
        )
        return scale, jnp.where(finite & ~grow, good_steps, 0)


def _check_opt(caller: str, opt: Any) -> None:
    """Raise unless ``opt`` is an ``fg.train`` optimizer this class can wrap."""
    if isinstance(opt, LossScaleOptimizer):
        fix = "it already scales the loss; wrap the optimizer once"
    elif isinstance(opt, Optimizer):
        return
    elif isinstance(opt, OptimizerGroup):
        fix = (
            "wrap the group's optimizers you step, e.g. LossScaleOptimizer(group['D']) "
            "(see LossScaleOptimizer.init)"
        )
    elif callable(getattr(opt, "init", None)) and callable(getattr(opt, "update", None)):
        fix = "wrap the optax transformation first: LossScaleOptimizer(fg.train.Optimizer(tx))"
    else:
        fix = "pass an fg.train optimizer, e.g. LossScaleOptimizer(fg.train.AdamOptimizer(1e-3))"
    raise TypeError(f"{caller}: opt is a {type(opt).__name__}, not an fg.train optimizer; {fix}.")


def _loss_scale_state(caller: str, state: Any, call: str) -> LossScaleState:
    """``state.opt_state``, after checking that it is a ``LossScaleOptimizer``'s."""
    return _habits.wrapper_state(caller, state, call, LossScaleState, "LossScaleOptimizer")
