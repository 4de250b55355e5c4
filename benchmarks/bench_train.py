"""A jitted funcgrad training step against the hand-written JAX + optax step.

funcgrad: ``opt.compute_gradients`` -> ``fg.clip_by_global_norm`` -> ``opt.apply_gradients``.
Baseline: ``jax.value_and_grad`` and ``optax.chain(optax.clip_by_global_norm, ...)``.

Two models, on random data of MNIST's shape: the TF1 tutorial's softmax regression (784 -> 10,
batch 100, gradient descent 0.01) and a 784-512-512-10 MLP (batch 128, Adam 0.001).
Each is timed per step (a jitted step called in a Python loop) and per epoch (the whole
epoch in one ``lax.scan``), the two variants interleaved in one run; the medians and
the funcgrad / baseline ratio are printed.

    PYTHONPATH=. python benchmarks/bench_train.py --repeats 15
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

import funcgrad as fg
from benchmarks._timing import with_iqr

CLIP = 5.0


def _loss(params: list[dict[str, jax.Array]], x: jax.Array, y: jax.Array) -> jax.Array:
    h = x
    for i, layer in enumerate(params):
        h = h @ layer["W"] + layer["b"]
        if i < len(params) - 1:
            h = jax.nn.relu(h)
    return optax.softmax_cross_entropy_with_integer_labels(h, y).mean()


def _init(key: jax.Array, sizes: list[int]) -> list[dict[str, jax.Array]]:
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        {"W": jax.random.normal(k, (m, n)) * (2.0 / m) ** 0.5, "b": jnp.zeros(n)}
        for k, m, n in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


def funcgrad_step(opt: fg.train.Optimizer) -> Callable[..., Any]:
    def step(state: fg.train.TrainState, batch: tuple[jax.Array, jax.Array]) -> Any:
        grads, variables = zip(*opt.compute_gradients(_loss, state.params, *batch), strict=True)
        clipped, _ = fg.clip_by_global_norm(list(grads), CLIP)
        return opt.apply_gradients(list(zip(clipped, variables, strict=True)), state), None

    return step


def optax_step(tx: optax.GradientTransformation) -> Callable[..., Any]:
    tx = optax.chain(optax.clip_by_global_norm(CLIP), tx)

    def step(state: tuple[Any, Any], batch: tuple[jax.Array, jax.Array]) -> Any:
        params, opt_state = state
        _, grads = jax.value_and_grad(_loss)(params, *batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), None

    return step


def _median_seconds(run: Callable[[], Any], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(run())
        times.append(time.perf_counter() - start)
    return times


def bench(name: str, sizes: list[int], batch: int, fg_opt: Any, tx: Any, args: Any) -> None:
    key = jax.random.PRNGKey(0)
    params = _init(key, sizes)
    steps = args.examples // batch
    xs = jax.random.normal(key, (steps, batch, sizes[0]))
    ys = jax.random.randint(key, (steps, batch), 0, sizes[-1])
    batches = list(zip(list(xs), list(ys), strict=True))  # split once, outside the timing
    variants = {
        "funcgrad": (funcgrad_step(fg_opt), fg_opt.init(params)),
        "optax": (
            optax_step(tx),
            (params, optax.chain(optax.clip_by_global_norm(CLIP), tx).init(params)),
        ),
    }
    per_step: dict[str, list[float]] = {v: [] for v in variants}
    per_epoch: dict[str, list[float]] = {v: [] for v in variants}
    runners = {}
    for label, (step, state) in variants.items():
        jitted = jax.jit(step)
        epoch = jax.jit(lambda s, step=step: jax.lax.scan(step, s, (xs, ys))[0])
        jax.block_until_ready((jitted(state, (xs[0], ys[0])), epoch(state)))  # compile
        runners[label] = (jitted, epoch, state)
    for r in range(args.repeats):
        order = list(runners) if r % 2 == 0 else list(reversed(runners))
        for label in order:
            jitted, epoch, state = runners[label]

            def loop(jitted: Any = jitted, state: Any = state) -> Any:
                for i in range(args.loop_steps):
                    state, _ = jitted(state, batches[i % steps])
                return state

            per_step[label] += [t / args.loop_steps for t in _median_seconds(loop, 1)]
            per_epoch[label] += _median_seconds(lambda e=epoch, s=state: e(s), 1)
    for what, table in (("per step", per_step), (f"epoch ({steps} steps, lax.scan)", per_epoch)):
        med = {k: statistics.median(v) for k, v in table.items()}
        paired = [a / b for a, b in zip(table["funcgrad"], table["optax"], strict=True)]
        print(
            f"{name:8s} {what:28s} funcgrad {med['funcgrad'] * 1e3:9.3f} ms   "
            f"optax {med['optax'] * 1e3:9.3f} ms   ratio {med['funcgrad'] / med['optax']:.3f}"
            f"   per round {with_iqr(paired)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=15, help="interleaved timing rounds")
    parser.add_argument("--loop-steps", type=int, default=100, help="steps per per-step round")
    parser.add_argument("--examples", type=int, default=60000, help="examples per epoch")
    parser.add_argument("--models", default="softmax,mlp", help="comma-separated: softmax,mlp")
    args = parser.parse_args()
    print(
        f"jax {jax.__version__}, optax {optax.__version__}, device {jax.devices()[0].device_kind}"
    )
    models = args.models.split(",")
    if "softmax" in models:
        bench(
            "softmax",
            [784, 10],
            100,
            fg.train.GradientDescentOptimizer(0.01),
            optax.sgd(0.01),
            args,
        )
    if "mlp" in models:
        bench(
            "mlp", [784, 512, 512, 10], 128, fg.train.AdamOptimizer(0.001), optax.adam(0.001), args
        )


if __name__ == "__main__":
    main()
