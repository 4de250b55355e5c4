"""Gradient overrides: ``tf.custom_gradient``, ``tf.RegisterGradient`` and
``gradient_override_map`` for JAX functions.

``custom_gradient`` writes a new function with its own gradient.  ``RegisterGradient``
names a gradient function, and ``gradient_override_map`` gives that gradient to ops of
an *existing* function, found by name in its jaxpr (``funcgrad._core.op_gradients`` and
``funcgrad._core.rewrite`` do the rewriting); ``identity`` is ``tf.identity``, an op to
override.  The only global state is the registry of named gradients, as in TensorFlow
(the built-ins and TensorFlow's gradient function of each op type, from
``funcgrad._core.tf_gradients``, are registered at import); it is guarded by a lock.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import threading
import warnings
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import overload

import jax
import jax.numpy as jnp
from jax import dtypes
from jax import lax
from jax.custom_derivatives import SymbolicZero

from funcgrad import _checks
from funcgrad._core import differentiate as _differentiate
from funcgrad._core import jax_internals as _jax
from funcgrad._core import op_gradients as _op_gradients
from funcgrad._core import rewrite as _rewrite
from funcgrad._core import tf_gradients as _tf_gradients
from funcgrad._types import Cotangent
from funcgrad._types import Function
from funcgrad._types import GradientFunction
from funcgrad._types import Op
from funcgrad._types import PyTree
from funcgrad._types import non_arrays

__all__ = [
    "Op",
    "RegisterGradient",
    "UnusedOverrideWarning",
    "custom_gradient",
    "gradient_override_map",
    "identity",
]


class UnusedOverrideWarning(UserWarning):
    """A ``gradient_override_map`` key matched no op of the function it was given."""


# --- the registry -----------------------------------------------------------------------

_REGISTRY: dict[str, GradientFunction] = {}
_LOCK = threading.Lock()


class RegisterGradient:
    """Register a gradient function under a name (``tf.RegisterGradient``).

    ``fn(op, grad)`` receives the :class:`Op` and the cotangent of its output (a tuple
    of cotangents when the op has several outputs) and returns one cotangent per input
    of ``op`` -- a bare value when the op has one input.  ``None`` means zero; a
    cotangent is cast to its input's dtype and must have its input's shape.  Built in:
    ``"Identity"`` (straight-through), ``"StopGradient"`` (zero), ``"ReverseGradient"``
    (negated straight-through), ``"ClippedIdentity"`` (straight-through where
    ``|x| <= 1``, zero outside) and, under its op type, TensorFlow's own gradient
    function of every op in ``TF_OP_NAMES`` and of ``"Reciprocal"`` and ``"DivNoNan"``
    (``{"Mul": "Add"}`` differentiates a product as a sum, as in TensorFlow).

    Args:
      op_type: the name that ``gradient_override_map`` mappings refer to.

    Raises:
      TypeError: ``op_type`` is not a non-empty string, or the decorated object is not
        callable.
      KeyError: a gradient is already registered under ``op_type``.

    Example:
      >>> @fg.RegisterGradient("DoubleStraightThrough")
      ... def _double(op, grad):
      ...     return 2.0 * grad
      >>> f = fg.gradient_override_map(jnp.sign, {"Sign": "DoubleStraightThrough"})
      >>> jax.grad(lambda x: f(x).sum())(jnp.array([-3.0, 0.5])).tolist()
      [2.0, 2.0]
    """

    def __init__(self, op_type: str) -> None:
        if not isinstance(op_type, str) or not op_type:
            raise TypeError(
                f"fg.RegisterGradient(op_type): op_type must be a non-empty string, got "
                f"{op_type!r}."
            )
        self._op_type = op_type

    def __call__(self, fn: Function) -> Function:
        """Register ``fn`` and return it unchanged."""
        if not callable(fn):
            raise TypeError(
                f"fg.RegisterGradient({self._op_type!r}): decorate a function "
                f"fn(op, grad), got {type(fn).__name__}."
            )
        with _LOCK:
            if self._op_type in _REGISTRY:
                raise KeyError(
                    f"fg.RegisterGradient({self._op_type!r}): a gradient is already "
                    "registered under this name; choose another name."
                )
            _REGISTRY[self._op_type] = fn
        return fn


def _first_output(op: Op, grad: Cotangent) -> Cotangent:
    return grad[0] if len(op.outputs) > 1 else grad


def _to_first_input(op: Op, grad: Cotangent) -> Cotangent:
    return grad if len(op.inputs) == 1 else (grad, *([None] * (len(op.inputs) - 1)))


@RegisterGradient("Identity")
def _identity(op: Op, grad: Cotangent) -> Cotangent:
    return _to_first_input(op, _first_output(op, grad))


@RegisterGradient("StopGradient")
def _stop_gradient(op: Op, grad: Cotangent) -> Cotangent:
    del grad
    return [None] * len(op.inputs)


@RegisterGradient("ReverseGradient")
def _reverse_gradient(op: Op, grad: Cotangent) -> Cotangent:
    return _to_first_input(op, -_first_output(op, grad))


@RegisterGradient("ClippedIdentity")
def _clipped_identity(op: Op, grad: Cotangent) -> Cotangent:
    grad = _first_output(op, grad)
    inside = jnp.abs(op.inputs[0]) <= 1
    return _to_first_input(op, jnp.where(inside, grad, jnp.zeros_like(grad)))


def _register_tensorflow_gradients() -> None:
    """TensorFlow's gradient function of each op type, registered under the op type."""
    for op_type, fn in _tf_gradients.GRADIENTS.items():
        RegisterGradient(op_type)(fn)


