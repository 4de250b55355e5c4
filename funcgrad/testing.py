"""Is a gradient right?  TensorFlow's ``compute_gradient``, derivatives against differences,
and a port's state against TensorFlow's checkpoint.

:func:`compute_gradient` is ``tf.compat.v1.test.compute_gradient``: for each input, the
Jacobian that funcgrad differentiates (``fg.gradients``, one cotangent per output
element) beside the one that central differences estimate, in TensorFlow's layout and
with its formula.  :func:`check_gradients` asserts that they agree, element by element,
in reverse and/or forward mode, for first and second derivatives, and names the worst
element when they do not: the check for a hand-written ``fg.custom_gradient``, a
registered or overridden gradient, or a ``py_func``'s NumPy ``grad``.

:func:`compare_tf_checkpoint` is the check of a whole port: a TensorFlow 1.x checkpoint
and a funcgrad state (with its optimizer, group or moving averages) compared variable by
variable and slot by slot, by TensorFlow's names.

Beyond a size, :func:`check_gradients` checks a Jacobian at random rows, and
:func:`compute_gradient`, whose dense form is TensorFlow's, refuses.  The gradient
checks evaluate ``f`` many times and compare the numbers on the host, so
they run outside ``jax.jit`` and ``jax.vmap`` (given traced values, they raise
``TypeError``); ``f`` itself is jitted, so it must be traceable by ``jax.jit``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad import _checks
from funcgrad._core import derivative_modes as _derivative_modes
from funcgrad._core import differentiate as _differentiate
from funcgrad._core import jax_internals as _jax
from funcgrad._types import is_array
from funcgrad._types import replace_at
from funcgrad.gradients import gradients
from funcgrad.train._var_list import VarList
from funcgrad.train.checkpoints import _tf_layout
from funcgrad.train.moving_averages import EmaState
from funcgrad.train.state import TrainState

__all__ = ["check_gradients", "compare_tf_checkpoint", "compute_gradient"]

_MODES = ("rev", "fwd")
_TF_DELTA = 1e-3  # tf.compat.v1.test.compute_gradient's default delta
#: check_gradients compares an input's whole Jacobian up to this many elements
#: (x.size * y.size); beyond it, the elements of _SAMPLES random rows (_Function.sampled).
_DENSE_MAX = 2**18
_SAMPLES = 16
#: compute_gradient's largest Jacobian (x.size * y.size elements, TensorFlow's dense form).
_COMPUTE_MAX = 2**24


@dataclasses.dataclass
class _Function:
    """A function of the floating inputs of ``f`` at a point, to its floating outputs, flat."""

    fun: Callable[..., list[jax.Array]]
    point: list[np.ndarray]  # one value per floating input
    inputs: list[str]  # their names: xs, xs[0], xs['w']
    outputs: list[str]  # the output leaves' names: ys, ys[1]
    shapes: list[jax.ShapeDtypeStruct]  # the output leaves
    derivative: str  # how one Jacobian element reads, with {y} and {x}

    @property
    def width(self) -> int:
        """The number of output elements: a Jacobian's columns."""
        return sum(s.size for s in self.shapes)

    def jacobians(self, mode: str, inputs: Sequence[int]) -> list[np.ndarray]:
        """Per input of ``inputs``, funcgrad's Jacobian ``[x.size, y.size]`` (``y``: the
        outputs, flat)."""
        if not inputs:
            return []
        if mode == "fwd":
            jac = jax.jit(jax.jacfwd(self.fun, argnums=tuple(inputs)))(*self.point)
            return [
                np.concatenate(
                    [np.reshape(jac[k][n], (s.size, -1)).T for k, s in enumerate(self.shapes)],
                    axis=1,
                )
                for n, _ in enumerate(inputs)
            ]
        pull = self._pull()
        columns = []
        for j in range(self.width):
            grads = pull(self._one_hot(j), list(self.point))
            columns.append([np.ravel(grads[i]) for i in inputs])
        return [
            np.stack([c[n] for c in columns], axis=1)
            if columns
            else np.zeros((self.point[i].size, 0), self.point[i].dtype)
            for n, i in enumerate(inputs)
        ]

    def _pull(self) -> Callable[..., list[jax.Array]]:
        """``(cotangents, point) -> fg.gradients``: funcgrad's reverse mode, jitted."""
        return jax.jit(lambda cts, v: gradients(self.fun, v, cts, unconnected_gradients="zero"))

    def _one_hot(self, j: int) -> list[np.ndarray]:
        """The cotangent of output element ``j`` (of the outputs, flat)."""
        flat = np.zeros(self.width)
        flat[j] = 1
        ends = np.cumsum([s.size for s in self.shapes])[:-1]
        return [
            np.reshape(c, s.shape).astype(s.dtype)
            for c, s in zip(np.split(flat, ends), self.shapes, strict=True)
        ]

    def sampled(
        self, i: int, mode: str, delta: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, cols, funcgrad, numerical)``: input ``i``'s Jacobian at ``_SAMPLES``
        random rows (input elements, a fixed generator, so a failure repeats) and, in
        reverse mode, the columns where each row's central differences are largest plus
        ``_SAMPLES`` random ones; forward mode gives whole rows.  Memory follows
        ``x.size + y.size``, not their product.
        """
        rng = np.random.default_rng(0)
        x = self.point[i]
        rows = np.sort(rng.choice(x.size, size=min(_SAMPLES, x.size), replace=False))
        want = np.stack(
            [(_flat64(p) - _flat64(n)) / step for p, n, step in self.central(i, delta, rows)]
        )
        if mode == "fwd":

            def tangent(point: list[jax.Array], t: jax.Array) -> list[jax.Array]:
                along = functools.partial(lambda p, xi: self.fun(*replace_at(p, [i], [xi])), point)
                return list(jax.jvp(along, (point[i],), (t,))[1])

            push = jax.jit(tangent)
            got = np.stack([_flat64(push(list(self.point), _basis(x, r))) for r in rows])
            return rows, np.arange(want.shape[1]), got, want
        picked = rng.choice(want.shape[1], size=min(_SAMPLES, want.shape[1]), replace=False)
        cols = np.unique(np.concatenate([np.argmax(np.abs(want), axis=1), picked]))
        pull = self._pull()
        got = np.stack(
            [np.ravel(pull(self._one_hot(j), list(self.point))[i])[rows] for j in cols], axis=1
        )
        return rows, cols, got.astype(np.float64), want[:, cols]

    def central(
        self, i: int, delta: float, rows: Iterable[int] | None = None
    ) -> list[tuple[list[np.ndarray], list[np.ndarray], float]]:
        """Per element of input ``i`` (or of ``rows``): ``f(x + delta e)``,
        ``f(x - delta e)`` and the step.

        The perturbed input is rounded to its dtype, as TensorFlow's is; the step is the
        difference of the two inputs actually evaluated.
        """
        evaluate = jax.jit(self.fun)
        x = self.point[i]
        found = []
        for r in range(x.size) if rows is None else rows:
            pos, neg = x.copy(), x.copy()
            pos.reshape(-1)[r] += delta
            neg.reshape(-1)[r] -= delta
            step = float(pos.reshape(-1)[r]) - float(neg.reshape(-1)[r])
            ys_pos = [np.asarray(y) for y in evaluate(*replace_at(self.point, [i], [pos]))]
            ys_neg = [np.asarray(y) for y in evaluate(*replace_at(self.point, [i], [neg]))]
            found.append((ys_pos, ys_neg, step))
        return found

    def numerical(self, i: int, delta: float) -> np.ndarray:
        """Input ``i``'s Jacobian ``[x.size, y.size]`` by central differences, in float64."""
        rows = [(_flat64(p) - _flat64(n)) / step for p, n, step in self.central(i, delta)]
        return np.stack(rows) if rows else np.zeros((0, self.width))

    def gradient(self, mode: str) -> _Function:
        """The gradient of the sum of the outputs in ``mode``, as a function to check."""
        if mode == "rev":

            def grad(*v: jax.Array) -> list[jax.Array]:
                return gradients(self.fun, list(v), unconnected_gradients="zero")

        else:

            def grad(*v: jax.Array) -> list[jax.Array]:
                jac = jax.jacfwd(self.fun, argnums=tuple(range(len(v))))(*v)
                return [
                    functools.reduce(
                        jnp.add,
                        [
                            jnp.sum(jnp.reshape(j[i], (-1, *x.shape)), 0).astype(x.dtype)
                            for j in jac
                        ],
                    )
                    for i, x in enumerate(v)
                ]

        shapes = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in self.point]
        derivative = "d² sum(ys) / d {y} d {x}"
        return _Function(grad, self.point, self.inputs, self.inputs, shapes, derivative)


