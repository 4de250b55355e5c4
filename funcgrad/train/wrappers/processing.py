"""``optimize_loss``: TensorFlow 1.x's ``tf.contrib.layers.optimize_loss`` as an optimizer
that processes its gradients before each apply.

TensorFlow's function takes a loss tensor and returns a train op: it builds an optimizer
(by name, class, instance or function of the learning rate), computes the gradients, adds
noise, multiplies some, clips them, and applies them.  Here the loss is a function, so
``optimize_loss`` returns the optimizer whose ``minimize`` is that train op; its
``init``, ``compute_gradients`` (the raw gradients, as TensorFlow's optimizer computes
them) and ``apply_gradients`` (which processes, then applies) are an ``fg.train``
optimizer's, and its state is the state of the optimizer it was built from.

The processing follows TensorFlow 1.15's ``optimize_loss`` in its order: noise, then the
multipliers, then clipping (``tensorflow/contrib/layers/python/layers/optimizers.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from funcgrad import _checks
from funcgrad._types import GradsAndVars
from funcgrad._types import LearningRate
from funcgrad._types import PyTree
from funcgrad.clip import clip_by_global_norm
from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train import _pairs
from funcgrad.train import _var_list
from funcgrad.train._var_list import VarList
from funcgrad.train._variables import Flat
from funcgrad.train.group import OptimizerGroup
from funcgrad.train.names import variable_names
from funcgrad.train.optimizer import Optimizer
from funcgrad.train.optimizers.tf1 import AdagradOptimizer
from funcgrad.train.optimizers.tf1 import AdamOptimizer
from funcgrad.train.optimizers.tf1 import FtrlOptimizer
from funcgrad.train.optimizers.tf1 import GradientDescentOptimizer
from funcgrad.train.optimizers.tf1 import MomentumOptimizer
from funcgrad.train.optimizers.tf1 import RMSPropOptimizer
from funcgrad.train.state import TrainState
from funcgrad.train.wrappers._wrapper import Wrapper

__all__ = ["optimize_loss"]

_CALLER = "fg.train.optimize_loss(learning_rate, optimizer, ...)"

#: TensorFlow's ``OPTIMIZER_CLS_NAMES``: each is called with ``learning_rate=``.
_NAMES: dict[str, Callable[..., Optimizer]] = {
    "Adagrad": AdagradOptimizer,
    "Adam": AdamOptimizer,
    "Ftrl": FtrlOptimizer,
    "Momentum": lambda learning_rate: MomentumOptimizer(learning_rate, momentum=0.9),
    "RMSProp": RMSPropOptimizer,
    "SGD": GradientDescentOptimizer,
}
#: TensorFlow's ``OPTIMIZER_SUMMARIES``.
_SUMMARIES = ("learning_rate", "loss", "gradients", "gradient_norm", "global_gradient_norm")


class _OptimizeLoss(Wrapper):
    """The optimizer ``optimize_loss`` returns: ``optimizer``'s steps, with the
    gradients processed before each apply.  Its state is ``optimizer``'s, and every other
    hook of a step is ``optimizer``'s, so it wraps any ``fg.train`` optimizer (a
    ``LossScaleOptimizer``, a group's member)."""

    def __init__(
        self,
        optimizer: Optimizer,
        noise: tuple[float, jax.Array] | None,
        multipliers: dict[str, float],
        clip: float | Callable[[GradsAndVars], Any] | None,
        variables: VarList,
        increment_global_step: bool,
        name: str,
        learning_rate: Any,
    ) -> None:
        super().__init__(optimizer)
        if variables is not None:
            self.var_list = variables
        self.noise = noise
        self.multipliers = multipliers
        self.clip = clip
        self.variables = variables
        self.increment_global_step = increment_global_step
        self.name = name
        #: TensorFlow's variable ``<name>/learning_rate``, made for a float rate only.
        self.tf_learning_rate = (
            float(learning_rate) if _checks.is_real_number(learning_rate) else None
        )

    @property
    def tf_scope(self) -> str:
        """The variable scope of the TensorFlow variables the original makes (``name``),
        which TensorFlow checkpoints name its slots and non-slots under."""
        return self.name

    def _caller(self, method: str) -> str:
        return f"fg.train.optimize_loss(...).{method}"

    def init(self, params: PyTree) -> TrainState:
        """The state of the optimizer ``optimize_loss`` was built from, for ``params``.

        ``variables`` and the names of ``gradient_multipliers`` are checked against
        ``params`` here, before any step.
        """
        caller = self._caller("init(params)")
        state = super().init(params)
        self._selected(caller, params, None)
        self._factors(caller, variable_names(params))
        return state

    def _selected(self, caller: str, params: PyTree, var_list: VarList) -> list[bool]:
        """``variables`` (TensorFlow's ``var_list`` of the train op), or a call's
        ``var_list`` among them."""
        chosen = self.optimizer._selected(caller, params, self.variables)
        if var_list is None:
            return chosen
        selected = self.optimizer._selected(caller, params, var_list)
        outside = _var_list.outside(params, selected, chosen)
        if outside:
            raise ValueError(
                f"{caller}: var_list selects {outside}, which optimize_loss's variables= "
                "leaves out; select among those variables, or widen variables=."
            )
        return selected

    def _apply(self, caller: str, call: str, grads: list[Any], state: TrainState) -> TrainState:
        """Noise, multipliers and clipping, in TensorFlow's order, then ``optimizer``'s
        apply; ``global_step`` kept as it was without ``increment_global_step``."""
        if any(g is not None for g in grads):
            grads = self._processed(caller, grads, state)
        new = self.optimizer._apply(caller, call, grads, state)
        if self.increment_global_step:
            return new
        return new._replace(global_step=state.global_step)

    def _processed(self, caller: str, grads: list[Any], state: TrainState) -> list[Any]:
        flat = Flat(state.params)
        names = variable_names(state.params)
        if self.noise is not None:
            scale, key = self.noise
            step_key = jax.random.fold_in(key, state.global_step)
            grads = [
                None if g is None else _noisy(g, scale, jax.random.fold_in(step_key, i))
                for i, g in enumerate(grads)
            ]
        factors = self._factors(caller, names)
        grads = [
            # an IndexedSlices scales its values by a scalar itself
            g if g is None or m is None else g * jnp.asarray(m, g.dtype)
            for g, m in zip(grads, factors, strict=True)
        ]
        if isinstance(self.clip, float):
            grads, _ = clip_by_global_norm(grads, self.clip)
        elif self.clip is not None:
            clipped = self.clip(_pairs.named(grads, flat.variables, names))
            grads = _pairs.match(caller, clipped, flat.variables, names)
        return grads

    def _factors(self, caller: str, names: list[str]) -> list[float | None]:
        """Each variable's gradient multiplier (``None``: none)."""
        unknown = [f"{k!r}{_did_you_mean(k, names)}" for k in self.multipliers if k not in names]
        if unknown:
            raise ValueError(
                f"{caller}: gradient_multipliers names {', '.join(unknown)}, which are not "
                f"variables (TensorFlow would skip them silently); the variables are {names} "
                "(fg.train.variable_names(params)): key the multipliers by these names."
            )
        return [self.multipliers.get(n) for n in names]


