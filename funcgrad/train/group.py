"""``OptimizerGroup``: several optimizers over one set of variables, in one ``TrainState``.

A TensorFlow 1.x GAN builds two optimizers over the variables of one graph — the
discriminator's over ``d_vars``, the generator's over ``g_vars`` — and an actor-critic
builds a policy optimizer and a value optimizer whose variable lists share a trunk.
Each TF optimizer keeps its own slot variables (Adam's ``W/Adam``, ``W/Adam_1``) for the
variables of its ``var_list``; the variables themselves, and ``global_step``, are shared,
so a step of one optimizer sees every change the other made.

Here that is one ``TrainState``: the shared ``params``, one ``global_step``, and as
``opt_state`` a dict holding each optimizer's slots under its name in the group.
``group["D"]`` is an :class:`~funcgrad.train.Optimizer` that finds its slots under
``"D"``; a step of it changes only the variables of its ``var_list``, its own slots and
``global_step``.

``tf.estimator``'s wide & deep model trains otherwise: one train op,
``tf.group(dnn_opt.minimize(loss, var_list=dnn_vars), linear_opt.minimize(loss,
var_list=linear_vars))``, whose two minimizes differentiate one loss at the same
values and whose ``global_step`` advances once.  ``group.minimize`` (and
``group.compute_gradients`` / ``group.apply_gradients``) is that step: an
:class:`~funcgrad.train.Optimizer` over every member's variables (:class:`_All`) whose
apply hands each variable's gradient to the member that trains it.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp

from funcgrad import _checks
from funcgrad._types import PyTree
from funcgrad.train import _habits
from funcgrad.train._var_list import VarList
from funcgrad.train._variables import Flat
from funcgrad.train.names import variable_names
from funcgrad.train.optimizer import GradsAndVars
from funcgrad.train.optimizer import Optimizer
from funcgrad.train.state import TrainState

__all__ = ["OptimizerGroup"]


class _Member(Optimizer):
    """One optimizer of an :class:`OptimizerGroup`: its slots are ``opt_state[name]``.

    ``optimizer`` is the optimizer it was built from (its kind names its slots in a
    TensorFlow checkpoint).
    """

    def __init__(
        self, group: OptimizerGroup, name: str, optimizer: Optimizer, var_list: VarList
    ) -> None:
        super().__init__(optimizer.tx)
        self.sparse_rule = optimizer.sparse_rule
        self.group = group
        self.name = name
        self.optimizer = optimizer
        self.var_list = var_list

    def _caller(self, method: str) -> str:
        return f"fg.train.OptimizerGroup[{self.name!r}].{method}"

    def _slots(self, caller: str, state: TrainState) -> Any:
        opt_state = state.opt_state
        if not (isinstance(opt_state, dict) and self.name in opt_state):
            raise ValueError(
                f"{caller}: state.opt_state holds no slots for {self.name!r}, so this state "
                f"was not made by the group of {list(self.group)}; make the shared state "
                "with state = group.init(params)."
            )
        return opt_state[self.name]

    def _with_slots(self, state: TrainState, slots: Any) -> Any:
        return {**state.opt_state, self.name: slots}

    def _step_options(self, caller: str, params: PyTree, opt_state: Any, global_step: Any) -> Any:
        return self.optimizer._step_options(caller, params, opt_state, global_step)

    def _call_options(self) -> tuple[str, ...]:
        return self.optimizer._call_options()

    def _with_call_options(self, **options: Any) -> Optimizer:
        configured = self.optimizer._with_call_options(**options)
        return _Member(self.group, self.name, configured, self.var_list)

    def init_slots(self, flat: Flat) -> Any:
        """Fresh slots for the variables of this optimizer's ``var_list``."""
        trained = self._trained(self._caller("init(params)"), flat.params)
        return self.tx.init(flat.with_holes(trained))

    def init(self, params: PyTree) -> TrainState:
        """The group's shared state: ``group.init(params)``.

        Args:
          params: the parameters.

        Returns:
          ``TrainState`` with every optimizer's slots of the group.

        Example:
          >>> group = fg.train.OptimizerGroup(a=fg.train.GradientDescentOptimizer(0.1))
          >>> sorted(group["a"].init({"w": jnp.zeros(2)}).opt_state)
          ['a']
        """
        return self.group.init(params)