def _flat64(ys: Sequence[Any]) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(y)).astype(np.float64) for y in ys])


def _basis(x: np.ndarray, r: int) -> np.ndarray:
    """The unit tangent of element ``r`` of ``x`` (C order), in ``x``'s dtype."""
    one = np.zeros(x.size, x.dtype)
    one[r] = 1
    return one.reshape(x.shape)


def _function(caller: str, f: Callable[..., Any], xs: Any) -> _Function:
    """``f`` at ``xs`` as a :class:`_Function` of its floating leaves."""
    multi, args, leaves, tree = _differentiate.flatten_inputs(caller, xs)
    if any(isinstance(x, jax.core.Tracer) for x in leaves):
        raise TypeError(
            f"{caller}: xs holds traced values; it evaluates f on the host many times, so "
            "call it outside jax.jit and jax.vmap, with concrete arrays."
        )
    paths = jax.tree_util.tree_flatten_with_path(list(args) if multi else xs)[0]
    names = [f"xs{jax.tree_util.keystr(path)}" for path, _ in paths]
    complex_ = [f"{n} is {x.dtype}" for n, x in zip(names, leaves, strict=True) if _is_complex(x)]
    _checks.raise_collected(
        caller, complex_, "pass the real and imaginary parts as separate real inputs", TypeError
    )
    wrt = [i for i, x in enumerate(leaves) if jnp.issubdtype(x.dtype, jnp.floating)]
    if not wrt:
        raise ValueError(
            f"{caller}: xs has no floating leaf (dtypes {[str(x.dtype) for x in leaves]}); "
            "pass the floating arrays to differentiate."
        )
    outputs: list[str] = []

    def fun(*values: jax.Array) -> list[jax.Array]:
        args = jax.tree.unflatten(tree, replace_at(leaves, wrt, values))
        ys = f(*args) if multi else f(args[0])
        floating = [
            (f"ys{jax.tree_util.keystr(path)}", y)
            for path, y in jax.tree_util.tree_flatten_with_path(ys)[0]
            if jnp.issubdtype(jnp.result_type(y), jnp.floating)
        ]
        outputs[:] = [name for name, _ in floating]
        return [y for _, y in floating]

    point = [np.asarray(leaves[i]) for i in wrt]
    shapes = jax.eval_shape(fun, *point)
    if not shapes:
        raise ValueError(
            f"{caller}: f has no floating output; return the floating values to check."
        )
    return _Function(fun, point, [names[i] for i in wrt], list(outputs), shapes, "d {y} / d {x}")


