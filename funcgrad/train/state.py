"""``TrainState``: what TensorFlow keeps in variables, as one explicit value."""

from __future__ import annotations

from typing import Any
from typing import NamedTuple

import jax

from funcgrad._types import PyTree

__all__ = ["TrainState"]


class TrainState(NamedTuple):
    """The training state: parameters, optimizer slots and the global step.

    TensorFlow 1.x keeps these in graph variables (the trainable variables, the
    optimizer's slot variables such as Adam's ``m`` and ``v``, and ``global_step``).
    Here they are one pytree of arrays, returned anew by every
    ``Optimizer.apply_gradients`` / ``minimize``; it passes through ``jax.jit``,
    ``jax.lax.scan`` and checkpointing like any other pytree.  Make one with
    ``Optimizer.init(params)``: its ``opt_state`` and ``global_step`` are new arrays,
    none of them the optimizer's own constants, the parameters, or each other, so a
    step may donate the state (``jax.jit(step, donate_argnums=0)``) and the optimizer
    stays usable.  ``params`` are the arrays given to ``init``, which a donated step
    deletes: keep your own copy if you need them again.

    Attributes:
      params: the parameters, any pytree; its floating-point leaves are the variables,
        any other leaf (an equinox module's functions) is carried along unchanged.
      opt_state: the optimizer's state (``optax`` state of ``Optimizer.tx``); for an
        ``OptimizerGroup``, a dict of each optimizer's state under its name.
      global_step: an ``int32`` scalar, the number of steps applied so far.

    Example:
      >>> state = fg.train.GradientDescentOptimizer(0.1).init({"w": jnp.zeros(2)})
      >>> state.params, int(state.global_step)
      ({'w': Array([0., 0.], dtype=float32)}, 0)
      >>> len(jax.tree.leaves(state)) > 1
      True
    """

    params: PyTree
    opt_state: Any
    global_step: jax.Array
