"""Softmax regression on handwritten digits, trained two ways with identical costs.

The classic TF1 tutorial program — TensorFlow 1.x's MNIST softmax regression, trained with
``GradientDescentOptimizer.minimize`` and again by hand with ``tf.gradients`` and
``W.assign(W - lr * grad_W)`` — ported to funcgrad.  Both runs see the same batches, so
their per-epoch average costs agree to float32 rounding; the script prints them side by
side, then the test accuracy.  Each epoch is one jitted ``lax.scan`` over the batches.

    python examples/mnist_softmax.py                          # scikit-learn's digits
    python examples/mnist_softmax.py --dataset fashion-mnist  # Debian's dataset-fashion-mnist
    python examples/mnist_softmax.py --dataset mnist --data-dir ~/mnist --plot costs.png
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import datasets
import jax
import jax.numpy as jnp
import numpy as np
import reporting

import funcgrad as fg

# The tutorial's hyperparameters (learning rate 0.01, batches of 100) for the 60,000-image
# MNIST-style sets.  The digits set has 1,438 training images, 40 times fewer: smaller
# batches and a larger step give it a comparable number of updates in 10 epochs.
DEFAULTS = {
    "digits": {"learning_rate": 0.05, "batch_size": 10},
    "fashion-mnist": {"learning_rate": 0.01, "batch_size": 100},
    "mnist": {"learning_rate": 0.01, "batch_size": 100},
}
METHODS = ("minimize", "gradients")

Params = dict[str, jax.Array]
Batch = tuple[jax.Array, jax.Array]


@dataclasses.dataclass(frozen=True)
class Result:
    """What a run found: per-epoch average costs and test accuracy of each method."""

    epoch_costs: dict[str, np.ndarray]
    step_costs: dict[str, np.ndarray]
    accuracy: dict[str, float]


def cost(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    """The tutorial's cross-entropy ``mean(-sum(y * log(softmax(x W + b))))``, y one-hot.

    ``log_softmax`` replaces ``log(softmax(...))``: the same value, without the ``-inf``
    that ``log`` of an underflowed probability gives.
    """
    logits = x @ params["W"] + params["b"][None, :]
    return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits), axis=1))


def accuracy(params: Params, x: jax.Array, labels: jax.Array) -> float:
    """The fraction of ``x`` whose most likely class is its label."""
    predicted = jnp.argmax(x @ params["W"] + params["b"][None, :], axis=1)
    return float(jnp.mean(predicted == labels))


def minimize_step(learning_rate: float) -> Callable[[Any, Batch], tuple[Any, jax.Array]]:
    """One step of ``GradientDescentOptimizer(learning_rate).minimize(cost)``."""
    opt = fg.train.GradientDescentOptimizer(learning_rate)

    def step(state: fg.train.TrainState, batch: Batch) -> tuple[Any, jax.Array]:
        return opt.minimize(cost, state, *batch)

    return step


def gradients_step(learning_rate: float) -> Callable[[Any, Batch], tuple[Any, jax.Array]]:
    """One step by hand: ``fg.gradients`` for ``W`` and ``b``, then ``W - lr * grad``."""

    def step(params: Params, batch: Batch) -> tuple[Params, jax.Array]:
        x, y = batch
        value, (grad_W, grad_b) = fg.value_and_gradients(
            lambda W, b: cost({"W": W, "b": b}, x, y), [params["W"], params["b"]]
        )
        new = {"W": params["W"] - learning_rate * grad_W, "b": params["b"] - learning_rate * grad_b}
        return new, value

    return step


def make_epoch(step: Callable[[Any, Batch], tuple[Any, jax.Array]], batch_size: int) -> Callable:
    """A jitted epoch: shuffle with ``key``, then ``lax.scan`` ``step`` over the batches."""

    @jax.jit
    def epoch(carry: Any, x: jax.Array, y: jax.Array, key: jax.Array) -> tuple[Any, jax.Array]:
        n = x.shape[0] // batch_size
        order = jax.random.permutation(key, x.shape[0])[: n * batch_size]
        batches = (x[order].reshape(n, batch_size, -1), y[order].reshape(n, batch_size, -1))
        return jax.lax.scan(step, carry, batches)

    return epoch


def train(
    method: str, data: datasets.Dataset, args: argparse.Namespace, curves: reporting.Curves
) -> tuple[Params, np.ndarray]:
    """Trains from zeros with ``method``; returns the parameters and every step's cost."""
    params = {
        "W": jnp.zeros((data.num_features, data.num_classes), jnp.float32),
        "b": jnp.zeros((data.num_classes,), jnp.float32),
    }
    if method == "minimize":
        carry: Any = fg.train.GradientDescentOptimizer(args.learning_rate).init(params)
        step = minimize_step(args.learning_rate)
    else:
        carry, step = params, gradients_step(args.learning_rate)
    epoch = make_epoch(step, args.batch_size)
    x = jnp.asarray(data.x_train)
    y = jax.nn.one_hot(data.y_train, data.num_classes, dtype=jnp.float32)
    params_of = (lambda c: c.params) if method == "minimize" else (lambda c: c)

    def record_gradients(step: int) -> None:
        if curves.active:  # the whole training set's gradient, at the parameters of `step`
            summary = _full_gradient_summary(params_of(carry), x, y)
            curves.add_gradients(method, step, summary, fg.train.variable_names(params))

    record_gradients(0)
    costs = []
    for e in reporting.progress(range(args.epochs), desc=method, unit="epoch"):
        carry, step_costs = epoch(carry, x, y, jax.random.fold_in(jax.random.key(args.seed), e))
        costs.append(np.asarray(step_costs))
        done = (e + 1) * len(costs[-1])  # steps so far
        curves.add("loss", method, np.arange(done - len(costs[-1]), done) + 1, costs[-1])
        record_gradients(done)
    return params_of(carry), np.stack(costs)