def _is_complex(x: jax.Array) -> bool:
    return bool(jnp.issubdtype(x.dtype, jnp.complexfloating))


def compute_gradient(f: Callable[..., Any], xs: Any, delta: float | None = None) -> Any:
    """The theoretical and numerical Jacobians of ``f`` (``tf.compat.v1.test.compute_gradient``).

    For each input ``x`` a pair ``(theoretical, numerical)``, each of shape
    ``[x.size, y.size]`` (``y = f(*xs)``, both flattened in C order) and ``x``'s dtype:

    * ``theoretical[:, j]`` is ``fg.gradients(f, xs, grad_ys=e_j)`` for ``x``, ``e_j``
      the ``j``-th one-hot cotangent: funcgrad's derivative, custom and overridden
      gradients included (an input ``f`` does not depend on gives zeros);
    * ``numerical[i, :]`` is ``(f(x + delta e_i) - f(x - delta e_i)) / (2 delta)``,
      computed as TensorFlow computes it: ``x + delta e_i`` rounded to ``x``'s dtype, the
      difference and the division in ``y``'s dtype.

    TensorFlow 1's layout and default ``delta`` (``1e-3``).  ``tf.test.compute_gradient``
    (TensorFlow 2) instead returns ``(theoretical_list, numerical_list)``, each Jacobian
    transposed (``[y.size, x.size]``), with ``delta=1/1024`` by default.  Real floating
    inputs only; TensorFlow's layout for complex ones (real and imaginary parts
    interleaved) is not supported.

    Args:
      f: a function of the arrays in ``xs`` returning one floating array (for several
        outputs, concatenate them, e.g. ``jnp.concatenate([a.ravel(), b.ravel()])``).
        It is traced by ``jax.jit``.
      xs: one array (``f(xs)``, one pair comes back) or a list or tuple of arrays
        (``f(*xs)``, a list of pairs comes back).
      delta: the perturbation, a positive number; ``None`` for ``1e-3``.

    Returns:
      ``(theoretical, numerical)`` NumPy arrays, or a list of such pairs.

    Raises:
      TypeError: ``f`` is not callable, an input is not a real floating array (an
        element of a list that is itself a list or dict included), ``f`` does not return
        one floating array, or ``xs`` holds traced values (inside ``jax.jit``).
      ValueError: ``xs`` is empty, ``delta`` is not a positive finite number, or a
        Jacobian would have more than ``2**24`` elements (the message gives its size;
        :func:`check_gradients` checks such an input at random rows).

    Example:
      >>> theoretical, numerical = fg.testing.compute_gradient(
      ...     lambda x: x ** 2, jnp.array([1.0, 2.0]))
      >>> theoretical.tolist()
      [[2.0, 0.0], [0.0, 4.0]]
      >>> np.round(numerical, 3).tolist()
      [[2.0, 0.0], [0.0, 4.0]]
    """
    caller = "fg.testing.compute_gradient(f, xs, delta)"
    _checks.check_function(caller, f, "fg.testing.compute_gradient(jnp.sin, x)")
    multi = isinstance(xs, list | tuple)
    args = list(xs) if multi else [xs]
    names = [f"xs[{i}]" if multi else "xs" for i in range(len(args))]
    bad = [
        f"{n} is a {type(x).__name__}" for n, x in zip(names, args, strict=True) if not is_array(x)
    ]
    bad += [
        f"{n} has dtype {jnp.result_type(x)}"
        for n, x in zip(names, args, strict=True)
        if is_array(x) and not jnp.issubdtype(jnp.result_type(x), jnp.floating)
    ]
    _checks.raise_collected(
        caller,
        bad,
        "pass real floating arrays, e.g. x.astype(jnp.float32) (TensorFlow takes tensors: "
        "pass a pytree's leaves as separate inputs)",
        TypeError,
    )
    delta = _TF_DELTA if delta is None else _positive(caller, "delta", delta)
    func = _function(caller, f, xs)
    if len(func.shapes) != 1 or func.outputs != ["ys"]:
        raise TypeError(
            f"{caller}: f must return one floating array, got the floating outputs "
            f"{func.outputs or 'none'}; concatenate them into one, e.g. "
            "jnp.concatenate([a.ravel(), b.ravel()])."
        )
    _check_size(caller, func)
    y_dtype = func.shapes[0].dtype
    scale = np.asarray(2 * delta, dtype=y_dtype)[()]
    pairs = []
    for i, theoretical in enumerate(func.jacobians("rev", range(len(func.point)))):
        x_dtype = func.point[i].dtype
        numerical = [(p[0] - n[0]) / scale for p, n, _ in func.central(i, delta)]
        shape = (func.point[i].size, func.shapes[0].size)
        pairs.append(
            (
                theoretical.astype(x_dtype),
                np.reshape(np.asarray(numerical, dtype=x_dtype), shape),
            )
        )
    return pairs if multi else pairs[0]


