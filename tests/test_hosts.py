"""Several hosts: a job of 2 processes x 2 CPU devices on 127.0.0.1 (``jax.distributed``),
each check compared with one process.

One job runs every check (tests/hosts.py lists them), to keep the suite short: it trains,
saves and restores in both formats, then saves again and again until process 0 is killed
with SIGKILL in the middle of a save.  Before it starts, this process saves the
checkpoints the job restores (one process's, into the job's layout); after it ends, this
process restores the job's.  TensorFlow reading the job's checkpoint is in
tests/parity/test_tf_hosts_parity.py.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from funcgrad.train.checkpoints import _tf_bundle
from tests import hosts

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL")

LAZY = fg.train.LazyAdamOptimizer(0.1)
ADAM = fg.train.AdamOptimizer(0.1)
D = hosts.data()


class Job(NamedTuple):
    root: Path
    returncodes: list[int | None]
    errors: list[str]
    checks: list[dict[str, dict[str, Any]]]  # per process: what it verified or caught

    def out(self, name: str) -> dict[str, np.ndarray]:
        with np.load(self.root / "out" / f"{name}.npz") as arrays:
            return dict(arrays)


def _table_state(table: np.ndarray = D["table"]) -> fg.train.TrainState:
    return LAZY.init({"E": jnp.asarray(table)})


def _trained_table() -> fg.train.TrainState:
    step = jax.jit(lambda s: LAZY.minimize(hosts.table_loss, s, D["ids"], D["target"])[0])
    state = _table_state()
    for _ in range(hosts.STEPS):
        state = step(state)
    return state


def _flat(state: Any) -> dict[str, np.ndarray]:
    """``state``'s leaves by path, as the job writes them."""
    leaves = jax.tree_util.tree_leaves_with_path(state)
    return {hosts._key(path): np.asarray(leaf) for path, leaf in leaves}


