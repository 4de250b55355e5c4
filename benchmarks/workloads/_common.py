"""What every workload shares: rows of results, timing, optional peers."""

import contextlib
import dataclasses
import gc
import importlib
import os
import statistics
import time
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any


@dataclasses.dataclass
class Row:
    """One implementation's result: median seconds, and the final cost it reached."""

    name: str
    seconds: float | None = None
    final: float | None = None
    first: float | None = None  # compile (or graph build) + first run, where it matters
    note: str = ""


def row(name: str, run: Callable[[], Any], repeats: int, final: Callable[[Any], float]) -> Row:
    """Time ``run`` (first run, then the median of ``repeats``); ``final`` of its result.

    ``run`` must return only when its work is done (results on the host or blocked on);
    ``final`` (the cost check) runs outside the timed region.
    """
    return interleaved({name: (run, final)}, repeats)[0]


def interleaved(
    runs: dict[str, tuple[Callable[[], Any], Callable[[Any], float]]], repeats: int
) -> list[Row]:
    """Like :func:`row` for several runs, their repeats taken in turn so load hits all alike.

    Python's garbage collector is off while a call is timed, as in ``timeit``: a full
    collection of what earlier workloads left (TensorFlow's graphs, traced programs)
    takes up to half a second here and would land in whichever call it happened to
    interrupt. Each first run starts after a collection.
    """
    firsts, results = {}, {}
    for name, (run, _) in runs.items():
        gc.collect()
        with _gc_off():
            start = time.perf_counter()
            results[name] = run()
            firsts[name] = time.perf_counter() - start
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, (run, _) in runs.items():
            with _gc_off():
                start = time.perf_counter()
                results[name] = run()
                samples[name].append(time.perf_counter() - start)
    return [
        Row(
            name,
            seconds=statistics.median(samples[name]),
            final=final(results[name]),
            first=firsts[name],
        )
        for name, (_, final) in runs.items()
    ]


@contextlib.contextmanager
def _gc_off():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def peer(module: str) -> ModuleType | None:
    """Import an optional peer framework quietly; ``None`` when it is not installed."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return importlib.import_module(module)
        except ImportError:
            return None


def missing(name: str, module: str) -> Row:
    return Row(
        name, note=f"{module} not installed (pip install -r benchmarks/requirements-peers.txt)"
    )


def set_threads(threads: int) -> None:
    """Pin every framework that is installed to ``threads`` intra-op threads."""
    torch = peer("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    tf = peer("tensorflow")
    if tf is not None:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)


def jax_runs(label, x, y, batch, init, step_fn, final) -> dict:
    """Per-step jit and whole-run ``lax.scan`` runs for a JAX ``step_fn(carry, x, y)``.

    ``init()`` gives the first carry; ``final(params)`` the cost check, where ``params``
    is the carry's parameters (``carry.params`` or ``carry[0]``) as NumPy arrays.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    n = x.shape[0] // batch
    xb = jnp.asarray(x[: n * batch].reshape(n, batch, -1))
    yb = jnp.asarray(y[: n * batch].reshape(n, batch, -1))
    steps = list(zip(list(xb), list(yb), strict=True))
    step = jax.jit(step_fn)

    @jax.jit
    def scanned(carry, xb, yb):
        return jax.lax.scan(lambda c, b: (step_fn(c, *b), None), carry, (xb, yb))[0]

    def to_host(carry):
        params = carry.params if hasattr(carry, "params") else carry[0]
        return jax.tree.map(np.asarray, params)

    def per_step():
        carry = init()
        for xi, yi in steps:
            carry = step(carry, xi, yi)
        return to_host(carry)

    return {
        f"{label}, per-step jit": (per_step, final),
        f"{label}, whole run in one lax.scan": (lambda: to_host(scanned(init(), xb, yb)), final),
    }


def tf1_row(tf, name, x, y, batch, repeats, final, build) -> Row:
    """A TF1 session loop as in the TF1 tutorials: placeholders, ``feed_dict``, one batch a run.

    ``build(xs, ys)`` makes the model on the placeholders and returns ``(train_op,
    params)``; ``final(params)`` is the cost check on the fetched parameters.
    """
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        xs = v1.placeholder(tf.float32, [None, x.shape[1]])
        ys = v1.placeholder(tf.float32, [None, y.shape[1]])
        train, params = build(xs, ys)
        init = v1.global_variables_initializer()
    with v1.Session(graph=graph) as sess:

        def run():
            sess.run(init)
            for i in range(0, x.shape[0] - batch + 1, batch):
                sess.run(train, feed_dict={xs: x[i : i + batch], ys: y[i : i + batch]})
            return sess.run(params)

        return row(name, run, repeats, final)


def optax_runs(tx, loss, init_params, x, y, batch, final) -> dict:
    """The hand-written baseline: ``jax.grad`` of ``loss`` and the optax ``tx``."""
    import jax
    import optax

    def init():
        params = init_params()
        return params, tx.init(params)

    def step(carry, xi, yi):
        params, opt_state = carry
        updates, opt_state = tx.update(jax.grad(loss)(params, xi, yi), opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    return jax_runs("raw JAX + optax", x, y, batch, init, step, final)


def tf_batches(tf, x, y, batch) -> list:
    """``(x, y)`` as TensorFlow constants, one pair a batch, made outside any timing."""
    return [
        (tf.constant(x[i : i + batch]), tf.constant(y[i : i + batch]))
        for i in range(0, x.shape[0] - batch + 1, batch)
    ]