def _check_size(caller: str, func: _Function) -> None:
    """Refuse Jacobians too large to hold densely, naming the size and the alternative."""
    width = func.shapes[0].size
    big = [
        f"{name}'s Jacobian would be {x.size} x {width} = {x.size * width:,} elements "
        f"({2 * x.size * width * x.dtype.itemsize / 2**20:,.0f} MiB for the two)"
        for name, x in zip(func.inputs, func.point, strict=True)
        if x.size * width > _COMPUTE_MAX
    ]
    if big:
        raise ValueError(
            f"{caller}: {'; '.join(big)}, over the {_COMPUTE_MAX:,} elements it builds "
            "densely (TensorFlow's form); check the gradient with "
            "fg.testing.check_gradients(f, xs), which checks a large input's Jacobian at "
            "random rows, or pass a smaller input."
        )


def check_gradients(
    f: Callable[..., Any],
    xs: Any,
    *,
    order: int = 1,
    modes: str | Sequence[str] = ("rev",),
    atol: float | None = None,
    rtol: float | None = None,
    eps: float | None = None,
) -> None:
    """Assert that funcgrad's derivatives of ``f`` at ``xs`` match central differences.

    Every element of every Jacobian is compared: for ``order=1``, ``d y_j / d x_i`` of
    each floating output leaf ``y`` of ``f`` and each floating leaf ``x`` of ``xs``,
    against ``(f(x + eps e_i) - f(x - eps e_i)) / (2 eps)``; ``order=2`` checks those,
    then the Jacobian of the gradient of the sum of the outputs (the Hessian) against
    central differences *of that gradient* — so a second derivative is checked against
    the first one that funcgrad computes, as ``jax.test_util.check_grads`` does.  An
    element passes when ``|funcgrad - numerical| <= atol + rtol * |numerical|``.

    An input whose Jacobian has more than ``2**18`` elements (``x.size * y.size``) is
    checked at 16 random rows (input elements, from a fixed generator, so a failure
    repeats) instead of whole: forward mode compares those rows whole, reverse mode
    their elements where each row's central differences are largest, plus 16 random
    columns.  Memory and work then follow ``x.size + y.size``, not their product, as
    ``jax.test_util.check_grads``' random directions do; a rule wrong everywhere is
    caught as before, one wrong element among millions only if it is sampled.

    ``"rev"`` differentiates with ``fg.gradients`` (TensorFlow's ``tf.gradients``, custom,
    registered and overridden gradients, ``py_func`` gradients, the cuts of
    ``fg.stop_gradient``); ``"fwd"`` with ``jax.jacfwd``.  At ``order=2`` every pair of
    modes is checked (``"fwd over rev"`` is what ``fg.hessians`` computes).  Forward
    mode cannot pass through a ``jax.custom_vjp`` — which ``fg.custom_gradient``,
    ``fg.gradient_override_map`` and ``fg.py_func`` are — so asking for ``"fwd"`` on a
    function that holds one is a ``ValueError`` (check it with ``modes=("rev",)``),
    never a silent skip.

    Defaults follow the least precise floating dtype ``d`` among the checked inputs and
    outputs: ``eps``, ``atol`` and ``rtol`` are each the cube root of ``d``'s machine
    epsilon (about ``4.9e-3`` for float32, ``6.1e-6`` for float64, with
    ``jax_enable_x64``; central differences then err by about its square).  Integer
    and boolean inputs and outputs are left out.

    Args:
      f: a pure function, as for ``fg.gradients``; it is traced by ``jax.jit``.
      xs: the point, in the forms ``fg.gradients`` takes (a list or tuple is
        ``f(*xs)``; anything else ``f(xs)``; pytrees of arrays).
      order: ``1`` or ``2``.
      modes: ``"rev"``, ``"fwd"``, or a sequence of them.
      atol: the absolute tolerance, a positive number; ``None`` for the default.
      rtol: the relative tolerance, a positive number; ``None`` for the default.
      eps: the step of the central differences, a positive number; ``None`` for the
        default.

    Raises:
      AssertionError: a derivative differs; for each input, mode and order that fails,
        the message names the worst element (``d ys[1] / d xs[0][2]``), funcgrad's and
        the numerical value, the tolerance there and how many elements fail.
      TypeError: ``f`` is not callable, ``order`` is not an ``int``, a leaf of ``xs`` is
        not an array or is complex, or ``xs`` holds traced values (inside ``jax.jit``).
      ValueError: ``order`` is not 1 or 2, a mode is unknown, a tolerance or ``eps`` is
        not a positive finite number, ``xs`` or ``f``'s outputs have no floating leaf,
        ``"fwd"`` is asked of a function that holds a ``jax.custom_vjp``, or of
        ``order=2`` beyond ``2**18`` Jacobian elements (its gradient is a dense
        ``jax.jacfwd``).

    Example:
      >>> @fg.custom_gradient
      ... def cube(x):
      ...     return x ** 3, lambda dy: dy * 3.0 * x  # should be 3 x², not 3 x
      >>> fg.testing.check_gradients(lambda x: x ** 3, jnp.array([1.0, 2.0]))
      >>> fg.testing.check_gradients(cube, jnp.array([1.0, 2.0]))
      Traceback (most recent call last):
      ...
      AssertionError: fg.testing.check_gradients(f, xs): d ys[1] / d xs[1] (rev) is 6, ...
    """
    caller = "fg.testing.check_gradients(f, xs)"
    _checks.check_function(caller, f, "fg.testing.check_gradients(jnp.sin, x)")
    order = _checks.as_int(caller, "order", order, minimum=1, hint="pass 1 or 2")
    if not isinstance(modes, str | list | tuple):
        raise TypeError(
            f"{caller}: modes must be a string or a sequence of strings, got "
            f"{type(modes).__name__}; pass e.g. modes=('rev', 'fwd')."
        )
    modes = [modes] if isinstance(modes, str) else list(modes)
    problems = [
        f"modes has {m!r}{_checks.did_you_mean(str(m), _MODES)}" for m in modes if m not in _MODES
    ]
    if not modes:
        problems.append("modes is empty")
    if order > 2:
        problems.append(f"order is {order}, and only 1 and 2 are checked")
    _checks.raise_collected(caller, problems, "pass order=1 or 2 and modes from ('rev', 'fwd')")
    atol, rtol, eps = (
        None if v is None else _positive(caller, name, v)
        for name, v in (("atol", atol), ("rtol", rtol), ("eps", eps))
    )
    func = _function(caller, f, xs)
    if "fwd" in modes and _derivative_modes.has_custom_vjp(_jax.trace(func.fun, *func.point).jaxpr):
        raise ValueError(
            f"{caller}: modes has 'fwd', but f holds a jax.custom_vjp (fg.custom_gradient, "
            "fg.gradient_override_map or fg.py_func build one), which forward mode cannot "
            "pass through; check it with modes=('rev',)."
        )
    width = func.width
    if order == 2 and "fwd" in modes and any(x.size * width > _DENSE_MAX for x in func.point):
        raise ValueError(
            f"{caller}: order=2 with 'fwd' builds the gradient with jax.jacfwd, whose "
            f"memory follows x.size * y.size = {max(x.size for x in func.point) * width:,} "
            f"elements here, over {_DENSE_MAX:,}; check the second order with "
            "modes=('rev',), and forward mode at order=1."
        )
    dtypes = [x.dtype for x in func.point] + [s.dtype for s in func.shapes]
    default = max(float(jnp.finfo(d).eps) for d in dtypes) ** (1 / 3)
    tol = _Tolerance(
        default if atol is None else atol,
        default if rtol is None else rtol,
        default if eps is None else eps,
    )
    problems = _compare(func, modes, tol, "")
    if order == 2:
        for inner in modes:
            problems += _compare(func.gradient(inner), modes, tol, f" over {inner}")
    if problems:
        raise AssertionError(
            f"{caller}: {'; '.join(problems)}; a derivative rule of f is wrong there — check "
            "its custom gradient — or, if f is badly scaled at xs, pass a larger eps, atol or "
            f"rtol (now eps={tol.eps:.3g}, atol={tol.atol:.3g}, rtol={tol.rtol:.3g})."
        )


