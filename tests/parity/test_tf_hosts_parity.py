"""A TF checkpoint saved by every process of a job (2 processes x 2 CPU devices on
127.0.0.1, tests/hosts.py), read by TensorFlow 2.21: its ``Saver`` restores the table
each process wrote its rows of (TensorFlow's sharded format, the table stored as slices),
into a plain variable and into a partitioned one, and training goes on with TensorFlow's
numbers."""

from __future__ import annotations

import os

import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from tests import hosts

pytestmark = pytest.mark.skipif(os.name != "posix", reason="processes on 127.0.0.1")

ADAM = fg.train.AdamOptimizer(0.1)
#: TensorFlow's name of each value the job saved, and where tests/hosts.py wrote it.
KEYS = {
    "E": "params/E",
    "E/Adam": "opt_state/inner_state/0/mu/E",
    "E/Adam_1": "opt_state/inner_state/0/nu/E",
    "beta1_power": "opt_state/inner_state/0/beta1_power",
    "beta2_power": "opt_state/inner_state/0/beta2_power",
    "global_step": "global_step",
}


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory):
    """The job's checkpoint (3 LazyAdam steps on a table split by rows), and its values."""
    root = tmp_path_factory.mktemp("hosts")
    procs = hosts.launch(root, ["table"])
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], [err[-3000:] for _, err in outs]
    with np.load(root / "out" / "table.npz") as saved:
        values = dict(saved)
    return str(root / "job_tf" / "model.ckpt-3"), values


def _graph(tf, partitions: int | None):
    tf1 = tf.compat.v1
    partitioner = tf1.fixed_size_partitioner(partitions) if partitions else None
    table = tf1.get_variable("E", (hosts.ROWS, hosts.DIM), tf.float32, partitioner=partitioner)
    whole = tf.convert_to_tensor(table)
    step = tf1.train.get_or_create_global_step()
    train = tf1.train.AdamOptimizer(0.1).minimize(tf.reduce_sum(whole**2), global_step=step)
    return train, tf1.train.Saver(), whole, step


@pytest.mark.parametrize("partitions", [None, 2, 8], ids=["plain", "2_parts", "8_parts"])
def test_tensorflows_saver_restores_what_every_process_saved(tf, job, partitions) -> None:
    """The job stored the table as 4 slices, 2 in each process's data file: TensorFlow
    reads them into one variable, and into the parts of a partitioned one."""
    prefix, values = job
    reader = tf.train.load_checkpoint(prefix)
    assert sorted(reader.get_variable_to_shape_map()) == sorted(KEYS)
    for name, key in KEYS.items():
        np.testing.assert_array_equal(reader.get_tensor(name), values[key], err_msg=name)
    with tf.Graph().as_default():
        train, saver, whole, step = _graph(tf, partitions)
        with tf.compat.v1.Session() as sess:
            saver.restore(sess, prefix)
            np.testing.assert_array_equal(sess.run(whole), values["params/E"])
            assert sess.run(step) == hosts.STEPS
            sess.run(train)
            after = sess.run(whole)
    template = ADAM.init({"E": jnp.zeros((hosts.ROWS, hosts.DIM))})
    state = fg.train.restore_tf_checkpoint(prefix, template, ADAM)
    state, _ = ADAM.minimize(lambda p: jnp.sum(p["E"] ** 2), state)
    np.testing.assert_allclose(state.params["E"], after, rtol=1e-5, atol=1e-6)
