"""An embedding model's training step: sparse (touched rows) against dense, side by side.

The model: a ``V x 64`` float32 table read by 512 random ids a step (duplicates
included), then a dense layer ``64 -> 10`` and softmax cross-entropy.  Each variant is
one jitted step with the state donated (updated in place), timed on the same batches:

* funcgrad ``GradientDescentOptimizer(0.1)`` (word2vec's step), ``MomentumOptimizer(0.1,
  0.9)`` and ``LazyAdamOptimizer(1e-3)`` given the table's gradient as an
  ``fg.IndexedSlices`` (the rows of the batch);
* optax ``sgd(0.1, momentum=0.9)`` / ``adam(1e-3)`` on the dense gradient — every row,
  every step, as funcgrad did before sparse gradients;
* a hand-written JAX step that updates the touched rows only (SGD: ``E.at[ids].add(-lr
  * g)``; the others: unique ids, summed rows, gather, compute, scatter): the floor a
  library step should come close to;
* PyTorch ``nn.Embedding(sparse=True)`` with ``SGD(momentum=0.9)`` / ``SparseAdam``;
* TensorFlow 1.x in a session (``MomentumOptimizer`` on its ``IndexedSlices``).

Medians of ``--repeats`` rounds, the variants timed in turn within each round (in an
order rotated from round to round); the ratios are of medians of the same run.  Also
printed: the compiled funcgrad step's temporary memory
(``compiled.memory_analysis().temp_size_in_bytes``), which follows the batch, not the
table.  Peers that are not installed are rows saying so.  The dense
and peer rows are skipped above ``--dense-max`` rows (a 10,000,000 x 64 table is
2.5 GB; optax's dense Adam would hold five of them).

    PYTHONPATH=. python benchmarks/bench_sparse.py --rows 100000 1000000 10000000

``--only GradientDescent SGD`` times only the variants whose name holds one of the words given (on a
shared machine, fewer variants in a round give steadier ratios).

``--shards 32`` compares a lookup over shards with the same lookup on one table instead
(``--rows`` the table's rows, ``--ids`` the ids of a step): ``fg.nn.embedding_lookup``
over the table in 32 parts, as a restored partitioned variable is looked up
(``jnp.array_split(table, 32)`` inside the function), and over 32 separate arrays, against
``jnp.take(table, ids, axis=0)``; each alone (the forward lookup) and in a Momentum
``minimize`` step (jitted, the state donated).  Printed: XLA's temporary and output bytes
of each compiled function and the median time of each, the variants timed in turn within
each round, and the ratios to the one-table figures: of temporaries and outputs for the
lookup (its rows), of temporaries for the step (its outputs are the state, updated in
place and the same in every variant).

    PYTHONPATH=. python benchmarks/bench_sparse.py --shards 32 --rows 65536 --ids 20000
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax
import jax.numpy as jnp
import numpy as np
import optax

import funcgrad as fg

DIM, CLASSES, BATCH = 64, 10, 512
Step = Callable[[], Any]


def _loss(rows: jax.Array, w: jax.Array, labels: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(rows @ w, labels).mean()


def _batches(rows: int, n: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (rng.integers(0, rows, BATCH).astype(np.int32), rng.integers(0, CLASSES, BATCH))
        for _ in range(n)
    ]


def _params(rows: int) -> dict[str, jax.Array]:
    key = jax.random.key(0)
    table = 0.01 * jax.random.normal(key, (rows, DIM), jnp.float32)
    return {"E": table, "W": jnp.zeros((DIM, CLASSES), jnp.float32)}


def _runner(step: Callable[..., Any], state: Any, batches: list[Any]) -> Step:
    """A call that runs ``step`` over every batch, carrying the (donated) state.

    Small leaves are copied first: JAX may hand out one buffer for equal small zeros,
    and a buffer cannot be donated twice (the tables are built apart)."""
    box = [jax.tree.map(lambda x: x if x.size >= DIM * CLASSES * 10 else jnp.array(x), state)]

    def run() -> Any:
        for ids, labels in batches:
            box[0] = step(box[0], ids, labels)
        return jax.block_until_ready(box[0])

    return run


def funcgrad_step(opt: fg.train.Optimizer) -> Callable[..., Any]:
    """funcgrad's step as a port writes it: ``minimize`` of the loss, whose
    ``compute_gradients`` finds the lookup ``E[ids]`` and gives the table an
    ``fg.IndexedSlices`` of the batch's rows."""

    def loss(params: Any, ids: jax.Array, labels: jax.Array) -> jax.Array:
        return _loss(params["E"][ids], params["W"], labels)

    def step(state: fg.train.TrainState, ids: jax.Array, labels: jax.Array) -> Any:
        return opt.minimize(loss, state, ids, labels)[0]

    return jax.jit(step, donate_argnums=0)