@dataclasses.dataclass(frozen=True)
class _Tolerance:
    atol: float
    rtol: float
    eps: float


def _compare(func: _Function, modes: list[str], tol: _Tolerance, over: str) -> list[str]:
    """One line per input and mode whose Jacobian does not match central differences:
    every element up to ``_DENSE_MAX`` elements, sampled rows beyond."""
    width = func.width
    dense = [i for i, x in enumerate(func.point) if x.size * width <= _DENSE_MAX]
    numerical = {i: func.numerical(i, tol.eps) for i in dense}
    problems = []
    for mode in modes:
        checks = {
            i: (np.arange(func.point[i].size), np.arange(width), got, numerical[i])
            for i, got in zip(dense, func.jacobians(mode, dense), strict=True)
        }
        checks.update(
            (i, func.sampled(i, mode, tol.eps)) for i in range(len(func.point)) if i not in dense
        )
        for i in range(len(func.point)):
            rows, cols, got, want = checks[i]
            error = np.abs(got.astype(np.float64) - want)
            allowed = tol.atol + tol.rtol * np.abs(want)
            failing = ~(error <= allowed)  # NaN fails
            if not failing.any():
                continue
            ratio = np.where(np.isnan(error), np.inf, error / allowed)
            row, col = (int(k) for k in np.unravel_index(int(np.argmax(ratio)), got.shape))
            where = func.derivative.format(
                y=_element(func, int(cols[col])),
                x=_at(func.inputs[i], func.point[i].shape, int(rows[row])),
            )
            sample = (
                ""
                if i in dense
                else f", sampled in {len(rows)} random rows: {func.point[i].size} x {width} "
                "are too many to check all"
            )
            problems.append(
                f"{where} ({mode}{over}) is {got[row, col]:.6g}, central differences give "
                f"{want[row, col]:.6g}: off by {error[row, col]:.3g}, more than atol + rtol * "
                f"|numerical| = {allowed[row, col]:.3g} ({int(failing.sum())} of "
                f"{failing.size} elements fail{sample})"
            )
    return problems


