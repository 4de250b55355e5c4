"""Gradient ascent: maximise a log-likelihood by hand, and by minimising its negative.

TensorFlow 1.x optimizers only minimise, so the TF1 tutorial program maximises an objective
``f`` by handing ``-f`` to ``GradientDescentOptimizer.minimize``, after doing it by
hand with ``tf.gradients`` and ``x.assign(x + lr * grad)``.  Here the objective is the
average Gaussian log-likelihood of some data in the mean ``mu`` and the log standard
deviation ``log_sigma``, whose maximum is known in closed form (the sample mean and
standard deviation).  Both ways take the same steps, so their trajectories agree to
float32 rounding; a third run shows an adaptive optimizer (Adam) on ``-f``.

    python examples/gradient_ascent.py
    python examples/gradient_ascent.py --steps 500 --learning-rate 0.05
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import reporting

import funcgrad as fg

Params = dict[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class Run:
    """The objective and its gradient's norm before each step; the parameters at the end."""

    objective: np.ndarray
    gradient_norm: np.ndarray
    params: dict[str, float]


def log_likelihood(params: Params, data: jax.Array) -> jax.Array:
    """The mean log-density of ``data`` under N(mu, exp(log_sigma)^2)."""
    mu, log_sigma = params["mu"], params["log_sigma"]
    z = (data - mu) / jnp.exp(log_sigma)
    return jnp.mean(-0.5 * jnp.square(z) - log_sigma - 0.5 * np.log(2 * np.pi))


def ascend_by_hand(params: Params, data: jax.Array, learning_rate: float, steps: int) -> Run:
    """``x <- x + lr * d f / d x`` with ``fg.gradients``, as the tutorial's ``assign`` loop."""

    def step(p: Params, _: jax.Array) -> tuple[Params, tuple[jax.Array, jax.Array]]:
        value, (g_mu, g_log_sigma) = fg.value_and_gradients(
            lambda mu, log_sigma: log_likelihood({"mu": mu, "log_sigma": log_sigma}, data),
            [p["mu"], p["log_sigma"]],
        )
        new = {
            "mu": p["mu"] + learning_rate * g_mu,
            "log_sigma": p["log_sigma"] + learning_rate * g_log_sigma,
        }
        return new, (value, fg.global_norm([g_mu, g_log_sigma]))

    run = jax.jit(lambda p, xs: jax.lax.scan(step, p, xs))
    final, (values, norms) = reporting.scan_in_chunks(
        run, params, jnp.arange(steps), desc="by hand"
    )
    return Run(values, norms, {k: float(v) for k, v in final.items()})


def ascend_with_optimizer(
    params: Params, data: jax.Array, opt: fg.train.Optimizer, steps: int, name: str
) -> Run:
    """``opt.minimize`` of the negated objective; the objective is ``-loss``."""

    def negated(p: Params, data: jax.Array) -> jax.Array:
        return -log_likelihood(p, data)

    def step(state: fg.train.TrainState, _: jax.Array) -> tuple[fg.train.TrainState, tuple]:
        norm = fg.global_norm(jax.tree.leaves(jax.grad(log_likelihood)(state.params, data)))
        state, loss = opt.minimize(negated, state, data)
        return state, (-loss, norm)

    run = jax.jit(lambda s, xs: jax.lax.scan(step, s, xs))
    final, (values, norms) = reporting.scan_in_chunks(
        run, opt.init(params), jnp.arange(steps), desc=name
    )
    return Run(values, norms, {k: float(v) for k, v in final.params.items()})


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = reporting.make_parser(__doc__)
    parser.add_argument("--steps", type=int, default=300, help="steps of each ascent")
    parser.add_argument("--learning-rate", type=float, default=0.1, help="step size")
    parser.add_argument("--samples", type=int, default=1000, help="data points to fit")
    parser.add_argument("--true-mu", type=float, default=3.0, help="the data's mean")
    parser.add_argument("--true-sigma", type=float, default=2.0, help="the data's deviation")
    parser.add_argument("--seed", type=int, default=0, help="seeds the data")
    reporting.add_output_arguments(parser, "the objective and its gradient norm")
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed command line, checked."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if min(args.steps, args.samples - 1) < 1 or args.learning_rate <= 0 or args.true_sigma <= 0:
        parser.error("--steps, --learning-rate, --true-sigma must be positive, --samples > 1")
    reporting.check_output_arguments(parser, args)
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Run]:
    """Runs the three ascents and prints their objective and parameters."""
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    data = jnp.asarray(rng.normal(args.true_mu, args.true_sigma, args.samples), jnp.float32)
    start = {"mu": jnp.float32(0.0), "log_sigma": jnp.float32(0.0)}
    lr = args.learning_rate
    runs = {
        "by hand": ascend_by_hand(start, data, lr, args.steps),
        "minimize(-f)": ascend_with_optimizer(
            start, data, fg.train.GradientDescentOptimizer(lr), args.steps, "minimize(-f)"
        ),
        "Adam on -f": ascend_with_optimizer(
            start, data, fg.train.AdamOptimizer(lr), args.steps, "Adam on -f"
        ),
    }
    best = float(log_likelihood({"mu": jnp.mean(data), "log_sigma": jnp.log(jnp.std(data))}, data))
    source = f"N({args.true_mu}, {args.true_sigma}^2)"
    print(f"maximising the mean log-likelihood of {args.samples} samples of {source}")
    print(
        f"closed-form maximum {best:.6f} at mu = {np.mean(data):.4f}, sigma = {np.std(data):.4f}\n"
    )
    print(f"{'step':>6}  " + "  ".join(f"{name:>13}" for name in runs))
    for t in sorted({0, 1, 2, 5, 10, 30, 100, args.steps - 1} & set(range(args.steps))):
        print(f"{t + 1:>6}  " + "  ".join(f"{run.objective[t]:>13.6f}" for run in runs.values()))
    for name, run in runs.items():
        mu, sigma = run.params["mu"], np.exp(run.params["log_sigma"])
        print(f"{name:>13}: mu = {mu:.4f}, sigma = {sigma:.4f}")
    gap = np.max(np.abs(runs["by hand"].objective - runs["minimize(-f)"].objective))
    print(f"\nby hand vs minimize(-f): largest difference of the objective {gap:.1e}")
    curves = reporting.Curves(args, f"mean log-likelihood of {args.samples} samples of {source}")
    steps = np.arange(1, args.steps + 1)
    for name, run in runs.items():
        curves.add("objective", name, steps, run.objective)
        curves.add("gradient norm", name, steps, run.gradient_norm)
    curves.close()
    return runs


if __name__ == "__main__":
    main()