_register_tensorflow_gradients()


def identity(x: PyTree) -> PyTree:
    """``x`` unchanged, as an op that ``{"Identity": ...}`` overrides reach (``tf.identity``).

    ``lambda x: x`` leaves no op in a function's jaxpr, so an override has nothing to
    attach to; ``fg.identity`` emits JAX's ``copy`` primitive, which survives ``jax.jit``
    and is the op ``"Identity"`` names in ``gradient_override_map``.  Its own gradient is
    the identity.

    Args:
      x: an array, or a pytree of arrays (each leaf gets its own op).

    Returns:
      ``x``'s values, as new arrays.

    Raises:
      TypeError: a leaf of ``x`` is not an array or a number.

    Example:
      >>> flip = fg.gradient_override_map(fg.identity, {"Identity": "ReverseGradient"})
      >>> float(jax.grad(lambda x: 3.0 * flip(x))(jnp.float32(2.0)))
      -3.0
    """
    bad = non_arrays(x, "x")
    if bad:
        raise TypeError(f"fg.identity(x): {'; '.join(bad)}; pass an array or a pytree of arrays.")
    return jax.tree.map(lambda v: lax.copy_p.bind(jnp.asarray(v)), x)


# --- custom_gradient --------------------------------------------------------------------


def custom_gradient(f: Function) -> Function:
    """Give a function its own gradient, with ``tf.custom_gradient``'s signature.

    ``f(*args)`` returns ``(y, grad_fn)``; ``grad_fn(dy)`` takes the cotangent of ``y``
    (structured like ``y``) and returns the cotangents of ``args``; a ``grad_fn`` whose
    signature takes one argument per output, TensorFlow's ``grad_fn(dy1, dy2)``, gets
    one cotangent per leaf of ``y`` (in ``jax.tree.leaves`` order, which is TensorFlow's
    ``nest.flatten`` order), as TensorFlow passes them.  Built on
    ``jax.custom_vjp``: the result works under ``jax.jit``, ``jax.vmap`` and
    reverse-mode differentiation to any order, as far as ``grad_fn`` is itself
    differentiable (its derivative is taken by JAX).

    Differences from ``tf.custom_gradient``: a ``grad_fn`` of one parameter gets ``dy``
    structured like ``y`` even when ``y`` is a tuple or dict (TensorFlow would pass one
    argument per output tensor); there are no ``variables`` -- every input is an
    explicit argument; keyword arguments are not accepted.  As in TensorFlow, a list
    or tuple of one cotangent for one argument is that cotangent (unless the argument
    is itself a list or tuple).  Differences from ``jax.custom_gradient``: with one
    argument ``grad_fn`` returns a bare cotangent even when that argument is a pytree
    such as a dict (JAX wants a 1-tuple); a ``None`` cotangent, whole or as a leaf,
    means zero; integer and boolean arguments get no gradient; cotangents are cast to
    their argument's dtype and their shapes checked.  As with ``jax.custom_vjp``,
    forward-mode differentiation (``jax.jvp``, ``jax.jacfwd``) is not available.  As in
    TensorFlow, ``y`` is differentiated with ``grad_fn`` at every order, so
    ``jax.hessian`` (forward over reverse) raises too, with the fix: ``fg.hessians``
    and ``fg.hvp`` go reverse over reverse.

    ``f`` and ``grad_fn`` may use arrays made outside them (a filter kernel built with
    ``jnp``), as TensorFlow code does: ``f`` and ``grad_fn`` are traced when the
    function is called, and what they capture is passed on, so they work inside
    ``fg.gradients`` and ``jax.jit``.  A captured value that is being differentiated is
    an error that says the fix (pass it as an argument).  Where ``grad_fn`` is, or
    calls, the function itself (a gradient to every order), that inner call is traced
    when it is differentiated.

    Args:
      f: a function of positional JAX arrays (or pytrees of them) returning
        ``(y, grad_fn)``.

    Returns:
      A function with ``f``'s arguments that returns ``y`` and whose gradient is
      ``grad_fn``'s.

    Raises:
      TypeError: ``f`` is not callable; at call time, ``f`` does not return a pair
        ``(y, grad_fn)`` or keyword arguments are given; under forward-mode
        differentiation; at differentiation time, ``grad_fn`` takes neither ``dy`` nor
        one argument per output, or returns something that is not an array or ``None``.
      ValueError: at differentiation time, ``grad_fn`` returns the wrong number of
        cotangents, a cotangent's shape or structure does not match its argument, or
        ``f`` or ``grad_fn`` captures a value being differentiated.

    Example:
      >>> @fg.custom_gradient
      ... def log1pexp(x):
      ...     e = jnp.exp(x)
      ...     return jnp.log1p(e), lambda dy: dy * (1 - 1 / (1 + e))
      >>> float(jax.grad(log1pexp)(jnp.float32(100.0)))
      1.0
    """
    if not callable(f):
        raise TypeError(f"fg.custom_gradient(f): f must be callable, got {type(f).__name__}.")
    caller = f"fg.custom_gradient({getattr(f, '__name__', 'f')})"

    def split(xs: tuple[Any, ...]) -> tuple[PyTree, Callable[[PyTree], Any]]:
        out = f(*xs)
        if not (isinstance(out, tuple) and len(out) == 2 and callable(out[1])):
            raise TypeError(
                f"{caller}: f must return a pair (y, grad_fn), got {type(out).__name__}; "
                "return the value and the function from dy to the inputs' cotangents."
            )
        return out

    @functools.wraps(f)
    def with_gradient(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError(
                f"{caller}: keyword arguments {sorted(kwargs)} are not supported; pass "
                "them positionally."
            )
        key = getattr(f, "__code__", f)
        staging = _STAGING.get()
        if key in staging:  # f's gradient reaches f again: staged when differentiated
            with _rewrite.reverse_mode_only(caller):
                return _deferred(caller, split, args)
        token = _STAGING.set((*staging, key))
        try:
            with _rewrite.reverse_mode_only(caller):
                return _staged(caller, split, args)
        finally:
            _STAGING.reset(token)

    return with_gradient  # type: ignore[return-value]


#: The functions whose ``custom_gradient`` is being staged, innermost last (a cycle stops).
_STAGING: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar(
    "funcgrad_custom_gradient_staging", default=()
)

_Split = Callable[[Any], tuple[PyTree, Callable[..., Any]]]


def _gradient(caller: str, grad_fn: Callable[..., Any], dy: PyTree, args: tuple[Any, ...]) -> Any:
    """``grad_fn``'s cotangents for ``dy``, in either calling convention, checked to be arrays.

    ``grad_fn(dy)`` with ``dy`` structured like ``y``, or TensorFlow's
    ``grad_fn(dy1, ..., dyn)`` with one ``dy`` per output where its signature asks for
    that (:func:`_one_per_output`).  For one argument that is not itself a list or tuple,
    a list or tuple of one cotangent is that cotangent (TensorFlow flattens what
    ``grad_fn`` returns).
    """
    dys = jax.tree.leaves(dy)
    got = grad_fn(*dys) if _one_per_output(caller, grad_fn, len(dys)) else grad_fn(dy)
    bad = non_arrays(got, "grad_fn(dy)")
    if bad:
        raise TypeError(
            f"{caller}: {'; '.join(bad)}; grad_fn must return one cotangent per argument "
            "of f: an array (a pytree of them for a pytree argument), or None for zero."
        )
    one_listed = isinstance(got, list | tuple) and len(got) == 1
    if one_listed and len(args) == 1 and not isinstance(args[0], list | tuple):
        return got[0]
    return got


def _one_per_output(caller: str, grad_fn: Callable[..., Any], n: int) -> bool:
    """Whether ``grad_fn`` takes one ``dy`` per output (TensorFlow's), not one like ``y``.

    Decided by its signature: TensorFlow's form where ``grad_fn`` cannot take a single
    argument but takes ``n``, or takes ``*dys``; funcgrad's where it takes one argument
    (or has no signature to read).
    """
    try:
        signature = inspect.signature(grad_fn)
    except (TypeError, ValueError):
        return False
    params = list(signature.parameters.values())
    variadic = bool(params) and params[0].kind is inspect.Parameter.VAR_POSITIONAL
    if _binds(signature, 1) and not variadic:
        return False
    if _binds(signature, n):
        return True
    raise TypeError(
        f"{caller}: grad_fn{signature} cannot take the cotangents of f's {n} output(s); "
        "take one argument structured like f's output (grad_fn(dy)), or one per output "
        "as TensorFlow passes them (grad_fn(dy1, dy2, ...))."
    )


def _binds(signature: inspect.Signature, n: int) -> bool:
    try:
        signature.bind(*range(n))
    except TypeError:
        return False
    return True


def _staged(caller: str, split: _Split, args: tuple[Any, ...]) -> PyTree:
    """``f(*args)`` with ``grad_fn`` as its gradient, both staged to jaxprs now.

    ``f`` and ``grad_fn`` are traced when called, and every value they close over --
    a JAX array made by the function that calls ``f``, which is a tracer once
    ``fg.gradients`` or ``jax.jit`` traces it -- becomes an operand of the
    ``jax.custom_vjp``: nothing it runs later reads a tracer of a finished trace.
    ``grad_fn``'s own captures (values of ``f``) are the residuals.
    """
    backward: dict[str, Any] = {}

    def forward(*xs: Any) -> tuple[PyTree, list[Any]]:
        y, grad_fn = split(xs)
        dy = jax.tree.map(lambda v: jax.ShapeDtypeStruct(jnp.shape(v), jnp.result_type(v)), y)
        closed, shape = _jax.trace_with_shape(lambda dy: _gradient(caller, grad_fn, dy, args), dy)
        backward.update(gradient=closed.jaxpr, tree=jax.tree.structure(shape), dy=dy)
        return y, list(closed.consts)

    closed, (y_shape, _) = _jax.trace_with_shape(forward, *args)
    n_y, y_tree = len(jax.tree.leaves(y_shape)), jax.tree.structure(y_shape)

    def run(xs: tuple[Any, ...], captured: list[Any]) -> tuple[PyTree, list[Any]]:
        outs = _jax.Closed(closed.jaxpr, tuple(captured))(*jax.tree.leaves(xs))
        return jax.tree.unflatten(y_tree, outs[:n_y]), outs[n_y:]

    @jax.custom_vjp
    def call(xs: tuple[Any, ...], captured: list[Any]) -> PyTree:
        return run(xs, captured)[0]

    def fwd(xs: tuple[Any, ...], captured: list[Any]) -> tuple[PyTree, list[Any]]:
        if any(c.perturbed for c in captured):
            raise _differentiate.closure_error(f"{caller}: f or its grad_fn")
        xs, captured = jax.tree.map(lambda p: p.value, (xs, captured))
        # y by the function itself, so that an outer derivative of y takes grad_fn too,
        # as TensorFlow differentiates the custom gradient's output; the residuals (what
        # grad_fn captured of f) by f's own ops.
        return call(xs, captured), run(xs, captured)[1]

    def bwd(residuals: list[Any], dy: PyTree) -> tuple[Any, None]:
        dy_leaves = [  # a zero cotangent (symbolic, or of an integer y) as grad_fn's dy
            jnp.zeros(s.shape, s.dtype)
            if isinstance(d, SymbolicZero) or d.dtype == dtypes.float0
            else d
            for d, s in zip(jax.tree.leaves(dy), jax.tree.leaves(backward["dy"]), strict=True)
        ]
        outs = _jax.Closed(backward["gradient"], tuple(residuals))(*dy_leaves)
        got = jax.tree.unflatten(backward["tree"], outs)
        return tuple(_differentiate.input_cotangents(caller, got, args, bare=True)), None

    call.defvjp(fwd, bwd, symbolic_zeros=True)
    return call(args, list(closed.consts))


def _deferred(caller: str, split: _Split, args: tuple[Any, ...]) -> PyTree:
    """``f(*args)`` with ``grad_fn`` as its gradient, ``f`` traced again when differentiated.

    For a function that its own gradient reaches again (``tf.custom_gradient``'s habit
    of returning the function itself as the gradient of its gradient), where staging
    every order now would never end.  Its residuals are its arguments: the backward
    calls ``f`` again for a ``grad_fn`` of the trace it runs in.
    """

    @jax.custom_vjp
    def call(*xs: Any) -> PyTree:
        return split(xs)[0]

    def fwd(*xs: Any) -> tuple[PyTree, tuple[Any, ...]]:
        return call(*xs), xs

    def bwd(xs: tuple[Any, ...], dy: PyTree) -> tuple[Any, ...]:
        got = _gradient(caller, split(xs)[1], dy, args)
        return tuple(_differentiate.input_cotangents(caller, got, args, bare=True))

    call.defvjp(fwd, bwd)
    return call(*args)


# --- gradient_override_map --------------------------------------------------------------

#: TensorFlow op name -> the JAX name it overrides (a primitive or a named function).
TF_OP_NAMES: Mapping[str, str] = {
    "Abs": "abs",
    "Add": "add",
    "AddV2": "add",
    "Atan2": "atan2",
    "Atanh": "atanh",
    "Cast": "convert_element_type",
    "Ceil": "ceil",
    "ClipByValue": "clamp",
    "Cos": "cos",
    "Cumprod": "cumprod",
    "CumulativeLogsumexp": "cumlogsumexp",
    "Elu": "elu",
    "Exp": "exp",
    "Expm1": "expm1",
    "Floor": "floor",
    "Identity": "copy",
    "LeakyRelu": "leaky_relu",
    "Log": "log",
    "Log1p": "log1p",
    "MatMul": "dot_general",
    "Max": "reduce_max",
    "Maximum": "max",
    "Min": "reduce_min",
    "Minimum": "min",
    "Mul": "mul",
    "Neg": "neg",
    "NextAfter": "nextafter",
    "Pow": "pow",
    "Prod": "reduce_prod",
    "RealDiv": "div",
    "Relu": "relu",
    "Relu6": "relu6",
    "Round": "round",
    "Rsqrt": "rsqrt",
    "Selu": "selu",
    "Sigmoid": "logistic",
    "Sign": "sign",
    "Sin": "sin",
    "Softplus": "softplus",
    "Softsign": "soft_sign",
    "Sqrt": "sqrt",
    "Square": "square",
    "StopGradient": "stop_gradient",
    "Sub": "sub",
    "Tanh": "tanh",
    "UnsortedSegmentProd": "scatter-mul",
    "Xlog1py": "xlog1py",
    "Xlogy": "xlogy",
}


@functools.cache
def _jax_names() -> frozenset[str]:
    return _jax.first_order_primitive_names() | _rewrite.NAMED_FUNCTIONS


def _rules(caller: str, mapping: Any) -> dict[str, tuple[str, GradientFunction]]:
    """Check ``mapping`` now and resolve it: JAX name -> (key as written, gradient fn)."""
    if not isinstance(mapping, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
    ):
        raise TypeError(
            f"{caller}: the mapping must be a dict from op names to gradient names "
            f"(strings), e.g. {{'Sign': 'Identity'}}; got {mapping!r}."
        )
    with _LOCK:
        registry = dict(_REGISTRY)
    problems: list[str] = []
    hints: list[str] = []
    rules: dict[str, tuple[str, GradientFunction]] = {}
    for key, grad_name in mapping.items():
        name = TF_OP_NAMES.get(key, key)
        if name not in _jax_names():
            valid = [*TF_OP_NAMES, *sorted(_jax_names())]
            problems.append(f"unknown op {key!r}{_checks.did_you_mean(key, valid)}")
        elif name in rules:
            problems.append(f"{rules[name][0]!r} and {key!r} name the same op")
        if grad_name not in registry:
            suggestion = _checks.did_you_mean(grad_name, registry)
            problems.append(f"no gradient registered as {grad_name!r}{suggestion}")
        elif name in _jax_names():
            rules[name] = (key, _tf_gradients.with_attributes(name, registry[grad_name]))
    if any(p.startswith("unknown op") for p in problems):
        hints.append(
            "op names are TensorFlow's (the table funcgrad.overrides.TF_OP_NAMES) or JAX "
            "primitive names as jax.make_jaxpr(f) prints them"
        )
    if any(p.startswith("no gradient") for p in problems):
        own = sorted(set(registry) - set(_tf_gradients.GRADIENTS))
        hints.append(
            f"the registered gradients are {own} and TensorFlow's gradient of each op type "
            "(the keys of funcgrad.overrides.TF_OP_NAMES, 'Reciprocal', 'DivNoNan'); add one "
            "with fg.RegisterGradient(name)"
        )
    _checks.raise_collected(caller, problems, "; ".join(hints or ["give each op one key"]))
    return rules


def _with_rules(f: Function, rules: dict[str, tuple[str, GradientFunction]]) -> Function:
    """``f``, re-emitted with each op ``rules`` names differentiated by its gradient."""
    name = getattr(f, "__name__", "f")

    def warn_unused(matched: set[str]) -> None:
        unused = [key for jax_name, (key, _) in rules.items() if jax_name not in matched]
        if unused:
            hint = "check the op names against jax.make_jaxpr(f)(...)"
            if "copy" in (TF_OP_NAMES.get(k, k) for k in unused):
                hint = (
                    "an identity written as lambda x: x leaves no op to override: write "
                    f"fg.identity(x), as tf.identity; otherwise {hint}"
                )
            warnings.warn(
                UnusedOverrideWarning(
                    f"fg.gradient_override_map({name}, ...): {unused} matched no op of the "
                    f"function; {hint}."
                ),
                stacklevel=3,
            )

    overridden = _op_gradients.with_gradients(
        f,
        rules,
        caller=f"fg.gradient_override_map({name}, mapping)",
        prefix="overridden_",
        on_trace=warn_unused,
    )
    return overridden  # type: ignore[return-value]


@overload
def gradient_override_map(f: Function, mapping: Mapping[str, str]) -> Function: ...


@overload
def gradient_override_map(
    f: Mapping[str, str], mapping: None = None
) -> Callable[[Function], Function]: ...


def gradient_override_map(f: Any, mapping: Mapping[str, str] | None = None) -> Any:
    """``f`` with the gradients of the named ops replaced by registered ones.

    TensorFlow's ``with g.gradient_override_map({"Sign": "Identity"}):``, for a function:
    ``f``'s jaxpr is rewritten so that every op a key names -- inside nested ``jit``,
    ``scan``, ``cond``, ``while`` and ``checkpoint`` too -- keeps its value but
    differentiates with the registered gradient.  Keys are TensorFlow op names (the
    table ``TF_OP_NAMES``: ``"Sign"``, ``"Relu"``, ``"Round"``, ...) or JAX names
    (primitives such as ``"sign"``, named functions such as ``"relu"``); the gradient's
    ``op.type`` is the key as written.  Array arguments (leaves of any pytree) are
    traced; every other argument is passed through as a constant.

    Args:
      f: the function, or the mapping when used as a decorator
        (``@fg.gradient_override_map({"Sign": "Identity"})``).
      mapping: op name -> registered gradient name.

    Returns:
      A function with ``f``'s values, name, docstring and ``__wrapped__`` (or, given
      only a mapping, a decorator that makes one).

    Raises:
      ValueError: a key is not a known op name, two keys name the same op, or a value
        is not a registered gradient name (raised here, listing the valid names).
      TypeError: ``f`` is not callable or ``mapping`` is not a dict of strings.

    Warns:
      UnusedOverrideWarning: when ``f`` is traced, for keys that match no op of it.

    Example:
      >>> f = fg.gradient_override_map(jnp.sign, {"Sign": "Identity"})
      >>> x = jnp.array([-2.0, 0.5])
      >>> f(x).tolist(), jax.grad(lambda x: f(x).sum())(x).tolist()
      ([-1.0, 1.0], [1.0, 1.0])
    """
    if mapping is None and isinstance(f, Mapping):
        rules = _rules("fg.gradient_override_map(mapping)", f)
        return lambda fun: _with_rules(_callable(fun), rules)
    rules = _rules(f"fg.gradient_override_map({getattr(f, '__name__', 'f')}, mapping)", mapping)
    return _with_rules(_callable(f), rules)


def _callable(f: Function) -> Function:
    if not callable(f):
        raise TypeError(
            f"fg.gradient_override_map(f, mapping): f must be callable, got "
            f"{type(f).__name__}; pass the function whose op gradients to replace."
        )
    return f
