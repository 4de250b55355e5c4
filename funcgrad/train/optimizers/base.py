r"""``TF1Optimizer``: the one base of every TensorFlow 1.x optimizer in ``fg.train``.

Every named optimizer — ``tf.train``'s (``AdamOptimizer``, ...), the TF1 projects'
(BERT's ``AdamWeightDecayOptimizer``, ``tf.contrib.opt``'s, tensor2tensor's) and a user's
own — subclasses :class:`TF1Optimizer` as the original subclasses ``tf.train.Optimizer``,
and is written as pure functions of arrays:

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
  ``_apply_sparse_duplicate_indices`` (TensorFlow's name too) is the step before: a rule
  that wants the duplicates as they are (``GradientDescentOptimizer``'s) overrides it.
* ``_prepare(step)`` (optional): the values every variable's rule of the step shares,
  computed once per step (Adam's bias-corrected rate); the rules read them in
  ``step.prepared``.
* ``_finish(non_slots, step)`` (optional): the new non-slot values, once per step.
* The hyperparameters: passed to ``super().__init__`` as keywords and annotated in
  ``__init__`` with their range (``beta1: Annotated[float, "in [0, 1)"]``), they are
  checked together, every problem at once, with the same words for every optimizer, and
  kept in ``opt.hyperparameters``.

The subclass gets what every ``fg.train`` optimizer has: ``compute_gradients`` /
``apply_gradients`` / ``minimize``, ``OptimizerGroup``, ``LossScaleOptimizer``, the
wrappers, ``save_tf_checkpoint`` / ``restore_tf_checkpoint`` by these TF names, the
orbax ``Checkpointer``, ``jax.jit`` with a donated state, and ``.tx``, an optax
``GradientTransformation`` for plain optax loops (its step is its own update count
there).  Every rule computes in float32 or wider and stores in the variable's dtype.

Design note
-----------
The state: ``InjectLearningRateState(rate, count, inner)``, the learning rate held (a
number) or scheduled at ``global_step``.  ``inner`` is a :class:`TF1OptimizerState` —
the slots by key, the non-slots by name — built and stepped here, one rule call per
variable.  A class whose dense rule is an optax chain of optax's pieces and the
transformations of :mod:`funcgrad.train.optimizers.transforms` (``tf.train``'s ten:
``_chain()``, a :class:`Chain`) has that chain's state as ``inner`` instead, and its
dense step is the chain's update of every variable at once: the states and numbers of
those ten are what they were before this base, so their checkpoints and the programs
that read their states keep working.  The chain is the class's rule only while no rule
hook is overridden below the class that declares it: a subclass with a rule of its own
(``AdamWOptimizer``'s decay before ``AdamOptimizer``'s rule) is stepped per variable,
with a :class:`TF1OptimizerState`.  Either way the slots and non-slots are read and
written by key through :meth:`TF1Optimizer.tf_slots` / :meth:`TF1Optimizer.with_tf_values`
(the chain declares where its state holds each, and the sign: RMSProp's momentum is
held negated there), which is what the sparse rules and the TF checkpoint functions use.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
import typing
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Annotated
from typing import Any
from typing import ClassVar
from typing import NamedTuple
from typing import cast

import jax
import jax.numpy as jnp
import numpy as np
import optax

from funcgrad import _checks
from funcgrad._types import LearningRate
from funcgrad._types import PyTree
from funcgrad._types import get_path
from funcgrad._types import put_path
from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train import _var_list
from funcgrad.train._sparse import LeafRule
from funcgrad.train._sparse import sum_duplicates
from funcgrad.train._var_list import VarList
from funcgrad.train._variables import Flat
from funcgrad.train.names import variable_names
from funcgrad.train.optimizer import Optimizer
from funcgrad.train.optimizers._float32 import in_float32
from funcgrad.train.optimizers._float32 import widen
from funcgrad.train.schedules.learning_rate import InjectLearningRateState
from funcgrad.train.schedules.learning_rate import inject_learning_rate

__all__ = ["TF1Optimizer", "TF1OptimizerState", "TF1Step"]

#: A place in a state: tuple indices, field names and dict keys, outermost first.
Path = tuple[int | str, ...]


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
        ``var.op.name``; ``""`` in ``_prepare`` and ``_finish``.
      non_slots: the non-slot values before this step.
      prepared: what the optimizer's ``_prepare`` computed for this step, once for every
        variable (TensorFlow's tensors of ``_prepare``); empty in ``_prepare`` itself.
      selected: for each option given in a form of ``var_list`` (``decay_var_list``), the
        names of the variables it selects (an option given as ``None`` is absent).
    """

    learning_rate: jax.Array
    global_step: jax.Array
    name: str
    non_slots: Mapping[str, jax.Array]
    prepared: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    selected: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)


