"""TensorFlow's derivative conventions for a JAX function: ``tensorflow_conventions``.

JAX and TensorFlow 2.21 agree on the derivative of most ops, but not everywhere: a
``maximum`` tie, ``abs`` at 0, a ``sqrt`` in the masked branch of a ``where``, ``pow``'s
higher derivatives, ``elu`` at 0, ...  ``tensorflow_conventions`` re-emits a function
with the ops where they differ differentiated by TensorFlow's registered gradient
function (``funcgrad._core.tf_gradients``), found by name in the function's jaxpr as
``gradient_override_map`` finds them.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from funcgrad._core import jax_internals as _jax
from funcgrad._core import op_gradients as _op_gradients
from funcgrad._core.tf_gradients import GRADIENTS
from funcgrad._types import Function
from funcgrad._types import GradientFunction
from funcgrad._types import Op

__all__ = ["tensorflow_conventions"]


def _clamp(op: Op, grad: jax.Array) -> tuple[Any, ...]:
    """``lax.clamp(lo, x, hi)`` as TensorFlow's ``ClipByValue(x, lo, hi)``."""
    lo, x, hi = op.inputs
    gx, glo, ghi = GRADIENTS["ClipByValue"](Op(op.type, (x, lo, hi), op.outputs, {}), grad)
    return glo, gx, ghi


def _clip(op: Op, grad: jax.Array) -> list[Any]:
    """``jnp.clip(x, lo, hi)`` as ``tf.clip_by_value``: ``Maximum(Minimum(x, hi), lo)``.

    Either bound may be missing (``jnp.clip(x, None, hi)``): the call's body shows which.
    """
    call = _jax.named_call_body(op.params, "clip")
    assert call is not None  # the rule of the named function "clip" alone
    body = {eqn.primitive.name for eqn in call.jaxpr.eqns}
    x, *bounds = op.inputs
    lo = bounds.pop(0) if "max" in body else None
    hi = bounds.pop(0) if "min" in body else None
    grads: list[Any] = []
    if lo is not None:
        t = x if hi is None else jnp.minimum(x, hi)
        grad, g_lo = GRADIENTS["Maximum"](Op("Maximum", (t, lo), (), {}), grad)
        grads.append(g_lo)
    if hi is not None:
        grad, g_hi = GRADIENTS["Minimum"](Op("Minimum", (x, hi), (), {}), grad)
        grads.append(g_hi)
    return [grad, *grads]


#: JAX name -> (TensorFlow op type, TensorFlow's gradient function), for every op where
#: JAX's derivative rule gives other numbers than TensorFlow's (docs/conventions.md).
CONVENTIONS: dict[str, tuple[str, GradientFunction]] = {
    "abs": ("Abs", GRADIENTS["Abs"]),
    "atan2": ("Atan2", GRADIENTS["Atan2"]),
    "atanh": ("Atanh", GRADIENTS["Atanh"]),
    "clamp": ("ClipByValue", _clamp),
    "clip": ("clip_by_value", _clip),
    "cumlogsumexp": ("CumulativeLogsumexp", GRADIENTS["CumulativeLogsumexp"]),
    "cumprod": ("Cumprod", GRADIENTS["Cumprod"]),
    "elu": ("Elu", GRADIENTS["Elu"]),
    "expm1": ("Expm1", GRADIENTS["Expm1"]),
    "integer_pow": ("Pow", GRADIENTS["Pow"]),
    "leaky_relu": ("LeakyRelu", GRADIENTS["LeakyRelu"]),
    "log": ("Log", GRADIENTS["Log"]),
    "log1p": ("Log1p", GRADIENTS["Log1p"]),
    "max": ("Maximum", GRADIENTS["Maximum"]),
    "min": ("Minimum", GRADIENTS["Minimum"]),
    "nextafter": ("NextAfter", GRADIENTS["NextAfter"]),
    "pow": ("Pow", GRADIENTS["Pow"]),
    "reduce_max": ("Max", GRADIENTS["Max"]),
    "reduce_min": ("Min", GRADIENTS["Min"]),
    "reduce_prod": ("Prod", GRADIENTS["Prod"]),
    "relu": ("Relu", GRADIENTS["Relu"]),
    "relu6": ("Relu6", GRADIENTS["Relu6"]),
    "rsqrt": ("Rsqrt", GRADIENTS["Rsqrt"]),
    "scatter-mul": ("UnsortedSegmentProd", GRADIENTS["UnsortedSegmentProd"]),
    "selu": ("Selu", GRADIENTS["Selu"]),
    "sign": ("Sign", GRADIENTS["Sign"]),
    "soft_sign": ("Softsign", GRADIENTS["Softsign"]),
    "sqrt": ("Sqrt", GRADIENTS["Sqrt"]),
    "tanh": ("Tanh", GRADIENTS["Tanh"]),
    "xlog1py": ("Xlog1py", GRADIENTS["Xlog1py"]),
    "xlogy": ("Xlogy", GRADIENTS["Xlogy"]),
}


