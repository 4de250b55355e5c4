"""``Wrapper``: an optimizer around another ``fg.train`` optimizer — private.

Design note
-----------
What it follows: TensorFlow's optimizer wrappers (``MixedPrecisionLossScaleOptimizer``,
``tf.contrib.opt.MovingAverageOptimizer``, the optimizer ``optimize_loss`` builds) hold
the optimizer they were given and call its ``compute_gradients`` / ``apply_gradients``
around what they add.  A :class:`Wrapper` does the same through the hooks every
:class:`~funcgrad.train.Optimizer` step goes through (``_check_state``, ``_scaled_loss``,
``_unscaled``, ``_apply``): each is the wrapped optimizer's, on the wrapped optimizer's
part of the state, unless the wrapper adds something of its own; the variables it trains
are the wrapped optimizer's (``var_list``), unless it narrows them (``optimize_loss``'s
``variables=``) — so wrappers nest (``optimize_loss`` over a
``LossScaleOptimizer`` over a group's member) and everything a wrapper does not own
travels through it: a call-site option such as AdamW's ``decay_var_list`` configures the
optimizer inside (:meth:`Wrapper._with_call_options`).

The state: a wrapper with a state of its own keeps it as a ``NamedTuple`` whose field
``inner_state`` holds the wrapped optimizer's ``opt_state`` (:attr:`Wrapper.state_type`);
one without (``optimize_loss``'s) has the wrapped optimizer's state as it is.

What it assumes: the wrapped optimizer's ``init`` makes the parameters and
``global_step`` of the state; the wrapper never changes either outside the wrapped
optimizer's ``_apply`` (but ``optimize_loss``'s ``increment_global_step=False``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any
from typing import ClassVar

from funcgrad._types import PyTree
from funcgrad.train import _habits
from funcgrad.train.optimizer import Optimizer
from funcgrad.train.state import TrainState


class Wrapper(Optimizer):
    """An ``fg.train`` optimizer around ``optimizer``, delegating every hook to it.

    Attributes:
      optimizer: the wrapped optimizer.
      var_list: the variables this wrapper trains: the wrapped optimizer's (an
        ``OptimizerGroup`` member's ``var_list``), unless the wrapper narrows them.
    """

    #: The ``NamedTuple`` of this wrapper's ``opt_state`` (its ``inner_state`` field holds
    #: the wrapped optimizer's), or ``None``: the wrapped optimizer's state as it is.
    state_type: ClassVar[type | None] = None

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer
        self.var_list = optimizer.var_list

    # The state: the wrapped optimizer's, inside this wrapper's.

    def _own_state(self, params: PyTree, inner: TrainState) -> Any:
        """This wrapper's ``opt_state`` around the wrapped optimizer's fresh ``inner``."""
        del params
        return inner.opt_state

    def init(self, params: PyTree) -> TrainState:
        """A fresh state: the wrapped optimizer's, with this wrapper's around its slots.

        Args:
          params: the parameters, any pytree the wrapped optimizer takes.

        Returns:
          The ``TrainState``; its ``opt_state`` holds the wrapped optimizer's.

        Raises:
          TypeError: ``params`` is a ``TrainState``; as the wrapped optimizer's ``init``.
        """
        caller = self._caller("init(params)")
        _habits.check_params(caller, params, "state = opt.init(state.params)")
        inner = self.optimizer.init(params)
        return TrainState(inner.params, self._own_state(params, inner), inner.global_step)

    def _inner(self, state: Any) -> Any:
        """The wrapped optimizer's state within ``state`` (``None``: a ``compute_gradients``
        of the parameters alone)."""
        if self.state_type is None or state is None:
            return state
        return TrainState(state.params, state.opt_state.inner_state, state.global_step)

    def _outer(self, state: TrainState, inner: TrainState, **own: Any) -> TrainState:
        """``state`` after the wrapped optimizer's step to ``inner``, with this wrapper's
        fields ``own`` replaced."""
        if self.state_type is None:
            return inner
        opt_state = state.opt_state._replace(inner_state=inner.opt_state, **own)
        return TrainState(inner.params, opt_state, inner.global_step)

    # The hooks of Optimizer's steps, each the wrapped optimizer's on its part.

    def _check_state(self, caller: str, state: Any, call: str) -> None:
        if self.state_type is not None:
            name = type(self).__name__
            _habits.wrapper_state(caller, state, call, self.state_type, name)
        self.optimizer._check_state(caller, self._inner(state), call)

    def _scaled_loss(
        self, loss_fn: Callable[..., Any], state: Any, has_aux: bool
    ) -> Callable[..., Any]:
        return self.optimizer._scaled_loss(loss_fn, self._inner(state), has_aux)

    def _unscaled(self, grads: list[Any], state: Any) -> list[Any]:
        return self.optimizer._unscaled(grads, self._inner(state))

    def _apply(self, caller: str, call: str, grads: list[Any], state: TrainState) -> TrainState:
        """The wrapped optimizer's step (this wrapper adds nothing here)."""
        return self._outer(state, self.optimizer._apply(caller, call, grads, self._inner(state)))

    def _call_options(self) -> tuple[str, ...]:
        return self.optimizer._call_options()

    def _with_call_options(self, **options: Any) -> Optimizer:
        """A copy of this wrapper around the wrapped optimizer configured with ``options``."""
        new = copy.copy(self)
        new.optimizer = self.optimizer._with_call_options(**options)
        return new
