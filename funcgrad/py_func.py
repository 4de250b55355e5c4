"""``tf.py_func`` for JAX: NumPy code inside jitted, vmapped, differentiable functions.

Design note
-----------
Called at the top level (no transformation is tracing: ``jax.extend.core``'s opaque
trace state is the one at import) on concrete arrays, ``func`` is simply called and its
outputs checked against ``Tout``: nothing is compiled, so a new ``func`` each call costs
nothing.  Traced, ``func`` runs on the host through ``jax.pure_callback``
(``vmap_method="sequential"``, or ``"broadcast_all"`` when ``vectorized=True``), or
through an ordered ``jax.experimental.io_callback`` when ``stateful=True``.  JAX keeps
the executable it compiles for a callback evaluated eagerly, keyed on the callback, so
every callback compares equal and its host (``func`` and its checks) is found by a
number passed as the callback's first operand (:class:`_Callback`): a new ``func`` each
call — a gradient that makes a new ``py_func`` — shares one executable per signature.

Gradients are a ``jax.custom_vjp`` whose backward pass builds the op record (an
``fg.Op`` of type ``"PyFunc"``) and calls ``grad(op, dy)``; ``grad`` may call ``py_func``
again for a NumPy gradient, and its result is checked as every gradient function's is
(``funcgrad._core.differentiate.input_cotangents``).  Without ``grad`` the op is not
differentiable, as in TensorFlow (``ops.NotDifferentiable("PyFunc")``): it is made with
``_connectivity.not_differentiable``, which ``fg.gradients`` treats as a cut and whose
backward pass raises if ``jax.grad`` differentiates through it — the same in every
context.

Errors on the host: an exception in ``func``, or an output that does not match
``Tout``, is caught and turned into a :class:`PyFuncError` that carries the original
type name, message and traceback text.  JAX forwards an exception raised in a callback
as ``jax.errors.JaxRuntimeError`` with the exception's text in its message; the
callback keeps its error under a number of its own (``funcgrad._core.host_errors``), and a
``py_func`` or ``fg.gradients`` evaluated eagerly raises the :class:`PyFuncError`
itself — per call, from any thread.  The callback then returns normally on the next
call, so the process stays usable.  JAX logs each failed callback; a filter on its
callback logger drops those records for :class:`PyFuncError` only, since the error
reaches the caller anyway.

Side effects: an empty ``Tout`` without ``stateful=True`` is refused, since a pure
callback without outputs is removed under ``jax.jit`` and never runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import traceback
import weakref
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from funcgrad._core import connectivity as _connectivity
from funcgrad._core import differentiate as _differentiate
from funcgrad._core import host_errors as _host_errors
from funcgrad._core import jax_internals as _jax
from funcgrad._types import GradientFunction
from funcgrad._types import Op
from funcgrad._types import is_array

__all__ = ["PyFuncError", "py_func"]

#: What ``py_func`` returns: a dtype (shaped like ``inp[0]``), a ``jax.ShapeDtypeStruct``,
#: or a list of either.
ToutSpec: TypeAlias = Any


class PyFuncError(RuntimeError):
    """An exception raised by a ``py_func``'s host function, or an output not matching ``Tout``.

    Attributes:
      type_name: the original exception's type name (``"ValueError"``).
      message: the original exception's message.
      traceback_text: the original traceback, formatted.

    Outside ``jax.jit`` (a plain call, ``jax.grad``, ``jax.vmap``, ``fg.gradients``) a
    failing ``py_func`` raises this, each call its own error, from any thread; inside
    a ``jax.jit`` of the user's, JAX raises ``jax.errors.JaxRuntimeError`` with the same
    text in its message.

    Example:
      >>> def needs_positive(a):
      ...     if (a <= 0).any():
      ...         raise ValueError("needs positive inputs")
      ...     return np.log(a)
      >>> try:
      ...     fg.py_func(needs_positive, [jnp.zeros(2)], jnp.float32)
      ... except fg.PyFuncError as e:
      ...     print(e.type_name, "|", e.message)
      ValueError | needs positive inputs
    """

    def __init__(
        self, caller: str, type_name: str, message: str, traceback_text: str, tag: str = ""
    ) -> None:
        self.caller, self.type_name = caller, type_name
        self.message, self.traceback_text = message, traceback_text
        if traceback_text:
            message = (
                f"func raised {type_name}: {message}\n\nOriginal traceback:\n"
                f"{traceback_text}\nFix func or its inputs; the next call runs normally"
            )
        super().__init__(f"{caller}: {message}{' ' + tag if tag else ''}.")


class _DropPyFuncLogs(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], PyFuncError))


logging.getLogger(_jax.CALLBACK_LOGGER).addFilter(_DropPyFuncLogs())


@dataclasses.dataclass(frozen=True)
class _Host:
    """The host side: calls ``func`` on NumPy arrays and checks its outputs against ``Tout``."""

    func: Callable[..., Any]
    caller: str
    in_ndims: tuple[int, ...]
    outs: tuple[jax.ShapeDtypeStruct, ...]  # as Tout asked (before dtype canonicalization)
    single: bool

    def __call__(self, *args: Any) -> tuple[np.ndarray, ...]:
        arrays = [np.asarray(a) for a in args]
        try:
            result = self.func(*arrays)
        except Exception as e:  # every failure of user code reaches the caller
            self._raise(type(e).__name__, str(e), traceback.format_exc())
        batch = arrays[0].shape[: arrays[0].ndim - self.in_ndims[0]] if arrays else ()
        return self._check(result, batch)

    def _check(self, result: Any, batch: tuple[int, ...]) -> tuple[np.ndarray, ...]:
        if result is None and self.outs:
            self._raise(
                "TypeError",
                f"func returned None, but Tout lists {len(self.outs)} output(s); return "
                "them (a missing return statement?)",
                "",
            )
        if result is None:  # Tout is empty: the func of a side effect
            result = []
        elif self.single or not isinstance(result, list | tuple):
            result = [result]
        if len(result) != len(self.outs):
            self._raise(
                "ValueError",
                f"func returned {len(result)} outputs, but Tout lists {len(self.outs)}; "
                "return one array per Tout entry",
                "",
            )
        outs = [np.asarray(r) for r in result]
        bad = [
            f"output {i}: Tout says shape {batch + s.shape} dtype {s.dtype}, func returned "
            f"shape {o.shape} dtype {o.dtype}"
            for i, (o, s) in enumerate(zip(outs, self.outs, strict=True))
            if o.shape != batch + s.shape or o.dtype != s.dtype
        ]
        if bad:
            self._raise(
                "ValueError",
                "; ".join(bad) + " (return arrays of Tout's shape and dtype, e.g. with "
                ".astype(np.float32), or change Tout)",
                "",
            )
        return tuple(outs)

    def _raise(self, type_name: str, message: str, traceback_text: str) -> Any:
        raise PyFuncError(self.caller, type_name, message, traceback_text) from None


#: The hosts of the live callbacks, by number (see :class:`_Callback`).
_HOSTS: weakref.WeakValueDictionary[int, _Host] = weakref.WeakValueDictionary()
_NUMBERS = itertools.count()


def _free_number() -> int:
    """A number no live host has, that fits the ``int32`` operand."""
    while (number := next(_NUMBERS) % 2**31) in _HOSTS:
        pass
    return number


@dataclasses.dataclass(frozen=True, eq=False)
class _Callback:
    """``host`` as a callback: its error is kept for the caller (``funcgrad._core.host_errors``).

    JAX keeps the executable it compiles for a callback evaluated outside ``jax.jit`` (a
    ``py_func`` under eager ``fg.gradients`` or ``jax.grad``), keyed on the callback.  So
    every ``_Callback`` compares equal, and the host runs by its number, the callback's
    first operand: a new ``func`` each call (a gradient that makes a new ``py_func``)
    reuses one executable instead of compiling and keeping another.  The number finds
    the host in ``_HOSTS``, which holds it as long as this callback does — as long as
    the jaxpr or the compiled function that can call it.
    """

    host: _Host
    number: int = dataclasses.field(default_factory=lambda: _free_number())

    def __post_init__(self) -> None:
        _HOSTS[self.number] = self.host

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Callback)

    def __hash__(self) -> int:
        return hash(_Callback)

    def __call__(self, number: Any, *args: Any) -> tuple[np.ndarray, ...]:
        host = _HOSTS[int(np.ravel(number)[0])]  # ravel: vmap may broadcast it
        try:
            return host(*args)
        except PyFuncError as e:
            fields = (e.caller, e.type_name, e.message, e.traceback_text)
            raise PyFuncError(*fields, _host_errors.keep(PyFuncError, *fields)) from None


def _specs(caller: str, tout: ToutSpec, inputs: Sequence[jax.Array]) -> tuple[list[Any], bool]:
    """``Tout`` as a list of ``ShapeDtypeStruct`` and whether it was a list."""
    many = isinstance(tout, list | tuple)
    specs = []
    for i, t in enumerate(tout if many else [tout]):
        where = f"Tout[{i}]" if many else "Tout"
        if isinstance(t, jax.ShapeDtypeStruct):
            specs.append(jax.ShapeDtypeStruct(t.shape, np.dtype(t.dtype)))
            continue
        try:
            dtype = np.dtype(t)
        except TypeError:
            raise TypeError(
                f"{caller}: {where} is {t!r}; pass a dtype, a jax.ShapeDtypeStruct or a "
                "list of them."
            ) from None
        if not inputs:
            raise ValueError(
                f"{caller}: {where} is the dtype {dtype}, which takes its shape from inp[0], "
                "but inp is empty; pass jax.ShapeDtypeStruct(shape, dtype) instead."
            )
        specs.append(jax.ShapeDtypeStruct(inputs[0].shape, dtype))
    return specs, many


def _inputs(caller: str, inp: Any) -> tuple[jax.Array, ...]:
    if not isinstance(inp, list | tuple):
        raise TypeError(
            f"{caller}: inp must be a list of arrays, got {type(inp).__name__}; wrap a "
            "single input as [x]."
        )
    bad = [f"inp[{i}] is a {type(x).__name__}" for i, x in enumerate(inp) if not is_array(x)]
    if bad:
        raise TypeError(f"{caller}: {'; '.join(bad)}; every element of inp must be an array.")
    return tuple(jnp.asarray(x) for x in inp)


def _results(host: _Host) -> tuple[jax.ShapeDtypeStruct, ...]:
    """What JAX returns for ``host``'s outputs (dtypes canonicalized, as JAX stores them)."""
    return tuple(
        jax.ShapeDtypeStruct(s.shape, jax.dtypes.canonicalize_dtype(s.dtype)) for s in host.outs
    )