class _All(Optimizer):
    """Every member of an :class:`OptimizerGroup` as one optimizer: TensorFlow's one
    train op of several ``minimize`` calls.  It differentiates the variables of every
    member's ``var_list`` at once; its apply gives each member the gradients of its
    variables (each from the same values) and advances ``global_step`` once."""

    def __init__(self, group: OptimizerGroup) -> None:
        self.group = group

    def _caller(self, method: str) -> str:
        return f"fg.train.OptimizerGroup.{method}"

    def _call_options(self) -> tuple[str, ...]:
        members = self.group._members.values()
        return tuple(dict.fromkeys(o for m in members for o in m._call_options()))

    def _with_call_options(self, **options: Any) -> Optimizer:
        """Refused: an option belongs to the member it configures."""
        takers = [
            f"{n!r} ({type(m.optimizer).__name__})"
            for n, m in self.group._members.items()
            if set(options) & set(m._call_options())
        ]
        given = ", ".join(f"{k}=" for k in options)
        raise TypeError(
            f"fg.train.OptimizerGroup: {given} configures a member's optimizer, here "
            f"{', '.join(takers)}, not the group's one step; give it to that optimizer when "
            "you build it (AdamWOptimizer(..., decay_var_list=[...])), or step the member "
            f"alone: group[name].minimize(loss_fn, state, {given}...)."
        )

    def _trained(self, caller: str, params: PyTree) -> list[bool]:
        masks = [m._trained(caller, params) for m in self.group._members.values()]
        return [any(t) for t in zip(*masks, strict=True)]

    def _apply(self, caller: str, call: str, grads: list[Any], state: TrainState) -> TrainState:
        names = variable_names(state.params)
        pairs = zip(names, grads, self._trained(caller, state.params), strict=True)
        _checks.raise_collected(
            caller,
            [
                f"a gradient for {n!r}, which no optimizer of the group trains"
                for n, g, t in pairs
                if g is not None and not t
            ],
            "drop those pairs, or add the variables to a var_list in the group",
        )
        step = state.global_step
        owns = {}
        for member in self.group._members.values():
            mine = member._trained(caller, state.params)
            owns[member.name] = [g if t else None for g, t in zip(grads, mine, strict=True)]
        empty = [n for n, own in owns.items() if all(g is None for g in own)]
        if empty:
            raise ValueError(
                f"{caller}: no gradient reaches a variable of {empty} (var_list leaves it "
                "none, or the loss does not depend on them: TensorFlow's 'No gradients "
                "provided' of that member's minimize), and the group's step applies every "
                "member; select some of each member's variables, or step the others alone: "
                f"group[{next(n for n in owns if n not in empty)!r}].minimize(loss_fn, state)."
            )
        for member in self.group._members.values():
            own = owns[member.name]
            state = member._apply(f"{caller} ({member.name!r})", call, own, state)
            state = state._replace(global_step=step)  # each member reads the step before it
        return state._replace(global_step=step + 1)


