"""DQN on gymnasium's CartPole-v1, with the TF1 tutorial's ``stop_gradient`` target.

The TF1 tutorial program's Q-learning loss regresses Q(s, a) on the one-step target
``r + gamma * max_a' Q(s', a')`` computed by the *same* network, wrapped in
``tf.stop_gradient`` so that the target is a constant, and trains it with
``tf.train.RMSPropOptimizer``.  TensorFlow 1.x programs often wrote the same thing the
other way: run the network on s' first, then feed the target into a placeholder.  This
script trains either variant (``--variant``), or both from the same seed to show that
they learn the same.  Every ``--eval-every`` steps it runs the greedy policy on 100 fresh
episodes; CartPole counts as solved at an average return of 195, and training stops
there (``--no-stop-when-solved`` runs the whole ``--steps`` budget).  ``--plot`` and
``--logdir`` record the loss of every update, the returns, and every ``--log-every``
steps the statistics of the update's gradient; recording draws no random numbers, so a
run trains the same with them as without.

    python examples/dqn_cartpole.py                     # the stop_gradient variant
    python examples/dqn_cartpole.py --variant both      # and the placeholder variant
    python examples/dqn_cartpole.py --plot dqn.png --logdir runs/dqn
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import time
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import reporting

import funcgrad as fg

VARIANTS = ("stop_gradient", "placeholder")
SOLVED = 195.0

Params = list[dict[str, jax.Array]]
Batch = tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]  # s, a, r, s', done


@dataclasses.dataclass(frozen=True)
class Result:
    """A run: each episode's return and update's loss, each greedy evaluation ``(step, return)``."""

    episode_returns: list[float]
    evaluations: list[tuple[int, float]]
    losses: list[float]
    seconds: float

    @property
    def solved_at(self) -> int | None:
        """The first step whose greedy evaluation averaged ``SOLVED`` or more, if any."""
        return next((t for t, r in self.evaluations if r >= SOLVED), None)


def init_params(key: jax.Array, sizes: Sequence[int]) -> Params:
    """A ReLU MLP ``sizes[0] -> ... -> sizes[-1]`` with Glorot-uniform weights, zero biases."""
    keys = jax.random.split(key, len(sizes) - 1)
    init = jax.nn.initializers.glorot_uniform()
    return [
        {"w": init(k, (m, n), jnp.float32), "b": jnp.zeros((n,), jnp.float32)}
        for k, m, n in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


def q_values(params: Params, s: jax.Array) -> jax.Array:
    """Q(s, .) for a batch of states ``s``: one value per action."""
    for layer in params[:-1]:
        s = jax.nn.relu(s @ layer["w"] + layer["b"][None, :])
    return s @ params[-1]["w"] + params[-1]["b"][None, :]


def td_target(params: Params, batch: Batch, gamma: float) -> jax.Array:
    """``r + gamma * max_a' Q(s', a')``, with no bootstrap after a terminal state."""
    _, _, r, s_next, done = batch
    return r + gamma * (1.0 - done) * jnp.max(q_values(params, s_next), axis=1)


def _q_taken(params: Params, batch: Batch) -> jax.Array:
    s, a = batch[0], batch[1]
    return jnp.take_along_axis(q_values(params, s), a[:, None], axis=1)[:, 0]


def stop_gradient_loss(params: Params, batch: Batch, gamma: float) -> jax.Array:
    """The tutorial's loss: the target comes from the same network, under ``stop_gradient``."""
    target = fg.stop_gradient(td_target(params, batch, gamma))
    return jnp.mean(jnp.square(target - _q_taken(params, batch)))


def placeholder_loss(params: Params, batch: Batch, target: jax.Array) -> jax.Array:
    """The placeholder-style loss: the target is an input computed beforehand."""
    return jnp.mean(jnp.square(target - _q_taken(params, batch)))