def _wait_for(path: Path, procs: list[subprocess.Popen], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            return
        time.sleep(0.05)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Job:
    """The job, run once: every check, then a SIGKILL of process 0 mid-save."""
    root = tmp_path_factory.mktemp("hosts")
    trained = _trained_table()
    fg.train.save_tf_checkpoint(root / "one_tf" / "model.ckpt-3", trained, LAZY)
    with fg.train.Checkpointer(root / "one_orbax") as ckpt:
        ckpt.save(trained)
    procs = hosts.launch(root, ["dense", "table", "one", "init", "eager", "refusals", "kill"])
    try:
        _wait_for(root / "kill" / "saved", procs, 300)
        time.sleep(random.uniform(0.0, 0.3))  # any instant of a save
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(timeout=60)
    finally:
        for p in procs:  # process 1 waits for process 0 in the save: end it too
            p.kill()
        outs = [p.communicate(timeout=60) for p in procs]
    files = [root / "out" / f"checks-{k}.json" for k in range(len(procs))]
    checks = [json.loads(f.read_text()) if f.exists() else {} for f in files]
    return Job(root, [p.returncode for p in procs], [err[-3000:] for _, err in outs], checks)


def test_every_check_ran_until_the_kill(job: Job) -> None:
    assert job.returncodes == [-signal.SIGKILL, -signal.SIGKILL], job.errors
    names = ["dense", "eager", "init", "one", "refusals", "table"]
    assert [sorted(c) for c in job.checks] == [names, names], job.errors


def test_data_parallel_adam_equals_one_process(job: Job) -> None:
    state = ADAM.init({"w": jnp.zeros(hosts.FEATURES)})
    step = jax.jit(lambda s: ADAM.minimize(hosts.dense_loss, s, D["x"], D["y"])[0])
    for _ in range(hosts.STEPS):
        state = step(state)
    # the batch's gradient summed in another order: float32 rounding, a few steps deep
    np.testing.assert_allclose(job.out("dense")["w"], state.params["w"], rtol=1e-5, atol=1e-6)


def test_lazy_adam_on_a_table_split_by_rows_equals_one_process(job: Job) -> None:
    got, want = job.out("table"), _flat(_trained_table())
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_tf_checkpoint_saved_by_every_process_restores_in_one_process(job: Job) -> None:
    prefix = job.root / "job_tf" / "model.ckpt-3"
    files = sorted(p.name for p in prefix.parent.iterdir())
    assert files == [
        "checkpoint",
        "model.ckpt-3.data-00000-of-00002",
        "model.ckpt-3.data-00001-of-00002",
        "model.ckpt-3.index",
    ]
    reader = _tf_bundle.BundleReader(str(prefix))  # each process wrote the rows it holds
    shards = {e.shard for parts in reader.slices.values() for _, e in parts}
    assert reader.shards == 2 and shards == {0, 1} and reader.entries["E"].sliced
    restored = fg.train.restore_tf_checkpoint(prefix, _table_state(np.zeros_like(D["table"])), LAZY)
    got = _flat(restored)
    for name, value in job.out("table").items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    assert job.checks[0]["table"]["tf_back"]  # and into the job again, where each array was


def test_one_process_checkpoints_restore_into_the_job(job: Job) -> None:
    want = _flat(_trained_table())
    for saved in ("one_tf", "one_orbax"):
        got = job.out(saved)
        for name, value in want.items():
            np.testing.assert_array_equal(got[name], value, err_msg=f"{saved}: {name}")
    assert job.checks[0]["one"]["layout"]  # on the job's template's sharding, rows split


def test_an_orbax_checkpoint_saved_by_the_job_restores_in_one_process(job: Job) -> None:
    with fg.train.Checkpointer(job.root / "job_orbax") as ckpt:
        restored = ckpt.restore(_table_state(np.zeros_like(D["table"])))
    got = _flat(restored)
    for name, value in job.out("table").items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    assert job.checks[0]["table"]["orbax_back"]


def test_the_init_state_saved_by_every_process_restores(job: Job) -> None:
    params = {"w": jnp.arange(hosts.FEATURES, dtype=jnp.float32), "E": jnp.asarray(D["table"])}
    want, blank = ADAM.init(params), ADAM.init(jax.tree.map(jnp.zeros_like, params))
    from_tf = fg.train.restore_tf_checkpoint(job.root / "init_tf" / "model.ckpt-0", blank, ADAM)
    with fg.train.Checkpointer(job.root / "init_orbax") as ckpt:
        from_orbax = ckpt.restore(blank)
    for restored in (from_tf, from_orbax):
        for name, value in _flat(want).items():
            np.testing.assert_array_equal(_flat(restored)[name], value, err_msg=name)
    assert job.checks[0]["init"] == {"orbax_back": True, "tf_back": True}


def test_eager_sparse_gradients_equal_one_process(job: Job) -> None:
    state = _table_state()
    pairs = LAZY.compute_gradients(hosts.table_loss, state.params, D["ids"], D["target"])
    ((grad, _),) = pairs
    after = LAZY.apply_gradients(pairs, state)
    got = job.out("eager")
    assert job.checks[0]["eager"]["sparse"]
    np.testing.assert_array_equal(got["indices"], grad.indices)
    np.testing.assert_allclose(got["values"], grad.values, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got["E"], after.params["E"], rtol=1e-6, atol=1e-7)


def test_a_sigkill_mid_save_leaves_a_whole_checkpoint(job: Job) -> None:
    """Process 0 (which renames the files into place) was killed at a random instant of
    one of the saves: the prefix holds one save's tensors, all of them, old or new."""
    prefix = job.root / "kill" / "model.ckpt"
    opt = fg.train.GradientDescentOptimizer(0.1)
    template = opt.init({"E": jnp.zeros(hosts.KILL_SHAPE)})
    restored = fg.train.restore_tf_checkpoint(prefix, template, opt)
    table, step = np.asarray(restored.params["E"]), int(restored.global_step)
    assert step >= 1 and (table == step).all(), (step, table[0, :3], table[-1, -3:])
    again = template._replace(global_step=jnp.int32(0))  # a later save, by one process
    fg.train.save_tf_checkpoint(prefix, again, opt)
    left = sorted(p.name for p in prefix.parent.iterdir())
    assert left == ["checkpoint", "model.ckpt.data-00000-of-00001", "model.ckpt.index", "saved"]
    assert int(fg.train.restore_tf_checkpoint(prefix, template, opt).global_step) == 0


def _raise(caught: list[str]) -> None:
    """An error a process of the job caught, raised here again to be matched."""
    raise {"ValueError": ValueError, "RuntimeError": RuntimeError, "OSError": OSError}[caught[0]](
        caught[1]
    )


@pytest.mark.parametrize("process", [0, 1])
def test_copies_that_differ_between_the_processes_are_refused_by_each(job: Job, process) -> None:
    """Params built on each host, otherwise: no process's copy is saved as the job's."""
    caught = job.checks[process]["refusals"]
    with pytest.raises(
        ValueError,
        match=r"^fg.train.save_tf_checkpoint\(.*\): 'w' differs between process 0 and process "
        r"1, .*give every process the same value\. Nothing was written\.$",
    ):
        _raise(caught["tf_copies"])
    with pytest.raises(
        ValueError,
        match=r"^fg.train.Checkpointer.save\(.*\): params/w differs between process 0 and "
        r"process 1, .*make it one global array\. Nothing was written\.$",
    ):
        _raise(caught["orbax_copies"])
    assert caught["left"] == []


@pytest.mark.parametrize("process", [0, 1])
def test_processes_saving_different_states_are_refused_by_each(job: Job, process) -> None:
    with pytest.raises(
        ValueError,
        match=r"process 1 saves 7 tensors, process 0 6; every process must save the same "
        r"state, optimizer and arguments\. Nothing was written\.$",
    ):
        _raise(job.checks[process]["refusals"]["tf_plans"])


def test_a_process_that_cannot_write_fails_the_save_on_every_process(job: Job) -> None:
    with pytest.raises(OSError, match=r"No space left on device"):  # its own error
        _raise(job.checks[1]["refusals"]["tf_write"])
    with pytest.raises(
        RuntimeError,
        match=r"^fg.train.save_tf_checkpoint\(.*\): process 1 of the job could not save its "
        r"part \(OSError: .*No space left on device\); nothing was saved — fix the cause",
    ):
        _raise(job.checks[0]["refusals"]["tf_write"])
