"""``Optimizer``: TensorFlow 1.x's ``compute_gradients`` / ``apply_gradients`` /
``minimize`` over any optax ``GradientTransformation``, on an explicit ``TrainState``.

How a loss function is called and differentiated is ``funcgrad.train._loss_and_grads``;
which variable each pair of ``apply_gradients`` belongs to is ``funcgrad.train._pairs``;
which leaves are variables is ``funcgrad.train._variables``; the errors that TF1 and
optax habits get are ``funcgrad.train._habits``.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from funcgrad._core import sparse_reads
from funcgrad._types import GradsAndVars
from funcgrad._types import PyTree
from funcgrad.indexed_slices import IndexedSlices
from funcgrad.train import _habits
from funcgrad.train import _pairs
from funcgrad.train import _sparse
from funcgrad.train import _var_list
from funcgrad.train._loss_and_grads import LossCall
from funcgrad.train._loss_and_grads import value_and_grads
from funcgrad.train._var_list import VarList
from funcgrad.train._variables import Flat
from funcgrad.train.names import variable_names
from funcgrad.train.state import TrainState

__all__ = ["GradsAndVars", "Optimizer"]


class Optimizer:
    """TensorFlow 1.x's ``tf.train.Optimizer`` interface over an optax transformation.

    The optimizer is static configuration (safe to close over in ``jax.jit``); the
    values live in a :class:`~funcgrad.train.TrainState`.  Differences from
    TensorFlow: no graph or session — ``loss_fn(params, *args)`` is a function and
    every method returns new values; ``global_step`` is always kept, in the state.

    Args:
      tx: any ``optax.GradientTransformation``.  ``apply_gradients`` passes it the
        extra argument ``global_step`` (ignored unless it takes extra arguments).

    Attributes:
      tx: the transformation.
      var_list: the variables a call trains when it passes no ``var_list``: ``None``
        (every variable) — or, for an optimizer of an
        :class:`~funcgrad.train.OptimizerGroup`, the ``var_list`` it was given there.
      sparse_rule: how an ``fg.IndexedSlices`` gradient is applied.  ``None`` here: it
        is made dense (``g.to_dense()``) and ``tx`` sees an ordinary gradient, whatever
        ``tx`` wraps.  The TF1 optimizers (``MomentumOptimizer``, ...) set their
        TensorFlow sparse rule, which updates only the touched rows.

    Raises:
      TypeError: ``tx`` has no ``init`` and ``update``.

    Example:
      >>> opt = fg.train.Optimizer(optax.sgd(0.1))
      >>> state = opt.init({"w": jnp.float32(1.0)})
      >>> state, loss = opt.minimize(lambda p: p["w"] ** 2, state)
      >>> float(loss), round(float(state.params["w"]), 4), int(state.global_step)
      (1.0, 0.8, 1)
    """

    var_list: VarList = None
    sparse_rule: _sparse.SparseRule | None = None

    def __init__(self, tx: optax.GradientTransformation) -> None:
        if not (callable(getattr(tx, "init", None)) and callable(getattr(tx, "update", None))):
            raise TypeError(
                f"fg.train.Optimizer(tx): tx must be an optax GradientTransformation (with "
                f"init and update), got {type(tx).__name__}; e.g. Optimizer(optax.sgd(0.1))."
            )
        self.tx = tx

    def _caller(self, method: str) -> str:
        return f"fg.train.{type(self).__name__}.{method}"

    def _slots(self, caller: str, state: TrainState) -> Any:
        """This optimizer's slots in ``state`` (the whole ``opt_state`` here)."""
        del caller
        return state.opt_state

    def _with_slots(self, state: TrainState, slots: Any) -> Any:
        """``state.opt_state`` with this optimizer's slots replaced by ``slots``."""
        del state
        return slots

    def _trained(self, caller: str, params: PyTree) -> list[bool]:
        """Per variable, whether this optimizer has slots for it (``self.var_list``)."""
        return _var_list.select(caller, params, self.var_list)

    def init(self, params: PyTree) -> TrainState:
        """A fresh ``TrainState``: ``params``, the optimizer's slots, ``global_step=0``.

        Args:
          params: the parameters, any pytree: a dict of arrays, a flax ``nnx.State``,
            an equinox module as it is.  Leaves that are not variables (functions,
            integers, booleans) get no slots and are never changed.

        Returns:
          ``TrainState(params, tx.init(variables), int32 0)``: the slots of the
          variables ``var_list`` selects, in ``params``' structure with ``None`` where a
          leaf has no slots.

        Raises:
          TypeError: ``params`` is a ``TrainState``.
          ValueError: ``params`` holds no variable.

        Example:
          >>> state = fg.train.AdamOptimizer().init({"w": jnp.zeros(3)})
          >>> int(state.global_step)
          0
        """
        caller = self._caller("init(params)")
        _habits.check_params(caller, params, "state = opt.init(state.params)")
        flat, trained = Flat(params), self._trained(caller, params)
        slots = self.tx.init(flat.with_holes(trained))
        self._remember_structure(_structure_key(flat, trained), jax.tree.structure(slots))
        return TrainState(params, slots, jnp.zeros([], jnp.int32))

    def _init_structure(self, flat: Flat, trained: list[bool]) -> Any:
        """The tree structure of ``tx.init`` over the ``trained`` variables of ``flat``.

        ``init`` records it, and so does the first call for other variables (by their
        pytree structure, shapes and dtypes): a step traced after ``init`` finds its
        state's expected structure without tracing ``tx.init`` again.
        """
        key = _structure_key(flat, trained)
        found = self.__dict__.get("_structures", {}).get(key)
        if found is None:
            found = jax.tree.structure(jax.eval_shape(self.tx.init, flat.with_holes(trained)))
            self._remember_structure(key, found)
        return found

    def _remember_structure(self, key: Any, structure: Any) -> None:
        """Keep ``structure`` under ``key`` (on the instance: not every subclass calls
        ``Optimizer.__init__``), forgetting the oldest beyond ``_KNOWN_STRUCTURES``."""
        known: dict[Any, Any] = self.__dict__.setdefault("_structures", {})
        if len(known) >= _KNOWN_STRUCTURES:
            known.pop(next(iter(known)))
        known[key] = structure

    def _selected(self, caller: str, params: PyTree, var_list: VarList) -> list[bool]:
        """Per variable, whether a call with ``var_list`` differentiates it."""
        if var_list is None:
            return self._trained(caller, params)
        selected = _var_list.select(caller, params, var_list)
        trained = self._trained(caller, params) if self.var_list is not None else selected
        outside = _var_list.outside(params, selected, trained)
        if outside:
            raise ValueError(
                f"{caller}: var_list selects {outside}, which this optimizer holds no slots "
                "for (its var_list in the OptimizerGroup leaves them out); select among "
                "its variables, or add them to its var_list in the group."
            )
        return selected

    def compute_gradients(
        self,
        loss_fn: Callable[..., Any],
        params: PyTree,
        /,
        *args: Any,
        var_list: VarList = None,
        grad_loss: Any = None,
        has_aux: bool = False,
        **kwargs: Any,
    ) -> GradsAndVars | tuple[GradsAndVars, Any]:
        """The ``(gradient, variable)`` pairs of ``loss_fn(params, *args, **kwargs)``.

        One pair per variable of ``params`` in ``jax.tree_util`` flatten order (the
        order of :func:`~funcgrad.train.variable_names`); the variable is that leaf's
        value, the very object in ``params``.  Each pair is a tuple that also carries
        its variable's name as pytree metadata (kept by ``jax.jit`` and
        ``jax.tree.map``), which is how ``apply_gradients`` finds it again in any
        order.  The gradient is ``None`` for a variable the loss does not depend on
        (as ``fg.gradients`` decides) or that ``var_list`` leaves out; left-out
        variables and leaves that are not variables are not differentiated at all.
        A non-scalar loss is differentiated as its sum, as ``tf.gradients`` does.
        A variable the loss reads only through gathers of whole rows (an embedding
        table) gets an ``fg.IndexedSlices``, where ``tf.gradients`` gives one.

        ``loss_fn`` and ``params`` are positional-only, so a keyword argument of
        either name goes to ``loss_fn`` like any other.

        Args:
          loss_fn: ``loss_fn(params, *args, **kwargs)`` returns the loss (or
            ``(loss, aux)`` with ``has_aux``).
          params: the parameters (``state.params``), any pytree.
          *args: further arguments of ``loss_fn`` (the batch), not differentiated.
          var_list: which variables to differentiate: ``None`` (all), a list of
            variable names, a predicate ``(name, leaf) -> bool`` or a boolean pytree
            mask.
          grad_loss: TensorFlow's ``grad_loss``: the cotangent of the loss, of its
            shape and dtype; ``None`` means ones.
          has_aux: ``loss_fn`` returns ``(loss, aux)``, as with ``jax.value_and_grad``;
            only ``loss`` is differentiated, and ``aux`` is returned.
          **kwargs: keyword arguments of ``loss_fn`` (``train=True``, a dropout key).

        Returns:
          A list of ``(gradient, variable)`` pairs; with ``has_aux``, ``(pairs, aux)``.

        Raises:
          ValueError: ``var_list`` names an unknown variable (the message lists the
            valid names) or selects no variable; ``loss_fn`` returns a tuple, list or
            dict without ``has_aux=True``; ``grad_loss`` does not match the loss; a
            gathered id lies outside its table (checked outside ``jax.jit``).
          TypeError: ``params`` is a ``TrainState``; a TensorFlow-only keyword such as
            ``global_step=`` that ``loss_fn`` does not take.

        Example:
          >>> opt = fg.train.GradientDescentOptimizer(0.1)
          >>> params = {"a": jnp.float32(3.0), "b": jnp.float32(4.0)}
          >>> opt.compute_gradients(lambda p, x: p["a"] * x, params, jnp.float32(2.0))
          [(Array(2., dtype=float32), Array(3., dtype=float32)), (None, Array(4., dtype=float32))]
          >>> gvs, aux = opt.compute_gradients(
          ...     lambda p: (p["a"] ** 2, {"b": p["b"]}), params, has_aux=True)
          >>> float(gvs[0][0]), aux
          (6.0, {'b': Array(4., dtype=float32)})
        """
        caller = self._caller("compute_gradients(loss_fn, params, *args)")
        call = "gvs = opt.compute_gradients(loss_fn, state.params, *args)"
        _habits.check_params(caller, params, call)
        loss = LossCall(loss_fn, args, kwargs, var_list, grad_loss, has_aux, indexed_slices=True)
        return self._pairs(caller, call, loss, params, None)

    def apply_gradients(
        self,
        grads_and_vars: Iterable[tuple[Any, Any]],
        state: TrainState = _habits.NO_STATE,
        /,
        **tf_arguments: Any,
    ) -> TrainState:
        """Apply ``(gradient, variable)`` pairs to ``state``; ``global_step`` += 1.

        As in TensorFlow, any subset of the pairs ``compute_gradients`` returned, in
        any order, may be given (``[(g, v) for g, v in gvs if g is not None]``): a pair
        of ``compute_gradients`` finds its variable by the name it carries (also
        through ``jax.jit``), and a rebuilt pair by identity — its variable is the very
        array object (or, inside ``jax.jit``, the very tracer) of ``state.params``.  A
        rebuilt full list in ``compute_gradients``' order also works by position, with
        variables that are copies, NumPy arrays or ``None``, where shapes and dtypes
        prove the order (``None`` states it).  A pair that matches no variable, or
        several, is an error, and so are pairs in TensorFlow's wrong order,
        ``zip(variables, grads)``; docs/train.md, "Filtered and reordered pairs", has
        the rules.

        A ``None`` gradient, or a variable with no pair, is skipped: that variable
        and its optimizer slots stay unchanged, as in TensorFlow.  Gradients are cast
        to their variable's dtype (as feeding a placeholder does), so gradients
        processed on the host in NumPy can be applied.

        Args:
          grads_and_vars: ``(gradient, variable)`` pairs, as ``compute_gradients``
            returns them, or any subset of them; a list, or an iterator such as
            TensorFlow's ``zip(grads, variables)``.
          state: the ``TrainState`` to update.
          **tf_arguments: none is taken; TensorFlow's ``global_step=`` and ``name=``
            get an error that shows the call to write.

        Returns:
          The new ``TrainState``.

        Raises:
          TypeError: ``grads_and_vars`` is not a list of pairs (a gradient pytree), or
            a gradient is boolean, or complex for a real variable;
            ``state`` is not a ``TrainState`` (the parameters, or TensorFlow's
            ``global_step``); a keyword argument.
          ValueError: a pair matches no variable or an ambiguous one, or holds a
            variable where its gradient goes; a gradient has the wrong shape; every
            gradient is ``None`` (TensorFlow's "No gradients provided for any
            variable"); or ``state`` was made by another optimizer.

        Example:
          >>> opt = fg.train.GradientDescentOptimizer(0.5)
          >>> state = opt.init([jnp.float32(1.0), jnp.float32(2.0)])
          >>> gvs = opt.compute_gradients(lambda p: p[1] ** 2, state.params)
          >>> state = opt.apply_gradients([(g, v) for g, v in gvs if g is not None], state)
          >>> [float(p) for p in state.params], int(state.global_step)
          ([1.0, 0.0], 1)
        """
        taken = self._taken(tf_arguments)
        if taken:
            return self._with_call_options(**taken).apply_gradients(
                grads_and_vars, state, **tf_arguments
            )
        caller = self._caller("apply_gradients(grads_and_vars, state)")
        call = "state = opt.apply_gradients(grads_and_vars, state)"
        _habits.refuse_keywords(caller, None, tf_arguments, call)
        if state is _habits.NO_STATE:
            raise TypeError(f"{caller}: the TrainState to update is missing; {call}.")
        self._check_state(caller, state, call)
        flat = Flat(state.params)
        names = variable_names(state.params)
        grads = _pairs.match(caller, grads_and_vars, flat.variables, names)
        return self._apply(caller, call, grads, state)

    # fmt: off
    def minimize(
        self, loss_fn: Callable[..., Any], state: TrainState, /, *args: Any,
        var_list: VarList = None, grad_loss: Any = None, has_aux: bool = False, **kwargs: Any,
    ) -> tuple[TrainState, Any]:
        # fmt: on
        """One step on ``loss_fn(state.params, *args, **kwargs)``: compute, then apply.

        ``loss_fn`` and ``state`` are positional-only, so a keyword argument of either
        name (an RNN's ``state=``) goes to ``loss_fn`` like any other.

        Args:
          loss_fn: ``loss_fn(params, *args, **kwargs)`` returns the loss (or
            ``(loss, aux)`` with ``has_aux``); a non-scalar loss is differentiated as
            its sum, as ``tf.gradients`` does.
          state: the ``TrainState``.
          *args: further arguments of ``loss_fn`` (the batch).
          var_list: which variables to train, as in :meth:`compute_gradients`.
          grad_loss: the cotangent of the loss, as in :meth:`compute_gradients`.
          has_aux: ``loss_fn`` returns ``(loss, aux)``; only ``loss`` is differentiated.
          **kwargs: keyword arguments of ``loss_fn``.

        Returns:
          ``(new_state, loss)``, or ``(new_state, (loss, aux))`` with ``has_aux``: the
          loss (as ``loss_fn`` returned it) is the one at the parameters *before* the
          step, as ``sess.run([train_op, loss])`` shows in TensorFlow.

        Raises:
          TypeError: ``state`` is not a ``TrainState``; ``global_step=`` (the state
            counts the steps).
          ValueError: as :meth:`compute_gradients` and :meth:`apply_gradients`.

        Example:
          >>> opt = fg.train.GradientDescentOptimizer(0.25)
          >>> state = opt.init(jnp.float32(2.0))
          >>> state, loss = opt.minimize(lambda w, x: w * x, state, jnp.float32(4.0))
          >>> float(loss), float(state.params)
          (8.0, 1.0)
        """
        taken = self._taken(kwargs)
        if taken:
            return self._with_call_options(**taken).minimize(
                loss_fn, state, *args, var_list=var_list, grad_loss=grad_loss, has_aux=has_aux,
                **kwargs,
            )  # fmt: skip
        caller = self._caller("minimize(loss_fn, state, *args)")
        call = "state, loss = opt.minimize(loss_fn, state, *args)"
        self._check_state(caller, state, call)
        loss = LossCall(loss_fn, args, kwargs, var_list, grad_loss, has_aux, indexed_slices=True)
        out, selected, grads, why = self._gradients(caller, call, loss, state.params, state)
        names = variable_names(state.params)
        if all(g is None for g in grads):
            chosen = [n for n, s in zip(names, selected, strict=True) if s]
            raise _pairs.no_gradients(caller, chosen, why())
        return self._apply(caller, call, grads, state), out

    # TensorFlow's call-site options (AdamW's decay_var_list): configuration, taken from
    # a call's keywords and made an optimizer of their own for that call.

    def _call_options(self) -> tuple[str, ...]:
        """The keywords of ``minimize`` / ``apply_gradients`` that configure this optimizer
        for one call (none here)."""
        return ()

    def _with_call_options(self, **options: Any) -> Optimizer:
        """This optimizer configured with call-site ``options`` (only those of
        :meth:`_call_options`), a new object."""
        raise NotImplementedError  # never called: _call_options is empty here

    def _taken(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call-site options among ``kwargs``, removed from it."""
        return {k: kwargs.pop(k) for k in self._call_options() if k in kwargs}

    # The steps every method shares, and the hooks a wrapper (LossScaleOptimizer)
    # overrides: _check_state, _scaled_loss, _unscaled and _apply.

    def _pairs(
        self, caller: str, call: str, loss: LossCall, params: PyTree, state: Any
    ) -> GradsAndVars | tuple[GradsAndVars, Any]:
        """``compute_gradients``' pairs (and ``aux``) of ``loss`` at ``params``."""
        out, _, grads, _ = self._gradients(caller, call, loss, params, state)
        gvs = _pairs.named(grads, Flat(params).variables, variable_names(params))
        return (gvs, out[1]) if loss.has_aux else gvs

    def _gradients(
        self, caller: str, call: str, loss: LossCall, params: PyTree, state: Any
    ) -> tuple[Any, list[bool], list[Any], Callable[[], str]]:
        """``loss_fn``'s output, the selected variables, their gradients and ``why()``,
        the explanation of an all-``None`` gradient."""
        _habits.refuse_keywords(caller, loss.loss_fn, loss.kwargs, call)
        selected = self._selected(caller, params, loss.var_list)
        out, grads, why = value_and_grads(
            caller,
            self._scaled_loss(loss.loss_fn, state, loss.has_aux),
            Flat(params),
            loss.args,
            loss.kwargs,
            selected,
            has_aux=loss.has_aux,
            grad_loss=loss.grad_loss,
            indexed_slices=loss.indexed_slices,
        )
        return out, selected, self._unscaled(grads, state), why

    def _check_state(self, caller: str, state: Any, call: str) -> None:
        """Raise unless ``state`` is a ``TrainState`` (a wrapper checks its own part)."""
        _habits.check_state(caller, state, call)

    def _scaled_loss(
        self, loss_fn: Callable[..., Any], state: Any, has_aux: bool
    ) -> Callable[..., Any]:
        """The loss function differentiated (``loss_fn`` itself here)."""
        del state, has_aux
        return loss_fn

    def _unscaled(self, grads: list[Any], state: Any) -> list[Any]:
        """The gradients as the pairs hold them (those of ``loss_fn`` here)."""
        del state
        return grads

    def _apply(self, caller: str, call: str, grads: list[Any], state: TrainState) -> TrainState:
        """One update of ``state`` by one gradient (or ``None``) per variable."""
        flat = Flat(state.params)
        names = variable_names(state.params)
        trained = self._trained(caller, state.params)
        outside = [
            n for n, g, t in zip(names, grads, trained, strict=True) if g is not None and not t
        ]
        if outside:
            raise ValueError(
                f"{caller}: gradients for {outside}, which this optimizer holds no slots for "
                "(its var_list in the OptimizerGroup leaves them out); drop those pairs, or "
                "add the variables to its var_list in the group."
            )
        kept = [(g, v) for g, v, t in zip(grads, flat.variables, trained, strict=True) if t]
        if all(g is None for g, _ in kept):
            raise _pairs.no_gradients(caller, [n for n, t in zip(names, trained, strict=True) if t])
        slots = self._slots(caller, state)
        _habits.check_slots(caller, slots, self._init_structure(flat, trained), call)
        sparse_reads.check_all_ids(caller, grads, names)
        options = self._step_options(caller, state.params, slots, state.global_step)
        rule = self.sparse_rule
        if rule is None:  # a plain optax transformation: TF's dense fallback
            grads = [g.to_dense() if isinstance(g, IndexedSlices) else g for g in grads]
        if rule is not None and any(isinstance(g, IndexedSlices) for g in grads):
            new, new_slots = _sparse.apply(
                self.tx,
                rule,
                self._dense_step,
                lambda mask: self._init_structure(flat, mask),
                flat,
                trained,
                grads,
                slots,
                state.global_step,
                options,
            )
        else:
            step = state.global_step
            new, new_slots = self._dense_step(flat, trained, grads, slots, step, options)
        return TrainState(
            flat.replaced(new), self._with_slots(state, new_slots), state.global_step + 1
        )

    def _step_options(
        self, caller: str, params: PyTree, opt_state: Any, global_step: jax.Array
    ) -> Any:
        """What a step's transformation reads once per step (about every variable of
        ``params``, of its ``opt_state`` at ``global_step``), passed to ``tx.update`` as the
        extra argument ``step_options`` (``None``: nothing here)."""
        del caller, params, opt_state, global_step
        return None

    def _dense_step(
        self,
        flat: Flat,
        trained: list[bool],
        grads: list[Any],
        slots: Any,
        global_step: Any,
        options: Any = None,
    ) -> tuple[list[Any], Any]:
        """The new variables and slots after one optax update by dense ``grads`` (one per
        variable, ``None`` to skip) of the ``trained`` variables."""
        holed = flat.with_holes(trained)
        kept = [(g, v) for g, v, t in zip(grads, flat.variables, trained, strict=True) if t]
        skip = [g is None for g, _ in kept]
        filled = [jnp.zeros_like(v) if g is None else g for g, v in kept]
        extra = {"global_step": global_step}
        if options is not None:
            extra["step_options"] = options
        updates, new_slots = optax.with_extra_args_support(self.tx).update(
            flat.like_holes(trained, filled), slots, holed, **extra
        )
        stepped = iter(jax.tree.leaves(optax.apply_updates(holed, updates)))
        new = [next(stepped) if t else v for v, t in zip(flat.variables, trained, strict=True)]
        new = [v if g is None else n for v, n, g in zip(flat.variables, new, grads, strict=True)]
        if any(skip):
            skip_tree = flat.like_holes(trained, skip)
            new_slots = _keep_skipped_slots(self.tx, new_slots, slots, skip_tree)
        return new, new_slots


#: How many structures of ``tx.init`` an optimizer keeps (one per parameter structure
#: and selection of variables it steps).
_KNOWN_STRUCTURES = 16


def _structure_key(flat: Flat, trained: list[bool]) -> Any:
    """What ``tx.init``'s structure over the ``trained`` variables of ``flat`` depends on."""
    kept = [v for v, t in zip(flat.variables, trained, strict=True) if t]
    return flat.treedef, tuple(trained), tuple((jnp.shape(v), jnp.result_type(v)) for v in kept)


def _keep_skipped_slots(tx: optax.GradientTransformation, new: Any, old: Any, skip: PyTree) -> Any:
    """``new`` optimizer state, with the slots of skipped parameters taken from ``old``."""
    keep_old = optax.tree_utils.tree_map_params(
        tx, lambda _, s: s, new, skip, transform_non_params=lambda _: False
    )
    return jax.tree.map(lambda k, n, o: o if k else n, keep_old, new, old)
