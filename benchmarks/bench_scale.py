"""Accumulation over k = 4 versus one step on the 4x batch; data parallel on 1-8 devices.

    PYTHONPATH=. python benchmarks/bench_scale.py [--micro 512,1024,2048] [--repeats 15]

1. For each micro-batch size m, one Adam step of a 2-layer MLP on a batch of 4 * m
   examples, four ways: ``opt.minimize`` on the whole batch; ``minimize_in_microbatches``
   with k = 4 (one jitted step, ``lax.scan``); 4 calls of a jitted step of an
   ``accumulate_gradients(tx, 4)`` optimizer on m examples each; and, for reference, 4
   plain ``opt.minimize`` steps on m examples each (4 updates, no accumulation: what
   the machine charges for running the batch in pieces of m).  Each repeat times all
   four in a rotated order and divides by the whole-batch time of the same repeat;
   printed are the median times, the median ratio with its quartiles (target <= 1.05),
   and XLA's temporary memory of each compiled step (``memory_analysis``).
2. The ``data_parallel`` Adam step on 1, 2, 4 and 8 fake CPU devices (same global batch).
"""

import argparse
import os
import statistics

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
from _timing import interleaved
from _timing import paired

import funcgrad as fg

jax.config.update("jax_num_cpu_devices", 8)

K, D_IN, HIDDEN = 4, 256, 512


def loss_fn(params, x, y):
    h = jnp.tanh(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


def problem(micro):
    k1, k2, k3, k4 = jax.random.split(jax.random.key(0), 4)
    params = {
        "w1": jax.random.normal(k1, (D_IN, HIDDEN)) / 16,
        "w2": jax.random.normal(k2, (HIDDEN,)) / 16,
    }
    x = jax.random.normal(k3, (K * micro, D_IN))
    y = jax.random.normal(k4, (K * micro,))
    return params, x, y


def temp_mib(jitted, *args):
    analysis = jitted.lower(*args).compile().memory_analysis()
    return float("nan") if analysis is None else analysis.temp_size_in_bytes / 2**20


def accumulation(micro, repeats, number):
    params, x, y = problem(micro)
    opt = fg.train.AdamOptimizer(1e-3)
    acc = fg.train.Optimizer(fg.train.accumulate_gradients(opt.tx, K))
    step = jax.jit(lambda s, x, y: opt.minimize(loss_fn, s, x, y))
    scan = jax.jit(
        lambda s, x, y: fg.train.minimize_in_microbatches(opt, loss_fn, s, x, y, num_microbatches=K)
    )
    acc_step = jax.jit(lambda s, x, y: acc.minimize(loss_fn, s, x, y))
    state, acc_state = opt.init(params), acc.init(params)
    xs, ys = list(x.reshape(K, micro, D_IN)), list(y.reshape(K, micro))

    def calls(jitted, s):
        for xi, yi in zip(xs, ys, strict=True):
            s, _ = jitted(s, xi, yi)
        return s

    rows = {
        f"whole batch (1 step, {K * micro})": (
            lambda: step(state, x, y),
            temp_mib(step, state, x, y),
        ),
        f"minimize_in_microbatches k={K}": (
            lambda: scan(state, x, y),
            temp_mib(scan, state, x, y),
        ),
        f"accumulate_gradients, {K} calls": (
            lambda: calls(acc_step, acc_state),
            temp_mib(acc_step, acc_state, xs[0], ys[0]),
        ),
        f"reference: {K} plain steps of {micro}": (
            lambda: calls(step, state),
            temp_mib(step, state, xs[0], ys[0]),
        ),
    }
    results = paired({name: fn for name, (fn, _) in rows.items()}, repeats, number)
    print(f"\nmicro-batch {micro}, batch {K * micro}")
    print(f"{'step':34s} {'median ms':>10s} {'ratio':>6s} {'quartiles':>12s} {'XLA temp MiB':>13s}")
    for name, (seconds, ratios) in results.items():
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        print(
            f"{name:34s} {seconds * 1e3:10.2f} {statistics.median(ratios):6.2f} "
            f"{q1:5.2f}-{q3:<6.2f} {rows[name][1]:13.1f}"
        )


def data_parallel(micro, repeats, number):
    params, x, y = problem(micro)
    opt = fg.train.AdamOptimizer(1e-3)
    state = opt.init(params)
    steps = {}
    for n in (1, 2, 4, 8):
        mesh = jax.make_mesh((n,), ("data",), devices=jax.devices()[:n])
        run = fg.train.data_parallel(lambda s, x, y: opt.minimize(loss_fn, s, x, y), mesh)
        steps[f"{n} device(s)"] = lambda run=run: run(state, x, y)
    times = interleaved(steps, repeats, number)
    base = times["1 device(s)"]
    print(f"\n{f'data_parallel, batch {K * micro}':34s} {'median ms':>10s} {'vs 1':>6s}")
    for name, t in times.items():
        print(f"{name:34s} {t * 1e3:10.2f} {t / base:6.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--micro", default="512,1024,2048", help="micro-batch sizes m")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--number", type=int, default=5, help="calls per timing")
    args = parser.parse_args()
    sizes = [int(m) for m in args.micro.split(",")]
    print(f"jax {jax.__version__}, {jax.device_count()} CPU devices")
    for micro in sizes:
        accumulation(micro, args.repeats, args.number)
    data_parallel(sizes[0], args.repeats, args.number)


if __name__ == "__main__":
    main()