def _did_you_mean(key: str, names: list[str]) -> str:
    """The variable ``key`` was meant to name: TensorFlow's tensor name ``"W:0"`` names
    ``"W"``; otherwise the closest name."""
    stem = key.rsplit(":", 1)[0]
    if stem != key and stem in names:
        return f" (did you mean {stem!r}?)"
    return _checks.did_you_mean(key, names)


def _noisy(g: Any, scale: float, key: jax.Array) -> jax.Array:
    """``g`` plus ``scale`` times TensorFlow's ``truncated_normal`` of its dense shape
    (an ``IndexedSlices`` becomes dense, as ``IndexedSlices + Tensor`` does in TF)."""
    dense = g.to_dense() if isinstance(g, IndexedSlices) else g
    noise = jax.random.truncated_normal(key, -2.0, 2.0, dense.shape, jnp.float32)
    return dense + (noise * jnp.float32(scale)).astype(dense.dtype)


def _built(
    optimizer: Any, learning_rate: LearningRate | None, rate: LearningRate | None
) -> Optimizer:
    """The optimizer ``optimize_loss`` builds from ``optimizer`` and the (decayed) rate."""
    if isinstance(optimizer, Optimizer):
        if learning_rate is not None:
            raise ValueError(
                f"{_CALLER}: optimizer is an instance, which has its own learning rate, so "
                f"learning_rate={learning_rate!r} would be ignored (TensorFlow ignores it "
                "silently); pass learning_rate=None, or pass the class and the rate."
            )
        return optimizer
    by = "by name" if isinstance(optimizer, str) else "a class"
    if isinstance(optimizer, str | type) and rate is None:
        raise ValueError(
            f"{_CALLER}: learning_rate is None, and an optimizer given {by} "
            f"({optimizer!r}) needs one; pass a learning_rate such as 0.01."
        )
    if isinstance(optimizer, str):
        if optimizer not in _NAMES:
            raise ValueError(
                f"{_CALLER}: optimizer={optimizer!r} is not one of TensorFlow's names "
                f"{list(_NAMES)}{_checks.did_you_mean(optimizer, _NAMES)}; pass one of them, "
                "an fg.train optimizer class or instance, or a function of the learning rate."
            )
        return _NAMES[optimizer](learning_rate=rate)
    if isinstance(optimizer, type) and issubclass(optimizer, Optimizer):
        if "learning_rate" not in inspect.signature(optimizer).parameters:
            raise TypeError(
                f"{_CALLER}: the class {optimizer.__name__} takes no learning_rate; pass an "
                f"instance with learning_rate=None, or a function of the rate such as "
                "lambda lr: fg.train.Optimizer(optax.sgd(lr))."
            )
        return optimizer(learning_rate=rate)  # type: ignore[call-arg]
    if callable(optimizer) and not isinstance(optimizer, type):
        opt = optimizer() if rate is None else optimizer(rate)
        if not isinstance(opt, Optimizer):
            raise TypeError(
                f"{_CALLER}: the optimizer function returned a {type(opt).__name__}, not an "
                "fg.train optimizer; return one, e.g. lambda lr: "
                "fg.train.MomentumOptimizer(lr, momentum=0.5) (an optax transformation: "
                "lambda lr: fg.train.Optimizer(optax.sgd(lr)))."
            )
        return opt
    fix = "pass a name such as 'Adam', an fg.train optimizer class or instance, or a function"
    if isinstance(optimizer, OptimizerGroup):
        fix = "pass one of its optimizers, group['D']"
    elif callable(getattr(optimizer, "init", None)) and callable(
        getattr(optimizer, "update", None)
    ):
        fix = "wrap the optax transformation: fg.train.Optimizer(tx), with learning_rate=None"
    raise TypeError(f"{_CALLER}: optimizer is a {type(optimizer).__name__}; {fix}.")


