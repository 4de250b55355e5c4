"""Domain adaptation with a gradient-reversal layer (``"ReverseGradient"``).

Domain-adversarial training (Ganin & Lempitsky, 2015, "Unsupervised Domain Adaptation
by Backpropagation") learns features that classify the labelled *source* domain and
that a domain classifier cannot tell apart from the unlabelled *target* domain.  The
domain classifier sits behind an identity whose gradient is negated — TensorFlow
programs write it with ``RegisterGradient`` and ``gradient_override_map({"Identity":
...})``; here it is ``fg.gradient_override_map(jnp.copy, {"Identity":
"ReverseGradient"})``.  The domain head descends its loss while the features ascend it.

The toy: two interleaved half-moons (scikit-learn's ``make_moons``) as the source, and
the same moons rotated as the target.  The script trains the same network on the source
labels (its domain head behind ``fg.stop_gradient``, so that the features ignore it),
and with the reversed domain loss, and prints both accuracies on the target, whose
labels neither run sees.  Adversarial training is a game whose outcome for one seed
swings with the smallest change (another seed, or the rounding of another machine), so
it trains several seeds side by side (``jax.vmap``) and compares their means.

    python examples/gradient_reversal.py
    python examples/gradient_reversal.py --rotation 30 --domain-weight 1.0 --seeds 16
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import reporting

import funcgrad as fg
from funcgrad._types import ArrayLike

Params = dict[str, list[dict[str, jax.Array]]]
#: The gradient-reversal layer: the identity forward, the negated gradient backward.
flip_gradient = fg.gradient_override_map(jnp.copy, {"Identity": "ReverseGradient"})


@dataclasses.dataclass(frozen=True)
class Run:
    """Training runs, one per seed: accuracies ``(seeds,)`` and per-step curves."""

    source_accuracy: np.ndarray
    target_accuracy: np.ndarray
    domain_accuracy: np.ndarray
    losses: np.ndarray  # (seeds, steps, 2): label loss, weighted domain loss
    gradient_norm: np.ndarray  # (seeds, steps): the global norm of each step's gradient


def moons(rotation_degrees: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two half-moons, centred and rotated by ``rotation_degrees``; labels 0 / 1."""
    from sklearn.datasets import make_moons

    x, y = make_moons(n, noise=0.1, random_state=seed)
    x = x - np.array([0.5, 0.25])
    angle = np.deg2rad(rotation_degrees)
    rotation = np.array([[np.cos(angle), np.sin(angle)], [-np.sin(angle), np.cos(angle)]])
    return (x @ rotation).astype(np.float32), y.astype(np.int32)


def _mlp_init(key: jax.Array, sizes: Sequence[int]) -> list[dict[str, jax.Array]]:
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        {"w": jax.nn.initializers.glorot_normal()(k, (m, n)), "b": jnp.zeros((n,))}
        for k, m, n in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


def _mlp(layers: list[dict[str, jax.Array]], x: jax.Array, last_relu: bool) -> jax.Array:
    for i, layer in enumerate(layers):
        x = x @ layer["w"] + layer["b"][None, :]
        if last_relu or i < len(layers) - 1:
            x = jax.nn.relu(x)
    return x


def init_params(key: jax.Array, hidden: int) -> Params:
    """Features 2 -> hidden -> hidden, a label head and a domain head (one hidden layer)."""
    k_f, k_l, k_d = jax.random.split(key, 3)
    return {
        "features": _mlp_init(k_f, [2, hidden, hidden]),
        "label": _mlp_init(k_l, [hidden, 2]),
        "domain": _mlp_init(k_d, [hidden, hidden, 1]),
    }


def features(params: Params, x: jax.Array) -> jax.Array:
    """The shared feature extractor."""
    return _mlp(params["features"], x, last_relu=True)


def label_logits(params: Params, x: jax.Array) -> jax.Array:
    """The class scores of ``x``."""
    return _mlp(params["label"], features(params, x), last_relu=False)


