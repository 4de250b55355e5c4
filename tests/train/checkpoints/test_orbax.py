"""fg.train.Checkpointer: atomic saves, the last N kept, exact resumption, clear errors."""

import gc
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

ROOT = Path(__file__).resolve().parents[3]
OPT = fg.train.AdamOptimizer(lambda step: 0.1 / (1.0 + step.astype(jnp.float32)))


def initial_state():
    return OPT.init({"w": jnp.array([1.0, -2.0, 0.5]), "b": jnp.float32(0.0)})


@jax.jit
def train_step(state):
    """One step on a batch that depends only on global_step (a deterministic data stream)."""
    key = jax.random.fold_in(jax.random.key(0), state.global_step)
    x = jax.random.normal(key, (8, 3))
    y = jnp.sin(x[:, 0])

    def loss_fn(p):
        return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    return OPT.minimize(loss_fn, state)[0]


def train(state, steps):
    for _ in range(steps):
        state = train_step(state)
    return state


CHILD = """
import sys, time
import tests.conftest  # the parent's JAX settings
from orbax.checkpoint._src.path import atomicity
from tests.train.checkpoints.test_orbax import initial_state, train_step
import funcgrad as fg

directory, kill_at = sys.argv[1], int(sys.argv[2])
rename = atomicity.async_path.rename

async def rename_or_hang(src, dst):
    if dst.name == str(kill_at):  # every file is written; only the rename is left
        print("WRITTEN", flush=True)
        time.sleep(600)
    return await rename(src, dst)

atomicity.async_path.rename = rename_or_hang
ckpt = fg.train.Checkpointer(directory, max_to_keep=3)
state = initial_state()
for _ in range(kill_at):
    state = train_step(state)
    ckpt.save(state)
    print("SAVED", int(state.global_step), flush=True)
"""


def test_sigkill_while_saving_keeps_the_previous_checkpoint_and_resumes_bit_identically(tmp_path):
    directory = tmp_path / "run"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), "4"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    lines = []
    for line in child.stdout:
        lines.append(line.strip())
        if line.strip() == "WRITTEN":
            child.send_signal(signal.SIGKILL)
            break
    child.wait(timeout=60)
    child.stdout.close()
    assert lines == ["SAVED 1", "SAVED 2", "SAVED 3", "WRITTEN"]
    assert child.returncode == -signal.SIGKILL
    [unfinished] = [p for p in directory.iterdir() if p.name.startswith("4.")]
    assert (unfinished / "commit_success.txt").exists()  # written, but never renamed

    ckpt = fg.train.Checkpointer(directory, max_to_keep=3)
    assert ckpt.all_steps() == [1, 2, 3] and ckpt.latest_step() == 3
    restored = ckpt.restore(initial_state())
    uninterrupted = train(initial_state(), 6)
    chex.assert_trees_all_equal(restored, train(initial_state(), 3))
    resumed = train(restored, 3)
    chex.assert_trees_all_equal(resumed, uninterrupted)  # bit for bit
    assert ckpt.save(train(restored, 1)) == 4  # the unfinished write does not block step 4
    assert ckpt.all_steps() == [2, 3, 4]
    ckpt.close()


def test_restore_loads_no_pickle_and_keeps_the_template_sharding(tmp_path, monkeypatch):
    mesh = jax.make_mesh((8,), ("data",))
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    state = jax.device_put(train(initial_state(), 2), replicated)
    with fg.train.Checkpointer(tmp_path) as ckpt:
        ckpt.save(state)

        def refuse(*args, **kwargs):
            raise AssertionError("a pickle was loaded")

        for name in ("load", "loads", "Unpickler"):
            monkeypatch.setattr(pickle, name, refuse)
        restored = ckpt.restore(jax.device_put(initial_state(), replicated))
    chex.assert_trees_all_equal(restored, state)
    assert all(leaf.sharding == replicated for leaf in jax.tree.leaves(restored))


