"""W4: a host-callback op with a gradient: the TF1 tutorial's clipped ReLU in NumPy."""

import jax
import jax.numpy as jnp
import numpy as np

import funcgrad as fg

from ._common import Row
from ._common import interleaved
from ._common import missing
from ._common import peer
from ._common import row


def _clip(x):
    return np.clip(x, -3.0, 3.0).astype(x.dtype)


def _clip_grad(x, dy):
    return (dy * (np.abs(x) <= 3.0)).astype(x.dtype)


def _fg_clip(x):
    def grad(op, dy):
        return fg.py_func(_clip_grad, [op.inputs[0], dy], jnp.float32)

    return fg.py_func(_clip, [x], jnp.float32, grad=grad)


@jax.custom_vjp
def _raw_clip(x):
    return jax.pure_callback(_clip, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def _raw_fwd(x):
    return _raw_clip(x), x


def _raw_bwd(x, dy):
    return (jax.pure_callback(_clip_grad, jax.ShapeDtypeStruct(x.shape, x.dtype), x, dy),)


_raw_clip.defvjp(_raw_fwd, _raw_bwd)


def _value_and_grad(op):
    return jax.jit(jax.value_and_grad(lambda x: jnp.sum(op(x))))


def _tensorflow(x_np, calls, repeats):
    tf = peer("tensorflow")
    if tf is None:
        return missing("tf.py_function + tf.custom_gradient", "tensorflow")

    @tf.custom_gradient
    def clipped(x):
        y = tf.py_function(lambda v: _clip(v.numpy()), [x], tf.float32)

        def grad(dy):
            return tf.py_function(
                lambda v, d: _clip_grad(v.numpy(), d.numpy()), [x, dy], tf.float32
            )

        return y, grad

    @tf.function
    def value_and_grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(clipped(x))
        return y, tape.gradient(y, x)

    x = tf.constant(x_np)
    return row(
        "tf.py_function + tf.custom_gradient (tf.function)",
        lambda: _calls(lambda: float(value_and_grad(x)[0]), calls),
        repeats,
        float,
    )


def _calls(fn, calls):
    for _ in range(calls):
        out = fn()
    return out


def run(size: int = 1000, calls: int = 200, repeats: int = 15) -> list[Row]:
    """Per-call times; funcgrad's and the raw callback's repeats interleaved."""
    x_np = np.linspace(-5.0, 4.0, size, dtype=np.float32)
    x = jnp.asarray(x_np)
    runs = {}
    for mode in ("value + gradient", "value only"):
        for name, op in [
            ("fg.py_func", _fg_clip),
            ("raw jax.pure_callback + custom_vjp", _raw_clip),
        ]:
            if mode == "value only":
                fn = jax.jit(lambda x, op=op: jnp.sum(op(x)))
                once = lambda fn=fn: float(fn(x))  # noqa: E731
            else:
                fn = _value_and_grad(op)
                once = lambda fn=fn: float(fn(x)[0])  # noqa: E731
            runs[f"{name}, {mode}"] = (lambda once=once: _calls(once, calls), float)
    rows = [*interleaved(runs, repeats), _tensorflow(x_np, calls, repeats)]
    for r in rows:
        if r.seconds is not None:
            r.seconds /= calls  # per call
    return rows