def losses(
    params: Params,
    xs: jax.Array,
    ys: jax.Array,
    xt: jax.Array,
    domain_weight: ArrayLike,
    adversarial: bool = True,
) -> tuple[jax.Array, jax.Array]:
    """The source label loss and the weighted domain loss.

    The domain head sees the features through the reversal layer when ``adversarial``,
    and through ``fg.stop_gradient`` otherwise (it still learns to tell the domains
    apart, but the features do not hear about it).
    """
    label_loss = jnp.mean(
        -jnp.take_along_axis(jax.nn.log_softmax(label_logits(params, xs)), ys[:, None], axis=1)
    )
    both = jnp.concatenate([features(params, xs), features(params, xt)])
    domain = jnp.concatenate([jnp.zeros(xs.shape[0]), jnp.ones(xt.shape[0])])
    seen = flip_gradient(both) if adversarial else fg.stop_gradient(both)
    logits = _mlp(params["domain"], seen, last_relu=False)[:, 0]
    domain_loss = jnp.mean(
        jnp.maximum(logits, 0.0) - logits * domain + jnp.log1p(jnp.exp(-jnp.abs(logits)))
    )
    return label_loss, domain_weight * domain_loss


def _accuracy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    return jnp.mean(jnp.argmax(logits, axis=1) == labels)


def train(args: argparse.Namespace, adversarial: bool) -> Run:
    """Adam on the source label loss plus the reversed domain loss, its weight ramped up.

    The weight goes from 0 to ``args.domain_weight`` as ``2 / (1 + exp(-10 p)) - 1`` of
    the fraction ``p`` of training done, as in the paper.  Without ``adversarial`` the
    domain head trains on stopped features: the source-only baseline.  Seed ``s`` draws
    the source moons, the target moons (with ``s + 1``) and the initial weights; the
    ``args.seeds`` seeds from ``args.seed`` on train side by side.
    """
    seeds = range(args.seed, args.seed + args.seeds)
    source = [moons(0.0, args.samples, s) for s in seeds]
    target = [moons(args.rotation, args.samples, s + 1) for s in seeds]
    xs, ys = (np.stack(a) for a in zip(*source, strict=True))
    xt, yt = (np.stack(a) for a in zip(*target, strict=True))
    opt = fg.train.AdamOptimizer(args.learning_rate)

    def step(state: fg.train.TrainState, t: jax.Array, data: tuple) -> tuple[Any, tuple]:
        # The paper's ramp: the reversed loss grows from 0 to its weight as training goes.
        weight = args.domain_weight * (2.0 / (1.0 + jnp.exp(-10.0 * t / args.steps)) - 1.0)

        def total(params: Params) -> tuple[jax.Array, jax.Array]:
            parts = jnp.stack(losses(params, *data, weight, adversarial))
            return jnp.sum(parts), parts

        (_, parts), grads = fg.value_and_gradients(total, state.params, has_aux=True)
        norm = fg.global_norm(jax.tree.leaves(grads))
        pairs = zip(jax.tree.leaves(grads), jax.tree.leaves(state.params), strict=True)
        return opt.apply_gradients(list(pairs), state), (parts, norm)

    def chunk(carry: tuple, ts: jax.Array) -> tuple[tuple, tuple]:
        state, data = carry
        state, history = jax.lax.scan(lambda s, t: step(s, t, data), state, ts)
        return (state, data), history

    keys = jnp.stack([jax.random.key(s) for s in seeds])
    states = jax.jit(jax.vmap(lambda k: opt.init(init_params(k, args.hidden))))(keys)
    steps = np.broadcast_to(np.arange(args.steps, dtype=np.float32), (args.seeds, args.steps))
    run = jax.jit(jax.vmap(chunk))
    name = "gradient reversal" if adversarial else "source only"
    (states, _), (history, norms) = reporting.scan_in_chunks(
        run, (states, (xs, ys, xt)), steps, desc=name, axis=1
    )
    return Run(
        *(np.asarray(a) for a in jax.jit(jax.vmap(_evaluate))(states.params, xs, ys, xt, yt)),
        losses=history,
        gradient_norm=norms,
    )


