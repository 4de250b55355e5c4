"""TensorFlow 1.x update rules that optax does not have, as optax transformations.

Each is a small ``optax.GradientTransformation`` with a ``NamedTuple`` state named
after it, usable on its own or in ``optax.chain``.  The formulas are those of
TensorFlow's training kernels (``tensorflow/core/kernels/training_ops.cc``:
``ApplyAdam``, ``ApplyFtrl``/``ApplyFtrlV2``, ``ApplyProximalGradientDescent``,
``ApplyProximalAdagrad``).  The proximal and FTRL rules set the variable to a new value
rather than adding a step, so they need ``params`` and return ``new - params``.

Each computes in float32 — TensorFlow's float32 numbers — also for ``bfloat16`` and
``float16`` leaves, whose state stays in their own dtype: TensorFlow computes in the
variable's dtype, where ``1 - bfloat16(0.999)`` is 0 and its bfloat16 Adam diverges.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from funcgrad._types import PyTree
from funcgrad.train.optimizers import _kernels
from funcgrad.train.optimizers._float32 import in_float32

__all__ = [
    "ScaleByTfAdamState",
    "TfFtrlState",
    "TfProximalAdagradState",
    "scale_by_tf_adam",
    "tf_ftrl",
    "tf_proximal_adagrad",
    "tf_proximal_gradient_descent",
]


def _map_unzip(
    fn: Callable[..., tuple[Any, ...]], n_out: int, tree: PyTree, *rest: PyTree
) -> tuple[PyTree, ...]:
    """``jax.tree.map`` for a ``fn`` returning ``n_out`` values: ``n_out`` trees back."""
    leaves, treedef = jax.tree.flatten(tree)
    columns = [jax.tree.leaves(r) for r in rest]
    outs = [fn(*args) for args in zip(leaves, *columns, strict=True)]
    return tuple(jax.tree.unflatten(treedef, [o[i] for o in outs]) for i in range(n_out))


def _as(value: Any, like: jax.Array) -> jax.Array:
    """``value`` in ``like``'s dtype (float32 or wider here), as TensorFlow casts
    hyperparameters to the variable's."""
    return jnp.asarray(value).astype(jnp.result_type(like))


def _float32(value: Any) -> Any:
    """A hyperparameter in float32: a number as a NumPy scalar, a literal of the step and
    not an array it closes over; an array (a value fed by ``optax.inject_hyperparams``)
    as an array."""
    return jnp.asarray(value, jnp.float32) if isinstance(value, jax.Array) else np.float32(value)


def _require_params(params: PyTree, name: str) -> None:
    if params is None:
        raise ValueError(
            f"fg.train.{name}: update needs params (it sets the variable); call "
            "tx.update(updates, state, params)."
        )


class ScaleByTfAdamState(NamedTuple):
    """State of :func:`scale_by_tf_adam`: the step count, the two moments, and
    TensorFlow's ``beta1_power`` / ``beta2_power`` (the products the next step uses)."""

    step: jax.Array
    mu: PyTree
    nu: PyTree
    beta1_power: jax.Array
    beta2_power: jax.Array


