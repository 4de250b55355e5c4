"""Checkpoints of a >= 1 GB state saved and restored by a 2-process job against one process.

The state: an embedding table (``--rows`` x ``--dim`` float32, by default 2**20 x 96:
384 MiB) with Adam's two slots, 1.2 GB, every value random.  Two layouts, each in fresh
processes:

* ``one process``: the state on its one CPU device;
* ``2 processes``: a job of 2 processes x 2 CPU devices on 127.0.0.1
  (``jax.distributed``), the table's rows split over the 4 devices, so each process holds
  half.

In each, timed, the operations interleaved repeat by repeat (each after a barrier of the
job; a job's time is that of its slowest process):

* ``fg.train.save_tf_checkpoint`` (a job writes TensorFlow's sharded format: each process
  its own data file) and ``fg.train.restore_tf_checkpoint`` into the same layout;
* ``fg.train.Checkpointer.save`` and ``.restore``;
* orbax's ``StandardCheckpointer`` ``save`` and ``restore`` alone: the reference.

Printed: a Markdown table of the median seconds and GB/s of each, and the largest growth
of a process's peak resident memory during it (Linux's ``VmHWM``, reset just before).

    PYTHONPATH=. python benchmarks/bench_hosts.py --repeats 3
    PYTHONPATH=. python benchmarks/bench_hosts.py --rows 1024 --dim 8 --repeats 1  # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

OPERATIONS = [
    "save_tf_checkpoint",
    "restore_tf_checkpoint",
    "Checkpointer.save",
    "Checkpointer.restore",
    "orbax StandardCheckpointer.save",
    "orbax StandardCheckpointer.restore",
]


def _memory() -> dict[str, int]:
    """This process's resident memory and its peak, in bytes (Linux's /proc/self/status)."""
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return {key: int(fields[key].split()[0]) * 1024 for key in ("VmRSS", "VmHWM")}


def _measured(operation: Callable[[], Any], barrier: Callable[[], None]) -> dict[str, float]:
    """Seconds of ``operation()`` (from a barrier to a barrier) and the growth of this
    process's peak resident memory during it."""
    barrier()
    with open("/proc/self/clear_refs", "w") as f:  # VmHWM back to VmRSS
        f.write("5")
    before = _memory()["VmRSS"]
    start = time.perf_counter()
    operation()
    barrier()
    return {"seconds": time.perf_counter() - start, "peak_growth": _memory()["VmHWM"] - before}


def _worker(args: argparse.Namespace) -> None:
    """One process of a layout: every operation, ``--repeats`` times, timed."""
    import jax

    jax.config.update("jax_num_cpu_devices", 2 if args.processes > 1 else 1)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if args.processes > 1:
        jax.distributed.initialize(args.address, args.processes, args.index)
    import jax.numpy as jnp
    import numpy as np
    import orbax.checkpoint as ocp
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec

    import funcgrad as fg

    mesh = jax.make_mesh((jax.device_count(),), ("rows",), (jax.sharding.AxisType.Auto,))
    rows = NamedSharding(mesh, PartitionSpec("rows"))
    shape = (args.rows, args.dim)

    def table(seed: int) -> jax.Array:
        def block(where: tuple[slice, ...]) -> np.ndarray:
            start = where[0].start or 0
            rng = np.random.default_rng([seed, start])
            return rng.standard_normal(
                (len(range(*where[0].indices(args.rows))), args.dim), np.float32
            )

        return jax.make_array_from_callback(shape, rows, block)

    opt = fg.train.AdamOptimizer(0.1)
    state = opt.init({"E": table(0)})
    adam = state.opt_state.inner_state[0]._replace(mu={"E": table(1)}, nu={"E": table(2)})
    inner = (adam, *state.opt_state.inner_state[1:])
    state = state._replace(opt_state=state.opt_state._replace(inner_state=inner))
    everywhere = NamedSharding(mesh, PartitionSpec())  # the scalars: one global copy (orbax's)
    state = jax.tree.map(
        lambda a: a if a.ndim else jax.device_put(np.asarray(a), everywhere), state
    )
    template = jax.tree.map(lambda a: jnp.zeros_like(a) if a.ndim else a, state)  # tables 0
    jax.block_until_ready((state, template))
    base, orbax = args.dir, ocp.StandardCheckpointer()

    def barrier() -> None:
        if args.processes > 1:
            multihost_utils.sync_global_devices("bench")

    def fresh(name: str) -> str:
        path = os.path.join(base, name)
        if args.index == 0:
            shutil.rmtree(path, ignore_errors=True)
        barrier()
        return path

    def fg_save() -> None:
        with fg.train.Checkpointer(fresh("fg_orbax")) as ckpt:
            ckpt.save(state)

    def fg_restore() -> None:
        with fg.train.Checkpointer(os.path.join(base, "fg_orbax")) as ckpt:
            jax.block_until_ready(ckpt.restore(template))

    def orbax_save() -> None:
        orbax.save(os.path.join(fresh("orbax"), "state"), state)
        orbax.wait_until_finished()

    tf_prefix = os.path.join(base, "tf", "model.ckpt")
    operations = {
        "save_tf_checkpoint": lambda: fg.train.save_tf_checkpoint(
            os.path.join(fresh("tf"), "model.ckpt"), state, opt
        ),
        "restore_tf_checkpoint": lambda: jax.block_until_ready(
            fg.train.restore_tf_checkpoint(tf_prefix, template, opt)
        ),
        "Checkpointer.save": fg_save,
        "Checkpointer.restore": fg_restore,
        "orbax StandardCheckpointer.save": orbax_save,
        "orbax StandardCheckpointer.restore": lambda: jax.block_until_ready(
            orbax.restore(os.path.join(base, "orbax", "state"), template)
        ),
    }
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in OPERATIONS}
    for _ in range(args.repeats):
        for name in OPERATIONS:  # a save, then the restore of what it wrote
            samples[name].append(_measured(operations[name], barrier))
    restored = fg.train.restore_tf_checkpoint(tf_prefix, template, opt)
    same = jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), restored, state)
    samples["restored equal"] = [{"seconds": float(all(jax.tree.leaves(same)))}]
    with open(os.path.join(base, f"samples-{args.index}.json"), "w") as f:
        json.dump(samples, f)