def _evaluate(params: Params, xs: jax.Array, ys: jax.Array, xt: jax.Array, yt: jax.Array) -> tuple:
    """Accuracy on the source labels, on the target labels, and of the domain head."""
    domain_logits = _mlp(params["domain"], features(params, jnp.concatenate([xs, xt])), False)
    domain_labels = jnp.concatenate([jnp.zeros(len(xs)), jnp.ones(len(xt))])
    return (
        _accuracy(label_logits(params, xs), ys),
        _accuracy(label_logits(params, xt), yt),
        jnp.mean((domain_logits[:, 0] > 0) == (domain_labels > 0)),
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = reporting.make_parser(__doc__)
    parser.add_argument("--rotation", type=float, default=40.0, help="target rotation, degrees")
    parser.add_argument("--samples", type=int, default=300, help="points in each domain")
    parser.add_argument("--steps", type=int, default=2000, help="Adam steps of each run")
    parser.add_argument("--learning-rate", type=float, default=3e-3, help="Adam's step size")
    parser.add_argument(
        "--domain-weight", type=float, default=0.3, help="the reversed loss's final weight"
    )
    parser.add_argument("--hidden", type=int, default=32, help="units of each hidden layer")
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--seeds", type=int, default=8, help="how many seeds to run at once")
    reporting.add_output_arguments(parser, "the first seed's losses and gradient norm")
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed command line, checked."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if min(args.samples, args.steps, args.hidden, args.seeds) < 1 or args.learning_rate <= 0:
        parser.error("--samples, --steps, --hidden, --seeds, --learning-rate must be positive")
    if args.domain_weight <= 0:
        parser.error("--domain-weight must be positive")
    reporting.check_output_arguments(parser, args)
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Run]:
    """Trains source-only and domain-adversarially; prints the accuracies."""
    args = parse_args(argv)
    runs = {
        "source only": train(args, adversarial=False),
        "gradient reversal": train(args, adversarial=True),
    }
    print(
        f"two moons; target = source rotated {args.rotation:g} degrees; {args.samples} points "
        f"each; Adam {args.learning_rate}, {args.steps} steps; domain weight {args.domain_weight}"
        f"\n\ntarget accuracy by seed:"
    )
    seeds = range(args.seed, args.seed + args.seeds)
    print(f"{'seed':>17}  " + " ".join(f"{s:>5}" for s in seeds))
    for name, run in runs.items():
        print(f"{name:>17}  " + " ".join(f"{a:>5.3f}" for a in run.target_accuracy))
    print(f"\nmeans over the {args.seeds} seeds:")
    print(f"{'':>17}  {'source acc':>10}  {'target acc':>10}  {'domain acc':>10}")
    for name, run in runs.items():
        accuracies = (run.source_accuracy, run.target_accuracy, run.domain_accuracy)
        print(f"{name:>17}  " + "  ".join(f"{np.mean(a):>10.3f}" for a in accuracies))
    print(
        "\n(domain acc: how well the domain head tells the domains apart from the features; "
        "0.5 is chance)"
    )
    accuracies = ", ".join(f"{n} {np.mean(r.target_accuracy):.3f}" for n, r in runs.items())
    curves = reporting.Curves(
        args,
        f"two moons, target rotated {args.rotation:g} degrees; seed {args.seed}'s curves\n"
        f"target accuracy, mean of {args.seeds} seeds: {accuracies}",
    )
    steps = np.arange(1, args.steps + 1)
    for name, run in runs.items():
        curves.add("label loss", name, steps, run.losses[0, :, 0])
        curves.add("weighted domain loss", name, steps, run.losses[0, :, 1])
        curves.add("gradient norm", name, steps, run.gradient_norm[0])
    curves.close()
    return runs


if __name__ == "__main__":
    main()