class OptimizerGroup(Mapping[str, Optimizer]):
    """Several optimizers over one set of variables, sharing one ``TrainState``.

    TensorFlow 1.x's way to train a GAN or an actor-critic: every optimizer has its
    own ``var_list`` and its own slots, the variables and ``global_step`` are shared.
    ``group.init(params)`` makes the one state; ``group[name]`` is that optimizer, with
    ``compute_gradients``, ``apply_gradients`` and ``minimize`` as any
    :class:`~funcgrad.train.Optimizer`.  A step of ``group[name]``:

    * trains the variables of its ``var_list`` (the default of every call; a call may
      pass a ``var_list`` that selects among them), and leaves every other variable as
      it is — a step of another optimizer sees the values this one left;
    * updates its own slots only (``state.opt_state[name]``): Adam's moments and step
      count are per optimizer, as ``W/Adam`` and ``W/Adam_1`` are in TensorFlow;
    * adds one to the shared ``global_step``, as TensorFlow's ``minimize(...,
      global_step=gs)`` does; a learning-rate schedule reads that shared step.  A GAN
      that steps D and G once each per iteration counts two steps per iteration.

    Args:
      **optimizers: ``name=optimizer`` (trains every variable) or
        ``name=(optimizer, var_list)``; ``var_list`` takes every form that
        ``compute_gradients`` takes (a list of names, a predicate, a mask).

    Raises:
      TypeError: an entry is not an ``fg.train`` optimizer, or a pair of one and a
        ``var_list``.
      ValueError: no optimizer is given.

    Example:
      >>> params = {"D": jnp.float32(1.0), "G": jnp.float32(2.0)}
      >>> group = fg.train.OptimizerGroup(
      ...     D=(fg.train.GradientDescentOptimizer(0.5), ["D"]),
      ...     G=(fg.train.AdamOptimizer(0.1), ["G"]))
      >>> state = group.init(params)
      >>> state, loss = group["D"].minimize(lambda p: p["D"] * p["G"], state)
      >>> float(state.params["D"]), float(state.params["G"]), int(state.global_step)
      (0.0, 2.0, 1)
    """

    def __init__(self, **optimizers: Optimizer | tuple[Optimizer, VarList]) -> None:
        caller = "fg.train.OptimizerGroup(**optimizers)"
        if not optimizers:
            raise ValueError(
                f"{caller}: no optimizer given; name each with its var_list, e.g. "
                "OptimizerGroup(D=(d_opt, d_vars), G=(g_opt, g_vars))."
            )
        members: dict[str, _Member] = {}
        problems: list[str] = []
        for name, entry in optimizers.items():
            opt, var_list = entry if isinstance(entry, tuple) and len(entry) == 2 else (entry, None)
            if isinstance(opt, Optimizer) and hasattr(opt, "tx"):  # not a LossScaleOptimizer
                members[name] = _Member(self, name, opt, var_list)
            elif isinstance(opt, Optimizer):
                problems.append(
                    f"{name}= is {type(opt).__name__}, which wraps an optimizer: put the "
                    "optimizer it wraps in the group (its docs say how it goes with a group)"
                )
            else:
                problems.append(f"{name}= is {type(entry).__name__}")
        _checks.raise_collected(
            caller,
            problems,
            "pass an fg.train optimizer or a pair (optimizer, var_list) for each name, "
            "e.g. D=(fg.train.AdamOptimizer(2e-4), d_vars); wrap an optax transformation "
            "as fg.train.Optimizer(tx)",
            TypeError,
        )
        self._members = members
        self._all = _All(self)

    def __getitem__(self, name: str) -> Optimizer:
        if name not in self._members:
            raise KeyError(
                f"fg.train.OptimizerGroup[name]: no optimizer named {name!r}"
                f"{_checks.did_you_mean(name, self._members)}; the group has "
                f"{list(self._members)}."
            )
        return self._members[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def init(self, params: PyTree) -> TrainState:
        """The shared state: ``params``, every optimizer's slots, ``global_step=0``.

        Each optimizer's slots cover the variables of its ``var_list`` only (``None``
        elsewhere in the parameters' structure), as TensorFlow makes slots for the
        variables an optimizer is given.

        Args:
          params: the parameters, any pytree (as ``Optimizer.init`` takes).

        Returns:
          ``TrainState(params, {name: slots, ...}, int32 0)``.

        Raises:
          TypeError: ``params`` is a ``TrainState``.
          ValueError: an optimizer's ``var_list`` names an unknown variable or selects
            none (the message names the optimizer).

        Example:
          >>> group = fg.train.OptimizerGroup(
          ...     a=(fg.train.MomentumOptimizer(0.1, 0.9), ["x"]),
          ...     b=fg.train.GradientDescentOptimizer(0.1))
          >>> state = group.init({"x": jnp.zeros(2), "y": jnp.zeros(3)})
          >>> sorted(state.opt_state), int(state.global_step)
          (['a', 'b'], 0)
        """
        caller = "fg.train.OptimizerGroup.init(params)"
        _habits.check_params(caller, params, "state = group.init(state.params)")
        flat = Flat(params)
        slots = {name: m.init_slots(flat) for name, m in self._members.items()}
        return TrainState(params, slots, jnp.zeros([], jnp.int32))

    def compute_gradients(
        self, loss_fn: Callable[..., Any], params: PyTree, /, *args: Any, **options: Any
    ) -> GradsAndVars | tuple[GradsAndVars, Any]:
        """The ``(gradient, variable)`` pairs of every member's variables, from one
        differentiation of ``loss_fn`` (as ``Optimizer.compute_gradients``, with every
        member's ``var_list`` as the default).

        Args:
          loss_fn: ``loss_fn(params, *args, **kwargs)`` returns the loss.
          params: the parameters (``state.params``).
          *args: further arguments of ``loss_fn`` (the batch).
          **options: ``var_list``, ``grad_loss``, ``has_aux`` and ``loss_fn``'s keyword
            arguments, as ``Optimizer.compute_gradients`` takes them.

        Returns:
          A list of ``(gradient, variable)`` pairs; with ``has_aux``, ``(pairs, aux)``.

        Raises:
          ValueError: as ``Optimizer.compute_gradients``.

        Example:
          >>> group = fg.train.OptimizerGroup(
          ...     a=(fg.train.GradientDescentOptimizer(0.1), ["x"]),
          ...     b=(fg.train.AdagradOptimizer(0.1), ["y"]))
          >>> params = {"x": jnp.float32(1.0), "y": jnp.float32(2.0), "z": jnp.float32(3.0)}
          >>> [None if g is None else float(g)
          ...  for g, _ in group.compute_gradients(lambda p: p["x"] * p["y"] * p["z"], params)]
          [6.0, 3.0, None]
        """
        return self._all.compute_gradients(loss_fn, params, *args, **options)

    def apply_gradients(
        self, grads_and_vars: Iterable[tuple[Any, Any]], state: TrainState = _habits.NO_STATE, /
    ) -> TrainState:
        """TensorFlow's one train op of every member: each pair goes to the member whose
        ``var_list`` holds its variable, every member applies its gradients (all
        computed at the same values), and ``global_step`` advances once.

        A variable in the ``var_list`` of two members gets both updates, in the group's
        order (TensorFlow runs the two ops in no fixed order).  Each member reads
        ``global_step`` as it was before the step.

        Args:
          grads_and_vars: ``(gradient, variable)`` pairs, as
            :meth:`compute_gradients` returns them, or any subset of them.
          state: the group's ``TrainState`` (``group.init(params)``).

        Returns:
          The new ``TrainState``.

        Raises:
          TypeError: as ``Optimizer.apply_gradients``.
          ValueError: as ``Optimizer.apply_gradients``; a gradient of a variable no
            member trains; a member given no gradient (TensorFlow's "No gradients
            provided for any variable" of its ``minimize``).

        Example:
          >>> group = fg.train.OptimizerGroup(
          ...     a=(fg.train.GradientDescentOptimizer(0.5), ["x"]),
          ...     b=(fg.train.GradientDescentOptimizer(0.25), ["y"]))
          >>> state = group.init({"x": jnp.float32(1.0), "y": jnp.float32(2.0)})
          >>> gvs = group.compute_gradients(lambda p: p["x"] * p["y"], state.params)
          >>> state = group.apply_gradients(gvs, state)
          >>> float(state.params["x"]), float(state.params["y"]), int(state.global_step)
          (0.0, 1.75, 1)
        """
        return self._all.apply_gradients(grads_and_vars, state)

    def minimize(
        self, loss_fn: Callable[..., Any], state: TrainState, /, *args: Any, **options: Any
    ) -> tuple[TrainState, Any]:
        """One step of every member on one loss: TensorFlow's ``tf.group(a.minimize(loss,
        var_list=a_vars), b.minimize(loss, var_list=b_vars))`` with ``global_step``
        given to one of them (``tf.estimator``'s ``DNNLinearCombinedClassifier``).

        The loss is differentiated once, at the values before the step, for every
        member's variables; then :meth:`apply_gradients`.  Stepping ``group[name]``
        one after the other instead (a GAN's two losses) differentiates the second
        loss at the values the first step left, and counts a step for each.

        Args:
          loss_fn: ``loss_fn(params, *args, **kwargs)`` returns the loss.
          state: the group's ``TrainState``.
          *args: further arguments of ``loss_fn`` (the batch).
          **options: ``var_list``, ``grad_loss``, ``has_aux`` and ``loss_fn``'s keyword
            arguments, as ``Optimizer.minimize`` takes them.

        Returns:
          ``(new_state, loss)`` (``(new_state, (loss, aux))`` with ``has_aux``): the loss
          before the step.

        Raises:
          TypeError: as ``Optimizer.minimize``.
          ValueError: as ``Optimizer.minimize`` and :meth:`apply_gradients`.

        Example:
          >>> group = fg.train.OptimizerGroup(
          ...     linear=(fg.train.FtrlOptimizer(0.1), ["linear"]),
          ...     dnn=(fg.train.AdagradOptimizer(0.1), ["dnn"]))
          >>> state = group.init({"linear": jnp.ones(2), "dnn": jnp.ones(2)})
          >>> state, loss = group.minimize(lambda p: jnp.sum(p["linear"] * p["dnn"]), state)
          >>> float(loss), int(state.global_step)
          (2.0, 1)
        """
        return self._all.minimize(loss_fn, state, *args, **options)