def test_only_the_last_n_are_kept_and_a_step_is_never_overwritten(tmp_path):
    state = initial_state()
    with fg.train.Checkpointer(tmp_path, max_to_keep=2) as ckpt:
        for _ in range(4):
            state = train_step(state)
            ckpt.save(state)
        assert ckpt.all_steps() == [3, 4]
        with pytest.raises(ValueError, match=r"step 4 is already saved .* not overwritten"):
            ckpt.save(initial_state(), step=4)
        chex.assert_trees_all_equal(ckpt.restore(initial_state()), state)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda d: (d / "notes.txt").write_text("mine"), id="holds_a_file"),
        pytest.param(lambda d: (d / "data").mkdir(), id="holds_a_directory"),
    ],
)
def test_a_directory_holding_something_else_is_an_error_and_untouched(tmp_path, make):
    make(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(
        ValueError, match=r"holds entries that are not checkpoints.*nothing was written"
    ):
        fg.train.Checkpointer(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_file_in_place_of_the_directory_is_an_error(tmp_path):
    path = tmp_path / "ckpt"
    path.write_text("not a directory")
    with pytest.raises(ValueError, match=r"exists and is not a directory"):
        fg.train.Checkpointer(path)
    assert path.read_text() == "not a directory"


def test_an_unreadable_directory_is_an_error(tmp_path, monkeypatch):
    def unreadable(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "listdir", unreadable)
    with pytest.raises(PermissionError, match=r"cannot be read \(Permission denied\)"):
        fg.train.Checkpointer(tmp_path)


def test_a_save_after_a_rollback_wins_and_the_abandoned_steps_go(tmp_path):
    states = {0: initial_state()}
    for step in range(1, 11):
        states[step] = train_step(states[step - 1])
    with fg.train.Checkpointer(tmp_path, max_to_keep=3) as ckpt:
        ckpt.save(states[5])
        ckpt.save(states[10])  # then the run diverges: roll back to 5 and go on
        rolled_back = ckpt.restore(initial_state(), step=5)
        assert ckpt.all_steps() == [5, 10]  # restoring deletes nothing
        branch = {5: rolled_back}
        for step in (6, 7, 8):
            branch[step] = train_step(branch[step - 1])
            assert ckpt.save(branch[step]) == step
            assert ckpt.latest_step() == step
        assert ckpt.all_steps() == [6, 7, 8]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["6", "7", "8"]
    with fg.train.Checkpointer(tmp_path) as resumed:  # a new process resumes the new branch
        chex.assert_trees_all_equal(resumed.restore(initial_state()), branch[8])


def test_a_save_orbax_declines_is_an_error_not_a_silent_drop(tmp_path, monkeypatch):
    with fg.train.Checkpointer(tmp_path) as ckpt:
        monkeypatch.setattr(ckpt._manager, "save", lambda *args, **kwargs: False)
        with pytest.raises(RuntimeError, match=r"declined to write step 0 .*nothing was saved"):
            ckpt.save(initial_state())


@pytest.mark.parametrize(
    ("step", "error", "match"),
    [
        pytest.param(-1, ValueError, r"step must be an integer >= 0, got -1", id="negative"),
        pytest.param(2.7, TypeError, r"step must be an integer >= 0, got 2.7", id="fraction"),
        pytest.param(2.0, TypeError, r"step must be an integer >= 0, got 2.0", id="float"),
        pytest.param("3", TypeError, r"step must be an integer >= 0, got '3'", id="string"),
        pytest.param(True, TypeError, r"step must be an integer >= 0, got True", id="bool"),
        pytest.param(
            jnp.float32(3.0), TypeError, r"step must be an integer >= 0", id="float_array"
        ),
    ],
)
def test_a_bad_step_is_refused_before_anything_is_written(tmp_path, step, error, match):
    with fg.train.Checkpointer(tmp_path) as ckpt:
        with pytest.raises(error, match=match + r".*pass a step number >= 0"):
            ckpt.save(initial_state(), step=step)
        assert list(tmp_path.iterdir()) == []
        assert ckpt.save(initial_state(), step=3) == 3  # the folder still works


@pytest.mark.parametrize(
    "step",
    [
        pytest.param(np.int64(4), id="numpy_int64"),
        pytest.param(jnp.int32(4), id="jax_int32"),
        pytest.param(np.uint8(4), id="numpy_uint8"),
    ],
)
def test_numpy_and_jax_integers_are_steps(tmp_path, step):
    with fg.train.Checkpointer(tmp_path, max_to_keep=np.int64(2)) as ckpt:
        assert ckpt.save(initial_state(), step=step) == 4
        assert type(ckpt.all_steps()[0]) is int
        chex.assert_trees_all_equal(ckpt.restore(initial_state(), step=step), initial_state())


def test_restore_step_must_be_an_integer(tmp_path):
    with fg.train.Checkpointer(tmp_path) as ckpt:
        ckpt.save(initial_state())
        with pytest.raises(TypeError, match=r"step must be an integer, got 0.5; pass one of"):
            ckpt.restore(initial_state(), step=0.5)


def test_save_without_a_step_needs_a_global_step(tmp_path):
    with (
        fg.train.Checkpointer(tmp_path) as ckpt,
        pytest.raises(TypeError, match=r"state \(a dict\) has no global_step; pass step="),
    ):
        ckpt.save({"w": jnp.zeros(2)})
    with fg.train.Checkpointer(tmp_path) as ckpt:
        assert ckpt.save({"w": jnp.ones(2)}, step=1) == 1
        chex.assert_trees_all_equal(ckpt.restore({"w": jnp.zeros(2)}), {"w": jnp.ones(2)})


@pytest.mark.parametrize(
    ("like", "match"),
    [
        pytest.param(
            lambda: OPT.init({"w": jnp.zeros(3, jnp.bfloat16), "b": jnp.float32(0.0)}),
            r"params/w was saved as float32\[3\], like has bfloat16\[3\]; "
            r"opt_state/inner_state/0/mu/w was saved as float32\[3\], like has bfloat16\[3\]",
            id="float32_into_bfloat16",
        ),
        pytest.param(
            lambda: initial_state()._replace(global_step=jnp.float32(0.0)),
            r"global_step was saved as int32\[\], like has float32\[\]",
            id="int_step_into_float",
        ),
        pytest.param(
            lambda: OPT.init({"w": jnp.zeros(4), "b": jnp.float32(0.0)}),
            r"params/w was saved as float32\[3\], like has float32\[4\]",
            id="shape",
        ),
        pytest.param(
            lambda: fg.train.GradientDescentOptimizer(0.1).init({"w": jnp.zeros(3)}),
            r"like lacks the saved leaves \['params/b', .*like has leaves that were not saved: "
            r"\['opt_state/learning_rate'\]",
            id="another_optimizer",
        ),
    ],
)
def test_a_template_unlike_the_saved_leaves_is_refused_never_cast(tmp_path, like, match):
    with fg.train.Checkpointer(tmp_path) as ckpt:
        ckpt.save(train(initial_state(), 1))
        with pytest.raises(
            ValueError,
            match=r"step 1 in .* does not match like: " + match + r".*pass the template the run "
            r"saved \(same optimizer, params and dtypes\), or another step of \[1\]",
        ):
            ckpt.restore(like())


# When a damaged file fails a read, orbax's other reads still in flight end on its closed
# asyncio event loop, which Python reports as "unraisable"; the clear error raised at the
# call site is what these tests check.
def _settle():
    """Let the reads still in flight finish inside the test that started them."""
    time.sleep(0.2)
    gc.collect()


def _flip_bit(path, bit):
    data = bytearray(path.read_bytes())
    data[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(data))


def _random_bits_state():
    """A state whose params are random bits, which the compressor stores as they are."""
    bits = jax.random.bits(jax.random.key(1), (256,), jnp.uint32)
    w = jax.lax.bitcast_convert_type(bits, jnp.float32)
    return OPT.init({"w": w, "b": jnp.float32(0.5)})


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_flipped_bit_in_array_data_is_an_error_naming_the_leaf(tmp_path):
    state = _random_bits_state()
    with fg.train.Checkpointer(tmp_path / "run") as ckpt:
        ckpt.save(state)
    raw = np.asarray(state.params["w"]).tobytes()
    [data_file] = [p for p in (tmp_path / "run").rglob("d/*") if raw in p.read_bytes()]
    start = data_file.read_bytes().index(raw)
    rng = np.random.default_rng(0)
    for bit in rng.choice(8 * len(raw), size=12, replace=False):
        shutil.rmtree(tmp_path / "copy", ignore_errors=True)
        shutil.copytree(tmp_path / "run", tmp_path / "copy")
        _flip_bit(tmp_path / "copy" / data_file.relative_to(tmp_path / "run"), 8 * start + bit)
        with (
            fg.train.Checkpointer(tmp_path / "copy") as ckpt,
            pytest.raises(
                ValueError,
                match=r"step 0 in .* is damaged: the data of \['params/w'\] does not match "
                r"the checksum saved with it; restore another step of \[0\]",
            ),
        ):
            ckpt.restore(_random_bits_state())
    _settle()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_flipped_bit_in_any_file_of_a_step_is_an_error_or_changes_nothing(tmp_path):
    w = jax.random.normal(jax.random.key(2), (256,))
    state, _ = OPT.minimize(
        lambda p: jnp.sum((p["w"] - 1) ** 2) + p["b"], OPT.init({"w": w, "b": jnp.float32(0.5)})
    )
    with fg.train.Checkpointer(tmp_path / "run") as ckpt:
        ckpt.save(state)
    files = sorted(p.relative_to(tmp_path / "run") for p in (tmp_path / "run").rglob("*"))
    files = [f for f in files if (tmp_path / "run" / f).is_file()]
    assert sum(f.parent.name == "d" for f in files) >= 2  # the data files are among them
    rng = np.random.default_rng(0)
    outcomes = {}
    for f in files:
        size = (tmp_path / "run" / f).stat().st_size
        for bit in rng.choice(8 * size, size=3, replace=False):
            shutil.rmtree(tmp_path / "copy", ignore_errors=True)
            shutil.copytree(tmp_path / "run", tmp_path / "copy")
            _flip_bit(tmp_path / "copy" / f, bit)
            try:
                with fg.train.Checkpointer(tmp_path / "copy") as ckpt:
                    restored = ckpt.restore(_random_bits_state())
            except ValueError as error:
                assert re.search(
                    r"step 1 in .* (is damaged|cannot be read|does not match|has no)", str(error)
                )
                outcomes[f] = outcomes.get(f, 0) + 1
                if "cannot be read" in str(error):
                    _settle()
            else:  # the bit was in a byte no read depends on
                chex.assert_trees_all_equal(restored, state)
    assert any(f.parent.name == "d" for f in outcomes)  # damage was found in data files


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_unreadable_files_are_a_clear_error(tmp_path):
    with fg.train.Checkpointer(tmp_path) as ckpt:
        ckpt.save(initial_state())
        for data in (tmp_path / "0").rglob("d/*"):
            data.write_bytes(b"damaged")
        with pytest.raises(ValueError, match=r"step 0 .* cannot be read .*its files are damaged"):
            ckpt.restore(initial_state())
        _settle()
        with pytest.raises(
            FileNotFoundError, match=r"no complete checkpoint 7 .*complete steps: \[0\]"
        ):
            ckpt.restore(initial_state(), step=7)


def test_restore_from_an_empty_directory_is_an_error(tmp_path):
    with (
        fg.train.Checkpointer(tmp_path) as ckpt,
        pytest.raises(FileNotFoundError, match="no complete"),
    ):
        ckpt.restore(initial_state())


@pytest.mark.parametrize(
    ("n", "error"),
    [
        pytest.param(0, ValueError, id="zero"),
        pytest.param(2.0, TypeError, id="float"),
        pytest.param(None, TypeError, id="none"),
    ],
)
def test_max_to_keep_must_be_a_positive_integer(tmp_path, n, error):
    with pytest.raises(error, match=r"max_to_keep must be an integer >= 1"):
        fg.train.Checkpointer(tmp_path / "new", max_to_keep=n)
    assert not (tmp_path / "new").exists()


def test_the_numbers_saved_are_the_numbers_restored(tmp_path):
    state = train(initial_state(), 1)
    with fg.train.Checkpointer(tmp_path) as ckpt:
        ckpt.save(state, step=10)
        leaves = jax.tree.leaves(ckpt.restore(initial_state(), step=10))
    for got, want in zip(leaves, jax.tree.leaves(state), strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


def test_every_dtype_and_a_restore_onto_another_sharding_pass_the_checksums(tmp_path):
    mesh = jax.make_mesh((8,), ("data",))
    split = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    tree = {
        "bfloat16": jnp.arange(8, dtype=jnp.bfloat16),
        "float16": jnp.array([1.5, -2.0], jnp.float16),
        "int8": jnp.arange(-3, 5, dtype=jnp.int8),
        "uint32": jnp.array([0, 2**32 - 1], jnp.uint32),
        "bool": jnp.array([True, False]),
        "complex64": jnp.array([1 + 2j], jnp.complex64),
        "specials": jnp.array([jnp.nan, -0.0, jnp.inf]),
        "key": jax.random.key(3),
        "split_over_8": jax.device_put(jnp.arange(16.0), split),
    }
    like = {**tree, "key": jax.random.key(0), "split_over_8": jnp.zeros(16)}
    with fg.train.Checkpointer(tmp_path) as ckpt:
        ckpt.save(tree, step=1)
        restored = ckpt.restore(like)
    assert restored["split_over_8"].sharding == like["split_over_8"].sharding
    for name, value in tree.items():
        got = restored[name]
        if name == "key":
            got, value = jax.random.key_data(got), jax.random.key_data(value)
        np.testing.assert_array_equal(got, value)
        assert got.dtype == value.dtype


# --- the checksum itself ------------------------------------------------------------------


def test_checksums_compile_nothing(tmp_path, caplog):
    """The CRCs are computed on the host: no XLA compile for a state of a new shape."""
    state = OPT.init({"w": jnp.ones((7, 3)), "b": jnp.zeros(5)})
    jax.block_until_ready(state)
    with (
        caplog.at_level("WARNING", logger="jax"),
        jax.log_compiles(True),
        fg.train.Checkpointer(tmp_path) as ckpt,
    ):
        ckpt.save(state)
        chex.assert_trees_all_equal(ckpt.restore(state), state)
    assert not [r for r in caplog.records if "ompil" in r.getMessage()]


def test_a_record_of_both_kinds_checks_each_leaf_by_its_own():
    """A step of an earlier version may hold sums for some leaves, CRCs for others."""
    from funcgrad.train.checkpoints import _leaf_checksums as sums

    leaves = [jnp.arange(6.0), jnp.ones((2, 3), jnp.int32), jnp.arange(4.0)]
    crc = sums.record("save", ["a", "b", "c"], leaves)
    older = [np.asarray(s).tolist() for s in sums._sums(leaves)]
    assert sums.damaged([crc[0], older[1], older[2]], leaves) == []
    assert sums.damaged([crc[0] ^ 1, older[1], [older[2][0] ^ 1, older[2][1]]], leaves) == [0, 2]


@pytest.mark.parametrize(
    ("shape", "mesh", "spec"),
    [
        pytest.param((16, 3), (8,), ("a",), id="rows"),
        pytest.param((3, 16), (8,), (None, "a"), id="columns"),
        pytest.param((8, 6), (4, 2), ("a", "b"), id="blocks"),
        pytest.param((4, 6, 8), (2, 4), (None, "a", "b"), id="inner_blocks"),
        pytest.param((6, 4), (2, 4), ("a",), id="replicated_on_b"),
        pytest.param((5,), (8,), (), id="replicated"),
    ],
)
def test_the_shares_of_a_sharded_leafs_boxes_make_its_crc(shape, mesh, spec):
    """Each process checks the boxes it holds: their shares, put together, are the CRC of
    the whole leaf, whatever the layout (here the 8 devices stand for the processes)."""
    from funcgrad.train.checkpoints import _crc32c
    from funcgrad.train.checkpoints import _leaf_checksums as sums
    from funcgrad.train.checkpoints import _processes

    names = ("a", "b")[: len(mesh)]
    sharding = jax.sharding.NamedSharding(
        jax.make_mesh(mesh, names), jax.sharding.PartitionSpec(*spec)
    )
    value = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    leaf = jax.device_put(value, sharding)
    register = 0
    for box, data in _processes.local(leaf):
        register ^= sums._share(shape, box, np.asarray(data))
    assert _crc32c.finish(register, value.nbytes) == _crc32c.crc32c(value)


def test_the_shares_of_boxes_with_rows_too_long_to_pad(monkeypatch):
    from funcgrad.train.checkpoints import _crc32c
    from funcgrad.train.checkpoints import _leaf_checksums as sums

    monkeypatch.setattr(sums, "_CHUNK", 16)  # a row of 24 bytes: each run fed on its own
    value = np.arange(36, dtype=np.float32).reshape(6, 6)
    register = 0
    for box in (((0, 6), (0, 2)), ((0, 6), (2, 6))):
        register ^= sums._share(
            value.shape, box, value[box[0][0] : box[0][1], box[1][0] : box[1][1]]
        )
    assert _crc32c.finish(register, value.nbytes) == _crc32c.crc32c(value)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.int32, jnp.uint8])
def test_the_older_checksum_sees_where_each_element_is(dtype):
    """The same elements in another order are other data: a checksum that summed the
    elements' mixes without their positions would restore a permuted array silently
    (the record of steps saved before the CRC-32C one, still verified)."""
    from funcgrad.train.checkpoints._leaf_checksums import _sums

    a = jnp.arange(16).astype(dtype)
    swapped = a.at[jnp.array([3, 4])].set(a[jnp.array([4, 3])])
    square = a.reshape(4, 4)
    sums = [
        tuple(np.asarray(s).tolist())
        for s in _sums([a, a[::-1], swapped, square, square.T.reshape(4, 4)])
    ]
    assert sums[0] == tuple(np.asarray(_sums([a + 0])[0]).tolist())  # stable
    assert len({sums[0], sums[1], sums[2]}) == 3
    assert sums[3] == sums[0]  # one shape or another, the same bits in the same order
    assert sums[4] != sums[3]  # the transpose moves elements


# --- a resumed run compiles its step once -------------------------------------------------


def _save_and_restore_orbax(directory, state, template):
    with fg.train.Checkpointer(directory) as ckpt:
        ckpt.save(state)
        return ckpt.restore(template)


def _save_and_restore_tf(directory, state, template):
    prefix = fg.train.save_tf_checkpoint(directory / "model.ckpt", state, OPT)
    return fg.train.restore_tf_checkpoint(prefix, template, OPT)


@pytest.mark.parametrize("save_and_restore", [_save_and_restore_orbax, _save_and_restore_tf])
@pytest.mark.parametrize("placed", [False, True], ids=["fresh", "committed"])
def test_a_resumed_run_compiles_its_step_once(tmp_path, save_and_restore, placed):
    """A restored state is committed as the template is (a fresh init's is not; one put
    on a device is), so the first step on it and the next on its outputs reuse the step
    the run compiled before the save: init, a step, a save, a restore, 3 steps, 1 compile."""
    step = jax.jit(lambda state: train_step.__wrapped__(state))  # its own compile cache
    template = jax.device_put(initial_state(), jax.devices()[0]) if placed else initial_state()
    state = step(template)
    restored = save_and_restore(tmp_path, state, template)
    for leaf, like in zip(jax.tree.leaves(restored), jax.tree.leaves(template), strict=True):
        assert leaf.committed == like.committed
    chex.assert_trees_all_equal(restored, state)
    for _ in range(3):
        restored = step(restored)
    assert step._cache_size() == 1


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_step_saved_with_the_older_checksums_restores_and_is_verified(tmp_path):
    """tests/data/checkpointer_sums: a step saved before the CRC-32C record (a pair of
    sums per leaf), by the code of that time."""
    bits = jax.random.bits(jax.random.key(1), (256,), jnp.uint32)
    params = {"w": jax.lax.bitcast_convert_type(bits, jnp.float32), "h": jnp.arange(4.0)}
    params["h"] = params["h"].astype(jnp.bfloat16)
    opt = fg.train.AdamOptimizer(0.1)
    saved = opt.init(params)
    shutil.copytree(ROOT / "tests" / "data" / "checkpointer_sums", tmp_path / "run")
    with fg.train.Checkpointer(tmp_path / "run") as ckpt:
        chex.assert_trees_all_equal(
            ckpt.restore(opt.init(jax.tree.map(jnp.zeros_like, params))), saved
        )
    raw = np.asarray(params["w"]).tobytes()
    files = [p for p in (tmp_path / "run").rglob("d/*") if raw in p.read_bytes()]
    errors = []
    for data_file in files:  # w's bytes are in more than one of orbax's files
        shutil.rmtree(tmp_path / "copy", ignore_errors=True)
        shutil.copytree(tmp_path / "run", tmp_path / "copy")
        copy = tmp_path / "copy" / data_file.relative_to(tmp_path / "run")
        _flip_bit(copy, 8 * copy.read_bytes().index(raw) + 77)
        try:
            with fg.train.Checkpointer(tmp_path / "copy") as ckpt:
                chex.assert_trees_all_equal(ckpt.restore(saved), saved)  # a file not read
        except ValueError as error:
            errors.append(str(error))
    assert any("the data of ['params/w'] does not match the checksum" in e for e in errors)
    _settle()
