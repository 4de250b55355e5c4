"""Every ``fg.train`` optimizer's step, dense and sparse, against one hand-written step.

Each TF1 optimizer of ``fg.train.__all__`` (TensorFlow's defaults, a learning rate of
0.01) takes jitted ``minimize`` steps with its state donated on two models: *dense*, an
MLP 256-256-10 on a batch of 128; *sparse*, a 20,000 x 64 embedding table read by 512
ids (an ``fg.IndexedSlices`` gradient, each optimizer's sparse rule) into a 64 -> 10 layer.
The reference is the same model's step written with ``jax.grad`` and ``optax.sgd``.  Each
repeat times every step once in an order rotated from repeat to repeat
(``_timing.paired``) and divides each by the reference's time in the same repeat; the
table gives each optimizer's median ratio and its interquartile range over the repeats.
Its trace time: ``--traces`` times, a fresh ``jax.jit(step).trace`` of its dense step in
this process's CPU time, divided by that of the reference's step traced just before it
(JAX's caches cleared before each).

``--compare BEFORE AFTER`` runs this script on two funcgrad checkouts (each the
``PYTHONPATH`` of a subprocess), ``--rounds`` times in turn (the order alternating), and
gives per optimizer the median ratio and IQR of each, AFTER / BEFORE, whether AFTER's median
lies within BEFORE's IQR; the same for the trace ratios.

    PYTHONPATH=. python benchmarks/bench_optimizers.py --repeats 15
    python benchmarks/bench_optimizers.py --compare /path/to/main . --rounds 2 --repeats 10
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import funcgrad as fg

sys.path.insert(0, str(Path(__file__).parent))
from _timing import paired
from _timing import quartiles
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


def _trace_ratios(opt: Any, traces: int) -> list[float]:
    """Per repeat: the CPU seconds of a fresh ``jax.jit(step).trace`` of ``opt``'s dense
    step over those of the reference's step traced just before it (JAX's caches cleared
    before each), so that the load of a shared machine divides out."""
    params, loss, batch = _model("dense")
    state = opt.init(params)
    tx = optax.sgd(0.01)

    def reference(state: Any) -> Any:
        p, s = state
        updates, s = tx.update(jax.grad(loss)(p, *batch), s, p)
        return optax.apply_updates(p, updates), s

    def seconds(step: Any, state: Any) -> float:
        jax.clear_caches()
        start = time.process_time()
        jax.jit(step).trace(state)
        return time.process_time() - start

    ratios = []
    for _ in range(traces):
        ref = seconds(reference, (params, tx.init(params)))
        ratios.append(seconds(lambda s: opt.minimize(loss, s, *batch)[0], state) / ref)
    return ratios


def _run(args: argparse.Namespace) -> dict[str, Any]:
    """``{optimizer: {"dense": [ratio per repeat], "sparse": [...], "trace": [...]}}`` and the
    reference's seconds per step, measured in this process."""
    opts = optimizers()
    if args.only:
        opts = {n: o for n, o in opts.items() if any(w in n for w in args.only)}
    table = {
        kind: paired(_runners(kind, opts), args.repeats, args.number)
        for kind in ("dense", "sparse")
    }
    out: dict[str, Any] = {
        name: {kind: table[kind][name][1] for kind in ("dense", "sparse")} for name in opts
    }
    for name, opt in opts.items():
        out[name]["trace"] = _trace_ratios(opt, args.traces)
    out["(optax.sgd, ms per step)"] = {k: table[k]["reference"][0] * 1e3 for k in table}
    return out


def _print(out: dict[str, Any]) -> None:
    print("\n| optimizer | dense: ratio to optax.sgd (IQR) | sparse: ratio (IQR) | "
          "trace ratio (IQR) |")  # fmt: skip
    print("|---|---|---|---|")
    for name, row in out.items():
        if name.startswith("("):
            continue
        cells = [with_iqr(row[kind]) for kind in ("dense", "sparse")]
        print(f"| {name} | {cells[0]} | {cells[1]} | {with_iqr(row['trace'])} |")
    ref = out["(optax.sgd, ms per step)"]
    print(f"| (optax.sgd, per step) | {ref['dense']:.3f} ms | {ref['sparse']:.3f} ms | |")


def _verdict(runs: dict[str, list[dict[str, Any]]], name: str, what: str) -> str:
    """Table cells: before's and after's ratios (median and IQR over every run), the
    median's change, and whether after's median lies within before's IQR."""
    b = [x for run in runs["before"] for x in run[name][what]]
    a = [x for run in runs["after"] for x in run[name][what]]
    (q1, med, q3), after = quartiles(b), statistics.median(a)
    inside = "yes" if q1 <= after <= q3 else ("faster" if after < q1 else "no")
    return f"{with_iqr(b)} | {with_iqr(a)} | {after / med:.3f} | {inside}"


def _compare(args: argparse.Namespace, forwarded: list[str]) -> None:
    """Run this script on ``args.compare``'s two checkouts in turn and compare them."""
    labels = ("before", "after")
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = list(zip(labels, args.compare, strict=True))
            for label, path in order if r % 2 == 0 else order[::-1]:
                out = os.path.join(tmp, f"{label}{r}.json")
                env = {**os.environ, "PYTHONPATH": os.path.abspath(path)}
                cmd = [sys.executable, __file__, *forwarded, "--json", out]
                subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
                with open(out) as f:
                    runs[label].append(json.load(f))
    names = [n for n in runs["before"][0] if not n.startswith("(") and n in runs["after"][0]]
    print(f"{args.rounds} rounds of each, {args.repeats} repeats a round; ratios to optax.sgd")
    print("\n| optimizer | step | before (IQR) | after (IQR) | after / before | within IQR |")
    print("|---|---|---|---|---|---|")
    for name in names:
        for kind in ("dense", "sparse"):
            print(f"| {name} | {kind} | {_verdict(runs, name, kind)} |")
    print("\n| optimizer | trace ratio before (IQR) | after (IQR) | after / before | within IQR |")
    print("|---|---|---|---|---|")
    for name in names:
        print(f"| {name} | {_verdict(runs, name, 'trace')} |")
    for label in labels:
        ref = [run["(optax.sgd, ms per step)"] for run in runs[label]]
        dense, sparse = (statistics.median(r[k] for r in ref) for k in ("dense", "sparse"))
        print(f"optax.sgd per step ({label}): dense {dense:.3f} ms, sparse {sparse:.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--number", type=int, default=5, help="steps per timed call")
    parser.add_argument("--traces", type=int, default=3, help="fresh traces per optimizer")
    parser.add_argument("--only", nargs="+", help="optimizers whose name holds a word")
    parser.add_argument("--json", help="write the figures to this file too")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--rounds", type=int, default=2, help="runs of each, with --compare")
    args = parser.parse_args()
    if args.compare:
        forwarded = ["--repeats", str(args.repeats), "--number", str(args.number)]
        forwarded += ["--traces", str(args.traces)]
        forwarded += ["--only", *args.only] if args.only else []
        _compare(args, forwarded)
        return
    print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}; {args.repeats} repeats")
    out = _run(args)
    _print(out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
