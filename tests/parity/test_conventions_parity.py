"""fg.tensorflow_conventions against real TensorFlow 2.21, derivative by derivative.

Each probe is a TensorFlow function and its natural JAX port.  For every derivative
sequence up to its order ((0,) is d/dx, (0, 1) is d/dy of d/dx, ...) at every point,
TensorFlow's nested ``tf.compat.v1.gradients`` in a graph is compared with nested
``fg.gradients`` of ``fg.tensorflow_conventions(port)``: op by op, and jitted inside a
``lax.scan`` and inside a ``lax.cond``.  The graph runs with grappler's rewrites off, so
each op runs its own CPU kernel as the gradient function emitted it, as eager mode and
non-XLA ``tf.function`` do (grappler changes only rounding, and turns ``pow(x, -0.5)``
into ``rsqrt``, which is ``-inf`` at ``x = -0`` where ``pow`` is ``+inf``).

What "equal" means, per cell:

* ``None`` from ``tf.gradients`` (no path) must be ``None`` from ``fg.gradients``, and a
  tensor must be an array: unconnected is unconnected in both, a connected zero a zero;
* ``NaN`` where TensorFlow has ``NaN``, ``inf`` of the same sign where it has ``inf``;
* finite values equal to float32 rounding: at most ``ulps`` units in the last place
  apart (4 by default: TensorFlow's vectorised kernels round a little differently from
  their scalar formulas; more for the ops whose TensorFlow kernel orders its arithmetic
  otherwise than JAX's rule, named in the table), the sign of a zero not compared.

The points of a probe are evaluated at once, as vectors (elementwise functions) or as
rows (reductions over three values, stacked on the last axis), in one TensorFlow graph
and one session run for all probes.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
import pytest
from jax import lax

import funcgrad as fg
from funcgrad._core import jax_internals as _jax
from funcgrad._core import rewrite as _rewrite
from tests.parity import tolerance

INF, NAN = math.inf, math.nan


@dataclasses.dataclass(frozen=True)
class Probe:
    """A TensorFlow function (of the ``tf`` module) and its JAX port, to compare."""

    name: str
    tf_fn: Callable[[Any], Callable[..., Any]]
    jax_fn: Callable[..., Any]
    points: list[tuple[float, ...]]
    order: int = 3
    seqs: tuple[tuple[int, ...], ...] | None = None
    ulps: int = 4
    #: The magnitude of the terms that cancel into a derivative: ulps are counted at it
    #: where the derivative is smaller (0: at the derivative's own magnitude).
    scale: float = 0.0
    #: Whether the value is compared too (False: the port's value is JAX's own there).
    value: bool = True

    def sequences(self) -> list[tuple[int, ...]]:
        if self.seqs is not None:
            return list(self.seqs)
        n = len(self.points[0])
        return [s for k in range(1, self.order + 1) for s in itertools.product(range(n), repeat=k)]


def _pts(*xs: float) -> list[tuple[float, ...]]:
    return [(x,) for x in xs]


U = _pts(-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, INF, -INF, NAN)
POSITIVE = _pts(-1.0, -0.0, 0.0, 0.25, 1.0, 4.0, INF, NAN)
UNIT = _pts(-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, NAN)
BIG = _pts(-100.0, -20.0, -2.0, -0.0, 0.0, 2.0, 20.0, 100.0, INF, -INF, NAN)
ROUND = _pts(-1.5, -0.5, -0.0, 0.0, 0.3, 0.5, 1.5, 2.5, NAN)
WHERE = _pts(-1.0, -0.0, 0.0, 1e-30, 0.25, 4.0)
CLIP = _pts(-1.0, -0.0, 0.0, 0.5, 1.0, 2.0, INF, -INF, NAN)
PAIRS = [
    (1.0, 1.0), (0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (2.0, 1.0), (1.0, 2.0), (-1.0, 2.0),
    (0.0, 2.0), (2.0, 0.0), (INF, 1.0), (1.0, INF), (INF, INF), (-INF, 1.0), (NAN, 1.0),
    (1.0, NAN),
]  # fmt: skip
POW = [
    (0.0, 2.0), (0.0, 1.0), (0.0, 0.0), (0.0, 0.5), (0.0, 3.0), (0.0, -1.0), (0.0, 2.5),
    (-0.0, 2.0), (-1.0, 2.0), (-2.0, 3.0), (-1.0, 0.5), (-2.0, 0.0), (2.0, 0.0), (2.0, 1.0),
    (2.0, 2.0), (1.5, 2.5), (1.0, 0.0), (INF, 2.0), (2.0, INF), (NAN, 0.0), (1.0, NAN),
]  # fmt: skip
DIV = [
    (1.0, 0.0), (0.0, 0.0), (-1.0, 0.0), (1.0, -0.0), (0.0, 2.0), (3.0, 2.0), (-3.0, 2.0),
    (INF, 2.0), (1.0, INF), (INF, INF), (NAN, 1.0),
]  # fmt: skip
XLOGY = [
    (0.0, 0.0), (0.0, 1.0), (0.0, -1.0), (0.0, 2.0), (1.0, 0.0), (2.0, 3.0), (0.0, INF),
    (NAN, 1.0), (1.0, -1.0), (-2.0, 0.5),
]  # fmt: skip
TRIPLES = [
    (1.0, 1.0, 0.0), (1.0, 1.0, 1.0), (0.0, 1.0, 1.0), (2.0, 1.0, 0.5), (0.0, -0.0, -1.0),
    (NAN, 1.0, 0.0), (1.0, NAN, 2.0), (INF, 1.0, 0.0), (-INF, -INF, -INF), (INF, INF, 0.0),
]  # fmt: skip
SOFTMAX = [(-3.0, 0.5, 4.0), (30.0, -20.0, 0.0), (1e-3, -2e-3, 5.0)]
PRODUCTS = [
    (0.0, 2.0, 3.0), (0.0, 0.0, 3.0), (2.0, 0.0, 3.0), (1.0, 2.0, 3.0), (-0.0, 2.0, 3.0),
    (0.0, 0.0, 0.0), (INF, 0.0, 1.0), (NAN, 2.0, 3.0),
]  # fmt: skip
BOUNDS = [
    (0.0, 0.0, 1.0), (1.0, 0.0, 1.0), (0.5, 0.0, 1.0), (-1.0, 0.0, 1.0), (2.0, 0.0, 1.0),
    (0.5, 0.5, 0.5), (NAN, 0.0, 1.0),
]  # fmt: skip
FIRST = ((0,),)
WEIGHTS = (1.0, 2.0, 3.0)


def _unary(name, tf_fn, jax_fn, points=U, **kw):
    return Probe(name, tf_fn, jax_fn, points, **kw)


def _binary(name, tf_fn, jax_fn, points=PAIRS, order=2, **kw):
    return Probe(name, tf_fn, jax_fn, points, order=order, **kw)


def _triple(name, tf_reduce, jax_reduce, points=TRIPLES, order=2, **kw):
    """A reduction over three values per point: the values stacked on the last axis."""
    return Probe(
        name,
        lambda tf: lambda *a: tf_reduce(tf, tf.stack(list(a), axis=-1)),
        lambda *a: jax_reduce(jnp.stack(list(a), axis=-1)),
        points,
        order=order,
        **kw,
    )


def _tf_weighted(tf, v):
    return tf.reduce_sum(v * WEIGHTS, -1)


def _weighted(v):
    return jnp.sum(v * jnp.broadcast_to(jnp.asarray(WEIGHTS, jnp.float32), v.shape), -1)


def _where(name, tf_op, jax_op, cond=lambda x: x > 0, points=WHERE):
    return Probe(
        name,
        lambda tf: lambda x: tf.where(cond(x), tf_op(tf)(x), tf.zeros_like(x)),
        lambda x: jnp.where(cond(x), jax_op(x), 0.0),
        points,
    )


PROBES = [
    # kinks, ties and activations
    _unary("abs", lambda tf: tf.abs, jnp.abs),
    _unary("sign", lambda tf: tf.sign, jnp.sign),
    _unary("neg", lambda tf: tf.negative, jnp.negative),
    _unary("relu", lambda tf: tf.nn.relu, jax.nn.relu),
    _unary("relu6", lambda tf: tf.nn.relu6, jax.nn.relu6, [*U, (6.0,), (7.0,)]),
    _unary("maximum_x_0", lambda tf: lambda x: tf.maximum(x, 0.0), lambda x: jnp.maximum(x, 0.0)),
    _unary("maximum_0_x", lambda tf: lambda x: tf.maximum(tf.constant(0.0, x.dtype), x),
           lambda x: jnp.maximum(0.0, x)),
    _unary("minimum_1_abs", lambda tf: lambda x: tf.minimum(tf.constant(1.0, x.dtype), tf.abs(x)),
           lambda x: jnp.minimum(1.0, jnp.abs(x))),
    _unary("elu", lambda tf: tf.nn.elu, jax.nn.elu),
    _unary("selu", lambda tf: tf.nn.selu, jax.nn.selu, ulps=3),
    _unary("leaky_relu", lambda tf: lambda x: tf.nn.leaky_relu(x, 0.2),
           lambda x: jax.nn.leaky_relu(x, 0.2)),
    _unary("leaky_relu_default", lambda tf: lambda x: tf.nn.leaky_relu(x, 0.01),
           jax.nn.leaky_relu),
    # Their second and third derivatives are polynomials in sigmoid or tanh, built on an
    # exp whose XLA kernel differs per instruction set: 7 to 9 ulps from TensorFlow's on
    # AVX-512, AVX2, AVX and SSE4_2 CPUs (TensorFlow's is within 2 of the exact value).
    _unary("softplus", lambda tf: tf.nn.softplus, jax.nn.softplus, BIG, ulps=16),
    _unary("sigmoid", lambda tf: tf.sigmoid, jax.nn.sigmoid, BIG, ulps=16),
    _unary("tanh", lambda tf: tf.tanh, jnp.tanh, BIG, ulps=16),
    # Sign's gradient is a real zero in TensorFlow, which 1 / x's gradient at 0 makes
    # NaN; TanhGrad multiplies an infinite incoming gradient by 1 - y * y, not 0 * inf.
    _unary("sign_of_reciprocal", lambda tf: lambda x: tf.sign(1.0 / x) + x,
           lambda x: jnp.sign(1.0 / x) + x),
    _unary("reciprocal_of_tanh", lambda tf: lambda x: 1.0 / tf.tanh(x),
           lambda x: 1.0 / jnp.tanh(x), BIG, ulps=16),
    _unary("softsign", lambda tf: tf.nn.softsign, jax.nn.soft_sign, BIG[:-3] + BIG[-1:],
           seqs=FIRST),
    # From JAX 0.12.1 jax.nn.soft_sign(±inf) is ±1 where TensorFlow's is NaN: the values
    # stay JAX's (docs/conventions.md), the derivatives there are TensorFlow's 0.
    _unary("softsign_at_infinity", lambda tf: tf.nn.softsign, jax.nn.soft_sign,
           _pts(INF, -INF), seqs=FIRST, value=False),
    # exponentials, logarithms, roots and powers
    _unary("exp", lambda tf: tf.exp, jnp.exp, BIG),
    _unary("expm1", lambda tf: tf.math.expm1, jnp.expm1, BIG),
    _unary("log", lambda tf: tf.math.log, jnp.log, POSITIVE),
    _unary("log1p", lambda tf: tf.math.log1p, jnp.log1p,
           _pts(-2.0, -1.0, -0.5, -0.0, 0.0, 1.0, INF, NAN)),
    _unary("sqrt", lambda tf: tf.sqrt, jnp.sqrt, POSITIVE),
    _unary("rsqrt", lambda tf: tf.math.rsqrt, lax.rsqrt, POSITIVE),
    _unary("reciprocal", lambda tf: tf.math.reciprocal, jnp.reciprocal, [*POSITIVE, (-2.0,)]),
    _unary("one_over_x", lambda tf: lambda x: 1.0 / x, lambda x: 1.0 / x, [*POSITIVE, (-2.0,)]),
    _unary("square", lambda tf: tf.square, jnp.square),
    _unary("x**2", lambda tf: lambda x: x**2, lambda x: x**2),
    _unary("x**3", lambda tf: lambda x: x**3, lambda x: x**3),
    _unary("x**-2", lambda tf: lambda x: x**-2, lambda x: x**-2),
    _unary("x**-1", lambda tf: lambda x: x**-1, lambda x: x**-1, [*POSITIVE, (-2.0,)]),
    _unary("x**1", lambda tf: lambda x: x**1, lambda x: x**1, [*POSITIVE, (-2.0,)]),
    _unary("x**0", lambda tf: lambda x: x**0, lambda x: x**0, [*POSITIVE, (-2.0,)]),
    _unary("x**0.5", lambda tf: lambda x: x**0.5, lambda x: x**0.5, POSITIVE),
    _unary("sin", lambda tf: tf.sin, jnp.sin),
    _unary("cos", lambda tf: tf.cos, jnp.cos),
    _unary("atanh", lambda tf: tf.atanh, jnp.arctanh, UNIT),
    # piecewise constant and structural
    _unary("floor", lambda tf: tf.floor, jnp.floor, ROUND),
    _unary("round", lambda tf: tf.round, jnp.round, ROUND),
    _unary("stop_gradient", lambda tf: tf.stop_gradient, lax.stop_gradient),
    _unary("identity", lambda tf: tf.identity, fg.identity),
    _unary("cast_f16", lambda tf: lambda x: tf.cast(tf.cast(x, tf.float16), tf.float32),
           lambda x: x.astype(jnp.float16).astype(jnp.float32),
           _pts(-2.0, 0.0, 1.0, 1e-8, 70000.0, INF, NAN)),
    # clipping
    _unary("clip_by_value", lambda tf: lambda x: tf.clip_by_value(x, 0.0, 1.0),
           lambda x: jnp.clip(x, 0.0, 1.0), CLIP),
    _unary("ClipByValue_clamp", lambda tf: lambda x: tf.raw_ops.ClipByValue(
        t=x, clip_value_min=tf.constant(0.0, x.dtype), clip_value_max=tf.constant(1.0, x.dtype)),
           lambda x: lax.clamp(0.0, x, 1.0), CLIP),
    _unary("maximum_lower_bound", lambda tf: lambda x: tf.maximum(x, 0.0),
           lambda x: jnp.clip(x, min=0.0), CLIP),
    Probe("clip_by_value_bounds", lambda tf: lambda x, lo, hi: tf.clip_by_value(x, lo, hi),
          lambda x, lo, hi: jnp.clip(x, lo, hi), BOUNDS, order=2),
    Probe("ClipByValue_bounds", lambda tf: lambda x, lo, hi: tf.raw_ops.ClipByValue(
        t=x, clip_value_min=lo, clip_value_max=hi),
          lambda x, lo, hi: lax.clamp(lo, x, hi), BOUNDS, order=2),
    # masked branches of a where
    _where("where_sqrt", lambda tf: tf.sqrt, jnp.sqrt),
    _where("where_rsqrt", lambda tf: tf.math.rsqrt, lax.rsqrt),
    _where("where_one_over_x", lambda tf: lambda x: 1.0 / x, lambda x: 1.0 / x),
    _where("where_log", lambda tf: tf.math.log, jnp.log),
    _where("where_log1p", lambda tf: tf.math.log1p, jnp.log1p, lambda x: x > -1,
           _pts(-2.0, -1.0, 0.0, 1.0)),
    _where("where_atanh", lambda tf: tf.atanh, jnp.arctanh, lambda x: x < 1, _pts(2.0, 1.0, 0.5)),
    _where("where_x**-1", lambda tf: lambda x: x**-1, lambda x: x**-1),
    _where("where_x*log(x)", lambda tf: lambda x: x * tf.math.log(x), lambda x: x * jnp.log(x)),
    _where("where_safe_sqrt", lambda tf: lambda x: tf.sqrt(tf.where(x > 0, x, tf.ones_like(x))),
           lambda x: jnp.sqrt(jnp.where(x > 0, x, 1.0))),
    _unary("zero_times_sqrt", lambda tf: lambda x: 0.0 * tf.sqrt(x), lambda x: 0.0 * jnp.sqrt(x),
           WHERE),
    # binary
    _binary("add", lambda tf: tf.add, jnp.add),
    _binary("sub", lambda tf: tf.subtract, jnp.subtract),
    _binary("mul", lambda tf: tf.multiply, jnp.multiply),
    _binary("div", lambda tf: tf.divide, jnp.divide, DIV),
    _binary("maximum", lambda tf: tf.maximum, jnp.maximum),
    _binary("minimum", lambda tf: tf.minimum, jnp.minimum),
    _binary("pow", lambda tf: tf.pow, jnp.power, POW, order=3),
    _binary("atan2", lambda tf: tf.atan2, jnp.arctan2,
            [(0.0, 0.0), (0.0, -1.0), (1.0, 0.0), (1.0, 1.0), (-1.0, -1.0), (INF, 1.0),
             (NAN, 1.0)]),
    # JAX has no derivative of nextafter; TensorFlow's is ones for x1, zeros for x2.
    _binary("nextafter", lambda tf: tf.math.nextafter, jnp.nextafter,
            [(1.0, 0.0), (1.0, 2.0), (0.0, 0.0), (-0.0, 1.0), (INF, 1.0), (NAN, 1.0),
             (1.0, NAN)]),
    _binary("squared_difference", lambda tf: tf.math.squared_difference,
            lambda x, y: jnp.square(x - y), order=3),
    _binary("xlogy", lambda tf: tf.math.xlogy, jss.xlogy, XLOGY, order=3),
    _binary("xlog1py", lambda tf: tf.math.xlog1py, jss.xlog1py,
            [(0.0, -1.0), (0.0, 0.0), (0.0, -2.0), (1.0, -1.0), (2.0, 3.0), (0.0, INF)]),
    _binary("where_div", lambda tf: lambda x, y: tf.where(tf.not_equal(y, 0.0), x / y,
                                                          tf.zeros_like(x)),
            lambda x, y: jnp.where(y != 0, x / y, 0.0), DIV),
    _binary("where_pow", lambda tf: lambda x, y: tf.where(x > 0, tf.pow(x, y), tf.zeros_like(x)),
            lambda x, y: jnp.where(x > 0, jnp.power(x, y), 0.0),
            [(0.0, 0.5), (0.0, -1.0), (0.0, 2.0), (-1.0, 0.5), (4.0, 0.5)]),
    _binary("matmul", lambda tf: lambda x, y: (
        tf.stack([x, y], -1)[..., None, :] @ tf.stack([y, x], -1)[..., :, None])[..., 0, 0],
            lambda x, y: (
        jnp.stack([x, y], -1)[..., None, :] @ jnp.stack([y, x], -1)[..., :, None])[..., 0, 0],
            [(1.0, 2.0), (0.0, 0.0), (INF, 1.0), (NAN, 1.0)], order=3),
    # reductions and scans over three values
    _triple("reduce_max", lambda tf, v: tf.reduce_max(v, -1), lambda v: jnp.max(v, -1)),
    _triple("reduce_min", lambda tf, v: tf.reduce_min(v, -1), lambda v: jnp.min(v, -1)),
    _triple("reduce_sum", lambda tf, v: tf.reduce_sum(v, -1), lambda v: jnp.sum(v, -1)),
    _triple("reduce_prod", lambda tf, v: tf.reduce_prod(v, -1), lambda v: jnp.prod(v, -1),
            PRODUCTS),
    _triple("cumprod", lambda tf, v: _tf_weighted(tf, tf.math.cumprod(v, -1)),
            lambda v: _weighted(jnp.cumprod(v, -1)), PRODUCTS),
    _triple("cumsum", lambda tf, v: _tf_weighted(tf, tf.cumsum(v, -1)),
            lambda v: _weighted(jnp.cumsum(v, -1))),
    _triple("cumulative_logsumexp",
            lambda tf, v: _tf_weighted(tf, tf.math.cumulative_logsumexp(v, -1)),
            lambda v: _weighted(lax.cumlogsumexp(v, v.ndim - 1)),
            [(-INF, 1.0, 2.0), (-INF, -INF, 0.0), (1.0, 2.0, 3.0), (0.0, -INF, 1.0),
             (3.0, 2.0, 1.0)], order=1),
    _triple("norm", lambda tf, v: tf.norm(v, axis=-1), lambda v: jnp.linalg.norm(v, axis=-1),
            [(0.0, 0.0, 0.0), (3.0, 4.0, 0.0), (1.0, 1.0, 1.0), (INF, 1.0, 0.0)]),
    _triple("logsumexp", lambda tf, v: tf.reduce_logsumexp(v, -1),
            lambda v: jax.nn.logsumexp(v, -1), TRIPLES[:5], ulps=4),
    # The n-th derivative of a softmax is a polynomial of degree n + 1 in its outputs,
    # whose terms (up to the sum of the weights) cancel: ulps are counted at that sum.
    _triple("softmax", lambda tf, v: _tf_weighted(tf, tf.nn.softmax(v, -1)),
            lambda v: _weighted(jax.nn.softmax(v, -1)), TRIPLES[:5] + SOFTMAX, order=3,
            ulps=16, scale=sum(WEIGHTS)),
    _triple("log_softmax", lambda tf, v: _tf_weighted(tf, tf.nn.log_softmax(v, -1)),
            lambda v: _weighted(jax.nn.log_softmax(v, -1)), TRIPLES[:5] + SOFTMAX, order=3,
            scale=sum(WEIGHTS)),
]  # fmt: skip


# --- the two sides ----------------------------------------------------------------------


#: Every probe's points are padded to this many (repeating the last), so that eager
#: evaluation reuses the compiled kernels of one shape from probe to probe.
WIDTH = 24


def _columns(probe: Probe) -> list[np.ndarray]:
    points = probe.points + probe.points[-1:] * (WIDTH - len(probe.points))
    return [np.asarray(c, np.float32) for c in zip(*points, strict=True)]


def _tensorflow_graph_values(tf, dtype) -> dict[tuple[str, tuple[int, ...]], Any]:
    """Every probe's value and derivatives from TensorFlow in ``dtype``, in one graph and
    one run (the points are the float32 ones, exactly representable in float64)."""
    fetches, feeds, nones = {}, {}, set()
    graph = tf.Graph()
    with graph.as_default():
        for probe in PROBES:
            columns = [c.astype(dtype) for c in _columns(probe)]
            xs = [tf.compat.v1.placeholder(dtype, [len(c)]) for c in columns]
            feeds.update(zip(xs, columns, strict=True))
            tensors = {(): probe.tf_fn(tf)(*xs)}
            for seq in probe.sequences():
                parent = tensors[seq[:-1]]
                grad = None if parent is None else tf.compat.v1.gradients(parent, xs[seq[-1]])[0]
                tensors[seq] = grad
            nones |= {(probe.name, s) for s, t in tensors.items() if t is None}
            fetches.update({(probe.name, s): t for s, t in tensors.items() if t is not None})
    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        values = session.run(fetches, feed_dict=feeds)
    return {**values, **dict.fromkeys(nones)}


@pytest.fixture(scope="module")
def tensorflow_values(tf):
    """TensorFlow's float32 numbers on this CPU, and the float64 reference beside them."""
    return _tensorflow_graph_values(tf, np.float32), _tensorflow_graph_values(tf, np.float64)