def optax_step(tx: optax.GradientTransformation) -> Callable[..., Any]:
    """optax on the dense gradient: the table-sized gradient, every row updated."""

    def step(state: Any, ids: jax.Array, labels: jax.Array) -> Any:
        params, opt_state = state
        grads = jax.grad(lambda p: _loss(p["E"][ids], p["W"], labels))(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    return jax.jit(step, donate_argnums=0)


def _touched(table_rows: int, ids: jax.Array, g_rows: jax.Array) -> tuple[jax.Array, jax.Array]:
    unique, inverse = jnp.unique(ids, size=BATCH, fill_value=table_rows, return_inverse=True)
    return unique, jax.ops.segment_sum(g_rows, inverse.reshape(BATCH), num_segments=BATCH)


def hand_sgd_step(lr: float = 0.1) -> Callable[..., Any]:
    """word2vec's touched-rows SGD step written by hand in JAX: ``E.at[ids].add(-lr * g)``."""

    def step(state: Any, ids: jax.Array, labels: jax.Array) -> Any:
        table, w = state
        g_rows, g_w = jax.grad(_loss, argnums=(0, 1))(table[ids], w, labels)
        return table.at[ids].add(-lr * g_rows), w - lr * g_w

    return jax.jit(step, donate_argnums=0)


def hand_momentum_step(lr: float = 0.1, mu: float = 0.9) -> Callable[..., Any]:
    """The touched-rows momentum step written by hand in JAX."""

    def step(state: Any, ids: jax.Array, labels: jax.Array) -> Any:
        (table, w), (acc, acc_w) = state
        g_rows, g_w = jax.grad(_loss, argnums=(0, 1))(table[ids], w, labels)
        unique, g = _touched(table.shape[0], ids, g_rows)
        a = acc.at[unique].get(mode="clip") * mu + g
        acc = acc.at[unique].set(a, mode="drop")
        table = table.at[unique].add(-lr * a, mode="drop")
        acc_w = acc_w * mu + g_w
        return (table, w - lr * acc_w), (acc, acc_w)

    return jax.jit(step, donate_argnums=0)


def hand_lazy_adam_step(lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999) -> Callable:
    """The touched-rows (lazy) Adam step written by hand in JAX."""

    def step(state: Any, ids: jax.Array, labels: jax.Array) -> Any:
        (table, w), (m, v, mw, vw), t = state
        t = t + 1
        g_rows, g_w = jax.grad(_loss, argnums=(0, 1))(table[ids], w, labels)
        unique, g = _touched(table.shape[0], ids, g_rows)
        rate = lr * jnp.sqrt(1 - b2**t) / (1 - b1**t)
        m_rows = b1 * m.at[unique].get(mode="clip") + (1 - b1) * g
        v_rows = b2 * v.at[unique].get(mode="clip") + (1 - b2) * g * g
        m = m.at[unique].set(m_rows, mode="drop")
        v = v.at[unique].set(v_rows, mode="drop")
        table = table.at[unique].add(-rate * m_rows / (jnp.sqrt(v_rows) + 1e-8), mode="drop")
        mw = b1 * mw + (1 - b1) * g_w
        vw = b2 * vw + (1 - b2) * g_w * g_w
        w = w - rate * mw / (jnp.sqrt(vw) + 1e-8)
        return (table, w), (m, v, mw, vw), t

    return jax.jit(step, donate_argnums=0)


def _torch_rows(rows: int, batches: list[Any]) -> dict[str, Step]:
    try:
        import torch
    except ImportError:
        return {}
    torch.set_num_threads(2)
    out = {}
    for name, make in (
        ("PyTorch Embedding(sparse) + SGD(momentum)", lambda p: torch.optim.SGD(p, 0.1, 0.9)),
        ("PyTorch Embedding(sparse) + SparseAdam/Adam", None),
    ):
        emb = torch.nn.Embedding(rows, DIM, sparse=True)
        lin = torch.nn.Linear(DIM, CLASSES, bias=False)
        if make is None:
            opts = [
                torch.optim.SparseAdam(emb.parameters(), 1e-3),
                torch.optim.Adam(lin.parameters(), 1e-3),
            ]
        else:
            opts = [make(emb.parameters()), make(lin.parameters())]
        tb = [(torch.from_numpy(i.astype(np.int64)), torch.from_numpy(y)) for i, y in batches]

        def run(emb: Any = emb, lin: Any = lin, opts: list[Any] = opts, tb: Any = tb) -> Any:
            for ids, labels in tb:
                for o in opts:
                    o.zero_grad()
                loss = torch.nn.functional.cross_entropy(lin(emb(ids)), labels)
                loss.backward()
                for o in opts:
                    o.step()
            return loss

        out[name] = run
    return out


def _tf_rows(rows: int, batches: list[Any]) -> dict[str, Step]:
    try:
        import tensorflow as tf
    except ImportError:
        return {}
    tf.config.threading.set_inter_op_parallelism_threads(2)
    tf.config.threading.set_intra_op_parallelism_threads(2)
    graph = tf.Graph()
    with graph.as_default():
        table = tf.compat.v1.Variable(tf.random.normal([rows, DIM], stddev=0.01))
        w = tf.compat.v1.Variable(tf.zeros([DIM, CLASSES]))
        ids = tf.compat.v1.placeholder(tf.int32, [BATCH])
        labels = tf.compat.v1.placeholder(tf.int64, [BATCH])
        logits = tf.matmul(tf.nn.embedding_lookup(table, ids), w)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )
        train = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
        sess = tf.compat.v1.Session(graph=graph)
        sess.run(tf.compat.v1.global_variables_initializer())

    def run() -> Any:
        for i, y in batches:
            sess.run(train, {ids: i, labels: y})

    return {"TF1 session, MomentumOptimizer (IndexedSlices)": run}