class Chain(NamedTuple):
    """A class's dense rule as one optax transformation, and where its state holds what
    TensorFlow names.

    Attributes:
      transform: ``transform(rate)``, the transformation for a learning rate (a number
        or a traced scalar), the rate applied inside it.
      slots: ``{slot key: (path, sign)}``: where the state holds each slot tree, and the
        sign it holds it with (-1: negated).
      non_slots: ``{TF name: path}`` of each non-slot scalar.
    """

    transform: Callable[[Any], optax.GradientTransformation]
    slots: Mapping[str, tuple[Path, int]]
    non_slots: Mapping[str, Path] = {}


#: The hooks that make up a rule: a class that overrides one of them below the class
#: that declares a chain is stepped by its hooks, not by the chain.
_RULE_HOOKS = ("_apply_dense", "_prepare", "_finish", "_non_slots", "_slots_of", "_slot_initial")


def placed_like(value: Any, like: Any) -> jax.Array:
    """``value`` as an array of ``like``'s dtype, on ``like``'s sharding where ``like`` is a
    committed array (else uncommitted, as a fresh ``init``'s arrays are)."""
    host = np.asarray(value, jnp.result_type(like))
    committed = isinstance(like, jax.Array) and not isinstance(like, jax.core.Tracer)
    return jax.device_put(host, like.sharding if committed and like.committed else None)


class _ReadOnly(Mapping[str, Any]):
    """A step's values for a rule to read: what a rule writes goes into what it returns."""

    def __init__(self, values: Mapping[str, Any], what: str) -> None:
        self._values, self._what = dict(values), what

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __setitem__(self, key: str, value: Any) -> None:
        raise TypeError(
            f"fg.train: step.{self._what} is read-only (the values of the step, shared by "
            f"every variable's rule); return new values instead — a rule's new slots, "
            f"_finish's new non-slots — rather than setting step.{self._what}[{key!r}]."
        )

    def __repr__(self) -> str:
        return repr(self._values)


def _describe(value: Any) -> str:
    """What a hook returned, for an error message."""
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    shape = getattr(value, "shape", None)
    return f"an array of shape {shape}" if shape is not None else f"{value!r}"


def _non_slot_initial(value: float) -> jax.Array:
    """A non-slot variable's start, typed as TensorFlow types ``_create_non_slot_variable``'s
    initial value: int32 for a Python ``int``, float32 otherwise."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    return jnp.array(value, jnp.int32 if is_int else jnp.float32)


def _placeholder(var: jax.Array) -> jax.Array:
    """What a slot tree holds for a variable that has no such slot: a zero scalar (not an
    empty array, which the orbax ``Checkpointer`` refuses to save)."""
    return jnp.zeros((), var.dtype)


def _chained(cls: type) -> bool:
    """Whether ``cls``'s dense rule is the chain a class above it (or it) declares."""
    owner = next(c for c in cls.__mro__ if "_chain" in vars(c))
    return owner is not TF1Optimizer and all(
        getattr(cls, hook) is getattr(owner, hook) for hook in _RULE_HOOKS
    )


def _annotations(cls: type) -> dict[str, Any]:
    """The annotations of the ``__init__`` arguments of ``cls`` and its bases (the
    nearest class's first)."""
    hints: dict[str, Any] = {}
    for c in reversed(cls.__mro__):
        init = vars(c).get("__init__")
        if init is not None and c is not object:
            try:
                hints.update(typing.get_type_hints(init, include_extras=True))
            except (NameError, TypeError):  # a user's annotation that does not resolve
                continue
    return hints


def _kinds(hint: Any) -> tuple[str | None, set[Any]]:
    """The range rule of an annotation (``None``: none) and the types its union allows."""
    rule = None
    if typing.get_origin(hint) is Annotated:
        hint, rule = hint.__origin__, hint.__metadata__[0]
    args = (
        typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, type(int | None)) else ()
    )
    return rule, set(args or (hint,))


