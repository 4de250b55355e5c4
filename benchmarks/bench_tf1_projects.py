"""BERT's training step on funcgrad against the same rule hand-written in optax.

funcgrad: BERT's ``create_optimizer`` as ported in ``docs/tf1_projects.md`` —
``compute_gradients`` -> ``fg.clip_by_global_norm(1.0)`` -> ``apply_gradients`` of
``fg.train.AdamWeightDecayOptimizer`` (weight decay 0.01, LayerNorm and biases
excluded) at BERT's warmup-then-linear-decay rate.  Baseline: ``jax.value_and_grad`` and
``optax.chain(optax.clip_by_global_norm(1.0), <BERT's Adam, hand-written>)`` with the
same schedule and mask.  The model is a small BERT-style transformer encoder (embedding
table, self-attention, feed-forward, LayerNorm), a masked-token loss over tied
embeddings.  The two jitted steps (state donated) are timed side by side, interleaved
with the order rotated per repeat; XLA's temporary memory of each compiled step is
compared too.

    PYTHONPATH=. python benchmarks/bench_tf1_projects.py --repeats 15
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

import funcgrad as fg
from benchmarks._timing import paired
from benchmarks._timing import with_iqr

INIT_LR, TRAIN_STEPS, WARMUP = 1e-4, 10_000, 1_000
EXCLUDE = ["LayerNorm", "layer_norm", "bias"]


def _schedule(global_step: jax.Array) -> jax.Array:
    """BERT's rate: linear warmup, then polynomial decay to 0 (power 1)."""
    decayed = fg.train.polynomial_decay(INIT_LR, TRAIN_STEPS, end_learning_rate=0.0)(global_step)
    step = global_step.astype(jnp.float32)
    is_warmup = (global_step < WARMUP).astype(jnp.float32)
    return (1.0 - is_warmup) * decayed + is_warmup * INIT_LR * step / WARMUP


def _init(key: jax.Array, vocab: int, d: int, layers: int) -> dict[str, Any]:
    keys = iter(jax.random.split(key, 2 + 4 * layers))

    def dense(n_in: int, n_out: int) -> dict[str, jax.Array]:
        w = jax.random.normal(next(keys), (n_in, n_out)) * 0.02
        return {"kernel": w, "bias": jnp.zeros(n_out)}

    def norm() -> dict[str, jax.Array]:
        return {"gamma": jnp.ones(d), "beta": jnp.zeros(d)}

    encoder = {
        f"layer_{i}": {
            "attention": {"qkv": dense(d, 3 * d), "output": dense(d, d), "LayerNorm": norm()},
            "intermediate": dense(d, 4 * d),
            "output": {**dense(4 * d, d), "LayerNorm": norm()},
        }
        for i in range(layers)
    }
    table = jax.random.normal(next(keys), (vocab, d)) * 0.02
    return {"embeddings": {"word_embeddings": table, "LayerNorm": norm()}, "encoder": encoder}


def _layer_norm(x: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-12) * p["gamma"] + p["beta"]