@jax.jit
def _full_gradient_summary(params: Params, x: jax.Array, y: jax.Array) -> fg.GradientSummary:
    # Only compute_gradients is used: the learning rate plays no part.
    gvs = fg.train.GradientDescentOptimizer(0.0).compute_gradients(cost, params, x, y)
    return fg.gradient_summary(gvs)


def build_parser() -> argparse.ArgumentParser:
    """The command line; learning rate and batch size default per dataset (``DEFAULTS``)."""
    parser = reporting.make_parser(__doc__)
    parser.add_argument(
        "--dataset", choices=datasets.DATASETS, default="digits", help="the images to classify"
    )
    parser.add_argument(
        "--data-dir",
        type=pathlib.Path,
        help=f"directory of the IDX files (fashion-mnist: {datasets.FASHION_MNIST_DIR})",
    )
    parser.add_argument("--epochs", type=int, default=10, help="passes over the training set")
    parser.add_argument(
        "--batch-size", type=int, help="images per step (default: 10 for digits, else 100)"
    )
    parser.add_argument(
        "--learning-rate", type=float, help="SGD step size (default: 0.05 for digits, else 0.01)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds the batch order")
    reporting.add_output_arguments(
        parser, "the cost of every step and the whole training set's gradient norms"
    )
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed command line, checked, with the dataset's defaults filled in."""
    parser = build_parser()
    args = parser.parse_args(argv)
    for name, value in DEFAULTS[args.dataset].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.epochs < 1 or args.batch_size < 1 or args.learning_rate <= 0:
        parser.error("--epochs and --batch-size must be positive, --learning-rate above 0")
    reporting.check_output_arguments(parser, args)
    return args


def main(argv: Sequence[str] | None = None) -> Result:
    """Runs both methods, prints the epoch table and accuracy; returns the numbers."""
    args = parse_args(argv)
    try:
        data = datasets.load(args.dataset, args.data_dir)
    except datasets.DataError as e:
        sys.exit(f"mnist_softmax.py: {e}")
    n_steps = len(data.y_train) // args.batch_size
    print(
        f"{data}\nSGD, learning rate {args.learning_rate}, batches of {args.batch_size} "
        f"({n_steps} steps an epoch), {args.epochs} epochs\n",
        flush=True,
    )
    curves = reporting.Curves(args, f"softmax regression on {data.name}")
    params, step_costs = {}, {}
    for method in METHODS:
        params[method], step_costs[method] = train(method, data, args, curves)
    epoch_costs = {m: c.mean(axis=1) for m, c in step_costs.items()}
    print(f"{'epoch':>5}  {'cost: minimize':>14}  {'cost: gradients':>15}  {'|difference|':>12}")
    for e, (a, b) in enumerate(zip(*epoch_costs.values(), strict=True)):
        print(f"{e + 1:>5}  {a:>14.6f}  {b:>15.6f}  {abs(a - b):>12.1e}")
    largest = float(np.max(np.abs(np.subtract(*step_costs.values()))))
    print(
        f"\nlargest difference of any step's cost: {largest:.1e} (equal to 1e-6: {largest <= 1e-6})"
    )
    x_test, y_test = jnp.asarray(data.x_test), jnp.asarray(data.y_test)
    acc = {m: accuracy(params[m], x_test, y_test) for m in METHODS}
    print(f"test accuracy: minimize {acc['minimize']:.3f}, gradients {acc['gradients']:.3f}")
    curves.close()
    return Result(epoch_costs, step_costs, acc)


if __name__ == "__main__":
    main()