def scale_by_tf_adam(
    beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8
) -> optax.GradientTransformation:
    r"""TensorFlow 1.x's Adam scaling, with epsilon outside the bias correction.

    .. math::
      m_t = m + (g - m)(1 - \beta_1), \quad v_t = v + (g^2 - v)(1 - \beta_2), \quad
      u = \frac{\sqrt{1 - \beta_2^t}}{1 - \beta_1^t} \frac{m_t}{\sqrt{v_t} + \hat\epsilon}

    ``optax.scale_by_adam`` adds epsilon to the bias-corrected ``sqrt(v_hat)``
    instead (Kingma & Ba, Algorithm 1); TensorFlow's "epsilon hat" form (Section 2's
    last paragraph) differs when ``v`` is small.  Chain with a learning rate.

    The decays are rounded to float32 before ``1 - beta`` is taken, as TensorFlow does
    for a float32 variable (``1 - float32(0.999)`` is ``0.00099998713``); ``bfloat16``
    moments are updated in float32 and stored in ``bfloat16`` (TensorFlow computes
    ``1 - bfloat16(0.999) = 0`` there, and diverges).  The bias correction reads
    :math:`\beta^t` from TensorFlow's running products ``beta1_power`` / ``beta2_power``
    (float32 scalars that start at :math:`\beta` and are multiplied by it after each
    step, as TensorFlow's ``AdamOptimizer._finish`` does), not ``float32(beta) ** t``,
    which rounds differently as ``t`` grows.

    Args:
      beta1: decay of the first moment.
      beta2: decay of the second moment.
      epsilon: TensorFlow's epsilon hat.

    Returns:
      An ``optax.GradientTransformation`` with state :class:`ScaleByTfAdamState`.

    Example:
      >>> tx = fg.train.scale_by_tf_adam()
      >>> g = jnp.array([0.5, -2.0])
      >>> updates, state = tx.update(g, tx.init(g))
      >>> updates.round(4).tolist(), int(state.step)
      ([1.0, -1.0], 1)
    """

    b1, b2 = _float32(beta1), _float32(beta2)

    def init_fn(params: PyTree) -> ScaleByTfAdamState:
        mu, nu = optax.tree.zeros_like(params), optax.tree.zeros_like(params)  # two buffers
        # New arrays, never b1 / b2 themselves: a donated state would delete them.
        powers = jnp.array(beta1, jnp.float32), jnp.array(beta2, jnp.float32)
        return ScaleByTfAdamState(jnp.zeros([], jnp.int32), mu, nu, *powers)

    def update_fn(updates: PyTree, state: ScaleByTfAdamState, params: PyTree = None) -> Any:
        del params
        step = optax.safe_increment(state.step)
        alpha = jnp.sqrt(1 - state.beta2_power) / (1 - state.beta1_power)

        def leaf(g: jax.Array, m: jax.Array, v: jax.Array) -> tuple[jax.Array, ...]:
            b1_, b2_ = _as(beta1, m), _as(beta2, v)
            return _kernels.adam(g, m, v, alpha.astype(m.dtype), b1_, b2_, epsilon, nesterov=False)

        scaled, mu, nu = _map_unzip(leaf, 3, updates, state.mu, state.nu)
        powers = (state.beta1_power * b1, state.beta2_power * b2)
        return scaled, ScaleByTfAdamState(step, mu, nu, *powers)

    return in_float32(optax.GradientTransformation(init_fn, update_fn))


class TfFtrlState(NamedTuple):
    """State of :func:`tf_ftrl`: the squared-gradient accumulator and the linear term."""

    accumulator: PyTree
    linear: PyTree


def tf_ftrl(
    learning_rate: float | jax.Array,
    learning_rate_power: float = -0.5,
    initial_accumulator_value: float = 0.1,
    l1: float = 0.0,
    l2: float = 0.0,
    l2_shrinkage: float = 0.0,
    beta: float = 0.0,
) -> optax.GradientTransformation:
    r"""FTRL-Proximal (McMahan et al., 2013) as TensorFlow's ``ApplyFtrlV2`` computes it.

    With :math:`p = -\text{learning\_rate\_power}`, per element:

    .. math::
      \tilde g = g + 2 \lambda_s w, \quad n_t = n + g^2, \quad
      z_t = z + \tilde g - \frac{n_t^p - n^p}{\eta} w, \quad
      w_t = \begin{cases} \frac{\lambda_1 \operatorname{sign}(z_t) - z_t}
        {n_t^p / \eta + 2 \lambda_2'} & |z_t| > \lambda_1 \\ 0 & \text{otherwise}
      \end{cases}

    where :math:`\lambda_2' = \lambda_2 + \beta / (2\eta)`.

    Args:
      learning_rate: :math:`\eta`, a number or a scalar array.
      learning_rate_power: :math:`-p`, zero or negative (``-0.5``: Adagrad-like).
      initial_accumulator_value: the accumulator's start, zero or more.
      l1: :math:`\lambda_1`, the L1 strength.
      l2: :math:`\lambda_2`, the L2 strength.
      l2_shrinkage: :math:`\lambda_s`, the L2 shrinkage strength (on the gradient).
      beta: TensorFlow's ``beta``, added to L2 as ``beta / (2 * learning_rate)``.

    Returns:
      An ``optax.GradientTransformation`` (its ``update`` needs ``params``) with
      state :class:`TfFtrlState`.

    Example:
      >>> tx = fg.train.tf_ftrl(0.1, l1=0.01)
      >>> w = jnp.array([0.0, 0.0])
      >>> updates, _ = tx.update(jnp.array([1.0, 0.001]), tx.init(w), w)
      >>> updates.round(4)
      Array([-0.0944,  0.    ], dtype=float32)
    """
    p = -learning_rate_power

    def leaf(g: jax.Array, w: jax.Array, n: jax.Array, z: jax.Array) -> tuple[jax.Array, ...]:
        lr = _as(learning_rate, w)
        w_t, n_t, z_t = _kernels.ftrl(g, w, n, z, lr, p, l1, l2, l2_shrinkage, beta)
        return w_t - w, n_t, z_t

    def init_fn(params: PyTree) -> TfFtrlState:
        return TfFtrlState(
            optax.tree.full_like(params, initial_accumulator_value),
            optax.tree.zeros_like(params),
        )

    def update_fn(updates: PyTree, state: TfFtrlState, params: PyTree = None) -> Any:
        _require_params(params, "tf_ftrl")
        steps, n, z = _map_unzip(leaf, 3, updates, params, state.accumulator, state.linear)
        return steps, TfFtrlState(n, z)

    return in_float32(optax.GradientTransformation(init_fn, update_fn))


