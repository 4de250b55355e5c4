"""examples/data_parallel.py across two real processes on this machine, as on two hosts."""

import json
import os
import pathlib
import socket
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

import funcgrad as fg
from tests import example_scripts

SCRIPT = pathlib.Path(example_scripts.EXAMPLES) / "data_parallel.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_equal_one_device_training() -> None:
    address = f"127.0.0.1:{_free_port()}"
    # Two processes at once, so not this test process's XLA cache (tests/conftest.py):
    # JAX writes an entry in place, and one could read the other's half-written entry.
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parent.parent), "JAX_COMPILATION_CACHE_DIR": ""}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(SCRIPT),
                address,
                "2",
                str(i),
                "--cpu-devices",
                "2",
                "--steps",
                "5",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    lines = [out.strip().splitlines()[-1] for out, _ in outs]
    assert lines[0].startswith("process 0 of 2, 4 devices") and "process 1 of 2" in lines[1]
    assert lines[0].split("w = ")[1] == lines[1].split("w = ")[1]

    module = example_scripts.load("data_parallel")
    x, y = module.dataset()
    opt = fg.train.AdamOptimizer(0.1)
    state = opt.init({"w": jnp.zeros(x.shape[1])})
    for _ in range(5):
        state, _ = jax.jit(lambda s: opt.minimize(module.loss_fn, s, x, y))(state)
    got = np.array(json.loads(lines[0].split("w = ")[1]))
    np.testing.assert_allclose(got, np.round(np.asarray(state.params["w"]), 6), atol=2e-6)
