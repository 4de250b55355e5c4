"""Data-parallel training over every device of every host, with fg.train.data_parallel.

Each process runs this same script.  With arguments it joins a cluster of
NUM_PROCESSES processes coordinated at COORDINATOR:PORT (process 0's host):

    python examples/data_parallel.py 10.0.0.1:1234 2 0   # on 10.0.0.1
    python examples/data_parallel.py 10.0.0.1:1234 2 1   # on the second host

Without arguments it reads the cluster from the environment (SLURM, Open MPI, TPU
pods: ``srun --nodes=2 --ntasks-per-node=1 python examples/data_parallel.py``), or runs
alone.  ``--cpu-devices N`` gives each process N CPU devices, to try it on one machine
(two processes on 127.0.0.1 are what the tests run).  Every process prints the same
parameters: the mesh spans all hosts' devices and each host feeds its own rows.
``--plot`` and ``--logdir`` are written by process 0 alone.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import reporting
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec

import funcgrad as fg


def loss_fn(params, x, y):
    return jnp.mean((x @ params["w"] - y) ** 2)


def dataset(n: int = 64, features: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, features)).astype(np.float32)
    return x, (x @ np.arange(1.0, features + 1) + 0.5).astype(np.float32)


def train(steps: int, curves: reporting.Curves | None = None) -> np.ndarray:
    """``steps`` Adam steps on the whole dataset, split across every process's devices.

    ``curves`` gets each step's loss and gradient norm.
    """
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    opt = fg.train.AdamOptimizer(0.1)
    step = fg.train.data_parallel(lambda s, x, y: opt.minimize(loss_fn, s, x, y), mesh)
    sharding = NamedSharding(mesh, PartitionSpec("data"))
    x_all, y_all = dataset()
    rows = np.array_split(np.arange(len(x_all)), jax.process_count())[jax.process_index()]
    x = jax.make_array_from_process_local_data(sharding, x_all[rows])
    y = jax.make_array_from_process_local_data(sharding, y_all[rows])
    state = opt.init({"w": jnp.zeros(x_all.shape[1])})
    gradient_norm = fg.train.data_parallel(
        lambda p, x, y: fg.global_norm(jax.tree.leaves(jax.grad(loss_fn)(p, x, y))), mesh
    )
    for t in reporting.progress(range(1, steps + 1), desc=f"process {jax.process_index()}"):
        if curves is not None and curves.active:  # the whole batch's, as the step's
            curves.add("gradient norm", "data parallel", [t], [gradient_norm(state.params, x, y)])
        state, loss = step(state, x, y)
        loss = float(loss)  # waits for the step, so that progress is true
        if curves is not None:
            curves.add("loss", "data parallel", [t], [loss])
    return np.asarray(state.params["w"].addressable_data(0))


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = reporting.make_parser(__doc__)
    parser.add_argument(
        "cluster",
        nargs="*",
        help="COORDINATOR:PORT NUM_PROCESSES PROCESS_ID (none: the environment's, or alone)",
    )
    parser.add_argument("--steps", type=int, default=20, help="Adam steps")
    parser.add_argument(
        "--cpu-devices", type=int, default=0, help="CPU devices per process (0: JAX's choice)"
    )
    reporting.add_output_arguments(parser, "each step's loss and gradient norm (process 0)")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Joins the cluster, trains, and prints this process's parameters."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.cluster and len(args.cluster) != 3:
        parser.error("give all three of COORDINATOR:PORT NUM_PROCESSES PROCESS_ID, or none")
    if args.steps < 1 or args.cpu_devices < 0:
        parser.error("--steps must be positive and --cpu-devices not negative")
    if args.cpu_devices:
        jax.config.update("jax_num_cpu_devices", args.cpu_devices)
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if args.cluster:
        address, processes, index = args.cluster
        jax.distributed.initialize(address, int(processes), int(index))
    elif any(v in os.environ for v in ("SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE")):
        jax.distributed.initialize()
    if jax.process_index() != 0:
        args.plot = args.logdir = None
    reporting.check_output_arguments(parser, args)
    curves = reporting.Curves(args, "linear regression, data parallel")
    w = train(args.steps, curves)
    curves.close()
    print(
        f"process {jax.process_index()} of {jax.process_count()}, "
        f"{jax.device_count()} devices: w = {np.round(w, 6).tolist()}"
    )


if __name__ == "__main__":
    main()