class TF1Optimizer(Optimizer):
    r"""The base of an optimizer written as a ``tf.train.Optimizer`` subclass.

    A subclass declares ``slots`` (``{key: TF name}``) and overrides ``_apply_dense``
    and, as its original does, ``_apply_sparse``, ``_non_slots``, ``_prepare``,
    ``_finish``, ``_slots_of`` and ``_slot_initial`` (the docs page *Optimizers of TF1
    projects* sets them beside TensorFlow's hooks).  Its ``__init__`` calls
    ``super().__init__(learning_rate, **hyperparameters)`` and keeps its hyperparameters
    as attributes, as the original keeps them on ``self``; a hyperparameter annotated
    with its range (``Annotated[float, ">= 0"]``) is checked by this base.

    Args:
      learning_rate: a number or a ``schedule(step)``, evaluated at ``global_step``
        before the step (held in the state, so :func:`~funcgrad.train.set_learning_rate`
        changes a number); a rule reads it as ``step.learning_rate``.
      **hyperparameters: the optimizer's other arguments, as given, checked against the
        annotations of ``__init__``: a number annotated ``Annotated[float, rule]`` must be
        finite and within ``rule`` (``">= 0"``, ``"> 0"``, ``"<= 0"``, ``">= 1"``,
        ``"in [0, 1)"``, ``"in [0, 1]"``, ``"finite"``), one annotated ``bool`` True or
        False, one that may be a ``Schedule`` a function of the step returning one
        floating scalar.

    Attributes:
      hyperparameters: the keywords given to this base, as given.

    Raises:
      TypeError: ``learning_rate`` is neither a number nor a schedule; a hyperparameter
        of the wrong type.
      ValueError: ``learning_rate`` is negative or not finite; a hyperparameter out of
        its range or not finite.

    Example:
      TensorFlow's ``GradientDescentOptimizer`` with a momentum slot, written the TF1 way:

      >>> from typing import Annotated
      >>> class Momentum(fg.train.TF1Optimizer):
      ...     slots = {"momentum": "Momentum"}  # TF: self._zeros_slot(v, "momentum", "Momentum")
      ...     def __init__(self, learning_rate, momentum: Annotated[float, ">= 0"]):
      ...         super().__init__(learning_rate, momentum=momentum)
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
      >>> Momentum(0.1, -1.0)  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ValueError: fg.train.Momentum(...): momentum must be finite and >= 0, got -1.0; ...
    """

    #: The slots of each variable: ``{key: TF name}`` (saved as ``<var>/<TF name>``,
    #: numbered ``_1``, ``_2`` where a variable has several of one name).
    slots: ClassVar[Mapping[str, str]] = {}
    #: Whether this base widens the whole variable and its slots to float32 before
    #: ``_apply_sparse``.  A rule that gathers the touched rows and widens only those
    #: (``_kernels.on_rows``) turns it off, so that a bfloat16 table's step costs its batch.
    _widen_for_sparse: ClassVar[bool] = True
    #: Whether ``_apply_sparse`` takes each slot as the state holds it (with the sign of
    #: ``_layout``) and signs the rows it touches itself: a slot held negated is otherwise
    #: negated whole before the rule and after it, a table's worth of work each step.
    _sparse_takes_held_slots: ClassVar[bool] = False

    def __init__(self, learning_rate: LearningRate, **hyperparameters: Any) -> None:
        name = type(self).__name__
        slots = self.slots
        if not (
            isinstance(slots, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in slots.items())
        ):
            raise TypeError(
                f"fg.train.{name}.slots must map each slot's key to its TensorFlow name, got "
                f"{slots!r}; declare e.g. slots = {{'m': '{name}'}} (a slot 'm' of variable "
                f"W saved as W/{name})."
            )
        _checks.check_rate(f"fg.train.{name}(learning_rate, ...)", learning_rate)
        self._check_hyperparameters(f"fg.train.{name}(...)", hyperparameters)
        self._learning_rate = learning_rate
        #: The optimizer's arguments other than the learning rate, as given.
        self.hyperparameters = hyperparameters

    @property
    def learning_rate(self) -> Any:
        """Not read here: a rule reads the rate of its step, ``step.learning_rate``.

        TensorFlow's ``self._lr_t`` (or a project's ``self.learning_rate``) is a tensor
        of the step; here the rate given (a number ``set_learning_rate`` may change, or
        a schedule) is evaluated for each step and handed to the rules.  Setting it, as
        TensorFlow's ``__init__`` does (``self.learning_rate = learning_rate``), sets the
        rate the optimizer is built with.

        Raises:
          TypeError: always, with the fix.
        """
        raise TypeError(
            f"fg.train.{type(self).__name__}.learning_rate: a rule reads the rate of its "
            "step, step.learning_rate (a schedule evaluated at global_step, or the held rate "
            "that set_learning_rate changes), not self.learning_rate; write step.learning_rate "
            "in _apply_dense / _apply_sparse / _prepare."
        )

    @learning_rate.setter
    def learning_rate(self, value: LearningRate) -> None:
        _checks.check_rate(f"fg.train.{type(self).__name__}.learning_rate = ...", value)
        self._learning_rate = value

    def __getattr__(self, name: str) -> Any:
        """Only for what this base's ``__init__`` sets: say that it was not called."""
        if name in ("_learning_rate", "hyperparameters"):
            raise TypeError(
                f"fg.train.{type(self).__name__}: its __init__ does not call "
                "super().__init__(learning_rate, **hyperparameters), which this base needs "
                "(the learning rate, the checked hyperparameters); call it first in __init__, "
                "as a tf.train.Optimizer subclass calls its base's."
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _check_hyperparameters(self, caller: str, given: Mapping[str, Any]) -> None:
        """Check each hyperparameter against its annotation in ``__init__``, all at once."""
        hints = _annotations(type(self))
        numbers, wrong = {}, []
        for name, value in given.items():
            rule, kinds = _kinds(hints.get(name, Any))
            functions = any(typing.get_origin(k) is Callable for k in kinds)
            if value is None and type(None) in kinds:
                continue
            if bool in kinds and kinds <= {bool, type(None)}:
                if not isinstance(value, bool):
                    wrong.append(f"{name} must be True or False, got {value!r}")
            elif callable(value) and functions:
                hint = "pass a function of the step that returns one floating scalar"
                _checks.check_schedule(caller, name, value, hint)
            elif functions and rule is None:
                wrong.append(f"{name} must be a function of global_step, got {value!r}")
            elif int in kinds and float not in kinds and rule is not None:
                if not _checks.is_integer(value, arrays=False):
                    wrong.append(f"{name} must be an integer, got {value!r}")
                else:
                    numbers[name] = (value, rule)
            elif rule is not None:
                numbers[name] = (value, rule)
        safe = "the original's defaults are a safe start"
        _checks.raise_collected(caller, wrong, f"pass values of these kinds ({safe})", TypeError)
        _checks.check_numbers(caller, numbers, safe)

    def _check_var_list(self, caller: str, name: str, value: Any) -> None:
        """Raise for an option in a form of ``var_list`` that no form takes (one string,
        which would be read letter by letter); the rest is checked against the variables."""
        if isinstance(value, str):
            raise TypeError(
                f"{caller}: {name} is the string {value!r}; pass a list of variable names, "
                f"e.g. [{value!r}], a predicate (name, leaf) -> bool or a boolean mask."
            )

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

    def _apply_sparse_duplicate_indices(
        self, grad: IndexedSlices, var: jax.Array, slots: dict[str, jax.Array], step: TF1Step
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """``_apply_sparse`` on ``grad`` with the values of equal ids summed in its dtype
        (TensorFlow's ``_deduplicate_indexed_slices``); ``grad`` may repeat ids here, and
        the arrays are as stored (``bfloat16`` too)."""
        rows = sum_duplicates(grad)
        summed = IndexedSlices(rows.values, rows.indices, var.shape)
        if self._widen_for_sparse:
            return self._in_float32(self._apply_sparse, summed, var, slots, step)
        result = self._apply_sparse(summed, var, slots, step)
        return self._stored("_apply_sparse", result, var, slots, step)

    def _check_names(self, names: list[str]) -> None:
        """Raise for options that match none of ``names``, the names of every variable of
        the parameters (nothing is checked here); called once per traced step."""
        del names

    def _prepare(self, step: TF1Step) -> dict[str, Any]:
        """The values every variable's rule of ``step`` reads, computed once per step and
        handed to the rules as ``step.prepared`` (none here)."""
        del step
        return {}

    def _finish(self, non_slots: dict[str, jax.Array], step: TF1Step) -> dict[str, jax.Array]:
        """The non-slot values after the step (unchanged here)."""
        del step
        return non_slots

    def _chain(self) -> Chain | None:
        """This class's dense rule as an optax chain, and where its state holds the slots
        and non-slots (none here: the rule is ``_apply_dense``, variable by variable)."""
        return None

    def _var_lists(self) -> dict[str, VarList]:
        """The options given in a form of ``var_list``, by name (none here); each step
        resolves them to the names they select, ``step.selected``."""
        return {}

    def _restore_non_slots(
        self, caller: str, inner: Any, values: dict[str, Any], global_step: int
    ) -> Any:
        """``inner`` with the non-slot values read from a TensorFlow checkpoint set (each
        in the dtype the state holds it); a subclass derives what follows from them."""
        del caller, global_step
        paths = self._layout()[1]
        for name, value in values.items():
            inner = put_path(inner, paths[name], placed_like(value, get_path(inner, paths[name])))
        return inner

    # The machinery.

    def _stepped_by_chain(self) -> bool:
        """Whether the dense step is this class's chain (not its rules, variable by variable)."""
        return _chained(type(self)) and self._chain() is not None

    @functools.cached_property
    def tx(self) -> optax.GradientTransformationExtraArgs:
        """The optimizer as an optax ``GradientTransformation`` (extra argument:
        ``global_step``, at which a schedule is evaluated; its own update count without it)."""
        chain = self._chain() if self._stepped_by_chain() else None
        if chain is None:
            return optax.GradientTransformationExtraArgs(self._init, self._update)
        caller = f"fg.train.{type(self).__name__}(learning_rate, ...)"
        transform = chain.transform
        return inject_learning_rate(
            caller, lambda rate: in_float32(transform(rate)), self._learning_rate
        )

    @property
    def sparse_rule(self) -> Any:  # type: ignore[override]
        """How an ``fg.IndexedSlices`` gradient is applied: ``_apply_sparse``, or (without
        one) the dense rule on the dense gradient."""
        cls = type(self)
        own = (
            cls._apply_sparse is not TF1Optimizer._apply_sparse
            or cls._apply_sparse_duplicate_indices
            is not TF1Optimizer._apply_sparse_duplicate_indices
        )
        return self._sparse_rule if own else None

    def _layout(self) -> tuple[dict[str, tuple[Path, int]], dict[str, Path]]:
        """Where ``inner`` (the state inside the learning rate's) holds each slot tree, with
        its sign, and each non-slot."""
        chain = self._chain() if self._stepped_by_chain() else None
        if chain is not None:
            return dict(chain.slots), dict(chain.non_slots)
        return (
            {k: (("slots", k), 1) for k in self.slots},
            {n: ("non_slots", n) for n in self._non_slots()},
        )

    def _checked_non_slots(self) -> dict[str, float]:
        """``_non_slots()``, each a TF name and a Python number a scalar variable holds."""
        non_slots = self._non_slots()
        hook = f"fg.train.{type(self).__name__}._non_slots()"
        if not isinstance(non_slots, Mapping):
            raise TypeError(
                f"{hook}: it returns {non_slots!r}; return a dict of TF names to initial values, "
                "e.g. {'beta1_power': 0.9}."
            )
        kinds = _checks.not_names_to_numbers(non_slots)
        if kinds:
            raise TypeError(
                f"{hook}: it returns {', '.join(kinds)}; each non-slot is a scalar variable named "
                "by a string, its initial value a Python number (an int makes an int32 "
                "variable, a float a float32 one), e.g. {'beta1_power': 0.9}."
            )
        wide = [
            f"{k!r}: {v}"
            for k, v in non_slots.items()
            if isinstance(v, int) and not -(2**31) <= v < 2**31
        ]
        if wide:
            raise ValueError(
                f"{hook}: it returns {', '.join(wide)}, beyond the int32 an int non-slot is (as "
                "TensorFlow's); start it within int32, or at a float."
            )
        if "global_step" in non_slots:
            raise ValueError(
                f"{hook} names a non-slot 'global_step', the name a TensorFlow checkpoint "
                "gives the step count; name it after what it holds (TensorFlow's optimizers: "
                "'beta1_power', 'iter')."
            )
        return dict(non_slots)

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
          >>> fg.train.AdamOptimizer().tf_names({"W": jnp.ones(2)})
          ([[('m', 'Adam'), ('v', 'Adam')]], ['beta1_power', 'beta2_power'])
        """
        per_var = [[(k, self.slots[k]) for k in self._declared(v)] for v in Flat(params).variables]
        return per_var, list(self._checked_non_slots())

    def tf_slots(self, opt_state: Any) -> dict[str, PyTree]:
        """Each slot tree of ``opt_state`` (this optimizer's state), as TensorFlow holds it.

        Args:
          opt_state: the state this optimizer's ``tx.init`` made (``state.opt_state``).

        Returns:
          ``{slot key: tree}`` in the order of ``slots``, each tree in the parameters'
          structure (``None`` or a zero scalar where a variable has no such slot).

        Example:
          >>> opt = fg.train.RMSPropOptimizer(0.5, momentum=0.5)
          >>> state, _ = opt.minimize(lambda p: p["W"], opt.init({"W": jnp.float32(1.0)}))
          >>> {k: round(float(v["W"]), 4) for k, v in opt.tf_slots(state.opt_state).items()}
          {'rms': 1.0, 'momentum': 0.5}
        """
        inner = opt_state.inner_state
        return {
            k: _signed(get_path(inner, path), sign) for k, (path, sign) in self._layout()[0].items()
        }

    def tf_non_slots(self, opt_state: Any) -> dict[str, jax.Array]:
        """Each non-slot value of ``opt_state`` (this optimizer's state), by TensorFlow name.

        Args:
          opt_state: the state this optimizer's ``tx.init`` made (``state.opt_state``).

        Returns:
          ``{TF name: scalar}``, in the order of ``_non_slots()``.

        Example:
          >>> opt = fg.train.AdamOptimizer(beta1=0.5)
          >>> state, _ = opt.minimize(lambda p: p["W"], opt.init({"W": jnp.float32(1.0)}))
          >>> {k: round(float(v), 6) for k, v in opt.tf_non_slots(state.opt_state).items()}
          {'beta1_power': 0.25, 'beta2_power': 0.998001}
        """
        inner = opt_state.inner_state
        return {n: get_path(inner, path) for n, path in self._layout()[1].items()}

    def with_tf_values(
        self,
        caller: str,
        opt_state: Any,
        slots: Mapping[str, PyTree],
        non_slots: Mapping[str, Any],
        global_step: int,
    ) -> Any:
        """``opt_state`` with slot trees and non-slot values as TensorFlow holds them (read
        from its checkpoint) put in, and what follows from them derived (Adam's step).

        Args:
          caller: the call to name in an error.
          opt_state: this optimizer's state (a template).
          slots: ``{slot key: tree}`` for the slots to set (trees of the state's structure).
          non_slots: ``{TF name: value}`` for the non-slots to set.
          global_step: the checkpoint's ``global_step``.

        Returns:
          The new state.

        Raises:
          ValueError: the non-slot values do not fit this optimizer (Adam's powers of
            other betas).

        Example:
          >>> opt = fg.train.AdamOptimizer(beta1=0.5)
          >>> template = opt.init({"W": jnp.float32(1.0)})
          >>> state = opt.with_tf_values("restore", template.opt_state, {},
          ...     {"beta1_power": 0.125, "beta2_power": 0.999 ** 3}, global_step=2)
          >>> int(state.inner_state[0].step)  # two steps taken: beta1_power is 0.5 ** 3
          2
        """
        inner = opt_state.inner_state
        paths = self._layout()[0]
        for key, tree in slots.items():
            path, sign = paths[key]
            inner = put_path(inner, path, _signed(tree, sign))
        if non_slots:
            inner = self._restore_non_slots(caller, inner, dict(non_slots), global_step)
        return opt_state._replace(inner_state=inner)

    def _declared(self, var: Any) -> tuple[str, ...]:
        if isinstance(var, int | float | complex):  # a Python number is a variable too
            var = jnp.asarray(var)
        keys = tuple(self._slots_of(var))
        unknown = [k for k in keys if k not in self.slots]
        if unknown:
            raise ValueError(
                f"fg.train.{type(self).__name__}._slots_of returns {unknown}, which are not "
                f"keys of its slots {dict(self.slots)}; declare every slot in slots."
            )
        return tuple(k for k in self.slots if k in keys)

    def _selections(self, params: PyTree) -> dict[str, frozenset[str]]:
        """Each ``var_list``-form option resolved to the names of ``params`` it selects."""
        found = {}
        for option, var_list in self._var_lists().items():
            if var_list is None:
                continue
            caller = f"fg.train.{type(self).__name__}(..., {option})"
            names = variable_names(params)
            chosen = _var_list.selection(caller, params, var_list, option)
            if not any(chosen):
                raise ValueError(
                    f"{caller}: {option}={var_list!r} selects none of the variables "
                    f"{names[:8]}{' ...' if len(names) > 8 else ''}; pass {option}=None "
                    "for every variable, or select some by name."
                )
            found[option] = frozenset(n for n, c in zip(names, chosen, strict=True) if c)
        return found

    def _step_options(
        self, caller: str, params: PyTree, opt_state: Any, global_step: jax.Array
    ) -> dict[str, Any]:
        """What a step reads once (the options' names checked against every variable of
        ``params``, the ``var_list``-form options resolved, the learning rate of the step:
        a schedule is called once per step)."""
        del caller
        self._check_names(variable_names(params))
        rate = self._rate(opt_state, global_step)
        return {"selected": self._selections(params), "learning_rate": rate}

    def _init(self, params: PyTree) -> InjectLearningRateState:
        def slot(key: str) -> PyTree:
            def one(var: Any) -> jax.Array:
                var = jnp.asarray(var)
                if key not in self._declared(var):
                    return _placeholder(var)
                return jnp.array(self._slot_initial(key, var), var.dtype)  # a fresh buffer

            return jax.tree.map(one, params)

        non_slots = {k: _non_slot_initial(v) for k, v in self._checked_non_slots().items()}
        inner = TF1OptimizerState({k: slot(k) for k in self.slots}, non_slots)
        rate = self._learning_rate
        held = None if callable(rate) else jnp.array(rate, jnp.float32)
        return InjectLearningRateState(held, jnp.zeros([], jnp.int32), inner)

    def _rate(self, state: InjectLearningRateState, global_step: jax.Array) -> jax.Array:
        if state.learning_rate is not None:
            return jnp.asarray(state.learning_rate, jnp.float32)
        return jnp.asarray(self._learning_rate(global_step), jnp.float32)  # type: ignore[operator]

    def _prepared(
        self,
        rate: jax.Array,
        global_step: jax.Array,
        non_slots: Mapping[str, jax.Array],
        selected: Mapping[str, frozenset[str]],
    ) -> TF1Step:
        """The step before any variable (``name`` ``""``), with ``_prepare``'s values."""
        step = TF1Step(rate, global_step, "", _ReadOnly(non_slots, "non_slots"), selected=selected)
        return dataclasses.replace(step, prepared=_ReadOnly(self._prepare(step), "prepared"))

    def _update(
        self,
        updates: PyTree,
        state: InjectLearningRateState,
        params: PyTree = None,
        global_step: jax.Array | None = None,
        step_options: Mapping[str, Any] | None = None,  # what _step_options returns
        **extra_args: Any,
    ) -> tuple[PyTree, InjectLearningRateState]:
        del extra_args
        if params is None and jax.tree.leaves(updates):  # None alone: no variable to step
            raise ValueError(
                f"fg.train.{type(self).__name__}.tx: update needs params (the rules read "
                "the variables); call tx.update(updates, state, params)."
            )
        count = cast(jax.Array, state.step)  # always kept: a rule may read the step
        step_count = count if global_step is None else jnp.asarray(global_step, jnp.int32)
        if step_options is None:  # a plain optax loop: params are every variable
            caller = f"fg.train.{type(self).__name__}.tx"
            step_options = self._step_options(caller, params, state, step_count)
        rate = step_options["learning_rate"]
        inner: TF1OptimizerState = state.inner_state
        names = variable_names(params)
        grads, treedef = jax.tree.flatten(updates)
        variables = jax.tree.leaves(params)
        slot_leaves = {k: treedef.flatten_up_to(t) for k, t in inner.slots.items()}  # type: ignore[attr-defined]
        new_vars, new_slots = [], {k: list(v) for k, v in slot_leaves.items()}
        prepared = self._prepared(rate, step_count, inner.non_slots, step_options["selected"])
        for i, (g, v, name) in enumerate(zip(grads, variables, names, strict=True)):
            keys = self._declared(v)
            mine = {k: slot_leaves[k][i] for k in keys}
            step = dataclasses.replace(prepared, name=name)
            new_v, out = self._in_float32(self._apply_dense, g, v, mine, step)
            new_vars.append(new_v)
            for k in keys:
                new_slots[k][i] = out[k]
        non_slots = self._finished(self._finish(dict(inner.non_slots), prepared), inner.non_slots)
        deltas = [n - v for n, v in zip(new_vars, variables, strict=True)]
        slots = {k: jax.tree.unflatten(treedef, v) for k, v in new_slots.items()}
        new_state = InjectLearningRateState(
            state.learning_rate,
            optax.safe_increment(count),
            TF1OptimizerState(slots, non_slots),
        )
        return jax.tree.unflatten(treedef, deltas), new_state

    def _finished(self, new: Any, old: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """``_finish``'s new non-slot values, checked: every one, a scalar, in its dtype."""
        hook = f"fg.train.{type(self).__name__}._finish"
        if not isinstance(new, Mapping):
            raise TypeError(
                f"{hook}: it returns {_describe(new)}; return the dict of every non-slot's new "
                f"value, {sorted(old)}."
            )
        missing, extra = sorted(set(old) - set(new)), sorted(set(new) - set(old))
        shaped = [
            f"{k!r} of shape {jnp.shape(new[k])}" for k in old if k in new and jnp.shape(new[k])
        ]
        problems = [f"no value for the non-slots {missing}"] * bool(missing)
        problems += [f"values for {extra}, which _non_slots() does not declare"] * bool(extra)
        problems += [f"{', '.join(shaped)}, where a non-slot is a scalar"] * bool(shaped)
        if problems:
            raise ValueError(
                f"{hook}: it returns {'; '.join(problems)}; return every non-slot's new scalar "
                "value, changed or not."
            )
        return {k: jnp.asarray(new[k]).astype(v.dtype) for k, v in old.items()}

    def _in_float32(
        self, rule: Any, grad: Any, var: jax.Array, slots: dict[str, jax.Array], step: TF1Step
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """``rule`` computed in float32 or wider, its results in the given dtypes."""
        var = jnp.asarray(var)  # a Python float is a variable too
        wide_var = widen(var)
        if isinstance(grad, IndexedSlices):
            grad = IndexedSlices(widen(grad.values), grad.indices, grad.dense_shape)
        else:
            grad = widen(grad).astype(wide_var.dtype)
        result = rule(grad, wide_var, {k: widen(s) for k, s in slots.items()}, step)
        return self._stored(rule.__name__, result, var, slots, step)

    def _stored(
        self, hook: str, result: Any, var: jax.Array, slots: dict[str, jax.Array], step: TF1Step
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """A rule's ``(new_var, new_slots)``, checked — a pair, every slot, each of its
        shape — and in the dtypes of ``var`` and its ``slots``."""
        caller = f"fg.train.{type(self).__name__}.{hook}"
        fix = f"return (new_var, new_slots): the new {step.name!r} and a dict of its slots"
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], Mapping)):
            raise TypeError(
                f"{caller}: it returns {_describe(result)} for {step.name!r}; {fix} "
                f"{sorted(slots)}."
            )
        new_var, new_slots = result
        missing, extra = sorted(set(slots) - set(new_slots)), sorted(set(new_slots) - set(slots))
        wrong = [
            f"{what} of shape {jnp.shape(new)} for {old_shape}"
            for what, new, old_shape in [
                (f"the variable {step.name!r}", new_var, jnp.shape(var)),
                *[
                    (f"the slot {k!r}", new_slots[k], jnp.shape(s))
                    for k, s in slots.items()
                    if k in new_slots
                ],
            ]
            if jnp.shape(new) != old_shape
        ]
        problems = [f"no new value for the slots {missing} of {step.name!r}"] * bool(missing)
        problems += [f"slots {extra} that {step.name!r} does not have"] * bool(extra)
        problems += wrong
        if problems:
            raise ValueError(
                f"{caller}: it returns {'; '.join(problems)}; return the variable and every one "
                "of its slots, changed or not, each of its shape."
            )
        out = {k: jnp.asarray(new_slots[k]).astype(s.dtype) for k, s in slots.items()}
        return jnp.asarray(new_var).astype(var.dtype), out

    def _sparse_rule(
        self, opt_state: InjectLearningRateState, global_step: jax.Array, step_options: Any
    ) -> LeafRule:
        """The :data:`~funcgrad.train._sparse.SparseRule` that calls
        ``_apply_sparse_duplicate_indices`` with each variable's slots by key."""
        non_slots = self.tf_non_slots(opt_state)
        rate = step_options["learning_rate"]
        prepared = self._prepared(rate, global_step, non_slots, step_options["selected"])
        layout = self._layout()[0]
        order = _flatten_order(opt_state.inner_state, layout)
        rule = self._apply_sparse_duplicate_indices

        def leaf(
            var: jax.Array, slots: list[jax.Array], slices: IndexedSlices, name: str
        ) -> list[jax.Array]:
            keys = self._declared(var)
            by_key = dict(zip(order, slots, strict=True))
            signs = {k: 1 if self._sparse_takes_held_slots else layout[k][1] for k in keys}
            mine = {k: _signed(by_key[k], signs[k]) for k in keys}
            step = dataclasses.replace(prepared, name=name)
            new_var, out = self._stored(
                rule.__name__, rule(slices, var, mine, step), var, mine, step
            )
            signed = {k: _signed(v, signs[k]) for k, v in out.items()}
            return [new_var, *(signed.get(k, by_key[k]) for k in order)]

        return leaf

    def _call_options(self) -> tuple[str, ...]:
        """The keywords ``minimize`` / ``apply_gradients`` take for this optimizer: the
        options of ``_var_lists`` (TensorFlow's call-site ``decay_var_list``)."""
        return tuple(self._var_lists())

    def _with_call_options(self, **options: Any) -> TF1Optimizer:
        """A copy of this optimizer with call-site options as constructor options: the
        copy is configuration of its own, so no call changes this optimizer."""
        caller = f"fg.train.{type(self).__name__}.minimize(..., {', '.join(options)})"
        for name, value in options.items():
            self._check_var_list(caller, name, value)
        new = copy.copy(self)
        new.__dict__.pop("tx", None)  # built anew, for the copy
        for name, value in options.items():
            setattr(new, "_" + name, value)
        return new


def _signed(tree: PyTree, sign: int) -> PyTree:
    """``tree`` as held with ``sign`` (negated for -1; itself for 1)."""
    return tree if sign == 1 else jax.tree.map(jnp.negative, tree)


def _flatten_order(inner: Any, layout: Mapping[str, tuple[Path, int]]) -> list[str]:
    """The slot keys in the order their trees' leaves come in ``inner``'s flatten order."""
    paths = [p for p, _ in jax.tree_util.tree_flatten_with_path(inner)[0]]
    first = {
        k: next(i for i, p in enumerate(paths) if _starts_with(p, path))
        for k, (path, _) in layout.items()
        if any(_starts_with(p, path) for p in paths)
    }
    return sorted(first, key=first.__getitem__)


def _starts_with(keys: tuple[Any, ...], path: Path) -> bool:
    """Whether the key path ``keys`` (``jax.tree_util``'s) begins with ``path``."""
    if len(keys) < len(path):
        return False
    for key, step in zip(keys, path, strict=False):
        name = getattr(key, "idx", getattr(key, "name", getattr(key, "key", None)))
        if name != step:
            return False
    return True