def _rate(learning_rate: Any, decay_fn: Any) -> LearningRate | None:
    """The learning rate the optimizer is built with: ``decay_fn(learning_rate, step)``
    as a ``schedule(step)`` when there is a decay function."""
    if learning_rate is None:
        if decay_fn is not None:
            raise ValueError(
                f"{_CALLER}: learning_rate_decay_fn is given without a learning_rate, so it "
                "would be ignored (TensorFlow ignores it silently); pass the learning_rate "
                "it decays, or build the optimizer with a schedule."
            )
        return None
    _checks.check_rate(_CALLER, learning_rate)
    if decay_fn is None:
        return learning_rate
    if not callable(decay_fn):
        raise TypeError(
            f"{_CALLER}: learning_rate_decay_fn must be a function (learning_rate, "
            f"global_step) -> rate, got {type(decay_fn).__name__}; e.g. lambda lr, step: "
            "fg.train.exponential_decay(lr, 1000, 0.96)(step)."
        )
    base = learning_rate

    def decayed(step: jax.Array) -> jax.Array:
        return decay_fn(base(step) if callable(base) else base, step)

    _checks.check_schedule(
        _CALLER,
        "learning_rate_decay_fn(learning_rate, global_step)",
        decayed,
        "return one float scalar, e.g. fg.train.exponential_decay(lr, 1000, 0.96)(step)",
    )
    return decayed