def temp_bytes(step: Callable[..., Any], state: Any, batch: Any) -> int:
    """The compiled step's temporary memory, in bytes (XLA's own figure)."""
    analysis = step.lower(state, *batch).compile().memory_analysis()  # type: ignore[attr-defined]
    return int(analysis.temp_size_in_bytes)


def _variants(rows: int, dense_max: int) -> dict[str, Callable[[list[Any]], Step]]:
    """``{name: make(device_batches) -> run}``: each builds its own state when called."""
    params = lambda: _params(rows)  # noqa: E731
    sgd = fg.train.GradientDescentOptimizer(0.1)
    momentum = fg.train.MomentumOptimizer(0.1, 0.9)
    lazy = fg.train.LazyAdamOptimizer(1e-3)

    def tables(n: int) -> tuple[jax.Array, ...]:
        return tuple(jnp.zeros((rows, DIM), jnp.float32) for _ in range(n))

    def layers(n: int) -> tuple[jax.Array, ...]:
        return tuple(jnp.zeros((DIM, CLASSES), jnp.float32) for _ in range(n))

    def hand_momentum(b: list[Any]) -> Step:
        p = params()
        return _runner(hand_momentum_step(), ((p["E"], p["W"]), (*tables(1), *layers(1))), b)

    def hand_adam(b: list[Any]) -> Step:
        p = params()
        state = ((p["E"], p["W"]), (*tables(2), *layers(2)), jnp.float32(0))
        return _runner(hand_lazy_adam_step(), state, b)

    def hand_sgd(b: list[Any]) -> Step:
        p = params()
        return _runner(hand_sgd_step(), (p["E"], p["W"]), b)

    out: dict[str, Callable[[list[Any]], Step]] = {
        "funcgrad GradientDescentOptimizer (IndexedSlices)": lambda b: _fg_runner(sgd, rows, b),
        "hand-written JAX, touched rows, SGD": hand_sgd,
        "funcgrad MomentumOptimizer (IndexedSlices)": lambda b: _fg_runner(momentum, rows, b),
        "hand-written JAX, touched rows, momentum": hand_momentum,
        "funcgrad LazyAdamOptimizer (IndexedSlices)": lambda b: _fg_runner(lazy, rows, b),
        "hand-written JAX, touched rows, lazy Adam": hand_adam,
    }
    if rows <= dense_max:
        for name, tx in (("momentum", optax.sgd(0.1, momentum=0.9)), ("Adam", optax.adam(1e-3))):

            def dense(b: list[Any], tx: optax.GradientTransformation = tx) -> Step:
                p = params()
                return _runner(optax_step(tx), (p, tx.init(p)), b)

            out[f"optax dense {name}"] = dense
    return out


