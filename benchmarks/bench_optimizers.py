"""Every ``fg.train`` optimizer's step, dense and sparse, against one hand-written step.

Each TF1 optimizer of ``fg.train.__all__`` (TensorFlow's defaults, a learning rate of
0.01) takes jitted ``minimize`` steps with its state donated on two models: *dense*, an
MLP 256-256-10 on a batch of 128; *sparse*, a 20,000 x 64 embedding table read by 512
ids (an ``fg.IndexedSlices`` gradient, each optimizer's sparse rule) into a 64 -> 10 layer.
The reference is the same model's step written with ``jax.grad`` and ``optax.sgd``.  Each
repeat times every step once in an order rotated from repeat to repeat
(``_timing.paired``) and divides each by the reference's time in the same repeat; the
table gives each optimizer's median ratio and its interquartile range over the repeats.
Run it on two versions of funcgrad one right after the other (``PYTHONPATH``) to compare.

    PYTHONPATH=. python benchmarks/bench_optimizers.py --repeats 15
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import funcgrad as fg

sys.path.insert(0, str(Path(__file__).parent))
from _timing import paired
from _timing import with_iqr

_REQUIRED = {"learning_rate": 0.01, "momentum": 0.9, "weight_decay": 0.01}


def optimizers() -> dict[str, Any]:
    """Every TF1 optimizer class of ``fg.train``, built with its defaults."""
    found = {}
    for name in sorted(fg.train.__all__):
        cls = getattr(fg.train, name)
        if not (isinstance(cls, type) and issubclass(cls, fg.train.Optimizer)):
            continue
        parameters = inspect.signature(cls).parameters
        if "opt" in parameters or "tx" in parameters or name == "TF1Optimizer":
            continue  # wrappers, Optimizer(tx), the base
        kwargs = {k: v for k, v in _REQUIRED.items() if k in parameters}
        if name == "AdafactorOptimizer":
            kwargs.pop("learning_rate")
        found[name] = cls(**kwargs)
    return found


def _model(kind: str) -> tuple[Any, Any, tuple[Any, ...]]:
    """``(params, loss, batch)`` of the dense or the sparse model."""
    rng = np.random.default_rng(0)
    if kind == "dense":
        sizes = [256, 256, 10]
        params = {
            f"layer{i}": {
                "w": jnp.asarray(rng.normal(size=(a, b)) / np.sqrt(a), jnp.float32),
                "b": jnp.zeros(b),
            }
            for i, (a, b) in enumerate(itertools.pairwise(sizes))
        }
        x = jnp.asarray(rng.normal(size=(128, sizes[0])), jnp.float32)

        def loss(p: Any, x: jax.Array, y: jax.Array) -> jax.Array:
            h = jnp.tanh(x @ p["layer0"]["w"] + p["layer0"]["b"][None, :])
            logits = h @ p["layer1"]["w"] + p["layer1"]["b"][None, :]
            return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(y.shape[0]), y])

        return params, loss, (x, jnp.asarray(rng.integers(0, 10, 128)))
    params = {
        "E": jnp.asarray(rng.normal(size=(20_000, 64)) * 0.1, jnp.float32),
        "w": jnp.asarray(rng.normal(size=(64, 10)) * 0.1, jnp.float32),
    }

    def loss(p: Any, ids: jax.Array, y: jax.Array) -> jax.Array:
        logits = p["E"][ids] @ p["w"]
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(y.shape[0]), y])

    batch = (jnp.asarray(rng.integers(0, 20_000, 512)), jnp.asarray(rng.integers(0, 10, 512)))
    return params, loss, batch


def _runners(kind: str, opts: dict[str, Any]) -> dict[str, Any]:
    params, loss, batch = _model(kind)
    tx = optax.sgd(0.01)

    def reference(state: Any) -> Any:
        p, s = state
        updates, s = tx.update(jax.grad(loss)(p, *batch), s, p)
        return optax.apply_updates(p, updates), s

    steps = {"reference": (jax.jit(reference, donate_argnums=0), (params, tx.init(params)))}
    for name, opt in opts.items():
        step = jax.jit(lambda s, opt=opt: opt.minimize(loss, s, *batch)[0], donate_argnums=0)
        steps[name] = (step, opt.init(jax.tree.map(jnp.copy, params)))
    states = {name: s for name, (_, s) in steps.items()}

    def runner(name: str) -> Any:
        def run() -> Any:
            states[name] = steps[name][0](states[name])
            return states[name]

        return run

    return {name: runner(name) for name in steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--number", type=int, default=5, help="steps per timed call")
    parser.add_argument("--only", nargs="+", help="optimizers whose name holds a word")
    args = parser.parse_args()
    opts = optimizers()
    if args.only:
        opts = {n: o for n, o in opts.items() if any(w in n for w in args.only)}
    print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}; {args.repeats} repeats")
    table = {
        kind: paired(_runners(kind, opts), args.repeats, args.number)
        for kind in ("dense", "sparse")
    }
    print("\n| optimizer | dense: ratio to optax.sgd (IQR) | sparse: ratio (IQR) |")
    print("|---|---|---|")
    for name in opts:
        cells = [with_iqr(table[kind][name][1]) for kind in ("dense", "sparse")]
        print(f"| {name} | " + " | ".join(cells) + " |")
    ref = [f"{table[kind]['reference'][0] * 1e3:.3f} ms" for kind in ("dense", "sparse")]
    print(f"| (optax.sgd, per step) | {ref[0]} | {ref[1]} |")


if __name__ == "__main__":
    main()