def _noise(scale: Any, key: Any) -> tuple[float, jax.Array] | None:
    """``(scale, key)`` of the gradient noise, checked; ``None`` without noise."""
    if scale is None:
        if key is not None:
            raise ValueError(
                f"{_CALLER}: key is given without gradient_noise_scale, and only the gradient "
                "noise uses it; pass gradient_noise_scale too, or drop key."
            )
        return None
    _checks.check_numbers(_CALLER, {"gradient_noise_scale": (scale, ">= 0")}, "e.g. 0.01")
    hint = "pass key=jax.random.key(0) for gradient_noise_scale (each step folds in global_step)"
    _checks.check_key(_CALLER, "key", key, hint)
    return float(scale), key


def _multipliers(multipliers: Any) -> dict[str, float]:
    """``gradient_multipliers`` checked: variable names to numbers."""
    if multipliers is None:
        return {}
    wrong = [repr(multipliers)]
    if isinstance(multipliers, Mapping):
        wrong = _checks.not_names_to_numbers(multipliers)
    if wrong:
        raise TypeError(
            f"{_CALLER}: gradient_multipliers must map variable names to numbers, got "
            f"{', '.join(wrong)}; pass e.g. {{'dense/kernel': 0.1}} "
            "(fg.train.variable_names(params) lists the names)."
        )
    named = {f"gradient_multipliers[{k!r}]": (v, "finite") for k, v in multipliers.items()}
    _checks.check_numbers(_CALLER, named, "e.g. {'dense/kernel': 0.1}")
    return {k: float(v) for k, v in multipliers.items()}


def _clip(clip_gradients: Any) -> float | Callable[[GradsAndVars], Any] | None:
    """``clip_gradients`` checked: a global norm (a float) or a function of the pairs."""
    if clip_gradients is None or callable(clip_gradients):
        return clip_gradients
    if not _checks.is_real_number(clip_gradients):
        raise TypeError(
            f"{_CALLER}: clip_gradients must be a number (the global norm) or a function "
            f"of the (gradient, variable) pairs, got {clip_gradients!r}; pass e.g. 5.0."
        )
    example = "e.g. 5.0, or None not to clip"
    _checks.check_numbers(_CALLER, {"clip_gradients": (clip_gradients, "> 0")}, example)
    return float(clip_gradients)


def _check_graph_arguments(
    update_ops: Any, name: Any, summaries: Any, colocate: Any, increment: Any
) -> str:
    """The TF graph's arguments checked (none changes a number here); the scope name."""
    if update_ops is not None and (not isinstance(update_ops, Sequence) or len(update_ops)):
        raise ValueError(
            f"{_CALLER}: update_ops={update_ops!r}, but a function has no update ops to run; "
            "return a layer's new statistics from loss_fn as aux (minimize(..., "
            "has_aux=True)) and drop update_ops."
        )
    wrong = [
        f"{arg}={value!r} is not {kind}"
        for arg, value, kind, ok in [
            ("name", name, "a string", name is None or isinstance(name, str)),
            ("colocate_gradients_with_ops", colocate, "a bool", isinstance(colocate, bool)),
            ("increment_global_step", increment, "a bool", isinstance(increment, bool)),
            (
                "summaries",
                summaries,
                "a list of names",
                summaries is None
                or (isinstance(summaries, Sequence) and not isinstance(summaries, str)),
            ),
        ]
        if not ok
    ]
    _checks.raise_collected(_CALLER, wrong, "pass TensorFlow's kinds of values", TypeError)
    unknown = [s for s in summaries or () if s not in _SUMMARIES]
    if unknown:
        raise ValueError(
            f"{_CALLER}: summaries {unknown} are not among TensorFlow's {list(_SUMMARIES)}; "
            "pass names from that list, or None."
        )
    return name or "OptimizeLoss"