def _in_scan(f: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *xs: lax.scan(lambda c, _: (c, f(*xs)), 0.0, None, length=1)[1][0]


def _in_cond(f: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *xs: lax.cond(True, lambda: f(*xs), lambda: jnp.zeros_like(xs[0]))


#: Op by op as it is, and jitted in the body of a ``lax.scan`` and in a ``lax.cond``
#: branch (``tests/test_conventions.py`` checks plain ``jax.jit`` against op by op).
CONTEXTS = {"eager": lambda f: f, "jit_scan": _in_scan, "jit_cond": _in_cond}


def _funcgrad_values(probe: Probe, context: str) -> dict[tuple[int, ...], Any]:
    """The value and every derivative by nested ``fg.gradients`` (``None``: unconnected).

    The derivatives of one parent come from one ``fg.gradients`` call over all inputs.
    """
    f = fg.tensorflow_conventions(CONTEXTS[context](probe.jax_fn))
    seqs = probe.sequences()

    def all_values(*xs: jax.Array) -> dict[tuple[int, ...], Any]:
        out: dict[tuple[int, ...], Any] = {(): f(*xs)}
        for parent in sorted({s[:-1] for s in seqs}, key=len):
            grads = [None] * len(xs)
            if out[parent] is not None:
                grads = fg.gradients(_derivative(f, parent), list(xs))
            out.update({s: grads[s[-1]] for s in seqs if s[:-1] == parent})
        return out

    run = jax.jit(all_values) if context != "eager" else all_values
    return run(*(jnp.asarray(c) for c in _columns(probe)))


def _derivative(f: Callable[..., Any], seq: tuple[int, ...]) -> Callable[..., Any]:
    """``f``'s derivative ``seq`` as a function of all of ``f``'s inputs."""
    for i in seq:

        def f(*args, g=f, i=i):
            return fg.gradients(lambda v: g(*args[:i], v, *args[i + 1 :]), args[i])

    return f


# --- the comparison ---------------------------------------------------------------------


def _mismatches(probe: Probe, seq: tuple[int, ...], want: Any, got: Any, exact: Any) -> list[str]:
    where = f"d{''.join('xyz'[i] for i in seq)}" if seq else "value"
    if want is None or got is None:
        if (want is None) != (got is None):
            return [f"{where}: TensorFlow {want}, funcgrad {got}"]
        return []
    n = len(probe.points)  # the columns past it repeat the last point
    want, got = np.asarray(want, np.float32)[:n], np.asarray(got, np.float32)[:n]
    exact = np.asarray(exact, np.float64)[:n]
    same = (np.isnan(want) & np.isnan(got)) | (want == got)
    finite = np.isfinite(want) & np.isfinite(got)
    same |= finite & tolerance.within_tensorflows_error(want, got, exact, probe.ulps, probe.scale)
    return [
        f"{where} at {probe.points[i]}: TensorFlow {want[i]!r}, funcgrad {got[i]!r}, "
        f"exact {exact[i]!r}"
        for i in np.flatnonzero(~same)
    ]


@pytest.mark.parametrize("context", list(CONTEXTS))
@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_tensorflow_conventions_match_tensorflow(tensorflow_values, probe, context):
    tensorflow, exact = tensorflow_values
    got = _funcgrad_values(probe, context)
    compared = ([()] if probe.value else []) + probe.sequences()
    problems = [
        m
        for seq in compared
        for m in _mismatches(
            probe, seq, tensorflow[(probe.name, seq)], got[seq], exact[(probe.name, seq)]
        )
    ]
    assert not problems, f"{probe.name} ({context}):\n  " + "\n  ".join(problems)


def test_the_suite_is_broad():
    """At least 60 probes over 30 differentiable ops, at first, second and third order."""
    ops = set()
    for probe in PROBES:
        args = [jnp.zeros(2, jnp.float32)] * len(probe.points[0])
        ops |= _differentiable_ops(jax.make_jaxpr(probe.jax_fn)(*args).jaxpr)
    orders = {len(s) for p in PROBES for s in p.sequences()}
    assert len(PROBES) >= 60 and len(ops) >= 30 and orders == {1, 2, 3}, (len(PROBES), ops)


def _differentiable_ops(jaxpr) -> set[str]:
    """The names of the ops with a floating output (primitives and named functions)."""
    names = set()
    for eqn in jaxpr.eqns:
        name = _rewrite.key(eqn)
        floating = any(jnp.issubdtype(v.aval.dtype, jnp.inexact) for v in eqn.outvars)
        named = name in _rewrite.NAMED_FUNCTIONS or _jax.kind(eqn) is _jax.Kind.PRIMITIVE
        if named and floating:
            names.add(name)
        for sub in _jax.sub_jaxprs(eqn):
            names |= _differentiable_ops(sub)
    return names


@pytest.mark.parametrize("slope", [0.2, 0.01], ids=["alpha_0.2", "default_slope"])
@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(fg.tensorflow_conventions, id="conventions"),
        pytest.param(
            lambda f: fg.gradient_override_map(f, {"LeakyRelu": "LeakyRelu"}), id="override"
        ),
    ],
)
def test_leaky_relu_float64_slope_is_tensorflows_float32_alpha(tf, run_tf1, slope, wrap):
    """TensorFlow's alpha is a float32 attribute that its float64 kernel casts: the slope of
    the gradient is float64(float32(0.2)) = 0.20000000298023224, and so is funcgrad's.  The
    values stay the function's own (JAX's float64 slope)."""
    x = np.array([-2.0, -0.5, 0.0, 3.0])

    def build():
        t = tf.constant(x, tf.float64)
        return tf.compat.v1.gradients(tf.reduce_sum(tf.nn.leaky_relu(t, slope)), t)[0]

    tf_grad = run_tf1(build)
    rounded = float(np.float32(slope))
    assert rounded != slope and tf_grad.tolist() == [rounded] * 3 + [1.0]
    leaky = (lambda v: jax.nn.leaky_relu(v, slope)) if slope != 0.01 else jax.nn.leaky_relu
    with jax.enable_x64(True):
        f = wrap(leaky)
        v = jnp.asarray(x, jnp.float64)
        got = fg.gradients(lambda v: jnp.sum(f(v)), v)
        values, expected_values = f(v), leaky(v)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, tf_grad)
    np.testing.assert_array_equal(values, expected_values)