def make_update(variant: str, opt: fg.train.Optimizer, gamma: float) -> Callable:
    """A jitted ``update(state, batch) -> (state, loss)`` for ``variant``."""
    if variant == "stop_gradient":

        def update(state: fg.train.TrainState, batch: Batch) -> tuple[Any, jax.Array]:
            return opt.minimize(stop_gradient_loss, state, batch, gamma)

    else:

        def update(state: fg.train.TrainState, batch: Batch) -> tuple[Any, jax.Array]:
            target = td_target(state.params, batch, gamma)  # as sess.run(target) first
            return opt.minimize(placeholder_loss, state, batch, target)

    return jax.jit(update)


class ReplayBuffer:
    """A ring buffer of transitions, sampled uniformly."""

    def __init__(self, capacity: int, obs_size: int) -> None:
        self.s = np.zeros((capacity, obs_size), np.float32)
        self.a = np.zeros(capacity, np.int32)
        self.r = np.zeros(capacity, np.float32)
        self.s_next = np.zeros((capacity, obs_size), np.float32)
        self.done = np.zeros(capacity, np.float32)
        self.size = self.next = 0

    def add(self, s: np.ndarray, a: int, r: float, s_next: np.ndarray, done: bool) -> None:
        """Stores one transition, overwriting the oldest when full."""
        i = self.next
        self.s[i], self.a[i], self.r[i], self.s_next[i], self.done[i] = s, a, r, s_next, done
        self.next = (i + 1) % len(self.a)
        self.size = min(self.size + 1, len(self.a))

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        """A uniform batch of stored transitions."""
        i = rng.integers(0, self.size, batch_size)
        return self.s[i], self.a[i], self.r[i], self.s_next[i], self.done[i]


def greedy_action(params: list[dict[str, np.ndarray]], s: np.ndarray) -> np.ndarray:
    """argmax_a Q(s, a) in NumPy (cheaper than a device call for one small state)."""
    for layer in params[:-1]:
        s = np.maximum(s @ layer["w"] + layer["b"], 0.0)
    return np.argmax(s @ params[-1]["w"] + params[-1]["b"], axis=-1)


def evaluate(params: Params, episodes: int, seed: int) -> float:
    """The average return of the greedy policy over ``episodes`` episodes run in parallel."""
    host = jax.tree.map(np.asarray, params)
    env = gym.make_vec("CartPole-v1", num_envs=episodes, vectorization_mode="vector_entry_point")
    s, _ = env.reset(seed=seed)
    returns, running = np.zeros(episodes), np.ones(episodes, bool)
    while running.any():
        s, r, terminated, truncated, _ = env.step(greedy_action(host, s))
        returns += r * running
        running &= ~(terminated | truncated)
    env.close()
    return float(returns.mean())


def train(variant: str, args: argparse.Namespace, curves: reporting.Curves) -> Result:
    """Trains a DQN with ``variant``'s loss until solved or ``args.steps`` steps."""
    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    env = gym.make("CartPole-v1")
    obs_size = env.observation_space.shape[0]
    opt = fg.train.RMSPropOptimizer(args.learning_rate)
    state = opt.init(init_params(jax.random.key(args.seed), [obs_size, *args.hidden, 2]))
    names = fg.train.variable_names(state.params)
    update = make_update(variant, opt, args.gamma)
    buffer = ReplayBuffer(args.buffer_size, obs_size)
    host = jax.tree.map(np.asarray, state.params)
    s, _ = env.reset(seed=args.seed)
    returns: list[float] = []
    evaluations: list[tuple[int, float]] = []
    losses: list[float] = []
    episode_return = 0.0
    bar = reporting.progress(range(1, args.steps + 1), desc=variant)
    for t in bar:
        epsilon = max(args.final_epsilon, 1.0 - t / args.explore_steps)
        a = int(rng.integers(2)) if rng.random() < epsilon else int(greedy_action(host, s))
        s_next, r, terminated, truncated, _ = env.step(a)
        buffer.add(s, a, float(r), s_next, terminated)  # a time limit is not a terminal
        s, episode_return = s_next, episode_return + float(r)
        if terminated or truncated:
            returns.append(episode_return)
            curves.add("episode return", variant, [t], [episode_return])
            s, episode_return = env.reset()[0], 0.0
        if t > args.warmup:
            batch = buffer.sample(rng, args.batch_size)
            if curves.active and t % args.log_every == 0:  # the gradient this update applies
                summary = _loss_gradient_summary(state.params, batch, args.gamma)
                curves.add_gradients(variant, t, summary, names)
            state, loss = update(state, batch)
            losses.append(float(loss))
            curves.add("loss", variant, [t], [losses[-1]])
            host = jax.tree.map(np.asarray, state.params)
        if t % args.eval_every == 0:
            evaluations.append((t, evaluate(state.params, args.eval_episodes, args.seed + t)))
            bar.set_postfix(greedy_return=evaluations[-1][1])
            curves.add("greedy return", variant, [t], [evaluations[-1][1]])
            if args.stop_when_solved and evaluations[-1][1] >= SOLVED:
                break
    bar.close()
    env.close()
    return Result(returns, evaluations, losses, time.perf_counter() - start)


