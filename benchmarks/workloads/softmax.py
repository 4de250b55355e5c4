"""W1: the TF1 tutorial's softmax regression, one epoch of SGD 0.01 over 55,000 x 784, batch 100."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

import funcgrad as fg

from ._common import Row
from ._common import interleaved
from ._common import jax_runs
from ._common import missing
from ._common import optax_runs
from ._common import peer
from ._common import row
from ._common import tf1_row
from ._common import tf_batches

LR = 0.01


def make_data(n: int, features: int = 784, classes: int = 10, seed: int = 0):
    """MNIST-shaped data: pixels in [0, 1), labels from a fixed linear teacher."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, features), dtype=np.float32)
    labels = np.argmax(x @ rng.normal(size=(features, classes)).astype(np.float32), axis=1)
    y = np.eye(classes, dtype=np.float32)[labels]
    return x, y


def cost(w, b, x, y) -> float:
    """The tutorial's cross-entropy of the final parameters, in float64 NumPy."""
    logits = x.astype(np.float64) @ np.asarray(w, np.float64) + np.asarray(b, np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return float(-np.mean(np.sum(y * log_p, axis=1)))


def _loss(params, x, y):
    logits = x @ params["W"] + params["b"]
    return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits), axis=1))


def _init(features, classes):
    return {"W": jnp.zeros((features, classes)), "b": jnp.zeros((1, classes))}


def _final(x, y):
    return lambda params: cost(params["W"], params["b"], x, y)


def _funcgrad(x, y, batch):
    opt = fg.train.GradientDescentOptimizer(LR)
    return jax_runs(
        "funcgrad",
        x,
        y,
        batch,
        lambda: opt.init(_init(x.shape[1], y.shape[1])),
        lambda state, xi, yi: opt.minimize(_loss, state, xi, yi)[0],
        _final(x, y),
    )


def _raw_jax(x, y, batch):
    init = lambda: _init(x.shape[1], y.shape[1])  # noqa: E731
    return optax_runs(optax.sgd(LR), _loss, init, x, y, batch, _final(x, y))


def _torch(x, y, batch, repeats):
    torch = peer("torch")
    if torch is None:
        return [missing("PyTorch eager", "torch")]
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    batches = list(zip(xt.split(batch), yt.split(batch), strict=True))

    def loss(w, b, xi, yi):
        return -(yi * torch.log_softmax(xi @ w + b, dim=1)).sum(dim=1).mean()

    def params():
        w = torch.zeros(x.shape[1], y.shape[1], requires_grad=True)
        return w, torch.zeros(1, y.shape[1], requires_grad=True)

    def with_autograd():
        w, b = params()
        for xi, yi in batches:
            gw, gb = torch.autograd.grad(loss(w, b, xi, yi), (w, b))
            with torch.no_grad():
                w -= LR * gw
                b -= LR * gb
        return {"W": w.detach().numpy(), "b": b.detach().numpy()}

    def with_optim():
        w, b = params()
        opt = torch.optim.SGD([w, b], lr=LR)
        for xi, yi in batches:
            opt.zero_grad()
            loss(w, b, xi, yi).backward()
            opt.step()
        return {"W": w.detach().numpy(), "b": b.detach().numpy()}

    return [
        row("PyTorch eager, autograd.grad", with_autograd, repeats, _final(x, y)),
        row("PyTorch eager, optim.SGD", with_optim, repeats, _final(x, y)),
    ]


def _tensorflow(x, y, batch, repeats):
    tf = peer("tensorflow")
    if tf is None:
        return [missing("TensorFlow", "tensorflow")]
    batches = tf_batches(tf, x, y, batch)
    w = tf.Variable(tf.zeros((x.shape[1], y.shape[1])))
    b = tf.Variable(tf.zeros((1, y.shape[1])))

    @tf.function
    def step(xi, yi):
        with tf.GradientTape() as tape:
            loss = -tf.reduce_mean(tf.reduce_sum(yi * tf.nn.log_softmax(xi @ w + b), axis=1))
        gw, gb = tape.gradient(loss, [w, b])
        w.assign_sub(LR * gw)
        b.assign_sub(LR * gb)

    def tf2():
        w.assign(tf.zeros_like(w))
        b.assign(tf.zeros_like(b))
        for xi, yi in batches:
            step(xi, yi)
        return {"W": w.numpy(), "b": b.numpy()}

    return [
        row("TensorFlow 2, tf.function step", tf2, repeats, _final(x, y)),
        _tf1_session(tf, x, y, batch, repeats),
    ]


def _tf1_session(tf, x, y, batch, repeats):
    """The tutorial's own loop: placeholders, feed_dict, GradientDescentOptimizer.minimize."""

    def build(xs, ys):
        w = tf.Variable(tf.zeros((x.shape[1], y.shape[1])))
        b = tf.Variable(tf.zeros((1, y.shape[1])))
        loss = -tf.reduce_mean(tf.reduce_sum(ys * tf.nn.log_softmax(xs @ w + b), axis=1))
        return tf.compat.v1.train.GradientDescentOptimizer(LR).minimize(loss), {"W": w, "b": b}

    return tf1_row(
        tf, "TensorFlow 1, session loop (the tutorial's)", x, y, batch, repeats, _final(x, y), build
    )


def run(n: int = 55_000, batch: int = 100, repeats: int = 5) -> list[Row]:
    x, y = make_data(n)
    rows = interleaved({**_funcgrad(x, y, batch), **_raw_jax(x, y, batch)}, repeats)
    return rows + _torch(x, y, batch, repeats) + _tensorflow(x, y, batch, repeats)