@pytest.mark.parametrize("op", ["unsorted_segment_prod", "segment_prod"])
def test_segment_prod_with_repeated_ids(tf, run_tf1, op):
    """JAX differentiates a segment product only with unique ids; TensorFlow's gradient
    handles segments with no zero, one zero (the product of the others) and two."""
    data = np.array([[2.0, -1.0], [3.0, 0.0], [0.0, 0.0], [4.0, 2.0], [7.0, 0.0], [5.0, 3.0]],
                    np.float32)  # fmt: skip
    ids = np.array([0, 0, 1, 1, 1, 3], np.int32)
    weight = np.arange(8, dtype=np.float32).reshape(4, 2) + 1.0

    def build():
        d = tf.constant(data)
        if op == "segment_prod":
            out = tf.math.segment_prod(d, ids)
        else:
            out = tf.math.unsorted_segment_prod(d, ids, 4)
        return tf.compat.v1.gradients(tf.reduce_sum(weight * out), d)[0]

    f = fg.tensorflow_conventions(lambda d: jax.ops.segment_prod(d, ids, num_segments=4))
    got = fg.gradients(lambda d: jnp.sum(weight * f(d)), jnp.asarray(data))
    np.testing.assert_array_equal(got, run_tf1(build))


def test_scatter_mul_along_another_axis_is_a_segment_product(tf, run_tf1):
    """``x.at[:, ids].multiply(v)`` is TensorFlow's segment product of the transposes."""
    data = np.array([[2.0, -1.0], [3.0, 0.0], [0.0, 0.0], [4.0, 2.0], [7.0, 0.0], [5.0, 3.0]],
                    np.float32)  # fmt: skip
    ids = np.array([0, 0, 1, 1, 1, 3], np.int32)
    weight = np.arange(8, dtype=np.float32).reshape(4, 2) + 1.0
    start = np.array([[1.5, 2.0, -1.0, 0.5], [0.0, 3.0, 2.0, -2.0]], np.float32)

    def build():
        d, x = tf.constant(data), tf.constant(start.T)
        out = x * tf.math.unsorted_segment_prod(d, ids, 4)
        return tf.compat.v1.gradients(tf.reduce_sum(weight * out), [d, x])

    f = fg.tensorflow_conventions(lambda x, v: x.at[:, ids].multiply(v))
    got = fg.gradients(lambda x, v: jnp.sum(weight.T * f(x, v)), [start, data.T])
    want = run_tf1(build)
    np.testing.assert_allclose(got[1], want[0].T, rtol=1e-6)
    np.testing.assert_allclose(got[0], want[1].T, rtol=1e-6)