def optimize_loss(
    learning_rate: LearningRate | None,
    optimizer: str | type[Optimizer] | Optimizer | Callable[..., Optimizer],
    *,
    gradient_noise_scale: float | None = None,
    gradient_multipliers: Mapping[str, float] | None = None,
    clip_gradients: float | Callable[[GradsAndVars], GradsAndVars] | None = None,
    learning_rate_decay_fn: Callable[[Any, jax.Array], Any] | None = None,
    update_ops: Sequence[Any] | None = None,
    variables: VarList = None,
    name: str | None = None,
    summaries: Sequence[str] | None = None,
    colocate_gradients_with_ops: bool = False,
    increment_global_step: bool = True,
    key: jax.Array | None = None,
) -> Optimizer:
    """TensorFlow 1.x's ``tf.contrib.layers.optimize_loss``, as an ``fg.train`` optimizer.

    TensorFlow's ``train_op = optimize_loss(loss, global_step, learning_rate, optimizer,
    ...)`` becomes ``opt = fg.train.optimize_loss(learning_rate, optimizer, ...)``, then
    ``state = opt.init(params)`` and ``state, loss = opt.minimize(loss_fn, state,
    *batch)``, which is ``sess.run([train_op, loss])``: the loss goes to ``minimize`` and
    ``global_step`` lives in the state.  A step computes the gradients of the
    ``variables`` and, as TensorFlow 1.15's source does, in this order:

    1. adds ``gradient_noise_scale`` times a truncated normal (within two standard
       deviations, TensorFlow's ``truncated_normal``) to each gradient; an
       ``fg.IndexedSlices`` becomes dense, as in TensorFlow;
    2. multiplies the gradients of the variables named in ``gradient_multipliers``;
    3. clips them by their global norm (a number) or with a function of the pairs;

    then applies them and adds one to ``global_step`` (unless
    ``increment_global_step=False``).  ``compute_gradients`` returns the raw gradients,
    as TensorFlow's optimizer computes them; ``apply_gradients`` processes any pairs as
    above, then applies them.  The state is that of the optimizer built (its slots, its
    learning rate for :func:`~funcgrad.train.set_learning_rate`); the optimizer is
    ``opt.optimizer``.

    Args:
      learning_rate: a number, a ``schedule(step)`` (TensorFlow's rate tensor computed
        from ``global_step``), or ``None`` with an optimizer instance or a function of
        no argument.
      optimizer: how to build the optimizer, as TensorFlow takes it: a name,
        ``"Adagrad"``, ``"Adam"``, ``"Ftrl"``, ``"Momentum"`` (``momentum=0.9``),
        ``"RMSProp"`` or ``"SGD"``, built with TensorFlow's defaults; an ``fg.train``
        optimizer class, called as ``cls(learning_rate=rate)``; an instance, with
        ``learning_rate=None``; or a function, called as ``f(rate)``, or as ``f()``
        when ``learning_rate`` is ``None``, that returns an ``fg.train`` optimizer.
        Any ``fg.train`` optimizer may be wrapped: a ``LossScaleOptimizer``, or
        ``group["D"]`` of an ``OptimizerGroup`` (the group's state is the state).
      gradient_noise_scale: the scale of the noise, a number ``>= 0``, with ``key``.
      gradient_multipliers: variable name (``"dense/kernel"``, as
        :func:`~funcgrad.train.variable_names` gives) to the number its gradient is
        multiplied by.
      clip_gradients: a number: clip by global norm, ``fg.clip_by_global_norm``; a
        function: it takes the list of ``(gradient, variable)`` pairs and returns the
        pairs to apply (any subset, in any order, as ``apply_gradients`` takes them).
      learning_rate_decay_fn: ``f(learning_rate, global_step) -> rate``, evaluated at
        each step's ``global_step``, e.g. ``lambda lr, step:
        fg.train.exponential_decay(lr, 1000, 0.96)(step)``.
      update_ops: ``None`` or empty: a function has no update ops (a layer's new
        statistics come back from ``loss_fn`` with ``has_aux=True``).
      variables: the variables to train, in any form of ``var_list``: ``None`` (all),
        names, a predicate or a mask.  The optimizer's state has slots for every
        variable, as ``optimizer.init`` makes them.
      name: TensorFlow's variable scope (``"OptimizeLoss"`` when ``None``), which prefixes
        the names of the TensorFlow variables the original makes: the slots
        (``OptimizeLoss/dense/kernel/Adam``), the non-slot variables
        (``OptimizeLoss/beta1_power``) and, for a number, ``OptimizeLoss/learning_rate``.
        ``save_tf_checkpoint(path, state, opt)`` and ``restore_tf_checkpoint`` use
        these names, and only the ``variables``' slots, as TensorFlow's graph has them.
      summaries: TensorFlow's summary names (checked against its list); none is written
        here: use ``fg.gradient_summary`` and a summary writer.
      colocate_gradients_with_ops: a bool, without effect (XLA places the operations).
      increment_global_step: ``False`` leaves ``global_step`` as it was, for a second
        train op of the same step.
      key: a PRNG key (``jax.random.key(0)``), needed with ``gradient_noise_scale``.
        The noise of a step comes from ``jax.random.fold_in(key, global_step)``, folded
        in with each variable's index in ``variable_names`` order; it repeats when
        ``global_step`` does (with ``increment_global_step=False`` and no other step).

    Returns:
      An ``fg.train`` optimizer: ``init``, ``compute_gradients``, ``apply_gradients``,
      ``minimize``; attributes ``optimizer`` (the one built), ``name``.

    Raises:
      TypeError: an argument of the wrong kind: ``optimizer`` (an optax transformation,
        a class without ``learning_rate``, a function that returns no ``fg.train``
        optimizer), ``learning_rate``, ``clip_gradients``, ``gradient_multipliers``, a
        missing ``key`` with ``gradient_noise_scale``.
      ValueError: an unknown optimizer name (the names are listed); a value TensorFlow
        would ignore silently (``learning_rate`` with an instance,
        ``learning_rate_decay_fn`` without ``learning_rate``, a multiplier name that is
        no variable, at ``init`` or the first step); no ``learning_rate`` for a name or
        a class; a negative rate, noise scale or clip norm; ``update_ops``.

    Example:
      >>> opt = fg.train.optimize_loss(0.1, "SGD", clip_gradients=1.0,
      ...                              gradient_multipliers={"b": 0.5})
      >>> state = opt.init({"w": jnp.float32(0.0), "b": jnp.float32(0.0)})
      >>> state, loss = opt.minimize(lambda p: 3 * p["w"] + 4 * p["b"], state)
      >>> round(float(state.params["w"]), 4), round(float(state.params["b"]), 4)
      (-0.0832, -0.0555)
      >>> int(state.global_step), type(opt.optimizer).__name__
      (1, 'GradientDescentOptimizer')
    """
    graph_name = _check_graph_arguments(
        update_ops, name, summaries, colocate_gradients_with_ops, increment_global_step
    )
    noise = _noise(gradient_noise_scale, key)
    multipliers = _multipliers(gradient_multipliers)
    clip = _clip(clip_gradients)
    rate = _rate(learning_rate, learning_rate_decay_fn)
    built = _built(optimizer, learning_rate, rate)
    return _OptimizeLoss(
        built, noise, multipliers, clip, variables, increment_global_step, graph_name, learning_rate
    )
