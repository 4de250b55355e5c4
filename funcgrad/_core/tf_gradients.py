"""TensorFlow 2.21's registered gradient functions, written in JAX.

Design note
-----------
Each ``_<Op>`` gradient below is the function TensorFlow registers for the op type
``<Op>`` (``ops.RegisterGradient``), with TensorFlow's signature ``fn(op, grad)`` on an
``fg.Op``.  It follows the Python function named beside it, in TensorFlow 2.21's
``tensorflow/python/ops/math_grad.py`` (or ``nn_grad.py``, ``clip_ops.py`` where said),
formula for formula and in the same order of operations; where that function calls a
fused C++ gradient kernel (``SqrtGrad``, ``ReluGrad``, ``EluGrad``, ...), the kernel's
formula (``tensorflow/core/kernels/cwise_ops_gradients.h``, ``relu_op_functor.h``).
:data:`GRADIENTS` lists them by op type: the registry offers each as a
``gradient_override_map`` target, and ``tensorflow_conventions`` differentiates the ops
whose JAX rule gives other numbers with them.

Higher orders.  TensorFlow differentiates a gradient with the registered gradients of
the ops its gradient function emitted.  Where such an op's gradient differs from JAX's
rule for the same formula, the functions here emit a *TensorFlow op* (:func:`_op`): a
``custom_vjp`` whose backward is TensorFlow's gradient function of that op --
``Reciprocal`` (inside ``Log``'s gradient), ``Pow`` and ``Log`` (inside ``Pow``'s), the
kernels ``SqrtGrad``, ``RsqrtGrad`` and ``ReciprocalGrad`` (their C++ code returns 0
wherever the incoming gradient is exactly 0: :func:`_guard`), ``EluGrad``, ``ReluGrad``,
``Cumprod``, ``DivNoNan``, ``Xlogy`` / ``Xdivy``.  Plain ``jnp`` arithmetic (``*``,
``+``, ``-``, ``/``, ``where``, ``exp``, ``sign``, ``square``, ``cumsum``,
``zeros_like``) stands for TensorFlow's ops of those names, whose JAX rules give
TensorFlow's numbers, ``None`` included: ``zeros_like`` depends on nothing, as
TensorFlow's ``ZerosLike`` is not differentiable.

Which inputs are connected.  A TensorFlow op is joined by the graph to each of its
inputs, so ``tf.gradients`` finds a path through ``ReluGrad(dy, y)`` to ``y`` even
though the kernel only compares ``y``; a JAX expression that only compares is a cut
for ``fg.gradients``.  :func:`_joined` keeps such a path open without touching the
value, so ``fg.gradients`` answers ``None`` exactly where ``tf.gradients`` does.

Kernel formulas are written so that XLA keeps TensorFlow's non-finite results: an
indicator is made with ``where`` (``convert(pred) * v`` becomes ``select`` under
``jit``, turning ``0 * inf`` into 0), and a product with a zero indicator is written
``dy * 0`` where the kernel multiplies.  A gradient kernel's own output, which its
second gradient may read (``_SqrtGradGrad``), is computed again in its backward rather
than kept (``_rewrite.custom_op``'s ``keep_outputs``): the kernels' ``dy == 0`` guards
otherwise meet a JAX issue with ``lax.scan`` at the third order.  Even so, inside a
``lax.scan`` the fourth and higher derivatives through a guarded kernel can be wrong.

What it assumes: real floating dtypes (TensorFlow's ``conj`` is left out); an
elementwise op's inputs broadcast as NumPy's do, and each cotangent is summed back to
its input's shape, as TensorFlow's ``_ReduceGradientArgs`` does.  ``SoftsignGrad`` has
no registered gradient in TensorFlow (its second derivative raises ``LookupError``);
here the second derivative is JAX's, of the kernel's formula.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from funcgrad._core import jax_internals as _jax
from funcgrad._core import rewrite as _rewrite
from funcgrad._types import GradientFunction
from funcgrad._types import Op

#: The constants of TensorFlow's ``SeluGrad`` kernel (``relu_op_functor.h``).
_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_SCALE_ALPHA = 1.7580993408473768599402175208123


# --- helpers ----------------------------------------------------------------------------


def _op(
    op_type: str,
    impl: Callable[..., jax.Array],
    gradient: GradientFunction,
    *,
    params: dict[str, Any] | None = None,
    kernel: bool = False,
) -> Any:
    """A TensorFlow op: ``impl``'s value, ``gradient(op, grad)`` its registered gradient.

    ``params`` are the op's attributes; a gradient ``kernel`` computes its output again
    in its backward (see the design note).
    """

    def backward(xs: tuple[Any, ...], outs: tuple[Any, ...], cts: Any) -> list[Any]:
        got = gradient(Op(op_type, xs, outs, dict(params or {})), cts[0])
        return list(got) if isinstance(got, list | tuple) else [got]

    op = _rewrite.custom_op(op_type, lambda *xs: (impl(*xs),), backward, keep_outputs=not kernel)
    return lambda *xs: op(*xs)[0]


def _guard(dy: jax.Array, value: jax.Array) -> jax.Array:
    """The zero guard of TensorFlow's ``SqrtGrad``/``RsqrtGrad``/``ReciprocalGrad`` kernels."""
    return jnp.where(dy == 0, jnp.zeros_like(value), value)