def tf_proximal_gradient_descent(
    learning_rate: Any, l1: float = 0.0, l2: float = 0.0
) -> optax.GradientTransformation:
    r"""Proximal gradient descent with L1 and L2 (TensorFlow's ``ApplyProximalGradientDescent``).

    .. math::
      \tilde w = w - \eta g, \quad
      w_t = \operatorname{sign}(\tilde w) \frac{\max(|\tilde w| - \eta \lambda_1, 0)}
        {1 + \eta \lambda_2}

    Args:
      learning_rate: :math:`\eta`, a number or a scalar array.
      l1: :math:`\lambda_1`, the L1 strength.
      l2: :math:`\lambda_2`, the L2 strength.

    Returns:
      A stateless ``optax.GradientTransformation`` whose ``update`` needs ``params``.

    Example:
      >>> tx = fg.train.tf_proximal_gradient_descent(0.5, l1=1.0)
      >>> w = jnp.array([1.0, 0.2])
      >>> updates, _ = tx.update(jnp.array([0.0, 0.0]), tx.init(w), w)
      >>> updates
      Array([-0.5, -0.2], dtype=float32)
    """

    def update_fn(updates: PyTree, state: Any, params: PyTree = None) -> Any:
        _require_params(params, "tf_proximal_gradient_descent")
        steps = jax.tree.map(
            lambda g, w: _kernels.proximal(w, g, _as(learning_rate, w), l1, l2) - w, updates, params
        )
        return steps, state

    return in_float32(optax.GradientTransformation(lambda _: optax.EmptyState(), update_fn))


class TfProximalAdagradState(NamedTuple):
    """State of :func:`tf_proximal_adagrad`: the squared-gradient accumulator."""

    accumulator: PyTree


def tf_proximal_adagrad(
    learning_rate: Any,
    initial_accumulator_value: float = 0.1,
    l1: float = 0.0,
    l2: float = 0.0,
) -> optax.GradientTransformation:
    r"""Proximal Adagrad (TensorFlow's ``ApplyProximalAdagrad``).

    The proximal step of :func:`tf_proximal_gradient_descent` with the per-element
    step size :math:`\alpha = \eta / \sqrt{n_t}`, where :math:`n_t = n + g^2`.

    Args:
      learning_rate: :math:`\eta`, a number or a scalar array.
      initial_accumulator_value: the accumulator's start, positive.
      l1: :math:`\lambda_1`, the L1 strength.
      l2: :math:`\lambda_2`, the L2 strength.

    Returns:
      An ``optax.GradientTransformation`` (its ``update`` needs ``params``) with
      state :class:`TfProximalAdagradState`.

    Example:
      >>> tx = fg.train.tf_proximal_adagrad(0.1, initial_accumulator_value=0.0)
      >>> w = jnp.array([1.0])
      >>> updates, state = tx.update(jnp.array([2.0]), tx.init(w), w)
      >>> round(float(updates[0]), 4), state.accumulator.tolist()
      (-0.1, [4.0])
    """

    def leaf(g: jax.Array, w: jax.Array, n: jax.Array) -> tuple[jax.Array, ...]:
        w_t, n_t = _kernels.proximal_adagrad(g, w, n, _as(learning_rate, w), l1, l2)
        return w_t - w, n_t

    def init_fn(params: PyTree) -> TfProximalAdagradState:
        return TfProximalAdagradState(optax.tree.full_like(params, initial_accumulator_value))

    def update_fn(updates: PyTree, state: TfProximalAdagradState, params: PyTree = None) -> Any:
        _require_params(params, "tf_proximal_adagrad")
        steps, n = _map_unzip(leaf, 2, updates, params, state.accumulator)
        return steps, TfProximalAdagradState(n)

    return in_float32(optax.GradientTransformation(init_fn, update_fn))