@functools.partial(jax.jit, static_argnames="gamma")
def _loss_gradient_summary(params: Params, batch: Batch, gamma: float) -> fg.GradientSummary:
    # Only compute_gradients is used: the learning rate plays no part.
    opt = fg.train.GradientDescentOptimizer(0.0)
    return fg.gradient_summary(opt.compute_gradients(stop_gradient_loss, params, batch, gamma))


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = reporting.make_parser(__doc__)
    parser.add_argument(
        "--variant",
        choices=[*VARIANTS, "both"],
        default="stop_gradient",
        help="the target's form; both: train each from the same seed",
    )
    parser.add_argument("--steps", type=int, default=50_000, help="environment-step budget")
    parser.add_argument("--learning-rate", type=float, default=1e-4, help="RMSProp's step size")
    parser.add_argument("--gamma", type=float, default=0.99, help="the discount")
    parser.add_argument("--batch-size", type=int, default=64, help="transitions per update")
    parser.add_argument(
        "--hidden", type=int, nargs="+", default=[64, 64], help="units of each hidden layer"
    )
    parser.add_argument("--buffer-size", type=int, default=50_000, help="replay capacity")
    parser.add_argument("--warmup", type=int, default=1_000, help="random steps before updates")
    parser.add_argument("--explore-steps", type=int, default=10_000, help="epsilon 1 -> final")
    parser.add_argument("--final-epsilon", type=float, default=0.05, help="epsilon after that")
    parser.add_argument("--eval-every", type=int, default=2_000, help="steps between evaluations")
    parser.add_argument("--eval-episodes", type=int, default=100, help="episodes per evaluation")
    parser.add_argument(
        "--stop-when-solved",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"stop at the first greedy evaluation averaging {SOLVED:.0f} or more",
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds everything")
    reporting.add_output_arguments(parser, "losses, returns and gradient statistics")
    parser.add_argument(
        "--log-every", type=int, default=500, help="steps between gradient statistics"
    )
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed command line, checked."""
    parser = build_parser()
    args = parser.parse_args(argv)
    sizes = (args.steps, args.batch_size, args.buffer_size, args.explore_steps, args.log_every)
    if min(*sizes, args.eval_every, args.eval_episodes, *args.hidden) < 1:
        parser.error("every step count, size and episode count must be positive")
    reporting.check_output_arguments(parser, args)
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Result]:
    """Trains the chosen variants, prints their learning curves and greedy evaluation."""
    args = parse_args(argv)
    variants = VARIANTS if args.variant == "both" else (args.variant,)
    curves = reporting.Curves(args, "DQN on CartPole-v1")
    results = {}
    for variant in variants:
        result = results[variant] = train(variant, args, curves)
        solved = result.solved_at
        verdict = f"solved at step {solved}" if solved else f"not solved in {args.steps} steps"
        print(
            f"{variant:>13}: {verdict} ({result.seconds:.0f} s, "
            f"{len(result.episode_returns)} episodes); greedy return over "
            f"{args.eval_episodes} episodes by step: "
            + ", ".join(f"{t}: {r:.0f}" for t, r in result.evaluations)
        )
    curves.close()
    if len(results) == 2:
        a, b = (results[v] for v in VARIANTS)
        same = a.episode_returns == b.episode_returns and a.evaluations == b.evaluations
        print(f"the two variants learned the same (every episode and evaluation equal): {same}")
    return results


if __name__ == "__main__":
    main()