def _joined(value: jax.Array, *inputs: jax.Array) -> jax.Array:
    """``value``, with a differentiable path from each of ``inputs`` (see the design note)."""
    pick_first = jnp.zeros(value.shape, jnp.int32)
    return lax.select_n(pick_first, value, *(jnp.broadcast_to(x, value.shape) for x in inputs))


def _sum_to(grad: jax.Array, like: Any) -> jax.Array:
    """``grad`` summed over the axes ``like`` was broadcast along (``_ReduceGradientArg``)."""
    shape = jnp.shape(like)
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1
    )
    return jnp.sum(grad, axis=axes, keepdims=True).reshape(shape)


def _inputs(op: Op, n: int, gradient: str, names: str) -> tuple[Any, ...]:
    """``op.inputs``, checked to be the ``n`` inputs ``gradient`` differentiates."""
    if len(op.inputs) != n:
        raise ValueError(
            f"the gradient {gradient!r} for {op.type!r}: TensorFlow's {gradient} gradient "
            f"takes an op with {n} input(s) ({names}), but {op.type!r} has "
            f"{len(op.inputs)}; map {op.type!r} to a gradient for {len(op.inputs)} input(s)."
        )
    return op.inputs


def _x(op: Op, gradient: str) -> Any:
    return _inputs(op, 1, gradient, "x")[0]


def _xy(op: Op, gradient: str) -> tuple[Any, Any]:
    x, y = _inputs(op, 2, gradient, "x, y")
    return x, y


# --- the fused gradient kernels, each a TensorFlow op with its own gradient ------------