def _fg_runner(opt: fg.train.Optimizer, rows: int, batches: list[Any]) -> Step:
    step = funcgrad_step(opt)
    state = opt.init(_params(rows))
    temp = temp_bytes(step, state, batches[0])
    print(f"V={rows:,}: {type(opt).__name__} step temp size {temp:,} bytes "
          f"(the table: {rows * DIM * 4:,} bytes)", flush=True)  # fmt: skip
    return _runner(step, state, batches)


def _timed(runs: dict[str, Step], steps: int, repeats: int) -> dict[str, float]:
    """Median seconds per step of each run, the runs timed in turn within each round, the
    round starting one run further along each time (so no run always follows the dense
    steps, which leave the caches cold)."""
    for run in runs.values():  # compile and warm up
        run()
    names = list(runs)
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            runs[name]()
            samples[name].append((time.perf_counter() - start) / steps)
    return {name: statistics.median(s) for name, s in samples.items()}


def measure(
    rows: int, *, steps: int, repeats: int, dense_max: int, only: list[str] | None = None
) -> dict[str, float]:
    """Median seconds per step of every variant at ``rows`` rows (temp sizes printed).

    Up to ``dense_max`` rows every variant and peer is built and timed in turn; above
    it, one variant at a time (built, timed, freed), to keep the memory of one table's
    state at a time.
    """
    batches = _batches(rows, steps)
    device = [(jnp.asarray(i), jnp.asarray(y)) for i, y in batches]
    variants = _variants(rows, dense_max)
    if only:
        variants = {n: m for n, m in variants.items() if any(w in n for w in only)}
    if rows > dense_max:
        return {n: _timed({n: make(device)}, steps, repeats)[n] for n, make in variants.items()}
    runs = {name: make(device) for name, make in variants.items()}
    if not only:
        runs.update(_torch_rows(rows, batches))
        runs.update(_tf_rows(rows, batches))
    return _timed(runs, steps, repeats)


def _shard_variants(rows: int, shards: int) -> dict[str, tuple[Callable[..., Any], Any]]:
    """``{name: (lookup(params, ids), params)}``: one table, the table in ``shards`` parts
    (one array, split in the function), and ``shards`` separate arrays."""
    table = 0.01 * jax.random.normal(jax.random.key(0), (rows, DIM), jnp.float32)
    split = [table[p::shards] for p in range(shards)]  # "mod": id i in part i % shards
    return {
        "one table, jnp.take": (lambda t, ids: jnp.take(t, ids, axis=0), table),
        f"one array in {shards} parts, fg.nn.embedding_lookup(jnp.array_split(...))": (
            lambda t, ids: fg.nn.embedding_lookup(jnp.array_split(t, shards), ids),
            jnp.concatenate(split),
        ),
        f"{shards} separate arrays, fg.nn.embedding_lookup": (fg.nn.embedding_lookup, split),
    }


def _memory(compiled: Any) -> tuple[int, int]:
    analysis = compiled.memory_analysis()
    return int(analysis.temp_size_in_bytes), int(analysis.output_size_in_bytes)


