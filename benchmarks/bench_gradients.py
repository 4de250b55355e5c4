"""fg.gradients under jit versus the hand-written jax.vjp, and the analysis' trace cost.

    python benchmarks/bench_gradients.py [--repeats 21] [--number 50]

Times, interleaved in one run, the jitted gradient of a 3-layer MLP loss (batch 128)
written with ``fg.gradients`` and with ``jax.vjp``, and prints the median ratio (target
<= 1.02: the connectivity analysis runs at trace time only).  Then times the analysis
alone on a jaxpr of about 1,000 equations.
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
from _timing import interleaved

import funcgrad as fg
from funcgrad._core import connectivity as _connectivity


def _mlp_loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(h @ w + b)
    w, b = params[-1]
    logits = h @ w + b
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))


def _setup(batch=128, sizes=(784, 512, 512, 10)):
    keys = jax.random.split(jax.random.key(0), len(sizes) + 1)
    params = [
        (jax.random.normal(k, (m, n)) / jnp.sqrt(m), jnp.zeros((1, n)))
        for k, m, n in zip(keys, sizes[:-1], sizes[1:], strict=False)
    ]
    x = jax.random.normal(keys[-1], (batch, sizes[0]))
    y = jax.nn.one_hot(jnp.arange(batch) % sizes[-1], sizes[-1])
    return params, x, y


def _long_function(x):
    for i in range(250):
        x = jnp.sin(x) * (1.0 + i) + jnp.floor(x)
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--number", type=int, default=50)
    args = parser.parse_args()
    params, x, y = _setup()

    @jax.jit
    def with_funcgrad(params, x, y):
        return fg.gradients(lambda p: _mlp_loss(p, x, y), [params])[0]

    @jax.jit
    def with_vjp(params, x, y):
        _, vjp = jax.vjp(lambda p: _mlp_loss(p, x, y), params)
        return vjp(jnp.float32(1.0))[0]

    got, want = with_funcgrad(params, x, y), with_vjp(params, x, y)
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.allclose(a, b)), got, want))
    medians = interleaved(
        {
            "fg.gradients": lambda: with_funcgrad(params, x, y),
            "jax.vjp": lambda: with_vjp(params, x, y),
        },
        args.repeats,
        args.number,
    )
    ratio = medians["fg.gradients"] / medians["jax.vjp"]
    print(f"MLP 784-512-512-10, batch 128, jitted gradient (median of {args.repeats}):")
    for name, t in medians.items():
        print(f"  {name:13s} {t * 1e6:9.1f} us")
    print(f"  ratio fg.gradients / jax.vjp = {ratio:.3f} (target <= 1.02)")

    jaxpr = jax.make_jaxpr(_long_function)(jnp.float32(1.0)).jaxpr
    times = []
    for _ in range(20):
        start = time.perf_counter()
        _connectivity.connected_inputs(jaxpr, [True])
        times.append(time.perf_counter() - start)
    print(
        f"connectivity analysis on a jaxpr of {len(jaxpr.eqns)} equations: "
        f"{statistics.median(times) * 1e3:.2f} ms (median of 20)"
    )
    traces = {
        "fg.gradients": lambda: lambda x: fg.gradients(_long_function, x),
        "jax.grad": lambda: jax.grad(lambda x: _long_function(x)),
    }
    for name, make in traces.items():
        samples = []
        for _ in range(5):
            fn = make()  # a new function each time, so no trace cache is hit
            start = time.perf_counter()
            jax.make_jaxpr(fn)(jnp.float32(1.0))
            samples.append(time.perf_counter() - start)
        print(
            f"  whole trace of the gradient, {name:13s} {statistics.median(samples) * 1e3:7.1f} ms"
        )


if __name__ == "__main__":
    main()
