"""Exploding gradients in a recurrent network, tamed by ``clip_by_global_norm``.

A tanh RNN learns the adding problem (sum the two marked numbers of a long sequence).
Its recurrent weights start large, so the gradient through the sequence grows
exponentially in places (Pascanu et al., 2013, "On the difficulty of training recurrent
neural networks"): one step along such a gradient throws the weights far away.  The
script trains the same network from the same starts twice with the TF1 tutorials' pattern —
``compute_gradients``, ``clip_by_global_norm``, ``apply_gradients`` — once with
clipping and once without, and prints (and with ``--plot``, draws) the global norm
before and after clipping next to the loss.  With the default learning rate every
start diverges without clipping and learns with it: the outcome does not hang on a
lucky seed or on the rounding of one machine.

    python examples/clip_gradients.py
    python examples/clip_gradients.py --plot norms.png --clip-norm 1.0
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import reporting

import funcgrad as fg

Params = dict[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class Run:
    """One training run, step by step: loss, and the global norm before / after clipping."""

    loss: np.ndarray
    norm_before: np.ndarray
    norm_after: np.ndarray


def adding_problem(key: jax.Array, batch: int, length: int) -> tuple[jax.Array, jax.Array]:
    """Sequences ``(batch, length, 2)`` of (value, marker) and the sums of the marked values."""
    k_values, k_first, k_second = jax.random.split(key, 3)
    values = jax.random.uniform(k_values, (batch, length))
    first = jax.random.randint(k_first, (batch,), 0, length // 2)
    second = jax.random.randint(k_second, (batch,), length // 2, length)
    positions = jnp.arange(length)[None, :]
    markers = ((positions == first[:, None]) | (positions == second[:, None])).astype(jnp.float32)
    return jnp.stack([values, markers], axis=-1), jnp.sum(values * markers, axis=1)


def init_params(key: jax.Array, hidden: int, recurrent_scale: float) -> Params:
    """Input and output weights ~ N(0, 1/fan_in); recurrent weights a scaled orthogonal matrix."""
    k_in, k_rec, k_out = jax.random.split(key, 3)
    return {
        "W_x": jax.random.normal(k_in, (2, hidden)) / np.sqrt(2.0),
        "W_h": recurrent_scale * jax.nn.initializers.orthogonal()(k_rec, (hidden, hidden)),
        "b": jnp.zeros((hidden,)),
        "w_out": jax.random.normal(k_out, (hidden,)) / np.sqrt(hidden),
        "b_out": jnp.zeros(()),
    }


def loss_fn(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    """Mean squared error of the prediction read from the last hidden state."""

    def cell(h: jax.Array, x_t: jax.Array) -> tuple[jax.Array, None]:
        return jnp.tanh(x_t @ params["W_x"] + h @ params["W_h"] + params["b"][None, :]), None

    h0 = jnp.zeros((x.shape[0], params["W_h"].shape[0]))
    h, _ = jax.lax.scan(cell, h0, jnp.swapaxes(x, 0, 1))
    return jnp.mean(jnp.square(h @ params["w_out"] + params["b_out"] - y))


def train(args: argparse.Namespace, clip: bool) -> Run:
    """``args.steps`` SGD steps from each of ``args.seeds`` starts, run side by side (vmap).

    Every step's gradients are clipped when ``clip``; the arrays of the returned ``Run``
    are ``(seeds, steps)``.
    """
    opt = fg.train.GradientDescentOptimizer(args.learning_rate)

    def step(state: fg.train.TrainState, key: jax.Array) -> tuple[fg.train.TrainState, tuple]:
        x, y = adding_problem(key, args.batch_size, args.length)
        loss = loss_fn(state.params, x, y)
        grads, variables = zip(*opt.compute_gradients(loss_fn, state.params, x, y), strict=True)
        norm_before = fg.global_norm(grads)
        if clip:
            grads, _ = fg.clip_by_global_norm(grads, args.clip_norm, use_norm=norm_before)
        state = opt.apply_gradients(list(zip(grads, variables, strict=True)), state)
        return state, (loss, norm_before, fg.global_norm(grads))

    def start(seed: jax.Array) -> tuple[fg.train.TrainState, jax.Array]:
        params = init_params(jax.random.key(seed), args.hidden, args.recurrent_scale)
        return opt.init(params), jax.random.split(jax.random.key(seed + 1_000_000), args.steps)

    seeds = jnp.arange(args.seed, args.seed + args.seeds)
    states, data_keys = jax.vmap(start)(seeds)
    run = jax.jit(jax.vmap(lambda state, keys: jax.lax.scan(step, state, keys)))
    name = "clipped" if clip else "unclipped"
    _, history = reporting.scan_in_chunks(run, states, data_keys, desc=name, axis=1)
    return Run(*history)


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = reporting.make_parser(__doc__)
    parser.add_argument("--steps", type=int, default=1500, help="SGD steps of each run")
    parser.add_argument("--learning-rate", type=float, default=0.2, help="SGD step size")
    parser.add_argument("--clip-norm", type=float, default=1.0, help="clip_by_global_norm's bound")
    parser.add_argument("--batch-size", type=int, default=32, help="sequences per step")
    parser.add_argument("--length", type=int, default=10, help="sequence length")
    parser.add_argument("--hidden", type=int, default=32, help="units of the RNN")
    parser.add_argument("--recurrent-scale", type=float, default=1.5, help="W_h = scale * Q")
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--seeds", type=int, default=4, help="how many seeds to run at once")
    reporting.add_output_arguments(parser, "the first seed's loss and gradient norms")
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed command line, checked."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if (
        min(args.steps, args.batch_size, args.length - 1, args.hidden, args.seeds) < 1
        or args.clip_norm <= 0
    ):
        parser.error(
            "--steps, --batch-size, --hidden, --seeds, --clip-norm must be positive, --length > 1"
        )
    reporting.check_output_arguments(parser, args)
    return args


def _windows(values: np.ndarray, windows: int, reduce: Callable = np.mean) -> list[float]:
    """``reduce`` over the finite values of each window (``nan`` when there are none)."""
    chunks = [w[np.isfinite(w)] for w in np.array_split(values, windows)]
    return [float(reduce(w)) if w.size else float("nan") for w in chunks]


def final_loss(run: Run) -> np.ndarray:
    """Each seed's mean loss over the last tenth of the steps (``nan`` if it diverged)."""
    return run.loss[:, -max(1, run.loss.shape[1] // 10) :].mean(axis=1)


def record(curves: reporting.Curves, runs: dict[str, Run], clip_norm: float) -> None:
    """The first seed's loss, and its global norm before and after clipping."""
    steps = np.arange(1, runs["clipped"].loss.shape[1] + 1)
    for name, run in runs.items():
        curves.add("loss", name, steps, run.loss[0])
    curves.add("gradient norm", "unclipped", steps, runs["unclipped"].norm_before[0])
    curves.add("gradient norm", "clipped, before clipping", steps, runs["clipped"].norm_before[0])
    curves.add("gradient norm", "clipped, after clipping", steps, runs["clipped"].norm_after[0])
    curves.add("gradient norm", f"clip_norm = {clip_norm}", steps, np.full(len(steps), clip_norm))


def main(argv: Sequence[str] | None = None) -> dict[str, Run]:
    """Trains with and without clipping; prints the first seed's curves and every seed's end."""
    args = parse_args(argv)
    runs = {"clipped": train(args, clip=True), "unclipped": train(args, clip=False)}
    print(
        f"adding problem, length {args.length}; tanh RNN of {args.hidden} units, "
        f"W_h = {args.recurrent_scale} x orthogonal; SGD {args.learning_rate}, "
        f"clip_by_global_norm({args.clip_norm}); predicting 1.0 always scores 0.167\n"
        f"\nseed {args.seed}: means (and largest norms) of the finite values in windows of "
        f"{args.steps // 10} steps:"
    )
    header = (
        "steps",
        "loss clipped",
        "loss unclipped",
        "norm unclipped",
        "max",
        "norm clipped",
        "max",
    )
    print("  ".join(f"{h:>{max(len(h), 11)}}" for h in header))
    columns = [
        _windows(runs["clipped"].loss[0], 10),
        _windows(runs["unclipped"].loss[0], 10),
        _windows(runs["unclipped"].norm_before[0], 10),
        _windows(runs["unclipped"].norm_before[0], 10, np.max),
        _windows(runs["clipped"].norm_before[0], 10),
        _windows(runs["clipped"].norm_before[0], 10, np.max),
    ]
    for b, row in zip(
        np.array_split(np.arange(1, args.steps + 1), 10), zip(*columns, strict=True), strict=True
    ):
        cells = [f"{b[0]}-{b[-1]}", *(f"{v:.4g}" for v in row)]
        print("  ".join(f"{c:>{max(len(h), 11)}}" for c, h in zip(cells, header, strict=True)))
    print(f"\nloss over the last {max(1, args.steps // 10)} steps, by seed:")
    for name, run in runs.items():
        losses = final_loss(run)
        diverged = ~np.isfinite(losses)
        first = [int(np.argmax(~np.isfinite(loss))) + 1 for loss in run.loss[diverged]]
        print(
            f"{name:>10}: {np.array2string(losses, precision=4)}  ({diverged.sum()} of "
            f"{len(losses)} diverged{', at steps ' if first else ''}"
            f"{', '.join(map(str, first))})"
        )
    curves = reporting.Curves(args, f"adding problem, seed {args.seed}")
    record(curves, runs, args.clip_norm)
    curves.close()
    return runs


if __name__ == "__main__":
    main()