def _element(func: _Function, col: int) -> str:
    """The name of element ``col`` of the flattened outputs."""
    offsets = np.cumsum([0] + [s.size for s in func.shapes])
    k = int(np.searchsorted(offsets, col, side="right")) - 1
    return _at(func.outputs[k], func.shapes[k].shape, int(col - offsets[k]))


def _at(name: str, shape: tuple[int, ...], flat: int) -> str:
    """``name[i, j]``, element ``flat`` (C order) of an array of ``shape``; a scalar's ``name``."""
    if not shape:
        return name
    return f"{name}[{', '.join(map(str, np.unravel_index(flat, shape)))}]"


def _positive(caller: str, name: str, value: Any) -> float:
    """``value`` as a positive finite ``float``."""
    if not _checks.is_real_number(value):
        raise TypeError(
            f"{caller}: {name} must be a number, got {type(value).__name__}; pass a positive "
            f"float, e.g. {name}=1e-3."
        )
    if not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"{caller}: {name} must be positive and finite, got {value!r}; pass e.g. {name}=1e-3."
        )
    return float(value)


def _differ(got: np.ndarray, want: np.ndarray, tol: _Tolerance) -> tuple[np.ndarray, np.ndarray]:
    """How far ``got`` is from ``want`` (TensorFlow's), element by element, and how far
    it may be: integers and booleans exactly; floats within ``atol + rtol * |want|`` where
    both are finite, and an inf or NaN only against the same inf or NaN (as
    ``np.testing.assert_allclose`` with ``equal_nan=True``) — off by inf otherwise."""
    if got.dtype.kind in "biu" and want.dtype.kind in "biu":
        differ = got != want  # exact, beyond float64's 2**53 too
        error = np.abs(got.astype(np.float64) - want.astype(np.float64))
        return np.where(differ, np.maximum(error, 1.0), 0.0), np.zeros(differ.shape)
    kind = np.result_type(got.dtype, want.dtype, np.float64)
    got, want = got.astype(kind), want.astype(kind)
    finite = np.isfinite(got) & np.isfinite(want)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    error = np.abs(np.subtract(got, want, out=np.zeros_like(got), where=finite))
    allowed = tol.atol + tol.rtol * np.abs(np.where(finite, want, 0))
    return np.where(finite | same, error, np.inf), allowed