def measure_shards(rows: int, n_ids: int, shards: int, *, steps: int, repeats: int) -> None:
    """Print the lookup over ``shards`` shards against the one-table lookup."""
    rng = np.random.default_rng(0)
    ids = jnp.asarray(rng.integers(0, rows, n_ids).astype(np.int32))
    labels = jnp.asarray(rng.integers(0, CLASSES, n_ids))
    momentum = fg.train.MomentumOptimizer(0.1, 0.9)
    figures: dict[str, dict[str, tuple[int, int]]] = {"lookup": {}, "Momentum step": {}}
    runs: dict[str, dict[str, Step]] = {"lookup": {}, "Momentum step": {}}
    for name, (lookup, params) in _shard_variants(rows, shards).items():
        forward = jax.jit(lookup)
        figures["lookup"][name] = _memory(forward.lower(params, ids).compile())
        runs["lookup"][name] = lambda f=forward, p=params: jax.block_until_ready(
            [f(p, ids) for _ in range(steps)]
        )

        def loss(p: Any, ids: jax.Array, labels: jax.Array, lookup: Any = lookup) -> jax.Array:
            return _loss(lookup(p["E"], ids), p["W"], labels)

        step = jax.jit(
            lambda s, i, y, loss=loss: momentum.minimize(loss, s, i, y)[0], donate_argnums=0
        )
        state = momentum.init({"E": params, "W": jnp.zeros((DIM, CLASSES), jnp.float32)})
        figures["Momentum step"][name] = _memory(step.lower(state, ids, labels).compile())
        runs["Momentum step"][name] = _runner(step, state, [(ids, labels)] * steps)
    print(f"V={rows:,} rows x {DIM}, {n_ids:,} ids, {shards} shards; medians of {repeats} "
          f"rounds of {steps} calls")  # fmt: skip
    print("\n| variant | temporaries | outputs | time | vs one table (memory, time) |")
    print("|---|---|---|---|---|")
    for kind in ("lookup", "Momentum step"):
        times = _timed(runs[kind], steps, repeats)
        memory = {n: t + o if kind == "lookup" else t for n, (t, o) in figures[kind].items()}
        base_name = next(iter(times))
        base = max(memory[base_name], 1), times[base_name]
        for name, seconds in times.items():
            temp, out = figures[kind][name]
            ratio = f"{memory[name] / base[0]:.2f}x, {seconds / base[1]:.2f}x"
            print(f"| {kind}: {name} | {temp / 2**20:.2f} MiB | {out / 2**20:.2f} MiB | "
                  f"{seconds * 1e3:.3f} ms | {ratio} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--steps", type=int, default=20, help="steps per timed round")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds")
    parser.add_argument("--dense-max", type=int, default=1_000_000)
    parser.add_argument("--only", nargs="+", help="time only variants whose name holds a word")
    parser.add_argument("--shards", type=int, help="compare a lookup over this many shards")
    parser.add_argument("--ids", type=int, default=20_000, help="ids a step, with --shards")
    args = parser.parse_args()
    if args.shards:
        for rows in args.rows:
            measure_shards(rows, args.ids, args.shards, steps=args.steps, repeats=args.repeats)
        return
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, batch {BATCH}, dim {DIM}")
    table = {}
    for rows in args.rows:
        table[rows] = measure(
            rows,
            steps=args.steps,
            repeats=args.repeats,
            dense_max=args.dense_max,
            only=args.only,
        )
    names = list(dict.fromkeys(n for r in table.values() for n in r))
    print("\n| variant | " + " | ".join(f"V = {r:,}" for r in table) + " |")
    print("|---|" + "---|" * len(table))
    for name in names:
        cells = [f"{table[r][name] * 1e3:.3f} ms" if name in table[r] else "—" for r in table]
        print(f"| {name} | " + " | ".join(cells) + " |")
    fg_m = "funcgrad MomentumOptimizer (IndexedSlices)"
    for rows, r in table.items():
        for dense, hand, mine in (
            (
                "optax dense SGD",
                "hand-written JAX, touched rows, SGD",
                "funcgrad GradientDescentOptimizer (IndexedSlices)",
            ),
            ("optax dense momentum", "hand-written JAX, touched rows, momentum", fg_m),
            (
                "optax dense Adam",
                "hand-written JAX, touched rows, lazy Adam",
                "funcgrad LazyAdamOptimizer (IndexedSlices)",
            ),
        ):
            if mine not in r or hand not in r:
                continue
            parts = [
                f"V={rows:,} {mine.split()[1]}: {r[mine] / r[hand]:.2f}x the hand-written step"
            ]
            if dense in r:
                parts.append(f"{r[dense] / r[mine]:.1f}x faster than {dense}")
            print("; ".join(parts))
    if len(table) > 1 and all(fg_m in r for r in table.values()):
        lo, hi = min(table), max(table)
        print(f"growth V={lo:,} -> V={hi:,}: Momentum {table[hi][fg_m] / table[lo][fg_m]:.2f}x")


if __name__ == "__main__":
    main()