def _reciprocal_grad_grad(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_ReciprocalGradGrad`` (math_grad.py)."""
    a, b = op.inputs
    return grad * -2.0 * b * a, reciprocal_grad(a, grad)


#: ``ReciprocalGrad(y, dy)``: ``dy == 0 ? 0 : -y * y * dy``.
reciprocal_grad = _op(
    "ReciprocalGrad", lambda y, dy: _guard(dy, -y * y * dy), _reciprocal_grad_grad, kernel=True
)


def _sqrt_grad_grad(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_SqrtGradGrad`` (math_grad.py)."""
    ga = grad / op.inputs[0]
    return -ga * op.outputs[0], 0.5 * ga


#: ``SqrtGrad(y, dy)``: ``dy == 0 ? 0 : 0.5 * dy / y``.
sqrt_grad = _op("SqrtGrad", lambda y, dy: _guard(dy, (0.5 * dy) / y), _sqrt_grad_grad, kernel=True)


def _rsqrt_grad_grad(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_RsqrtGradGrad`` (math_grad.py)."""
    a, b = op.inputs
    return -1.5 * grad * b * jnp.square(a), rsqrt_grad(a, grad)


#: ``RsqrtGrad(y, dy)``: ``dy == 0 ? 0 : -0.5 * (dy * y) * (y * y)``.
rsqrt_grad = _op(
    "RsqrtGrad", lambda y, dy: _guard(dy, -0.5 * (dy * y) * (y * y)), _rsqrt_grad_grad, kernel=True
)


def _elu_grad_grad(op: Op, grad: jax.Array) -> tuple[Any, ...]:
    """``_EluGradGrad`` (nn_grad.py); ``alpha`` (JAX's ``elu``) gets no gradient."""
    dy, y, alpha = op.inputs
    return elu_grad(grad, y, alpha), jnp.where(y < 0, grad * dy, jnp.zeros_like(y)), None


#: ``EluGrad(dy, y)``: ``y < 0 ? (y + 1) * dy : dy``, with ``alpha`` for ``1`` as
#: ``jax.nn.elu(x, alpha)`` needs.
elu_grad = _op(
    "EluGrad",
    lambda dy, y, alpha: jnp.where(y < 0, (y + alpha) * dy, dy),
    _elu_grad_grad,
    kernel=True,
)


def _selu_grad_grad(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_SeluGradGrad`` (nn_grad.py)."""
    dy, y = op.inputs
    return selu_grad(grad, y), jnp.where(y < 0.0, grad * dy, jnp.zeros_like(y))


#: ``SeluGrad(dy, y)``: ``y < 0 ? dy * (y + scale * alpha) : dy * scale``.
selu_grad = _op(
    "SeluGrad",
    lambda dy, y: jnp.where(y < 0, dy * (y + _SELU_SCALE_ALPHA), dy * _SELU_SCALE),
    _selu_grad_grad,
    kernel=True,
)


def _relu_grad_grad(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_ReluGradGrad`` (nn_grad.py)."""
    y = op.inputs[1]
    return relu_grad(grad, y), jnp.zeros_like(y)


#: ``ReluGrad(dy, y)``: ``dy * (y > 0)``.
relu_grad = _op(
    "ReluGrad", lambda dy, y: _joined(jnp.where(y > 0, dy, dy * 0), y), _relu_grad_grad, kernel=True
)


def _relu6_grad_grad(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_Relu6GradGrad`` (nn_grad.py)."""
    y = op.inputs[1]
    return relu6_grad(grad, y), jnp.zeros_like(y)


#: ``Relu6Grad(dy, y)``: ``dy * ((y > 0) & (y < 6))``.
relu6_grad = _op(
    "Relu6Grad",
    lambda dy, y: _joined(jnp.where((y > 0) & (y < 6), dy, dy * 0), y),
    _relu6_grad_grad,
    kernel=True,
)


def _leaky_relu_grad_grad(op: Op, grad: jax.Array) -> tuple[Any, ...]:
    """``_LeakyReluGradGrad`` (nn_grad.py); ``alpha`` is an attribute there: no gradient."""
    _, x, alpha = op.inputs
    return leaky_relu_grad(grad, x, alpha), jnp.zeros_like(x), None


def _attribute(alpha: Any, dtype: Any) -> Any:
    """A TensorFlow ``float`` attribute as a kernel of ``dtype`` reads it: rounded to
    float32 first (``static_cast<T>(alpha)``: ``0.2`` is ``0.20000000298...`` in float64)."""
    return jnp.asarray(alpha, jnp.float32).astype(dtype)


#: ``LeakyReluGrad(dy, x)``: ``x > 0 ? dy : dy * alpha``, ``alpha`` the float32 attribute.
leaky_relu_grad = _op(
    "LeakyReluGrad",
    lambda dy, x, alpha: _joined(jnp.where(x > 0, dy, dy * _attribute(alpha, dy.dtype)), x),
    _leaky_relu_grad_grad,
    kernel=True,
)


# --- TensorFlow ops emitted by gradient functions --------------------------------------


def _reciprocal(op: Op, grad: jax.Array) -> jax.Array:
    """``_ReciprocalGrad`` (math_grad.py)."""
    _x(op, "Reciprocal")
    return reciprocal_grad(op.outputs[0], grad)


reciprocal = _op("Reciprocal", lambda x: 1 / x, _reciprocal)


def _log(op: Op, grad: jax.Array) -> jax.Array:
    """``_LogGrad`` (math_grad.py)."""
    return grad * reciprocal(_x(op, "Log"))


log = _op("Log", jnp.log, _log)


def _pow(op: Op, grad: jax.Array) -> tuple[Any, ...]:
    """``_PowGrad`` (math_grad.py); for ``integer_pow`` the exponent is a constant."""
    if len(op.inputs) == 1 and "y" in op.params:
        (x,), n = op.inputs, op.params["y"]
        return (grad * float(n) * integer_pow(n - 1)(x),)
    x, y = _xy(op, "Pow")
    gx = grad * y * power(x, y - 1)
    mask = x > 0
    safe_x = jnp.where(mask, x, jnp.ones_like(x))
    log_x = jnp.where(mask, log(safe_x), jnp.zeros_like(x))
    gy = grad * op.outputs[0] * log_x
    return _sum_to(gx, x), _sum_to(gy, y)


power = _op("Pow", lambda x, y: lax.pow(*jnp.broadcast_arrays(x, y)), _pow)


@functools.cache
def integer_pow(n: int) -> Callable[[jax.Array], jax.Array]:
    """TensorFlow's ``Pow`` with the constant exponent ``n``, computed as ``x ** n``."""
    return _op("Pow", lambda x: lax.integer_pow(x, n), _pow, params={"y": n})


def _div_no_nan(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_DivNoNanGrad`` (math_grad.py)."""
    x, y = _xy(op, "DivNoNan")
    return _sum_to(div_no_nan(grad, y), x), _sum_to(grad * div_no_nan(div_no_nan(-x, y), y), y)


div_no_nan = _op("DivNoNan", lambda x, y: jnp.where(y == 0, 0.0, x / y), _div_no_nan)


def _xdivy(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_XDivyGrad`` (math_grad.py); ``y**2`` is a ``Pow``."""
    x, y = op.inputs
    partial_x = xdivy(_is_nonzero(x), y)
    partial_y = xdivy(-x, integer_pow(2)(y))
    return _sum_to(partial_x * grad, x), _sum_to(partial_y * grad, y)


xdivy = _op("Xdivy", lambda x, y: jnp.where(x == 0, 0.0, x / y), _xdivy)


def _is_nonzero(x: jax.Array) -> jax.Array:
    """``cast(x != 0, x.dtype)``, made with a select."""
    return jnp.where(x != 0, jnp.ones_like(x), jnp.zeros_like(x))


def _xlogy(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_XLogyGrad`` (math_grad.py)."""
    x, y = _xy(op, "Xlogy")
    partial_x = xlogy(_is_nonzero(x), y)
    partial_y = xdivy(x, y)
    return _sum_to(partial_x * grad, x), _sum_to(partial_y * grad, y)


xlogy = _op("Xlogy", lambda x, y: jnp.where(x == 0, 0.0, x * jnp.log(y)), _xlogy)


def _xlog1py(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_XLog1pyGrad`` (math_grad.py)."""
    x, y = _xy(op, "Xlog1py")
    partial_x = xlog1py(_is_nonzero(x), y)
    partial_y = xdivy(x, y + 1.0)
    return _sum_to(partial_x * grad, x), _sum_to(partial_y * grad, y)


xlog1py = _op("Xlog1py", lambda x, y: jnp.where(x == 0, 0.0, x * jnp.log1p(y)), _xlog1py)


def _exclusive(x: jax.Array, axis: int, reverse: bool, fill: float) -> jax.Array:
    """``x`` shifted one place along ``axis`` (towards the end, or the start if ``reverse``)."""
    edge = jnp.full_like(lax.slice_in_dim(x, 0, 1, axis=axis), fill)
    if reverse:
        return jnp.concatenate([lax.slice_in_dim(x, 1, None, axis=axis), edge], axis)
    return jnp.concatenate([edge, lax.slice_in_dim(x, 0, -1, axis=axis)], axis)


def _cumsum(x: jax.Array, axis: int, exclusive: bool, reverse: bool) -> jax.Array:
    """TensorFlow's ``Cumsum``: plain JAX, whose rule is TensorFlow's ``_CumsumGrad``."""
    return lax.cumsum(_exclusive(x, axis, reverse, 0) if exclusive else x, axis, reverse=reverse)


def _axis_params(op: Op, gradient: str, names: tuple[str, ...]) -> list[Any]:
    """The static parameters ``names`` of a reduction or scan op, checked to be there."""
    if any(n not in op.params for n in names):
        raise ValueError(
            f"the gradient {gradient!r} for {op.type!r}: TensorFlow's {gradient} gradient "
            f"needs the op's {', '.join(names)}, which {op.type!r} does not have; map it to "
            f"the JAX op of that kind, or to another gradient."
        )
    return [op.params[n] for n in names]


def _cumprod_grad(op: Op, grad: jax.Array) -> jax.Array:
    """``_CumprodGrad`` (math_grad.py)."""
    x = _x(op, "Cumprod")
    axis, reverse = _axis_params(op, "Cumprod", ("axis", "reverse"))
    exclusive = op.params.get("exclusive", False)
    prod = cumprod(axis, exclusive, reverse)(x)
    out = _cumsum(prod * grad, axis, exclusive, not reverse)
    return div_no_nan(out, x)


@functools.cache
def cumprod(axis: int, exclusive: bool, reverse: bool) -> Callable[[jax.Array], jax.Array]:
    """TensorFlow's ``Cumprod`` along ``axis``, with its ``exclusive`` and ``reverse``."""
    params = {"axis": axis, "exclusive": exclusive, "reverse": reverse}

    def impl(x: jax.Array) -> jax.Array:
        return lax.cumprod(
            _exclusive(x, axis, reverse, 1) if exclusive else x, axis, reverse=reverse
        )

    return _op("Cumprod", impl, _cumprod_grad, params=params)


def _cumulative_logsumexp_grad(op: Op, grad: jax.Array) -> jax.Array:
    """``_CumulativeLogsumexpGrad`` (math_grad.py): the incoming gradient split into its
    positive and negative parts, each summed in log space; a leading ``-inf`` gives
    ``NaN`` there, as in TensorFlow (``inf - inf`` in the reversed scan)."""
    x = _x(op, "CumulativeLogsumexp")
    axis, reverse = _axis_params(op, "CumulativeLogsumexp", ("axis", "reverse"))
    scan = cumulative_logsumexp(axis, op.params.get("exclusive", False), not reverse)
    lowest = jnp.full_like(grad, jnp.finfo(grad.dtype).min)
    log_positive = jnp.where(grad > 0, jnp.log(grad), lowest)
    log_negative = jnp.where(grad < 0, jnp.log(-grad), lowest)
    out = op.outputs[0]
    return jnp.exp(scan(log_positive - out) + x) - jnp.exp(scan(log_negative - out) + x)


@functools.cache
def cumulative_logsumexp(
    axis: int, exclusive: bool, reverse: bool
) -> Callable[[jax.Array], jax.Array]:
    """TensorFlow's ``CumulativeLogsumexp`` along ``axis``, ``exclusive`` and ``reverse``."""
    params = {"axis": axis, "exclusive": exclusive, "reverse": reverse}

    def impl(x: jax.Array) -> jax.Array:
        shifted = _exclusive(x, axis, reverse, -math.inf) if exclusive else x
        return lax.cumlogsumexp(shifted, axis, reverse=reverse)

    return _op("CumulativeLogsumexp", impl, _cumulative_logsumexp_grad, params=params)


def _segment_axes(op: Op) -> tuple[jax.Array, int, int]:
    """The segment ids of a ``scatter-mul`` that multiplies whole slices of one axis of
    ``operand`` -- ``jax.ops.segment_prod``'s, ``x.at[ids].multiply(v)``,
    ``x.at[:, ids].multiply(v)`` -- with that axis of ``operand`` and of the updates."""
    operand, indices, updates = _inputs(op, 3, "UnsortedSegmentProd", "operand, ids, data")
    dims = op.params.get("dimension_numbers")
    if dims is not None and len(dims.inserted_window_dims) == 1 and indices.ndim == 2:
        (axis,) = dims.inserted_window_dims
        window = tuple(dims.update_window_dims)
        scatter = [d for d in range(updates.ndim) if d not in window]
        rest = [operand.shape[d] for d in range(operand.ndim) if d != axis]
        if (
            indices.shape[1] == 1
            and tuple(dims.scatter_dims_to_operand_dims) == (axis,)
            and not dims.operand_batching_dims
            and len(scatter) == 1
            and [updates.shape[d] for d in window] == rest
        ):
            return indices[:, 0], axis, scatter[0]
    raise ValueError(
        f"the gradient 'UnsortedSegmentProd' for {op.type!r}: TensorFlow's gradient "
        "differentiates a segment product (jax.ops.segment_prod, or x.at[ids].multiply(v): "
        "one id per whole slice of one axis), not this scatter; write it as one."
    )


def _unsorted_segment_prod(op: Op, grad: jax.Array) -> tuple[Any, None, jax.Array]:
    """``_UnsortedSegmentProdGrad`` (math_grad.py), for a ``scatter-mul`` of whole slices
    into ``operand`` (ones, for ``jax.ops.segment_prod``): segments with no zero divide
    the product by each entry, with one zero give that entry the product of the others,
    with two or more give zeros; entries whose id is out of range get 0.  The scattered
    axis is moved first, as TensorFlow's segments are."""
    ids, axis, scatter = _segment_axes(op)
    operand, output, grad = (jnp.moveaxis(v, axis, 0) for v in (op.inputs[0], op.outputs[0], grad))
    data = jnp.moveaxis(op.inputs[2], scatter, 0)
    n = operand.shape[0]

    def segment_sum(v: jax.Array) -> jax.Array:
        return jax.ops.segment_sum(v, ids, num_segments=n)

    def gather(v: jax.Array) -> jax.Array:
        return v[jnp.clip(ids, 0, n - 1)]

    is_zero = data == 0
    num_zeros = segment_sum(is_zero.astype(jnp.int32))
    kept = jnp.where(num_zeros > 1, jnp.zeros_like(grad), grad)
    non_zero = jnp.where(is_zero, jnp.ones_like(data), data)
    non_zero_prod = operand * jax.ops.segment_prod(non_zero, ids, num_segments=n)
    partial = jnp.where(is_zero, gather(non_zero_prod), gather(output) / data)
    valid = ((ids >= 0) & (ids < n)).reshape((-1,) + (1,) * (data.ndim - 1))
    gathered_grad = jnp.where(valid, gather(kept), jnp.zeros_like(data))
    prod = jax.ops.segment_prod(data, ids, num_segments=n)
    return (
        jnp.moveaxis(grad * prod, 0, axis),
        None,
        jnp.moveaxis(gathered_grad * partial, 0, scatter),
    )


# --- TensorFlow's gradient functions, by op type ----------------------------------------


def _add(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_AddGrad``."""
    x, y = _xy(op, "Add")
    return _sum_to(grad, x), _sum_to(grad, y)


def _sub(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_SubGrad``."""
    x, y = _xy(op, "Sub")
    return _sum_to(grad, x), _sum_to(-grad, y)


def _mul(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_MulGrad``."""
    x, y = _xy(op, "Mul")
    return _sum_to(grad * y, x), _sum_to(x * grad, y)


def _atan2(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_Atan2Grad``: ``atan2(y, x)``'s gradient ``grad / (y**2 + x**2)`` times ``x``, ``-y``."""
    y, x = _xy(op, "Atan2")
    grad_inv = grad / (jnp.square(y) + jnp.square(x))
    return _sum_to(x * grad_inv, y), _sum_to(-y * grad_inv, x)


def _next_after(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_NextAfterGrad`` (math_grad.py): ones for ``x1``, real zeros for ``x2``."""
    x1, x2 = _xy(op, "NextAfter")
    return _sum_to(jnp.ones_like(x1) * grad, x1), _sum_to(jnp.zeros_like(x2) * grad, x2)


def _real_div(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_RealDivGrad``."""
    x, y = _xy(op, "RealDiv")
    return _sum_to(grad / y, x), _sum_to(grad * ((-x / y) / y), y)


#: ``_MaximumMinimumGrad``'s mask: where ``x`` takes all of the gradient (ties included;
#: a NaN sends it to ``y``).  JAX splits a tie in half.
_FIRST_WINS: dict[str, Callable[[Any, Any], jax.Array]] = {
    "Maximum": jnp.greater_equal,
    "Minimum": jnp.less_equal,
}


def _maximum_minimum(name: str) -> GradientFunction:
    """``_MaximumMinimumGrad``: all of ``grad`` to ``x`` where ``_FIRST_WINS[name](x, y)``."""

    def gradient(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
        x, y = _xy(op, name)
        zeros = jnp.zeros_like(grad)
        xmask = _FIRST_WINS[name](x, y)
        return _sum_to(jnp.where(xmask, grad, zeros), x), _sum_to(jnp.where(xmask, zeros, grad), y)

    gradient.__doc__ = f"``_{name}Grad``."
    return gradient


def _min_or_max(op: Op, grad: jax.Array) -> jax.Array:
    """``_MinOrMaxGrad`` (``Max`` and ``Min``), with a select-made indicator."""
    x = _x(op, "Max")
    (axes,) = _axis_params(op, "Max", ("axes",))
    y = jnp.expand_dims(op.outputs[0], axes)
    grad = jnp.expand_dims(grad, axes)
    indicators = jnp.where(y == x, jnp.ones_like(x), jnp.zeros_like(x))
    num_selected = jnp.sum(indicators, axis=axes, keepdims=True)
    return (indicators / num_selected) * grad


def _prod(op: Op, grad: jax.Array) -> jax.Array:
    """``_ProdGrad``: the product of the other entries as two exclusive ``Cumprod``."""
    x = _x(op, "Prod")
    (axes,) = _axis_params(op, "Prod", ("axes",))
    reduced = tuple(axes)
    other = tuple(a for a in range(x.ndim) if a not in reduced)
    grad = jnp.broadcast_to(jnp.expand_dims(grad, reduced), x.shape)
    permuted = jnp.transpose(x, reduced + other)
    reshaped = permuted.reshape(math.prod(x.shape[a] for a in reduced), -1)
    left = cumprod(0, True, False)(reshaped)
    right = cumprod(0, True, True)(reshaped)
    y = (left * right).reshape(permuted.shape)
    return grad * jnp.transpose(y, [int(a) for a in np.argsort(reduced + other)])


def _clip_by_value(op: Op, grad: jax.Array) -> tuple[jax.Array, ...]:
    """``_clip_by_value_grad`` (clip_ops.py), the gradient of the ``ClipByValue`` op."""
    x, lo, hi = _inputs(op, 3, "ClipByValue", "t, clip_value_min, clip_value_max")
    zeros = jnp.zeros_like(grad)
    below, above = x < lo, x > hi
    return (
        jnp.where(below | above, zeros, grad),
        _sum_to(jnp.where(below, grad, zeros), lo),
        _sum_to(jnp.where(above, grad, zeros), hi),
    )


def _is_call_of(op: Op, name: str) -> bool:
    """Whether ``op`` is the call of the named JAX function ``name`` (``jax.nn.elu``'s ``jit``)."""
    return _jax.named_call_body(op.params, name) is not None


def _elu(op: Op, grad: jax.Array) -> Sequence[Any]:
    """``_EluGrad`` (nn_grad.py); ``jax.nn.elu``'s ``alpha`` input (TensorFlow's is 1).

    ``alpha`` gets the derivative of ``where(x > 0, x, alpha * expm1(x))``.  Only the call
    of ``jax.nn.elu`` has that input: any other op is TensorFlow's one-input ``Elu``.
    """
    y = op.outputs[0]
    if not _is_call_of(op, "elu"):
        _x(op, "Elu")
        return [elu_grad(grad, y, 1.0)]
    x, *alpha = op.inputs
    if not alpha:
        return [elu_grad(grad, y, 1.0)]
    (a,) = alpha
    dx = elu_grad(grad, y, a)
    return [dx, _sum_to(jnp.where(x > 0, jnp.zeros_like(grad), jnp.expm1(x) * grad), a)]


def _leaky_relu(op: Op, grad: jax.Array) -> Sequence[Any]:
    """``_LeakyReluGrad`` (nn_grad.py), for ``jax.nn.leaky_relu``'s call.

    TensorFlow's ``alpha`` attribute is the call's second input, which gets the
    derivative of ``where(x >= 0, x, alpha * x)``; with the default slope the call has
    none, and ``alpha`` is read off its body.  An override's op (:func:`with_attributes`)
    has it in ``op.params``, as TensorFlow's attribute, with no gradient.  Any other op
    has no ``alpha``: TensorFlow's ``op.get_attr("alpha")`` fails there too.
    """
    if "alpha" not in op.params and not _is_call_of(op, "leaky_relu"):
        raise ValueError(
            f"the gradient 'LeakyRelu' for {op.type!r}: TensorFlow's LeakyRelu gradient "
            f"reads the op's alpha attribute, which {op.type!r} does not have; map "
            f"jax.nn.leaky_relu ('LeakyRelu') to it, or {op.type!r} to another gradient."
        )
    if "alpha" in op.params or len(op.inputs) == 1:
        return [leaky_relu_grad(grad, _x(op, "LeakyRelu"), _leaky_relu_alpha(op))]
    x, alpha = _inputs(op, 2, "LeakyRelu", "features, alpha")
    da = jnp.where(x >= 0, jnp.zeros_like(grad), x * grad)
    return [leaky_relu_grad(grad, x, alpha), _sum_to(da, alpha)]


def _leaky_relu_alpha(op: Op) -> Any:
    """``jax.nn.leaky_relu``'s slope: the attribute, the second input, or read off the
    call's body as ``-leaky_relu(-1)`` (the default slope is no input)."""
    if "alpha" in op.params:
        return op.params["alpha"]
    if len(op.inputs) == 2:
        return op.inputs[1]
    body = _jax.named_call_body(op.params, "leaky_relu")
    assert body is not None  # _leaky_relu let through only this call
    (negated,) = body(-jnp.ones_like(op.inputs[0]))
    return -jnp.ravel(negated)[0] if jnp.size(negated) else -negated


def with_attributes(jax_name: str, fn: GradientFunction) -> GradientFunction:
    """``fn`` called as TensorFlow calls it on the op ``jax_name``.

    One JAX function takes a TensorFlow attribute as a trailing input:
    ``jax.nn.leaky_relu(x, negative_slope)`` is TensorFlow's ``LeakyRelu(features)`` with
    the attribute ``alpha``.  For it, ``fn`` sees one input and ``op.params["alpha"]``,
    and the slope gets no gradient (``None``).  Every other op's inputs are TensorFlow's
    (the inputs TensorFlow has that JAX keeps in ``params`` -- a reduction's ``axis`` --
    are integers), so ``fn`` is returned as it is.
    """
    if jax_name != "leaky_relu":
        return fn

    def gradient(op: Op, grad: Any) -> Any:
        tensorflow_op = Op(
            op.type, op.inputs[:1], op.outputs, {**op.params, "alpha": _leaky_relu_alpha(op)}
        )
        got = fn(tensorflow_op, grad)
        grads = list(got) if isinstance(got, list | tuple) else [got]
        return [*grads, *[None] * (len(op.inputs) - 1)]

    functools.update_wrapper(gradient, fn)
    return gradient


def _no_gradient(op: Op, grad: jax.Array) -> list[None]:
    """``_CeilGrad``, ``_FloorGrad``, ``_RoundGrad``: ``[None]``."""
    del op, grad
    return [None]


def _mat_mul(op: Op, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_MatMulGrad`` for ``x @ w`` of two matrices (no transposes)."""
    a, b = _xy(op, "MatMul")
    dims = op.params.get("dimension_numbers", _MATMUL)
    sa, sb = jnp.shape(a), jnp.shape(b)
    fits = len(sa) == len(sb) == 2 and sa[1] == sb[0] and grad.shape == (sa[0], sb[1])
    if not fits or dims != _MATMUL:
        raise ValueError(
            f"the gradient 'MatMul' for {op.type!r}: TensorFlow's MatMul gradient takes "
            f"the product of two matrices, x @ w, but the op has inputs of shapes {sa} and "
            f"{sb}, an output of shape {grad.shape} and "
            f"dimension numbers {dims}; write the product as x @ w of two 2-D arrays, or "
            "map the op to another gradient."
        )
    return grad @ b.T, a.T @ grad


_MATMUL = (((1,), (0,)), ((), ()))


def _unary(name: str, formula: Callable[[Any, Any, jax.Array], Any]) -> GradientFunction:
    """The gradient of a one-input op: ``formula(x, y, grad)``, ``y`` the op's output."""

    def gradient(op: Op, grad: jax.Array) -> Any:
        return formula(_x(op, name), op.outputs[0], grad)

    gradient.__name__ = gradient.__qualname__ = f"_{name}Grad"
    return gradient


GRADIENTS: dict[str, GradientFunction] = {
    "Abs": _unary("Abs", lambda x, y, g: g * jnp.sign(x)),
    "Add": _add,
    "AddV2": _add,
    "Atan2": _atan2,
    "Atanh": _unary("Atanh", lambda x, y, g: g * reciprocal(1 - jnp.square(x))),
    "Cast": _unary("Cast", lambda x, y, g: g),
    "Ceil": _no_gradient,
    "ClipByValue": _clip_by_value,
    "Cos": _unary("Cos", lambda x, y, g: -g * jnp.sin(x)),
    "Cumprod": _cumprod_grad,
    "CumulativeLogsumexp": _cumulative_logsumexp_grad,
    "DivNoNan": _div_no_nan,
    "Elu": _elu,
    "Exp": _unary("Exp", lambda x, y, g: g * y),
    "Expm1": _unary("Expm1", lambda x, y, g: g * jnp.exp(x)),
    "Floor": _no_gradient,
    "LeakyRelu": _leaky_relu,
    "Log": _log,
    "Log1p": _unary("Log1p", lambda x, y, g: g * reciprocal(1 + x)),
    "MatMul": _mat_mul,
    "Max": _min_or_max,
    "Maximum": _maximum_minimum("Maximum"),
    "Min": _min_or_max,
    "Minimum": _maximum_minimum("Minimum"),
    "Mul": _mul,
    "NextAfter": _next_after,
    "Neg": _unary("Neg", lambda x, y, g: -g),
    "Pow": _pow,
    "Prod": _prod,
    "RealDiv": _real_div,
    "Reciprocal": _reciprocal,
    "Relu": _unary("Relu", lambda x, y, g: relu_grad(g, y)),
    "Relu6": _unary("Relu6", lambda x, y, g: relu6_grad(g, y)),
    "Round": _no_gradient,
    "Rsqrt": _unary("Rsqrt", lambda x, y, g: rsqrt_grad(y, g)),
    "Selu": _unary("Selu", lambda x, y, g: selu_grad(g, y)),
    "Sigmoid": _unary("Sigmoid", lambda x, y, g: g * y * (1 - y)),
    "Sign": _unary("Sign", lambda x, y, g: jnp.zeros_like(x)),
    "Sin": _unary("Sin", lambda x, y, g: g * jnp.cos(x)),
    "Softplus": _unary("Softplus", lambda x, y, g: g * jax.nn.sigmoid(x)),
    "Softsign": _unary("Softsign", lambda x, y, g: g / jnp.square(jnp.abs(x) + 1)),
    "Sqrt": _unary("Sqrt", lambda x, y, g: sqrt_grad(y, g)),
    "Square": _unary("Square", lambda x, y, g: g * (x * 2.0)),
    "Sub": _sub,
    "Tanh": _unary("Tanh", lambda x, y, g: g * (1 - y * y)),
    "UnsortedSegmentProd": _unsorted_segment_prod,
    "Xlog1py": _xlog1py,
    "Xlogy": _xlogy,
}
"""TensorFlow's gradient function of each op type, ``fn(op, grad)``."""


def maximum_minimum(name: str) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """``tf.maximum`` (``"Maximum"``) or ``tf.minimum`` (``"Minimum"``) with TensorFlow's
    derivative in forward and reverse mode alike: the tangent or the cotangent goes to ``x``
    where :data:`_FIRST_WINS` says, as in ``_MaximumMinimumGrad`` (for ``fg.clip``)."""
    pick = jnp.maximum if name == "Maximum" else jnp.minimum

    @jax.custom_jvp
    def extremum(x: jax.Array, y: jax.Array) -> jax.Array:
        return pick(x, y)

    @extremum.defjvp
    def _jvp(
        primals: tuple[jax.Array, jax.Array], tangents: tuple[jax.Array, jax.Array]
    ) -> tuple[jax.Array, jax.Array]:
        x, y = primals
        dx, dy = tangents
        return pick(x, y), jnp.where(_FIRST_WINS[name](x, y), dx, dy)

    return extremum