def _shown(values: np.ndarray, flat: int) -> str:
    """Element ``flat`` of ``values``: an integer or boolean in full, a float to 8 digits."""
    value = np.ravel(values)[flat]
    if values.dtype.kind in "biu":
        return str(value.item())
    return f"{value.astype(np.result_type(values.dtype, np.float64)):.8g}"


def compare_tf_checkpoint(
    path: str | os.PathLike[str],
    state: TrainState,
    optimizer: Any,
    *,
    ema_state: EmaState | None = None,
    extras: Mapping[str, Any] | None = None,
    name_map: Mapping[str, str | None] | None = None,
    var_list: VarList = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> dict[str, float]:
    """Check a port: a TensorFlow 1.x checkpoint against a funcgrad state, name by name.

    Every value that :func:`~funcgrad.train.save_tf_checkpoint` would write for
    ``state`` — each variable, each slot of each optimizer (``W/Adam``, ``W/Adam_2``),
    Adam's ``beta1_power`` (from the step count), a loss scale, ``global_step``, the
    moving averages of ``ema_state`` and the ``extras`` — is compared with the
    checkpoint's value of that name, element by element: finite floats to
    ``atol + rtol * |TensorFlow's|``; an inf or NaN only against the same inf (of the same
    sign) or NaN, as ``np.testing.assert_allclose`` with ``equal_nan=True`` (it never
    widens the tolerance); integers and booleans exactly.  The loop it ends: train N steps
    in TensorFlow and save, restore that into funcgrad, train N more steps in both, save
    TensorFlow's, compare.  Not under ``jax.jit`` (it reads files).

    Args:
      path: the checkpoint prefix (or its ``.index``, or a directory: its latest).
      state: the funcgrad state to check.
      optimizer: what made ``state``, as ``restore_tf_checkpoint`` takes it (a TF1
        optimizer, an ``OptimizerGroup``, a ``MovingAverageOptimizer``, a
        ``LossScaleOptimizer``).
      ema_state: moving averages to compare with ``<name>/ExponentialMovingAverage``.
      extras: other variables, TensorFlow name to array.
      name_map: funcgrad names to the checkpoint's, as ``restore_tf_checkpoint`` takes it.
      var_list: the variables TensorFlow trained (slots of the others are not compared).
      rtol: relative tolerance, positive.
      atol: absolute tolerance, positive.

    Returns:
      The largest absolute difference of each TensorFlow name, largest first.

    Raises:
      AssertionError: a value differs beyond the tolerance: the message names the worst
        one by its TensorFlow name (and funcgrad's), its element, both values, and how
        many differ.
      ValueError, TypeError, FileNotFoundError: as ``restore_tf_checkpoint`` (a name
        missing in the checkpoint, a dtype or shape that differs, no checkpoint), or a
        tolerance that is not a positive number.

    Example:
      >>> import tempfile
      >>> opt = fg.train.AdamOptimizer(0.1)
      >>> loss = lambda p: jnp.sum(p["W"] ** 2)
      >>> state, _ = opt.minimize(loss, opt.init({"W": jnp.ones(2)}))
      >>> prefix = fg.train.save_tf_checkpoint(tempfile.mkdtemp() + "/model.ckpt-1", state, opt)
      >>> report = fg.testing.compare_tf_checkpoint(prefix, state, opt)
      >>> list(report)
      ['W', 'W/Adam', 'W/Adam_1', 'beta1_power', 'beta2_power', 'global_step']
      >>> ahead, _ = opt.minimize(loss, state)
      >>> fg.testing.compare_tf_checkpoint(prefix, ahead, opt)
      Traceback (most recent call last):
      ...
      AssertionError: fg.testing.compare_tf_checkpoint(path, state, optimizer): 6 of 6 values ...
    """
    caller = "fg.testing.compare_tf_checkpoint(path, state, optimizer)"
    tol = _Tolerance(_positive(caller, "atol", atol), _positive(caller, "rtol", rtol), 0.0)
    items, parts = _tf_layout.plan(caller, state, optimizer, name_map, var_list, ema_state, extras)
    prefix = _tf_layout.checkpoint_prefix(caller, path)
    view = _tf_layout.View(state, parts, ema_state, extras)
    ours = {item.name: item for item in items if item.name is not None}  # read one at a time
    counts = {item.name for item in items if item.what in ("global_step", "good_steps")}
    wanted = [(name, None if name in counts else view.held(ours[name])) for name in ours]
    keys = {item.name: item.key for item in items}
    differences: dict[str, float] = {}
    failing: list[tuple[float, str]] = []
    for name, want in _tf_layout.read_each(caller, prefix, wanted):
        got = np.asarray(view.value(ours[name]))
        error, allowed = _differ(got, want, tol)
        differences[name] = float(np.max(error, initial=0.0))
        bad = np.asarray(~(error <= allowed))
        if bad.any():
            with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                ratio = np.where(bad, error / allowed, 0.0)
            flat = int(np.argmax(ratio))
            where = _at(repr(name), want.shape, flat)
            failing.append(
                (
                    float(np.ravel(ratio)[flat]),
                    f"{where} (funcgrad's {keys[name]!r}) is {_shown(got, flat)} here and "
                    f"{_shown(want, flat)} in the checkpoint, off by "
                    f"{np.ravel(error)[flat]:.3g} ({int(bad.sum())} of {bad.size} elements)",
                )
            )
    if failing:
        failing.sort(reverse=True)
        others = [line.split(" (funcgrad", 1)[0] for _, line in failing[1:6]]
        also = f"; also {', '.join(others)}{' ...' if len(failing) > 6 else ''}" if others else ""
        raise AssertionError(
            f"{caller}: {len(failing)} of {len(ours)} values differ beyond atol + rtol * "
            f"|TensorFlow's| (atol={tol.atol:.3g}, rtol={tol.rtol:.3g}; integers exactly, inf "
            f"and NaN only where the same); the worst, "
            f"{failing[0][1]}{also}.  Find where the port first departs: compare after one "
            "step, then check that variable's loss terms and the optimizer's arguments; "
            "pass a larger rtol or atol only when the difference is rounding."
        )
    return dict(sorted(differences.items(), key=lambda kv: -kv[1]))