def _layout(args: argparse.Namespace, processes: int) -> dict[str, list[dict[str, float]]]:
    """Run a layout's processes; each operation's samples, the slowest process's."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    directory = tempfile.mkdtemp(prefix="bench-hosts-", dir=args.dir)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_COMPILATION_CACHE_DIR": ""}
    common = [sys.executable, __file__, "--rows", str(args.rows), "--dim", str(args.dim)]
    common += ["--repeats", str(args.repeats), "--dir", directory]
    children = [
        subprocess.Popen(
            [*common, "--worker", address, str(processes), str(k)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(processes)
    ]
    errors = [child.communicate(timeout=3600)[1] for child in children]
    if any(child.returncode for child in children):
        raise RuntimeError("\n".join(e[-3000:] for e in errors))
    per_process = []
    for k in range(processes):
        with open(os.path.join(directory, f"samples-{k}.json")) as f:
            per_process.append(json.load(f))
    shutil.rmtree(directory)
    return {
        name: [
            {key: max(p[name][r][key] for p in per_process) for key in per_process[0][name][r]}
            for r in range(len(per_process[0][name]))
        ]
        for name in per_process[0]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1 << 20)
    parser.add_argument("--dim", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where the checkpoints go (a temp dir)")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.address, processes, index = args.worker
        args.processes, args.index = int(processes), int(index)
        _worker(args)
        return
    size = 3 * args.rows * args.dim * 4
    results = {"one process": _layout(args, 1), "2 processes": _layout(args, 2)}
    print(f"state: {args.rows} x {args.dim} float32 table with Adam's slots, {size / 1e9:.2f} GB;")
    print(f"medians of {args.repeats} repeats; peak: the largest growth of one process's RSS")
    print()
    print(
        "| operation | one process (s) | 2 processes (s) | one process GB/s | 2 processes GB/s "
        "| peak one (MB) | peak each of 2 (MB) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in OPERATIONS:
        seconds = [statistics.median(s["seconds"] for s in results[k][name]) for k in results]
        peaks = [
            statistics.median(s["peak_growth"] for s in results[k][name]) / 1e6 for k in results
        ]
        rates = [size / 1e9 / s for s in seconds]
        print(
            f"| {name} | {seconds[0]:.2f} | {seconds[1]:.2f} | {rates[0]:.2f} | {rates[1]:.2f} "
            f"| {round(peaks[0])} | {round(peaks[1])} |"
        )
    equal = [bool(results[k]["restored equal"][0]["seconds"]) for k in results]
    print()
    print(f"TF checkpoint restored equal to the state saved: {equal[0]} (one), {equal[1]} (2)")


if __name__ == "__main__":
    main()