def _traced(inputs: Sequence[jax.Array]) -> bool:
    """Whether ``py_func`` is being traced: inside a transformation, or on a tracer."""
    return _jax.is_tracing() or any(isinstance(x, jax.core.Tracer) for x in inputs)


def _callback(
    host: _Host, stateful: bool, vectorized: bool
) -> Callable[..., tuple[jax.Array, ...]]:
    """The traced call of ``host``: a pure callback, or an ordered one that refuses vmap."""
    result = _results(host)
    callback = _Callback(host)
    number = np.int32(callback.number)
    if not stateful:
        method = "broadcast_all" if vectorized else "sequential"
        return lambda *xs: jax.pure_callback(callback, result, number, *xs, vmap_method=method)

    @jax.custom_batching.custom_vmap
    def ordered(*xs: jax.Array) -> tuple[jax.Array, ...]:
        return io_callback(callback, result, number, *xs, ordered=True)

    @ordered.def_vmap
    def _refuse(axis_size: int, in_batched: list[bool], *xs: jax.Array) -> Any:
        raise ValueError(
            f"{host.caller}: a stateful py_func cannot be vmapped (its calls are ordered "
            "side effects); pass stateful=False if func is pure, or loop over the batch "
            "with jax.lax.map."
        )

    return ordered


