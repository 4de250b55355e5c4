"""A job of several processes on this machine, as on several hosts (``jax.distributed``).

:func:`launch` starts ``python tests/hosts.py`` once per process, each with 2 CPU devices
of its own, coordinated on ``127.0.0.1``; each runs the checks it is given, in order, as
the same script runs on every host of a job, and process 0 writes what the tests compare
(the job's arrays gathered whole) into ``DIRECTORY/out``.  The checks:

* ``dense``: 3 data-parallel Adam steps (``fg.train.data_parallel``), the batch split over
  the 4 devices; ``out/dense.npy``: the weights.
* ``table``: 3 jitted LazyAdam steps on a table whose rows are split over the 4 devices;
  every process saves it with ``fg.train.save_tf_checkpoint`` (``job_tf/model.ckpt-3``) and
  ``fg.train.Checkpointer`` (``job_orbax``), then restores both into the job;
  ``out/table.npz``: the state.
* ``one``: the checkpoints one process saved before the job (``one_tf``, ``one_orbax``)
  restored into the job's row-split template; ``out/one_tf.npz``, ``out/one_orbax.npz``.
* ``init``: ``opt.init(params)`` of params each process built itself, saved by every
  process in both formats (``init_tf``, ``init_orbax``), and restored into the job.
* ``eager``: ``compute_gradients``, not jitted, with ids split over the processes, its
  ``IndexedSlices`` then applied by a jitted ``apply_gradients``; ``out/eager.npz``.
* ``kill``: saves the table's state to ``kill/model.ckpt`` again and again, its values
  ``i`` at the ``i``-th save; ``kill/saved`` appears once the first is whole (the tests
  kill a process then).

* ``refusals``: saves that must fail on every process alike — of own copies that differ
  between the processes (both formats), of another state on process 1, and of a disk
  full on process 1 only — each recorded as ``[type, message]``, and the files left.

``out/checks-K.json`` holds, per check, what process K verified itself (``True``) or
caught.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
ROWS, DIM, BATCH, FEATURES, STEPS = 16, 4, 32, 3, 3
#: The table the ``kill`` check saves again and again: 4 MB, 1 MB per device.
KILL_SHAPE = (4096, 256)


def data() -> dict[str, np.ndarray]:
    """The job's data, the same in every process and in the tests."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH, FEATURES)).astype(np.float32)
    return {
        "x": x,
        "y": (x @ np.arange(1.0, FEATURES + 1) + 0.5).astype(np.float32),
        "ids": rng.integers(0, ROWS, size=BATCH).astype(np.int32),
        "target": rng.normal(size=BATCH).astype(np.float32),
        "table": rng.normal(size=(ROWS, DIM)).astype(np.float32),
    }


def dense_loss(params, x, y):
    import jax.numpy as jnp

    return jnp.mean((x @ params["w"] - y) ** 2)


def table_loss(params, ids, target):
    import jax.numpy as jnp

    return jnp.mean((jnp.sum(params["E"][ids], axis=-1) - target) ** 2)


def _key(path) -> str:
    import jax

    return jax.tree_util.keystr(path, simple=True, separator="/")


