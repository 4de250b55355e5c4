"""A binarized network trained with straight-through gradients (TF1 tutorials' Sign -> Identity).

Weights and activations of a two-layer network on scikit-learn's digits go through
``jnp.sign``, whose gradient is zero almost everywhere, so plain JAX cannot train it.
``fg.gradient_override_map(model, {"Sign": "Identity"})`` gives ``sign`` the
straight-through gradient of BinaryConnect (Courbariaux et al., 2015);
``"ClippedIdentity"`` the clipped one of BinaryNet (Hubara et al., 2016), which also
stops the gradient of weights that have left [-1, 1].  The run trains all three and
prints their test accuracy: about 95 % with either override, chance without.

    python examples/straight_through.py
    python examples/straight_through.py --epochs 20 --hidden 256 --plot binary.png
"""

from __future__ import annotations

import argparse
import time
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

#: The runs: a label and the override mapping (``None``: JAX's own, zero, gradient).
MAPPINGS = {
    '{"Sign": "Identity"}': {"Sign": "Identity"},
    '{"Sign": "ClippedIdentity"}': {"Sign": "ClippedIdentity"},
    "no override (zero gradient)": None,
}

Params = dict[str, jax.Array]


def load(seed: int) -> tuple[np.ndarray, ...]:
    """Digits, standardized with the training split's statistics; 25 % held out."""
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        x.astype(np.float32), y.astype(np.int32), test_size=0.25, random_state=seed, stratify=y
    )
    mean, std = x_train.mean(0), x_train.std(0) + 1.0
    return (x_train - mean) / std, (x_test - mean) / std, y_train, y_test


def init(key: jax.Array, hidden: int) -> Params:
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.uniform(k1, (64, hidden), jnp.float32, -1.0, 1.0),
        "w2": jax.random.uniform(k2, (hidden, 10), jnp.float32, -1.0, 1.0),
    }


def model(params: Params, x: jax.Array) -> jax.Array:
    """Binary weights, binary hidden units; real inputs and logits."""
    h = jnp.sign(x @ jnp.sign(params["w1"]))
    return h @ jnp.sign(params["w2"]) / jnp.sqrt(jnp.float32(h.shape[-1]))


def train(
    mapping: dict[str, str] | None,
    *,
    epochs: int,
    hidden: int,
    seed: int = 0,
    curves: reporting.Curves | None = None,
    name: str = "train",
) -> float:
    """Train ``model`` (with ``mapping``'s gradients, or JAX's) and return test accuracy.

    ``curves`` gets each step's loss and gradient norm under ``name``.
    """
    x_train, x_test, y_train, y_test = map(jnp.asarray, load(seed))
    forward = model if mapping is None else fg.gradient_override_map(model, mapping)
    tx = optax.adam(1e-2)

    def loss(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
        return optax.softmax_cross_entropy_with_integer_labels(forward(params, x), y).mean()

    def step(carry: tuple[Params, Any], batch: tuple[jax.Array, jax.Array]) -> Any:
        params, state = carry
        value, grads = jax.value_and_grad(loss)(params, *batch)
        updates, state = tx.update(grads, state)
        params = optax.apply_updates(params, updates)
        clipped = jax.tree.map(lambda w: jnp.clip(w, -1.0, 1.0), params)
        return (clipped, state), (value, fg.global_norm(jax.tree.leaves(grads)))

    @jax.jit
    def epoch(params: Params, state: Any, key: jax.Array) -> tuple[tuple[Params, Any], Any]:
        order = jax.random.permutation(key, len(x_train))[: len(x_train) // 32 * 32]
        batches = (x_train[order].reshape(-1, 32, 64), y_train[order].reshape(-1, 32))
        return jax.lax.scan(step, (params, state), batches)

    key, init_key = jax.random.split(jax.random.key(seed))
    params = init(init_key, hidden)
    state = tx.init(params)
    done = 0
    for k in reporting.progress(jax.random.split(key, epochs), desc=name, unit="epoch"):
        (params, state), (losses, norms) = epoch(params, state, k)
        losses = np.asarray(losses)  # waits for the epoch, so that progress is true
        if curves is not None:
            steps = np.arange(done + 1, done + len(losses) + 1)
            curves.add("loss", name, steps, losses)
            curves.add("gradient norm", name, steps, norms)
        done += len(losses)
    predictions = jnp.argmax(jax.jit(model)(params, x_test), axis=-1)
    return float(jnp.mean(predictions == y_test))


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = reporting.make_parser(__doc__)
    parser.add_argument("--epochs", type=int, default=40, help="passes over the training set")
    parser.add_argument("--hidden", type=int, default=512, help="binary hidden units")
    parser.add_argument("--seed", type=int, default=0, help="seeds the split, weights and order")
    reporting.add_output_arguments(parser, "each step's loss and gradient norm")
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Trains the three variants and prints their test accuracy."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if min(args.epochs, args.hidden) < 1:
        parser.error("--epochs and --hidden must be positive")
    reporting.check_output_arguments(parser, args)
    curves = reporting.Curves(args, "binary network on digits")
    accuracies = {}
    for label, mapping in MAPPINGS.items():
        start = time.perf_counter()
        accuracy = accuracies[label] = train(
            mapping,
            epochs=args.epochs,
            hidden=args.hidden,
            seed=args.seed,
            curves=curves,
            name=label,
        )
        print(f"{label:30s} test accuracy {accuracy:6.1%}  ({time.perf_counter() - start:.1f} s)")
    curves.close()
    return accuracies


if __name__ == "__main__":
    main()