def tensorflow_conventions(f: Function) -> Function:
    """``f`` with TensorFlow 2.21's derivatives wherever JAX's rule gives other numbers.

    Every op of ``f`` whose JAX derivative differs from TensorFlow's registered gradient
    -- ``maximum``/``minimum`` ties (TensorFlow gives all to the first argument),
    ``abs`` at 0 (0, not 1), ``sqrt``/``rsqrt``/``reciprocal`` with a zero incoming
    gradient (0, not ``NaN``: a masked ``where`` branch), ``pow`` and ``x ** n`` at
    higher orders, ``elu``/``selu``/``leaky_relu`` at 0, ``clip`` at a bound,
    ``xlogy`` at ``x = 0``, ``cumprod``/``prod`` with zeros, ... (the full list with
    TensorFlow's gradient function for each: docs/conventions.md) -- keeps its value
    and differentiates with TensorFlow's gradient function, at every order: the
    gradient is built from TensorFlow-convention ops again, so its own derivatives are
    TensorFlow's too, ``None`` where ``tf.gradients`` answers ``None`` included.

    Built on the rewrite of ``gradient_override_map``: ops are found by name in ``f``'s
    jaxpr, inside nested ``jax.jit``, ``lax.scan``, ``lax.cond``, ``lax.while_loop`` and
    ``jax.checkpoint`` too; values are bit-identical to ``f``'s.  Composed with
    ``gradient_override_map`` in either order, the mapping wins for the ops it names.
    Bodies of ``jax.custom_jvp`` / ``jax.custom_vjp`` functions (``fg.custom_gradient``,
    an override's gradient) keep their own rules.  Array arguments are traced, every
    other argument is a constant.  Reverse mode only, as ``jax.custom_vjp``.

    Args:
      f: the function (also usable as ``@fg.tensorflow_conventions``).

    Returns:
      A function with ``f``'s values, name, docstring and ``__wrapped__``.

    Raises:
      TypeError: ``f`` is not callable.

    Example:
      >>> f = fg.tensorflow_conventions(lambda x: jnp.minimum(1.0, jnp.abs(x)))
      >>> x = jnp.array([0.0, 0.5, 1.0])
      >>> jax.grad(lambda x: f(x).sum())(x).tolist()
      [0.0, 1.0, 0.0]
      >>> jax.grad(lambda x: jnp.minimum(1.0, jnp.abs(x)).sum())(x).tolist()
      [1.0, 1.0, 0.5]
    """
    if not callable(f):
        raise TypeError(
            f"fg.tensorflow_conventions(f): f must be callable, got {type(f).__name__}; "
            "pass the function to differentiate with TensorFlow's conventions."
        )
    caller = f"fg.tensorflow_conventions({getattr(f, '__name__', 'f')})"
    return _op_gradients.with_gradients(  # type: ignore[return-value]
        f, CONVENTIONS, caller=caller, prefix="tensorflow_", transparent=True
    )
