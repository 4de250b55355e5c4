r"""``TF1Optimizer``: the base of an optimizer written as a ``tf.train.Optimizer`` subclass.

A TF1 project's own optimizer (BERT's ``AdamWeightDecayOptimizer``, ALBERT's
``LAMBOptimizer``, ``tf.contrib.opt``'s) subclasses ``tf.train.Optimizer``: it names
its slots, creates its non-slot variables, and writes the update of one variable in
``_apply_dense`` (and of an ``IndexedSlices`` gradient in ``_apply_sparse``), with the
step's hyperparameters read in ``_prepare`` / ``_finish``.  A subclass of
:class:`TF1Optimizer` is written the same way, as pure functions of arrays:

* ``slots``: the slots of each variable, ``{key: TF name}`` — the slot ``key`` of
  variable ``W`` is saved as ``W/<TF name>``, made unique as TensorFlow does
  (Adam's ``{"m": "Adam", "v": "Adam"}`` gives ``W/Adam`` and ``W/Adam_1``, BERT's
  ``{"adam_m": "adam_m", ...}`` gives ``W/adam_m``); ``_slots_of(var)`` picks the keys
  a variable has (all of them unless overridden) and ``_slot_initial(key, var)`` their
  start (zeros).
* ``_non_slots()``: the non-slot variables, ``{TF name: initial value}`` (Adam's
  ``beta1_power``), scalars saved under their name: int32 for a Python ``int`` initial
  value, float32 otherwise, as TensorFlow's ``_create_non_slot_variable`` types them.
* ``_apply_dense(grad, var, slots, step)``: the new variable and slots of one variable;
  it sees the whole variable (norms, trust ratios).  ``step`` is a :class:`TF1Step`:
  the learning rate, ``global_step`` before the step, the variable's name and the
  non-slot values.
* ``_apply_sparse(grad, var, slots, step)`` (optional): the same for an
  ``fg.IndexedSlices`` gradient whose duplicate ids are summed, as TensorFlow's
  ``_apply_sparse_duplicate_indices`` gives it (padding ids equal the table's length:
  a gather clamps them and ``.at[ids].set`` / ``.add`` drops them).  Without it, the
  gradient is made dense and ``_apply_dense`` applies it — TensorFlow's base
  ``_apply_sparse`` has no such fallback (it raises ``NotImplementedError``), but an
  optimizer that overrides ``apply_gradients`` (BERT's) computes on the dense tensor.
* ``_prepare(step)`` (optional): the values every variable's rule of the step shares,
  computed once per step (Adam's bias-corrected rate); the rules read them in
  ``step.prepared``.
* ``_finish(non_slots, step)`` (optional): the new non-slot values, once per step.

The subclass gets what every ``fg.train`` optimizer has: ``compute_gradients`` /
``apply_gradients`` / ``minimize``, ``OptimizerGroup``, ``LossScaleOptimizer``, the
wrappers, ``save_tf_checkpoint`` / ``restore_tf_checkpoint`` by these TF names, the
orbax ``Checkpointer``, ``jax.jit`` with a donated state, and ``.tx``, an optax
``GradientTransformation`` for plain optax loops (its step is its own update count
there).  Every rule computes in float32 or wider and stores in the variable's dtype.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any
from typing import ClassVar
from typing import NamedTuple
from typing import cast

import jax
import jax.numpy as jnp
import optax

from funcgrad import _checks
from funcgrad._types import PyTree
from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train._sparse import LeafRule
from funcgrad.train._sparse import sum_duplicates
from funcgrad.train._variables import Flat
from funcgrad.train.names import variable_names
from funcgrad.train.optimizer import Optimizer
from funcgrad.train.optimizers._float32 import widen
from funcgrad.train.schedules._inject import InjectLearningRateState
from funcgrad.train.schedules._inject import LearningRate
from funcgrad.train.schedules._inject import check_rate

__all__ = ["TF1Optimizer", "TF1OptimizerState", "TF1Step"]


class TF1OptimizerState(NamedTuple):
    """The state of a :class:`TF1Optimizer`'s rules (inside its learning-rate state).

    Attributes:
      slots: ``{slot key: tree}``, each tree in the parameters' structure (a variable
        without that slot holds a zero scalar placeholder there).
      non_slots: ``{TF name: scalar}`` (int32 or float32, as the initial value).
    """

    slots: dict[str, PyTree]
    non_slots: dict[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class TF1Step:
    """What a rule of a :class:`TF1Optimizer` reads besides the gradient, the variable
    and its slots: TensorFlow's ``_lr_t``, ``get_or_create_global_step()``, the
    variable's name and ``_get_non_slot_variable(name)``.

    Attributes:
      learning_rate: the rate of this step, a float32 scalar (a schedule evaluated at
        ``global_step``).
      global_step: the step count before this step, an int32 scalar.
      name: the variable's funcgrad name (``"dense/kernel"``), as TensorFlow's
        ``var.op.name``; ``""`` in ``_finish``.
      non_slots: the non-slot values before this step.
      prepared: what the optimizer's ``_prepare`` computed for this step, once for every
        variable (TensorFlow's tensors of ``_prepare``); empty in ``_prepare`` itself.
    """

    learning_rate: jax.Array
    global_step: jax.Array
    name: str
    non_slots: Mapping[str, jax.Array]
    prepared: Mapping[str, jax.Array] = dataclasses.field(default_factory=dict)


def _non_slot_initial(value: float) -> jax.Array:
    """A non-slot variable's start, typed as TensorFlow types ``_create_non_slot_variable``'s
    initial value: int32 for a Python ``int``, float32 otherwise."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    return jnp.array(value, jnp.int32 if is_int else jnp.float32)


def _placeholder(var: jax.Array) -> jax.Array:
    """What a slot tree holds for a variable that has no such slot: a zero scalar (not an
    empty array, which the orbax ``Checkpointer`` refuses to save)."""
    return jnp.zeros((), var.dtype)


class TF1Optimizer(Optimizer):
    r"""The base of an optimizer written as a ``tf.train.Optimizer`` subclass.

    A subclass declares ``slots`` (``{key: TF name}``) and overrides ``_apply_dense``
    and, as its original does, ``_apply_sparse``, ``_non_slots``, ``_prepare``,
    ``_finish``, ``_slots_of`` and ``_slot_initial`` (the docs page *Optimizers of TF1 projects*
    sets them beside TensorFlow's hooks).
    Its ``__init__`` calls ``super().__init__(learning_rate)`` and keeps its
    hyperparameters as attributes, as the original keeps them on ``self``.

    Args:
      learning_rate: a number or a ``schedule(step)``, evaluated at ``global_step``
        before the step (held in the state as for the built-in optimizers, so
        :func:`~funcgrad.train.set_learning_rate` changes a number).

    Raises:
      TypeError: ``learning_rate`` is neither a number nor a schedule.
      ValueError: ``learning_rate`` is negative or not finite.

    Example:
      TensorFlow's ``GradientDescentOptimizer`` with a momentum slot, written the TF1 way:

      >>> class Momentum(fg.train.TF1Optimizer):
      ...     slots = {"momentum": "Momentum"}  # TF: self._zeros_slot(v, "momentum", "Momentum")
      ...     def __init__(self, learning_rate, momentum):
      ...         super().__init__(learning_rate)
      ...         self._momentum = momentum
      ...     def _apply_dense(self, grad, var, slots, step):
      ...         accum = slots["momentum"] * self._momentum + grad
      ...         return var - step.learning_rate * accum, {"momentum": accum}
      >>> opt = Momentum(0.1, 0.9)
      >>> state = opt.init({"W": jnp.ones(2)})
      >>> for _ in range(2):
      ...     state, _ = opt.minimize(lambda p: p["W"].sum(), state)
      >>> np.asarray(state.params["W"], np.float64).round(4).tolist(), opt.tf_names(state.params)
      ([0.71, 0.71], ([[('momentum', 'Momentum')]], []))
    """

    #: The slots of each variable: ``{key: TF name}`` (saved as ``<var>/<TF name>``,
    #: numbered ``_1``, ``_2`` where a variable has several of one name).
    slots: ClassVar[Mapping[str, str]] = {}

    def __init__(self, learning_rate: LearningRate) -> None:
        name = type(self).__name__
        check_rate(f"fg.train.{name}(learning_rate, ...)", learning_rate)
        self._learning_rate = learning_rate
        super().__init__(optax.GradientTransformationExtraArgs(self._init, self._update))
        has_sparse = type(self)._apply_sparse is not TF1Optimizer._apply_sparse
        #: How an ``fg.IndexedSlices`` gradient is applied: ``_apply_sparse``, or (without
        #: one) the dense rule on the dense gradient.
        self.sparse_rule = self._sparse_rule if has_sparse else None

    # What a subclass writes (TensorFlow's names for the same hooks).

    def _slots_of(self, var: jax.Array) -> tuple[str, ...]:
        """The keys of ``slots`` that ``var`` has (all of them here)."""
        del var
        return tuple(self.slots)

    def _slot_initial(self, key: str, var: jax.Array) -> jax.Array:
        """The start of slot ``key`` of ``var``: zeros of its shape and dtype (``_zeros_slot``)."""
        del key
        return jnp.zeros_like(var)

    def _non_slots(self) -> dict[str, float]:
        """The non-slot variables, ``{TF name: initial value}`` (none here); an ``int``
        makes an int32 variable, as in TensorFlow."""
        return {}

    def _apply_dense(
        self, grad: jax.Array, var: jax.Array, slots: dict[str, jax.Array], step: TF1Step
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """The new ``var`` and slots after a dense gradient ``grad``."""
        raise NotImplementedError(
            f"fg.train.{type(self).__name__}: a TF1Optimizer subclass writes _apply_dense"
            "(self, grad, var, slots, step) -> (new_var, new_slots); define it."
        )

    def _apply_sparse(
        self, grad: IndexedSlices, var: jax.Array, slots: dict[str, jax.Array], step: TF1Step
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """The new ``var`` and slots after ``grad``, an ``IndexedSlices`` of unique ids."""
        raise NotImplementedError  # never called: sparse_rule is None without an override

    def _check_names(self, names: list[str]) -> None:
        """Raise for options that match none of ``names``, the variables this optimizer
        updates (nothing is checked here); called once per traced step."""
        del names

    def _prepare(self, step: TF1Step) -> dict[str, jax.Array]:
        """The values every variable's rule of ``step`` reads, computed once per step and
        handed to the rules as ``step.prepared`` (none here)."""
        del step
        return {}

    def _prepared(self, rate: jax.Array, global_step: jax.Array, non_slots: Any) -> TF1Step:
        """The step before any variable (``name`` ``""``), with ``_prepare``'s values."""
        step = TF1Step(rate, global_step, "", non_slots)
        return dataclasses.replace(step, prepared=self._prepare(step))

    def _finish(self, non_slots: dict[str, jax.Array], step: TF1Step) -> dict[str, jax.Array]:
        """The non-slot values after the step (unchanged here)."""
        del step
        return non_slots

    # The machinery.

    def _check_numbers(self, **hyperparameters: Any) -> None:
        """Raise ``TypeError`` for every hyperparameter that is not a Python or NumPy
        number (a string, a list, an array), all at once."""
        wrong = [
            f"{k} must be a number, got {v!r}"
            for k, v in hyperparameters.items()
            if not _checks.is_real_number(v)
        ]
        hint = "pass Python numbers (the original's defaults are a safe start)"
        _checks.raise_collected(f"fg.train.{type(self).__name__}(...)", wrong, hint, TypeError)

    def _check_patterns(self, argument: str, patterns: Any) -> list[str]:
        """``patterns`` (``None`` or a list of regexes) as a list; raise for anything
        else, such as one string (which the original would read letter by letter)."""
        if patterns is None:
            return []
        ok = isinstance(patterns, list | tuple) and all(isinstance(p, str) for p in patterns)
        if not ok:
            raise TypeError(
                f"fg.train.{type(self).__name__}(...): {argument} must be None or a list "
                f"of regular expressions, got {patterns!r}; pass e.g. "
                f"{argument}=['LayerNorm', 'layer_norm', 'bias']."
            )
        for p in patterns:
            try:
                re.compile(p)
            except re.error as error:
                raise ValueError(
                    f"fg.train.{type(self).__name__}(...): {argument} holds {p!r}, not a "
                    f"regular expression ({error}); escape it with re.escape."
                ) from None
        return list(patterns)

    def _check_matches(self, argument: str, patterns: list[str], names: list[str]) -> None:
        """Raise when ``patterns`` (searched as the original does, ``re.search``) match
        none of ``names``: the original would silently apply its rule to every variable."""
        if patterns and not any(re.search(p, n) for p in patterns for n in names):
            raise ValueError(
                f"fg.train.{type(self).__name__}: {argument}={patterns} matches none of the "
                f"variables {names[:8]}{' ...' if len(names) > 8 else ''}, so it would "
                "exclude nothing; write the patterns for these names (fg.train.variable_names"
                f"(params)), or pass {argument}=None to exclude nothing."
            )

    def tf_names(self, params: PyTree) -> tuple[list[list[tuple[str, str]]], list[str]]:
        """The TensorFlow names of the state: per variable of ``params``, its slots as
        ``(key, TF name)`` in creation order, and the non-slot names.

        Args:
          params: the parameters (arrays or ``jax.ShapeDtypeStruct`` values).

        Returns:
          ``(slots per variable, non-slot names)``.

        Example:
          >>> class Two(fg.train.TF1Optimizer):
          ...     slots = {"m": "Adam", "v": "Adam"}
          >>> Two(0.1).tf_names({"W": jnp.ones(2)})
          ([[('m', 'Adam'), ('v', 'Adam')]], [])
        """
        per_var = [[(k, self.slots[k]) for k in self._declared(v)] for v in Flat(params).variables]
        return per_var, list(self._non_slots())

    def _declared(self, var: Any) -> tuple[str, ...]:
        keys = tuple(self._slots_of(var))
        unknown = [k for k in keys if k not in self.slots]
        if unknown:
            raise ValueError(
                f"fg.train.{type(self).__name__}._slots_of returns {unknown}, which are not "
                f"keys of its slots {dict(self.slots)}; declare every slot in slots."
            )
        return tuple(k for k in self.slots if k in keys)

    def _init(self, params: PyTree) -> InjectLearningRateState:
        def slot(key: str) -> PyTree:
            def one(var: jax.Array) -> jax.Array:
                if key not in self._declared(var):
                    return _placeholder(var)
                return jnp.array(self._slot_initial(key, var), var.dtype)  # a fresh buffer

            return jax.tree.map(one, params)

        non_slots = {k: _non_slot_initial(v) for k, v in self._non_slots().items()}
        inner = TF1OptimizerState({k: slot(k) for k in self.slots}, non_slots)
        rate = self._learning_rate
        held = None if callable(rate) else jnp.array(rate, jnp.float32)
        return InjectLearningRateState(held, jnp.zeros([], jnp.int32), inner)

    def _rate(self, state: InjectLearningRateState, global_step: jax.Array) -> jax.Array:
        if state.learning_rate is not None:
            return state.learning_rate
        return jnp.asarray(self._learning_rate(global_step), jnp.float32)  # type: ignore[operator]

    def _update(
        self,
        updates: PyTree,
        state: InjectLearningRateState,
        params: PyTree = None,
        global_step: Any = None,
        **extra_args: Any,
    ) -> tuple[PyTree, InjectLearningRateState]:
        del extra_args
        if params is None:
            raise ValueError(
                f"fg.train.{type(self).__name__}.tx: update needs params (the rules read "
                "the variables); call tx.update(updates, state, params)."
            )
        count = cast(jax.Array, state.step)  # always kept: a rule may read the step
        step_count = count if global_step is None else jnp.asarray(global_step, jnp.int32)
        rate = self._rate(state, step_count)
        inner: TF1OptimizerState = state.inner_state
        names = variable_names(params)
        self._check_names(names)
        grads, treedef = jax.tree.flatten(updates)
        variables = jax.tree.leaves(params)
        slot_leaves = {k: treedef.flatten_up_to(t) for k, t in inner.slots.items()}  # type: ignore[attr-defined]
        new_vars, new_slots = [], {k: list(v) for k, v in slot_leaves.items()}
        prepared = self._prepared(rate, step_count, inner.non_slots)
        for i, (g, v, name) in enumerate(zip(grads, variables, names, strict=True)):
            keys = self._declared(v)
            mine = {k: slot_leaves[k][i] for k in keys}
            step = dataclasses.replace(prepared, name=name)
            new_v, out = self._in_float32(self._apply_dense, g, v, mine, step)
            new_vars.append(new_v)
            for k in keys:
                new_slots[k][i] = out[k]
        non_slots = self._finish(dict(inner.non_slots), prepared)
        non_slots = {
            k: jnp.asarray(non_slots[k]).astype(v.dtype) for k, v in inner.non_slots.items()
        }
        deltas = [n - v for n, v in zip(new_vars, variables, strict=True)]
        slots = {k: jax.tree.unflatten(treedef, v) for k, v in new_slots.items()}
        new_state = InjectLearningRateState(
            state.learning_rate,
            optax.safe_increment(count),
            TF1OptimizerState(slots, non_slots),
        )
        return jax.tree.unflatten(treedef, deltas), new_state

    def _in_float32(
        self, rule: Any, grad: Any, var: jax.Array, slots: dict[str, jax.Array], step: TF1Step
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """``rule`` computed in float32 or wider, its results in the given dtypes."""
        wide_var = widen(var)
        if isinstance(grad, IndexedSlices):
            grad = IndexedSlices(widen(grad.values), grad.indices, grad.dense_shape)
        else:
            grad = widen(grad).astype(wide_var.dtype)
        new_var, new_slots = rule(grad, wide_var, {k: widen(s) for k, s in slots.items()}, step)
        missing = sorted(set(slots) - set(new_slots))
        if missing:
            raise ValueError(
                f"fg.train.{type(self).__name__}: its rule returns no new value for the "
                f"slots {missing} of {step.name!r}; return every slot, changed or not."
            )
        out = {k: jnp.asarray(new_slots[k]).astype(s.dtype) for k, s in slots.items()}
        return jnp.asarray(new_var).astype(var.dtype), out

    def _sparse_rule(self, opt_state: InjectLearningRateState, global_step: jax.Array) -> LeafRule:
        """The :data:`~funcgrad.train._sparse.SparseRule` that calls ``_apply_sparse``."""
        inner: TF1OptimizerState = opt_state.inner_state
        prepared = self._prepared(self._rate(opt_state, global_step), global_step, inner.non_slots)

        def leaf(
            var: jax.Array, slots: list[jax.Array], slices: IndexedSlices, name: str
        ) -> list[jax.Array]:
            keys = self._declared(var)
            order = sorted(self.slots)  # the state's order: its dict of slot trees, flattened
            mine = {k: s for k, s in zip(order, slots, strict=True) if k in keys}
            rows = sum_duplicates(slices)  # TF's _apply_sparse_duplicate_indices
            grad = IndexedSlices(rows.values, rows.indices, var.shape)
            step = dataclasses.replace(prepared, name=name)
            new_var, out = self._in_float32(self._apply_sparse, grad, var, mine, step)
            return [new_var, *(out.get(k, s) for k, s in zip(order, slots, strict=True))]

        return leaf