def _differentiable(
    call: Callable[..., Any], grad: GradientFunction, params: dict[str, Any], caller: str
) -> Callable[..., Any]:
    @jax.custom_vjp
    def op(*xs: jax.Array) -> Any:
        return call(*xs)

    def fwd(*xs: jax.Array) -> tuple[Any, Any]:
        ys = op(*xs)  # ``op``, not ``call``: an outer derivative differentiates fwd
        return ys, (xs, ys)

    def bwd(res: Any, dys: Any) -> tuple[Any, ...]:
        xs, ys = res
        record = Op("PyFunc", tuple(xs), tuple(ys), params)
        dy = list(dys) if isinstance(params["Tout"], list) else dys[0]
        return tuple(_differentiate.input_cotangents(caller, grad(record, dy), xs, bare=False))

    op.defvjp(fwd, bwd)
    return op


def py_func(
    func: Callable[..., Any],
    inp: Sequence[Any],
    Tout: ToutSpec,
    *,
    stateful: bool = False,
    grad: GradientFunction | None = None,
    vectorized: bool = False,
    name: str | None = None,
) -> Any:
    """Run NumPy code ``func(*inp)`` on the host from inside JAX code (``tf.py_func``).

    Works under ``jax.jit``, ``jax.vmap``, ``jax.lax.scan`` / ``cond`` and, given ``grad``,
    ``jax.grad`` and ``fg.gradients`` to any order that ``grad`` supports.

    Differences from ``tf.py_func``: the gradient is the ``grad`` argument instead of
    ``RegisterGradient`` + ``gradient_override_map({"PyFunc": ...})``; under ``jax.vmap``
    ``func`` is called once per example, or once on the whole batch with
    ``vectorized=True``; an exception in ``func`` reaches the caller as
    :class:`PyFuncError` (or, inside ``jax.jit``, as ``jax.errors.JaxRuntimeError`` whose
    message holds the same text); ``stateful`` defaults to ``False``.  Forward-mode
    differentiation (``jax.jvp``, ``jax.jacfwd``, ``jax.hessian``) is not supported:
    ``grad`` is a reverse-mode rule, as in ``jax.custom_vjp``; nest reverse mode instead.

    Args:
      func: a Python function of NumPy arrays, one per element of ``inp``, returning a
        NumPy array (or a list of them when ``Tout`` is a list).
      inp: a list of arrays, the inputs.
      Tout: the output's dtype (the output then has ``inp[0]``'s shape), a
        ``jax.ShapeDtypeStruct``, or a list of either for several outputs.  Outputs are
        checked on the host against it, shape and dtype exactly.
      stateful: ``func`` has side effects: every call runs, in program order (an ordered
        ``io_callback``).  A stateful ``py_func`` cannot be vmapped.  The default,
        ``False`` (``tf.py_func``'s is ``True``), lets JAX skip a call whose outputs are
        unused under ``jax.jit``; pass ``True`` for logging, files or random numbers.
      grad: ``grad(op, dy)`` returns the cotangent of each input (a bare value when there
        is one input; ``None`` for zero), as a registered gradient does: each must have
        its input's shape and is cast to its input's dtype.  ``op`` is an ``fg.Op`` with
        ``.inputs``, ``.outputs``, ``.type`` (``"PyFunc"``) and ``.params``; ``dy`` is
        the output's cotangent (a list when ``Tout`` is a list).  ``grad`` may call
        ``fg.py_func`` for a NumPy gradient.  Without ``grad`` the op is not
        differentiable: ``fg.gradients`` treats it as a cut, ``jax.grad`` through it
        raises.
      vectorized: under ``jax.vmap``, call ``func`` once with a leading batch axis on
        every input (and expect it on every output) instead of once per example.
      name: a name for the op, used in error messages.

    Returns:
      The output array, or a list of them when ``Tout`` is a list.

    Raises:
      TypeError: ``inp`` is not a list of arrays, or ``Tout`` is not a dtype, a
        ``ShapeDtypeStruct`` or a list of them.
      ValueError: ``Tout`` is a dtype and ``inp`` is empty; ``Tout`` is empty and
        ``stateful`` is not set; ``stateful`` and ``vectorized`` are both set; when
        vmapped with ``stateful=True``; ``grad``'s cotangents do not match the inputs.
      LookupError: something differentiates through a ``py_func`` without ``grad``.
      TypeError: forward-mode differentiation reaches the ``py_func``.
      PyFuncError: ``func`` raised, or returned outputs unlike ``Tout``.

    Example:
      >>> x = jnp.array([-3.0, -4.0, 1.0, 40.0])
      >>> relu6 = lambda x: fg.py_func(lambda a: np.clip(a, 0, 6), [x], jnp.float32)
      >>> jax.jit(relu6)(x).tolist()
      [0.0, 0.0, 1.0, 6.0]
    """
    label = f"name={name!r}" if name else getattr(func, "__name__", "func")
    caller = f"fg.py_func({label}, inp, Tout)"
    if stateful and vectorized:
        raise ValueError(
            f"{caller}: stateful=True and vectorized=True; a stateful py_func cannot be "
            "vmapped, so drop vectorized (or stateful, if func is pure)."
        )
    inputs = _inputs(caller, inp)
    specs, many = _specs(caller, Tout, inputs)
    if not specs and not stateful:
        raise ValueError(
            f"{caller}: Tout is empty, so func runs only for its side effects, and a pure "
            "py_func (stateful=False) whose outputs are unused may never run under jax.jit; "
            "pass stateful=True (tf.py_func's default) to run it on every call, in order."
        )
    host = _Host(func, caller, tuple(x.ndim for x in inputs), tuple(specs), not many)
    if not _traced(inputs):  # nothing to trace: run func now, checked as the callback is
        outs = [jnp.asarray(o, r.dtype) for o, r in zip(host(*inputs), _results(host), strict=True)]
        return outs if many else outs[0]
    call = _callback(host, stateful, vectorized)
    if grad is not None:
        params = {"func": func, "Tout": specs if many else specs[0], "stateful": stateful}
        op = _differentiable(call, grad, {**params, "vectorized": vectorized, "name": name}, caller)
    else:
        op = _connectivity.not_differentiable(
            call,
            f"{caller}: this py_func has no gradient, and something differentiates through "
            "it (if it computes another py_func's gradient, that is a second derivative); "
            "pass grad=fn(op, dy) to fg.py_func, or hold its inputs constant with "
            "fg.stop_gradient.",
        )
    try:
        with _host_errors.raised_as_kept():  # run eagerly: the host error itself
            outs = op(*inputs)
    except TypeError as e:
        if "forward-mode" not in str(e):
            raise
        raise TypeError(
            f"{caller}: forward-mode differentiation (jax.jvp, jax.jacfwd, jax.hessian) "
            "does not go through a py_func, whose gradient is reverse-mode; use "
            "jax.jacrev(jax.jacrev(f)) for a Hessian."
        ) from None
    return list(outs) if many else outs[0]