def launch(
    directory: pathlib.Path, checks: list[str], processes: int = 2
) -> list[subprocess.Popen]:
    """Start the job: ``processes`` processes running ``checks`` in ``directory``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Several processes at once: no shared XLA cache (one could read another's half-written
    # entry; tests/conftest.py).
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "JAX_PLATFORMS": "cpu",
        "JAX_COMPILATION_CACHE_DIR": "",
    }
    command = [sys.executable, str(pathlib.Path(__file__)), f"127.0.0.1:{port}", str(processes)]
    return [
        subprocess.Popen(
            [*command, str(k), str(directory), *checks],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for k in range(processes)
    ]


def _full_disk(*args: Any) -> Any:
    raise OSError(28, "No space left on device")


def _job(address: str, processes: int, me: int) -> None:
    import jax

    jax.config.update("jax_num_cpu_devices", 2)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(address, processes, me)


def main(argv: list[str]) -> None:
    address, processes, me, directory, *checks = argv
    _job(address, int(processes), int(me))
    import jax
    import jax.numpy as jnp
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import funcgrad as fg
    from funcgrad.train.checkpoints import _tf_bundle

    root = pathlib.Path(directory)
    out = root / "out"
    out.mkdir(parents=True, exist_ok=True)
    mesh = jax.make_mesh((jax.device_count(),), ("data",), (jax.sharding.AxisType.Auto,))
    rows, replicated = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    d = data()
    lazy = fg.train.LazyAdamOptimizer(0.1)
    verified: dict[str, dict[str, Any]] = {}

    def whole(tree):  # the job's arrays, gathered to every process (the tests' view only)
        def gathered(a):
            if a.is_fully_addressable:  # this process's own copy
                return np.asarray(a)
            return np.asarray(multihost_utils.process_allgather(a, tiled=True))

        return jax.tree.map(gathered, tree)

    def write(name: str, tree) -> None:
        arrays = whole(tree)
        if me == "0":
            leaves = jax.tree_util.tree_leaves_with_path(arrays)
            np.savez(out / name, **{_key(path): leaf for path, leaf in leaves})

    def table_state():
        table = jax.make_array_from_callback(d["table"].shape, rows, lambda i: d["table"][i])
        return lazy.init({"E": table})

    def same(a, b) -> bool:  # equal values, each leaf where the other's is
        values = zip(jax.tree.leaves(whole(a)), jax.tree.leaves(whole(b)), strict=True)
        places = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
        return all(np.array_equal(x, y) for x, y in values) and all(
            x.sharding == y.sharding for x, y in places
        )

    def dense() -> dict[str, bool]:
        opt = fg.train.AdamOptimizer(0.1)
        step = fg.train.data_parallel(lambda s, x, y: opt.minimize(dense_loss, s, x, y), mesh)
        part = np.array_split(np.arange(BATCH), jax.process_count())[jax.process_index()]
        x = jax.make_array_from_process_local_data(rows, d["x"][part])
        y = jax.make_array_from_process_local_data(rows, d["y"][part])
        state = opt.init({"w": jnp.zeros(FEATURES)})
        for _ in range(STEPS):
            state, _ = step(state, x, y)
        write("dense", state.params)
        return {}

    def table() -> dict[str, bool]:
        ids = jax.device_put(d["ids"], replicated)
        target = jax.device_put(d["target"], replicated)
        step = jax.jit(lambda s: lazy.minimize(table_loss, s, ids, target)[0])
        state = table_state()
        for _ in range(STEPS):
            state = step(state)
        prefix = fg.train.save_tf_checkpoint(root / "job_tf" / "model.ckpt-3", state, lazy)
        with fg.train.Checkpointer(root / "job_orbax") as ckpt:
            ckpt.save(state)
            from_orbax = ckpt.restore(state)
        from_tf = fg.train.restore_tf_checkpoint(prefix, state, lazy)
        write("table", state)
        return {"tf_back": same(from_tf, state), "orbax_back": same(from_orbax, state)}

    def one() -> dict[str, bool]:
        template = table_state()
        from_tf = fg.train.restore_tf_checkpoint(root / "one_tf" / "model.ckpt-3", template, lazy)
        with fg.train.Checkpointer(root / "one_orbax") as ckpt:
            from_orbax = ckpt.restore(template)
        write("one_tf", from_tf)
        write("one_orbax", from_orbax)
        layout = [
            x.sharding == y.sharding
            for s in (from_tf, from_orbax)
            for x, y in zip(jax.tree.leaves(s), jax.tree.leaves(template), strict=True)
        ]
        return {"layout": all(layout)}

    def init() -> dict[str, bool]:
        opt = fg.train.AdamOptimizer(0.1)
        state = opt.init(
            {"w": jnp.arange(FEATURES, dtype=jnp.float32), "E": jnp.asarray(d["table"])}
        )
        fg.train.save_tf_checkpoint(root / "init_tf" / "model.ckpt-0", state, opt)
        with fg.train.Checkpointer(root / "init_orbax") as ckpt:
            ckpt.save(state)
            back = ckpt.restore(state)
        back_tf = fg.train.restore_tf_checkpoint(root / "init_tf" / "model.ckpt-0", state, opt)
        return {"orbax_back": same(back, state), "tf_back": same(back_tf, state)}

    def eager() -> dict[str, bool]:
        ids = jax.make_array_from_callback(d["ids"].shape, rows, lambda i: d["ids"][i])
        target = jax.make_array_from_callback(d["target"].shape, rows, lambda i: d["target"][i])
        state = table_state()
        gvs = lazy.compute_gradients(table_loss, state.params, ids, target)
        ((grad, _),) = gvs
        state = jax.jit(lazy.apply_gradients)(gvs, state)
        write("eager", {"values": grad.values, "indices": grad.indices, "E": state.params["E"]})
        return {"sparse": isinstance(grad, fg.IndexedSlices)}

    def refusals() -> dict[str, Any]:
        opt = fg.train.AdamOptimizer(0.1)
        refused = root / "refused"
        caught: dict[str, Any] = {}

        def attempt(name: str, call: Callable[[], Any]) -> None:
            try:
                call()
            except Exception as error:
                caught[name] = [type(error).__name__, str(error)]

        own = opt.init({"w": jnp.full(FEATURES, float(me))})  # each process's own, differing
        attempt("tf_copies", lambda: fg.train.save_tf_checkpoint(refused / "copies", own, opt))
        with fg.train.Checkpointer(refused / "orbax") as ckpt:
            attempt("orbax_copies", lambda: ckpt.save(own))
        same = opt.init({"w": jnp.zeros(FEATURES)})
        extras = {"x": np.float32(1)} if me == "1" else None
        attempt(
            "tf_plans",
            lambda: fg.train.save_tf_checkpoint(refused / "plans", same, opt, extras=extras),
        )
        write_data = _tf_bundle.write_data
        if me == "1":  # its disk is full
            _tf_bundle.write_data = _full_disk
        attempt("tf_write", lambda: fg.train.save_tf_checkpoint(refused / "write", same, opt))
        _tf_bundle.write_data = write_data
        multihost_utils.sync_global_devices("refusals")  # each process's failed save ended
        caught["left"] = sorted(p.name for p in refused.iterdir() if p.name != "orbax")
        return caught

    def kill() -> dict[str, bool]:
        opt = fg.train.GradientDescentOptimizer(0.1)
        prefix = root / "kill" / "model.ckpt"
        shape = KILL_SHAPE
        for i in range(1, 10**6):
            table = jax.make_array_from_callback(
                shape, rows, lambda w, i=i: np.full(shape, i, np.float32)[w]
            )
            state = opt.init({"E": table})._replace(global_step=jnp.int32(i))
            fg.train.save_tf_checkpoint(prefix, state, opt)
            if i == 1 and me == "0":
                (root / "kill" / "saved").write_bytes(b"")
        return {}

    bodies: dict[str, Callable[[], dict[str, Any]]] = {
        "dense": dense,
        "table": table,
        "one": one,
        "init": init,
        "eager": eager,
        "refusals": refusals,
        "kill": kill,
    }
    for check in checks:
        if check == "kill":
            (out / f"checks-{me}.json").write_text(json.dumps(verified))
        verified[check] = bodies[check]()
    (out / f"checks-{me}.json").write_text(json.dumps(verified))
    print(f"process {me}: done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
