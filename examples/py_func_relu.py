"""A NumPy activation with a NumPy gradient, trained inside a jitted model.

The TF1 tutorial program's pattern -- ``tf.py_func`` + ``tf.RegisterGradient`` +
``gradient_override_map({"PyFunc": ...})`` -- as one ``fg.py_func(..., grad=...)``:
a clipped ReLU (``np.clip(x, -3, 3)``, gradient 1 on ``[-3, 3]``, bounds included) is
the hidden activation of a small classifier trained on scikit-learn's digits.

    python examples/py_func_relu.py --steps 300
    python examples/py_func_relu.py --plot relu.png --logdir runs/relu
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import reporting
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import funcgrad as fg

LOW, HIGH = -3.0, 3.0


def clipped_relu_np(x: np.ndarray) -> np.ndarray:
    """The activation, in NumPy."""
    return np.clip(x, LOW, HIGH)


def clipped_relu_grad_np(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """Its gradient, in NumPy: ``dy`` where ``LOW <= x <= HIGH``, zero elsewhere."""
    return (dy * ((x >= LOW) & (x <= HIGH))).astype(dy.dtype)


def clipped_relu(x: jax.Array) -> jax.Array:
    """The activation as a differentiable JAX function, both halves on the host."""

    def grad(op: Any, dy: jax.Array) -> jax.Array:
        return fg.py_func(clipped_relu_grad_np, [op.inputs[0], dy], dy.dtype, name="clip_grad")

    return fg.py_func(clipped_relu_np, [x], x.dtype, grad=grad, name="clipped_relu")


Params = dict[str, jax.Array]


def init_params(key: jax.Array, n_in: int, hidden: int, n_out: int) -> Params:
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (n_in, hidden)) / np.sqrt(n_in),
        "b1": jnp.zeros(hidden),
        "w2": jax.random.normal(k2, (hidden, n_out)) / np.sqrt(hidden),
        "b2": jnp.zeros(n_out),
    }


def logits(
    params: Params, x: jax.Array, activation: Callable[[jax.Array], jax.Array] = clipped_relu
) -> jax.Array:
    h = activation(x @ params["w1"] + params["b1"][None, :])
    return h @ params["w2"] + params["b2"][None, :]


def loss_fn(
    params: Params,
    x: jax.Array,
    y: jax.Array,
    activation: Callable[[jax.Array], jax.Array] = clipped_relu,
) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(logits(params, x, activation), y).mean()


def train(
    steps: int = 300,
    lr: float = 0.5,
    hidden: int = 64,
    batch: int = 128,
    seed: int = 0,
    curves: reporting.Curves | None = None,
) -> tuple[list[float], float]:
    """Train on the digits; returns the loss at every step and the test accuracy.

    ``curves`` gets each step's loss and gradient norm.
    """
    data = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        (data.data / 16.0).astype(np.float32), data.target.astype(np.int32), random_state=seed
    )
    x_train, y_train = jnp.asarray(x_train), jnp.asarray(y_train)
    key, init_key = jax.random.split(jax.random.key(seed))
    params = init_params(init_key, 64, hidden, 10)

    @jax.jit
    def step(params: Params, key: jax.Array) -> tuple[Params, jax.Array, jax.Array]:
        idx = jax.random.choice(key, len(x_train), (batch,), replace=False)
        loss, grads = fg.value_and_gradients(
            lambda p: loss_fn(p, x_train[idx], y_train[idx]), params
        )
        norm = fg.global_norm(jax.tree.leaves(grads))
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss, norm

    losses = []
    for t, k in enumerate(reporting.progress(jax.random.split(key, steps), desc="train"), start=1):
        params, loss, norm = step(params, k)
        losses.append(float(loss))
        if curves is not None:
            curves.add("loss", "clipped ReLU", [t], [losses[-1]])
            curves.add("gradient norm", "clipped ReLU", [t], [norm])
    predictions = jnp.argmax(jax.jit(logits)(params, x_test), axis=-1)
    return losses, float((predictions == y_test).mean())


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = reporting.make_parser(__doc__)
    parser.add_argument("--steps", type=int, default=300, help="training steps")
    parser.add_argument("--lr", type=float, default=0.5, help="gradient descent step size")
    parser.add_argument("--hidden", type=int, default=64, help="hidden units")
    parser.add_argument("--batch", type=int, default=128, help="examples per step")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    reporting.add_output_arguments(parser, "each step's loss and gradient norm")
    return parser


def main(argv: Sequence[str] | None = None) -> tuple[list[float], float]:
    """Trains and prints the first and last loss and the test accuracy."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if min(args.steps, args.hidden, args.batch) < 1 or args.lr <= 0:
        parser.error("--steps, --hidden, --batch and --lr must be positive")
    reporting.check_output_arguments(parser, args)
    curves = reporting.Curves(args, "a py_func activation on digits")
    losses, accuracy = train(args.steps, args.lr, args.hidden, args.batch, args.seed, curves)
    print(f"loss: first step {losses[0]:.3f}, last step {losses[-1]:.3f}")
    print(f"test accuracy: {accuracy:.3f}")
    curves.close()
    return losses, accuracy


if __name__ == "__main__":
    main()
