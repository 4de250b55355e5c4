"""Checkpoints written by earlier funcgrads restore, and training goes on from them.

``tests/data/checkpoints/<writer>/<case>/`` holds what ``write.py`` saved after three
steps of each case of ``cases.py``: ``0.1.0`` (the released version: orbax checkpoints of
its nine optimizers) and ``4874c4a`` (the main branch before the optimizers moved onto one
base: orbax and TensorFlow checkpoints of every optimizer and composition).  Each test
restores one into a state the funcgrad under test builds, compares every value with the
one saved (a restore is a copy: equal), then takes the fourth step and compares it with
the fourth step the writer took (one step of float32 arithmetic: ``rtol=1e-5``).
"""

import importlib.util
import shutil
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import funcgrad as fg

DATA = Path(__file__).parents[1] / "data" / "checkpoints"
_spec = importlib.util.spec_from_file_location("checkpoint_cases", DATA / "cases.py")
cases = importlib.util.module_from_spec(_spec)
sys.modules["checkpoint_cases"] = cases
_spec.loader.exec_module(cases)

WRITERS = ["0.1.0", "4874c4a"]


def _written(kind, *writers):
    return [
        pytest.param(writer, name, id=f"{writer}-{name}")
        for writer in writers or WRITERS
        for name in sorted(p.name for p in (DATA / writer).iterdir())
        if (DATA / writer / name / kind).is_dir()
    ]


def _check(restored, name, writer, opt, case):
    values = np.load(DATA / writer / name / "values.npz")
    flat = jax.tree_util.tree_flatten_with_path(restored)[0]
    saved = {k[len("saved") :]: values[k] for k in values.files if k.startswith("saved")}
    assert sorted(jax.tree_util.keystr(p) for p, _ in flat) == sorted(saved)
    for path, leaf in flat:
        want = saved[jax.tree_util.keystr(path)]
        assert np.asarray(leaf).dtype == want.dtype, path
        np.testing.assert_array_equal(np.asarray(leaf), want, err_msg=str(path))
    after = cases.step(case, opt, restored, cases.STEPS)
    for path, leaf in jax.tree_util.tree_flatten_with_path(after)[0]:
        want = values["next" + jax.tree_util.keystr(path)]
        np.testing.assert_allclose(np.asarray(leaf), want, rtol=1e-5, atol=1e-7, err_msg=str(path))


@pytest.mark.parametrize(("writer", "name"), _written("tf"))
def test_a_tensorflow_checkpoint_restores_and_training_goes_on(writer, name):
    case = cases.cases()[name]
    opt = case.make()
    template = cases.init(case)
    prefix = DATA / writer / name / "tf" / f"model.ckpt-{cases.STEPS}"
    if case.ema:
        state, ema_state, _ = fg.train.restore_tf_checkpoint(
            prefix, template[0], opt, ema_state=template[1]
        )
        restored = (state, ema_state)
    else:
        restored = fg.train.restore_tf_checkpoint(prefix, template, opt)
    _check(restored, name, writer, opt, case)


@pytest.mark.parametrize(("writer", "name"), _written("orbax", "4874c4a"))
def test_an_orbax_checkpoint_restores_and_training_goes_on(writer, name, tmp_path):
    case = cases.cases()[name]
    opt = case.make()
    shutil.copytree(DATA / writer / name / "orbax", tmp_path / "orbax")
    with fg.train.Checkpointer(tmp_path / "orbax") as checkpointer:
        restored = checkpointer.restore(cases.init(case))
    _check(restored, name, writer, opt, case)


_ADAM_POWERS = "0.1.0's Adam state holds no beta1_power / beta2_power (added after it)"


@pytest.mark.parametrize(
    ("writer", "name"),
    [
        pytest.param(*p.values, id=p.id, marks=pytest.mark.xfail(strict=True, reason=_ADAM_POWERS))
        if p.values[1].startswith("adam")
        else p
        for p in _written("orbax", "0.1.0")
    ],
)
def test_the_state_of_a_0_1_0_orbax_checkpoint_is_the_state_of_today(writer, name):
    """orbax itself reads 0.1.0's files into today's state: every optimizer's state
    layout is still the layout 0.1.0 saved, but Adam's."""
    ocp = pytest.importorskip("orbax.checkpoint")
    case = cases.cases()[name]
    template = cases.init(case)
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, template)
    where = (DATA / writer / name / "orbax" / str(cases.STEPS) / "default").absolute()
    restored = ocp.StandardCheckpointer().restore(where, abstract)
    _check(restored, name, writer, case.make(), case)


@pytest.mark.xfail(
    strict=True,
    reason="0.1.0's Checkpointer wrote no record of the leaves, which Checkpointer.restore "
    "now requires (its checksums)",
)
def test_the_checkpointer_restores_a_0_1_0_checkpoint(tmp_path):
    case = cases.cases()["sgd"]
    shutil.copytree(DATA / "0.1.0" / "sgd" / "orbax", tmp_path / "orbax")
    with fg.train.Checkpointer(tmp_path / "orbax") as checkpointer:
        checkpointer.restore(cases.init(case))