def _loss(params: dict[str, Any], ids: jax.Array, heads: int) -> jax.Array:
    table = params["embeddings"]["word_embeddings"]
    h = _layer_norm(table[ids], params["embeddings"]["LayerNorm"])
    b, t, d = h.shape
    for layer in params["encoder"].values():
        att = layer["attention"]
        qkv = h @ att["qkv"]["kernel"] + att["qkv"]["bias"]
        q, k, v = (x.reshape(b, t, heads, d // heads) for x in jnp.split(qkv, 3, axis=-1))
        w = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / (d // heads) ** 0.5)
        a = jnp.einsum("bhqk,bkhd->bqhd", w, v).reshape(b, t, d)
        h = _layer_norm(h + a @ att["output"]["kernel"] + att["output"]["bias"], att["LayerNorm"])
        f = jax.nn.gelu(h @ layer["intermediate"]["kernel"] + layer["intermediate"]["bias"])
        out = layer["output"]
        h = _layer_norm(h + f @ out["kernel"] + out["bias"], out["LayerNorm"])
    logits = h @ table.T  # tied output embeddings, as BERT's masked-LM head
    return optax.softmax_cross_entropy_with_integer_labels(logits, ids).mean()


class BertAdamState(NamedTuple):
    """State of the hand-written optax form of BERT's rule."""

    count: jax.Array
    mu: Any
    nu: Any


def bert_adam_optax(mask: Any) -> optax.GradientTransformation:
    """BERT's AdamWeightDecay rule as a plain optax transformation (the baseline)."""

    def init(params: Any) -> BertAdamState:
        zeros = jax.tree.map(jnp.zeros_like, params)
        return BertAdamState(jnp.zeros([], jnp.int32), zeros, jax.tree.map(jnp.zeros_like, params))

    def update(grads: Any, state: BertAdamState, params: Any) -> Any:
        mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, state.mu, grads)
        nu = jax.tree.map(lambda v, g: 0.999 * v + (1.0 - 0.999) * g * g, state.nu, grads)
        lr = _schedule(state.count)

        def step(m: jax.Array, v: jax.Array, w: jax.Array, decay: bool) -> jax.Array:
            u = m / (jnp.sqrt(v) + 1e-6)
            return -lr * (u + 0.01 * w if decay else u)

        updates = jax.tree.map(step, mu, nu, params, mask)
        return updates, BertAdamState(state.count + 1, mu, nu)

    return optax.GradientTransformation(init, update)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--number", type=int, default=10)
    args = parser.parse_args()

    params = _init(jax.random.key(0), args.vocab, args.d, args.layers)
    ids = jax.random.randint(jax.random.key(1), (args.batch, args.seq), 0, args.vocab)
    loss = lambda p, ids: _loss(p, ids, args.heads)  # noqa: E731

    opt = fg.train.AdamWeightDecayOptimizer(
        _schedule, weight_decay_rate=0.01, exclude_from_weight_decay=EXCLUDE
    )

    def fg_step(state: fg.train.TrainState, ids: jax.Array) -> fg.train.TrainState:
        grads, tvars = zip(*opt.compute_gradients(loss, state.params, ids), strict=True)
        (grads, _) = fg.clip_by_global_norm(grads, clip_norm=1.0)
        return opt.apply_gradients(zip(grads, tvars, strict=True), state)

    names = fg.train.variable_names(params)
    decay = [not any(p in n for p in EXCLUDE) for n in names]
    mask = jax.tree.unflatten(jax.tree.structure(params), decay)
    tx = optax.chain(optax.clip_by_global_norm(1.0), bert_adam_optax(mask))

    def optax_step(carry: tuple[Any, Any], ids: jax.Array) -> tuple[Any, Any]:
        p, s = carry
        grads = jax.grad(loss)(p, ids)
        updates, s = tx.update(grads, s, p)
        return optax.apply_updates(p, updates), s

    jit_fg = jax.jit(fg_step, donate_argnums=0)
    jit_optax = jax.jit(optax_step, donate_argnums=0)
    copy = lambda tree: jax.tree.map(jnp.copy, tree)  # noqa: E731
    states = {"fg": opt.init(copy(params)), "optax": (copy(params), tx.init(params))}

    def run_fg() -> Any:
        states["fg"] = jit_fg(states["fg"], ids)
        return states["fg"].params

    def run_optax() -> Any:
        states["optax"] = jit_optax(states["optax"], ids)
        return states["optax"][0]

    memory = {
        "fg": jit_fg.lower(states["fg"], ids).compile().memory_analysis(),
        "optax": jit_optax.lower(states["optax"], ids).compile().memory_analysis(),
    }
    out = paired({"optax": run_optax, "fg": run_fg}, args.repeats, args.number)
    t_optax, t_fg = out["optax"][0], out["fg"][0]
    ratio = statistics.median(out["fg"][1])
    size = f"vocab {args.vocab}, d {args.d}, {args.layers} layers, batch {args.batch} x {args.seq}"
    print(f"BERT-style step: {size}; {args.repeats} repeats of {args.number} steps")
    print("| step | median per step | XLA temp memory |")
    print("|---|---|---|")
    for name, t in (("hand-written optax", t_optax), ("fg AdamWeightDecayOptimizer", t_fg)):
        key = "optax" if name.startswith("hand") else "fg"
        print(f"| {name} | {t * 1e3:.2f} ms | {memory[key].temp_size_in_bytes / 2**20:.2f} MiB |")
    temp = memory["fg"].temp_size_in_bytes / max(memory["optax"].temp_size_in_bytes, 1)
    print(f"| **ratio fg / optax** | **{ratio:.3f}** (median of per-repeat ratios) | "
          f"**{temp:.3f}** |")  # fmt: skip
    print(f"ratio per repeat, median (IQR): {with_iqr(out['fg'][1])}")


if __name__ == "__main__":
    main()
