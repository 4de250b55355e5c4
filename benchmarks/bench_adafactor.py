"""An Adafactor training step of a small transformer: funcgrad against the same rule in optax.

funcgrad: ``fg.train.AdafactorOptimizer()`` (tensor2tensor's defaults: relative step
``min(rsqrt(step + 1), 0.01)`` times the parameters' RMS, decay ``1 - (step + 1) ** -0.8``,
update clipping at 1, factored second moments), a jitted ``opt.minimize`` with a donated
state.  Baseline: the same rule hand-written from optax's pieces,
``optax.adafactor(schedule, min_dim_size_to_factor=1)`` with that relative-step schedule,
``jax.value_and_grad`` and ``optax.apply_updates``, jitted with a donated state.  The two
give the same parameters (printed); they are timed interleaved in one run (paired ratios,
medians), and each compiled step's memory is read from XLA's memory analysis.  Last, the
optimizer state of Adafactor against Adam's on the same model.

    PYTHONPATH=. python benchmarks/bench_adafactor.py --repeats 15
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _timing import paired
from _timing import with_iqr

import funcgrad as fg


def _init(key: jax.Array, vocab: int, d: int, layers: int) -> dict[str, Any]:
    keys = iter(jax.random.split(key, 1 + 6 * layers))

    def dense(m: int, n: int) -> jax.Array:
        return jax.random.normal(next(keys), (m, n)) * m**-0.5

    params: dict[str, Any] = {"embeddings": jax.random.normal(next(keys), (vocab, d)) * 0.02}
    for i in range(layers):
        params[f"layer_{i}"] = {
            "q": dense(d, d), "k": dense(d, d), "v": dense(d, d), "o": dense(d, d),
            "ff1": dense(d, 4 * d), "ff2": dense(4 * d, d),
            "LayerNorm": {"gamma": jnp.ones(d), "beta": jnp.zeros(d)},
        }  # fmt: skip
    return params


def _layer_norm(x: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-6) * p["gamma"] + p["beta"]


def _loss(params: dict[str, Any], ids: jax.Array, labels: jax.Array) -> jax.Array:
    table = params["embeddings"]
    x = table[ids]
    for name in sorted(k for k in params if k.startswith("layer_")):
        p = params[name]
        q, k, v = x @ p["q"], x @ p["k"], x @ p["v"]
        att = jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), axis=-1)
        x = _layer_norm(x + (att @ v) @ p["o"], p["LayerNorm"])
        x = x + jax.nn.relu(x @ p["ff1"]) @ p["ff2"]
    logits = x @ table.T
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def _relative_step(count: jax.Array) -> jax.Array:
    return jnp.minimum(jax.lax.rsqrt(count.astype(jnp.float32) + 1.0), 0.01)


def _memory(compiled: Any) -> int:
    m = compiled.memory_analysis()
    total = m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
    return int(total - m.alias_size_in_bytes)


def _state_bytes(opt_state: Any) -> int:
    return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(opt_state))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=2000)
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--number", type=int, default=10)
    args = parser.parse_args()

    params = _init(jax.random.PRNGKey(0), args.vocab, args.d, args.layers)
    ids = jax.random.randint(jax.random.PRNGKey(1), (args.batch, args.seq), 0, args.vocab)
    labels = jax.random.randint(jax.random.PRNGKey(2), (args.batch, args.seq), 0, args.vocab)

    opt = fg.train.AdafactorOptimizer()
    fg_step = jax.jit(lambda s, i, y: opt.minimize(_loss, s, i, y)[0], donate_argnums=0)
    tx = optax.adafactor(_relative_step, min_dim_size_to_factor=1)

    def optax_update(state: Any, i: jax.Array, y: jax.Array) -> Any:
        p, opt_state = state
        grads = jax.grad(_loss)(p, i, y)
        updates, opt_state = tx.update(grads, opt_state, p)
        return optax.apply_updates(p, updates), opt_state

    optax_step = jax.jit(optax_update, donate_argnums=0)

    def copy(tree: Any) -> Any:
        return jax.tree.map(jnp.copy, tree)

    states = {"fg": opt.init(copy(params)), "optax": (copy(params), tx.init(params))}
    for _ in range(3):  # the same rule: the same parameters after three steps
        states["fg"] = fg_step(states["fg"], ids, labels)
        states["optax"] = optax_step(states["optax"], ids, labels)
    diff = jax.tree.map(
        lambda a, b: float(jnp.abs(a - b).max()), states["fg"].params, states["optax"][0]
    )
    print(f"max |funcgrad - optax| after 3 steps: {max(jax.tree.leaves(diff)):.2e}")

    def run_fg() -> Any:
        states["fg"] = fg_step(states["fg"], ids, labels)
        return states["fg"]

    def run_optax() -> Any:
        states["optax"] = optax_step(states["optax"], ids, labels)
        return states["optax"]

    timed = paired({"optax": run_optax, "fg": run_fg}, args.repeats, args.number)
    optax_s, fg_s = timed["optax"][0], timed["fg"][0]
    ratio = statistics.median(timed["fg"][1])
    print(
        f"step time: funcgrad {fg_s * 1e3:.2f} ms, optax {optax_s * 1e3:.2f} ms, ratio {ratio:.3f}"
    )
    print(f"ratio per repeat, median (IQR): {with_iqr(timed['fg'][1])}")

    fg_mem = _memory(fg_step.lower(states["fg"], ids, labels).compile())
    optax_mem = _memory(optax_step.lower(states["optax"], ids, labels).compile())
    print(
        f"compiled memory: funcgrad {fg_mem / 2**20:.2f} MiB, optax {optax_mem / 2**20:.2f} MiB,"
        f" ratio {fg_mem / optax_mem:.3f}"
    )

    adam = fg.train.AdamOptimizer(0.001)
    adafactor_bytes = _state_bytes(states["fg"].opt_state)
    adam_bytes = _state_bytes(adam.init(params).opt_state)
    n = sum(x.size for x in jax.tree.leaves(params))
    print(
        f"optimizer state ({n} parameters): Adafactor {adafactor_bytes / 2**20:.3f} MiB, "
        f"Adam {adam_bytes / 2**20:.3f} MiB, ratio {adafactor_bytes / adam_bytes:.4f}"
    )


if __name__ == "__main__":
    main()
