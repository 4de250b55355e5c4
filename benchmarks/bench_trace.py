"""Trace, compile and first-call time of a transformer step: funcgrad against hand-written JAX.

The model: a flax linen transformer language model (untied input embedding and output
layer, pre-LayerNorm blocks of causal self-attention and a GELU feed-forward), computing
in bfloat16 on float32 parameters; about 5.8M parameters at the defaults.

funcgrad: ``LossScaleOptimizer(AdamWOptimizer)`` — ``compute_gradients`` (dynamic loss
scaling), ``fg.clip_by_global_norm(1.0)``, ``apply_gradients``.  Baseline: the same step
written by hand with ``jax.grad`` (the loss as its aux) and ``optax.chain(
clip_by_global_norm, adamw)``, the loss scaled, the gradients unscaled, a non-finite step
skipped and the scale adjusted by hand (optax's AdamW puts epsilon where optax does: the
same work, not the same numbers).

Each repeat builds both forms anew (the optimizers and their ``init``, as a program
starts), clears JAX's caches and measures them, one after the other (the order
alternates from repeat to repeat): the trace (``jax.jit(step).trace``) in wall-clock and
in this process's CPU time (tracing is single-threaded Python, so on a shared machine its
CPU time is the steadier figure; Python's garbage collector is off during it, as in
``timeit``, so that no collection of earlier repeats' garbage lands on one side), the
lowering, the XLA compile, and the first call of a fresh ``jax.jit`` (trace, compile and
run).  The same for the gradients alone:
``compute_gradients`` against ``jax.grad`` of the scaled loss, unscaled (trace only).
Printed: the medians and interquartile ranges of each side and of the per-repeat ratios
funcgrad / JAX.

    PYTHONPATH=. python benchmarks/bench_trace.py --repeats 11
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import Any

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

import funcgrad as fg
from benchmarks._timing import with_iqr

LR, DECAY, CLIP, SCALE, GROWTH = 1e-3, 1e-4, 1.0, 2.0**15, 2000


class _Block(nn.Module):
    heads: int
    mlp: int

    @nn.compact
    def __call__(self, h: jax.Array) -> jax.Array:
        mask = nn.make_causal_mask(h[..., 0])
        x = nn.LayerNorm(dtype=jnp.bfloat16)(h)
        h = h + nn.SelfAttention(num_heads=self.heads, dtype=jnp.bfloat16)(x, mask=mask)
        x = nn.LayerNorm(dtype=jnp.bfloat16)(h)
        x = nn.gelu(nn.Dense(self.mlp, dtype=jnp.bfloat16)(x))
        return h + nn.Dense(h.shape[-1], dtype=jnp.bfloat16)(x)


class Transformer(nn.Module):
    """A small decoder-only language model, bfloat16 compute on float32 parameters."""

    vocab: int
    d: int
    layers: int
    heads: int

    @nn.compact
    def __call__(self, ids: jax.Array) -> jax.Array:
        h = nn.Embed(self.vocab, self.d, dtype=jnp.bfloat16)(ids)
        pos = self.param("pos", nn.initializers.normal(0.02), (ids.shape[-1], self.d))
        h = h + pos.astype(jnp.bfloat16)
        for _ in range(self.layers):
            h = _Block(self.heads, 4 * self.d)(h)
        h = nn.LayerNorm(dtype=jnp.bfloat16)(h)
        return nn.Dense(self.vocab, dtype=jnp.bfloat16)(h)


def make_steps(model: Transformer) -> dict[str, tuple[Callable[..., Any], ...]]:
    """The compared functions: for ``step`` and ``gradients``, factories of the funcgrad
    form and the hand-written form (a new function each call), and the init of each state."""

    def loss_fn(params: Any, ids: jax.Array, targets: jax.Array) -> jax.Array:
        logits = model.apply({"params": params}, ids).astype(jnp.float32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    opt = fg.train.LossScaleOptimizer(
        fg.train.AdamWOptimizer(DECAY, LR), initial_scale=SCALE, growth_steps=GROWTH
    )
    tx = optax.chain(optax.clip_by_global_norm(CLIP), optax.adamw(LR, weight_decay=DECAY))

    def fg_init(params: Any) -> Any:
        return opt.init(params)

    def jax_init(params: Any) -> Any:
        return (params, tx.init(params), jnp.float32(SCALE), jnp.int32(0))

    def fg_grads() -> Callable[..., Any]:
        def grads(state: Any, ids: jax.Array, targets: jax.Array) -> Any:
            return opt.compute_gradients(loss_fn, state, ids, targets)

        return grads

    def jax_grads() -> Callable[..., Any]:
        def grads(state: Any, ids: jax.Array, targets: jax.Array) -> Any:
            params, _, scale, _ = state

            def scaled(p: Any) -> tuple[jax.Array, jax.Array]:
                loss = loss_fn(p, ids, targets)
                return loss * scale, loss

            grads, _ = jax.grad(scaled, has_aux=True)(params)
            return jax.tree.map(lambda g: g / scale, grads)

        return grads

    def fg_step() -> Callable[..., Any]:
        def step(state: Any, ids: jax.Array, targets: jax.Array) -> Any:
            grads, tvars = zip(*opt.compute_gradients(loss_fn, state, ids, targets), strict=True)
            clipped, _ = fg.clip_by_global_norm(list(grads), CLIP)
            return opt.apply_gradients(list(zip(clipped, tvars, strict=True)), state)

        return step

    def jax_step() -> Callable[..., Any]:
        grads_of = jax_grads()

        def step(state: Any, ids: jax.Array, targets: jax.Array) -> Any:
            params, opt_state, scale, good = state
            grads = grads_of(state, ids, targets)
            finite = jnp.all(jnp.array([jnp.isfinite(g).all() for g in jax.tree.leaves(grads)]))
            updates, new_opt_state = tx.update(grads, opt_state, params)
            new_params = optax.apply_updates(params, updates)
            keep = lambda new, old: jax.tree.map(  # noqa: E731
                lambda n, o: jnp.where(finite, n, o), new, old
            )
            grown = good + 1 >= GROWTH
            new_scale = jnp.where(
                finite, jnp.where(grown, scale * 2, scale), jnp.maximum(scale / 2, 1.0)
            )
            new_good = jnp.where(finite & ~grown, good + 1, 0)
            return (
                keep(new_params, params),
                keep(new_opt_state, opt_state),
                new_scale,
                new_good,
            )

        return step

    return {
        "step": (fg_step, jax_step),
        "gradients": (fg_grads, jax_grads),
        "init": (fg_init, jax_init),
    }


def _measure(make: Callable[[], Callable[..., Any]], args: tuple[Any, ...], full: bool) -> dict:
    """Seconds to trace a new function (wall clock and this process's CPU time), and with
    ``full`` to lower and compile it and to make a fresh ``jax.jit``'s first call; JAX's
    caches are cleared before each."""
    jax.clear_caches()
    gc.collect()  # as timeit: no collection of earlier runs' garbage inside the timing
    gc.disable()
    try:
        w0, c0 = time.perf_counter(), time.process_time()
        traced = jax.jit(make()).trace(*args)
        w1, c1 = time.perf_counter(), time.process_time()
    finally:
        gc.enable()
    out = {"trace, CPU": c1 - c0, "trace, wall": w1 - w0}
    if not full:
        return out
    lowered = traced.lower()
    w2 = time.perf_counter()
    lowered.compile()
    w3 = time.perf_counter()
    jax.clear_caches()
    w4 = time.perf_counter()
    jax.block_until_ready(jax.jit(make())(*args))
    w5 = time.perf_counter()
    return {**out, "lower, wall": w2 - w1, "compile, wall": w3 - w2, "first call, wall": w5 - w4}


def _row(label: str, fg_times: list[float], jax_times: list[float]) -> str:
    ratios = [a / b for a, b in zip(fg_times, jax_times, strict=True)]
    cells = [with_iqr(xs) for xs in (fg_times, jax_times, ratios)]
    return f"{label:22s} {cells[0]:>22s} {cells[1]:>22s} {cells[2]:>22s}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument(
        "--trace-only", action="store_true", help="time the traces only (no lower, compile, call)"
    )
    args = parser.parse_args()

    model = Transformer(args.vocab, args.d, args.layers, args.heads)
    ids = jax.random.randint(jax.random.key(1), (args.batch, args.seq), 0, args.vocab)
    targets = jnp.roll(ids, -1, axis=1)
    params = model.init(jax.random.key(0), ids)["params"]
    n_params = sum(x.size for x in jax.tree.leaves(params))
    print(
        f"jax {jax.__version__}, flax {flax.__version__}, device {jax.devices()[0].device_kind}; "
        f"{n_params:,} parameters, batch {args.batch} x {args.seq}, {args.repeats} repeats"
    )
    # times[what][phase][side]: one sample per repeat
    times: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    for r in range(args.repeats):
        # both sides anew each repeat, as a program starts: the optimizers, then their init
        funcs = make_steps(model)
        states = [init(params) for init in funcs.pop("init")]
        for what, pair in funcs.items():
            times.setdefault(what, {})
            full = what == "step" and not args.trace_only
            sides = [0, 1] if r % 2 == 0 else [1, 0]
            for side in sides:
                got = _measure(pair[side], (states[side], ids, targets), full)
                for phase, t in got.items():
                    times[what].setdefault(phase, ([], []))[side].append(t)
    head = ["what, phase", "funcgrad s (IQR)", "JAX s (IQR)", "ratio (IQR)"]
    print(f"{head[0]:22s} {head[1]:>22s} {head[2]:>22s} {head[3]:>22s}")
    for what, phases in times.items():
        for phase, (fg_times, jax_times) in phases.items():
            print(_row(f"{what}: {phase}", fg_times, jax_times))


if __name__ == "__main__":
    main()
