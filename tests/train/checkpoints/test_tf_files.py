"""The files of a TF checkpoint: hostile files refused with bounded memory, and saves that
can be killed at any instant (each kill in a subprocess of its own).

Every restore here goes through ``fg.train.restore_tf_checkpoint``; each killed save
through ``fg.train.save_tf_checkpoint``.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from funcgrad.train.checkpoints import _tf_bundle
from funcgrad.train.checkpoints import _tf_files
from funcgrad.train.checkpoints import _tf_slices as ts

pytestmark = pytest.mark.skipif(os.name != "posix", reason="FIFOs, /dev/zero and SIGKILL")

ROOT = Path(__file__).resolve().parents[3]
CALLER = re.escape("fg.train.restore_tf_checkpoint(path, state, optimizer): ")
OPT = fg.train.GradientDescentOptimizer(0.1)
DATA = ".data-00000-of-00001"


def _state(value: float, size: int = 1000) -> fg.train.TrainState:
    return OPT.init({"W": jnp.full(size, value, jnp.float32)})


def _restored(prefix: str, size: int = 1000) -> np.ndarray:
    return np.asarray(fg.train.restore_tf_checkpoint(prefix, _state(0.0, size), OPT).params["W"])


def _python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``code`` run in a fresh Python, this tree first on its path."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# Hostile files: each restore in one subprocess, which records the type and message of
# the error, the seconds to refuse, and how far the peak RSS rose (getrusage's
# ru_maxrss, KiB on Linux) above the peak of a normal restore done first.  A data-size
# limit of 1 GiB more than it uses makes a runaway read fail fast instead of taking the
# machine's memory.
_HOSTILE = """
import json, resource, sys, time
import jax.numpy as jnp
import funcgrad as fg

opt = fg.train.GradientDescentOptimizer(0.1)
template = opt.init({"W": jnp.zeros(1000, jnp.float32)})
fg.train.restore_tf_checkpoint(sys.argv[1], template, opt)
fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
data = int(fields["VmData"].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_DATA, (data + (1 << 30), resource.RLIM_INFINITY))
results = {}
for case, path in json.loads(sys.argv[2]).items():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    try:
        fg.train.restore_tf_checkpoint(path, template, opt)
        error = None
    except Exception as e:
        error = e
    results[case] = {
        "value_error": isinstance(error, ValueError),
        "message": f"{type(error).__name__}: {error}",
        "seconds": time.perf_counter() - start,
        "peak_growth_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before,
    }
print(json.dumps(results))
"""

_NOT_A_FILE = "pass the prefix of a checkpoint, e.g. 'train/model.ckpt-1000'"
_STATE_FIX = "rename it, or pass the checkpoint's prefix instead of its directory"
_DATA_FIX = "copy the checkpoint's data file there"


def _index_dev_zero(prefix: str) -> str:
    os.symlink("/dev/zero", prefix + ".index")
    return prefix


def _index_sparse(prefix: str) -> str:
    Path(prefix + ".index").touch()
    os.truncate(prefix + ".index", 1_500_000_000)  # a hole: no disk used
    return prefix


def _index_sparse_at_the_limit(prefix: str) -> str:
    Path(prefix + ".index").touch()
    os.truncate(prefix + ".index", _tf_bundle.INDEX_LIMIT)
    return prefix


def _index_fifo(prefix: str) -> str:
    os.mkfifo(prefix + ".index")
    return prefix


def _index_directory(prefix: str) -> str:
    os.mkdir(prefix + ".index")
    return prefix


def _data_dev_zero(prefix: str) -> str:
    os.symlink("/dev/zero", prefix + DATA)
    return prefix


def _data_fifo(prefix: str) -> str:
    os.mkfifo(prefix + DATA)
    return prefix


def _data_directory(prefix: str) -> str:
    os.mkdir(prefix + DATA)
    return prefix


def _state_dev_zero(prefix: str) -> str:
    os.symlink("/dev/zero", Path(prefix).parent / "checkpoint")
    return str(Path(prefix).parent)


def _state_sparse(prefix: str) -> str:
    Path(prefix).parent.joinpath("checkpoint").touch()
    os.truncate(Path(prefix).parent / "checkpoint", 1_500_000_000)
    return str(Path(prefix).parent)


def _state_directory(prefix: str) -> str:
    os.mkdir(Path(prefix).parent / "checkpoint")
    return str(Path(prefix).parent)


# (make the hostile file, what the error must say: what was found and the next step)
HOSTILE = {
    "index_symlink_to_dev_zero": (
        _index_dev_zero,
        rf"is a character device, not a file; {_NOT_A_FILE}",
    ),
    "index_sparse_1_5_gb": (
        _index_sparse,
        rf"1500000000 bytes, more than the 268435456 \(256 MiB.*; it is not a checkpoint's "
        rf"index — {_NOT_A_FILE}",
    ),
    "index_sparse_at_the_limit": (
        _index_sparse_at_the_limit,
        r"not the index of a TensorFlow V2 checkpoint \(no table footer\); pass the prefix",
    ),
    "index_fifo": (_index_fifo, rf"is a FIFO, not a file; {_NOT_A_FILE}"),
    "index_directory": (_index_directory, rf"\.index is a directory, not a file; {_NOT_A_FILE}"),
    "data_symlink_to_dev_zero": (
        _data_dev_zero,
        rf"is a character device, not a file; {_DATA_FIX}",
    ),
    "data_fifo": (_data_fifo, rf"is a FIFO, not a file; {_DATA_FIX}"),
    "data_directory": (_data_directory, rf"is a directory, not a file; {_DATA_FIX}"),
    "checkpoint_file_symlink_to_dev_zero": (_state_dev_zero, rf"character device.*{_STATE_FIX}"),
    "checkpoint_file_sparse_1_5_gb": (_state_sparse, rf"1500000000 bytes, more .*{_STATE_FIX}"),
    "checkpoint_file_directory": (_state_directory, rf"checkpoint is a directory.*{_STATE_FIX}"),
}


@pytest.fixture(scope="module")
def hostile_results(tmp_path_factory) -> dict:
    """Each hostile case restored in one subprocess: its error, time and memory."""
    root = tmp_path_factory.mktemp("hostile")
    good = fg.train.save_tf_checkpoint(str(root / "good" / "model.ckpt"), _state(1.0), OPT)
    paths = {}
    for case, (make, _) in HOSTILE.items():
        shutil.copytree(root / "good", root / case)
        prefix = str(root / case / "model.ckpt")
        if case.startswith("index"):
            os.remove(prefix + ".index")
        elif case.startswith("data"):
            os.remove(prefix + DATA)
        else:
            os.remove(root / case / "checkpoint")
        paths[case] = make(prefix)
    done = _python(_HOSTILE, good, json.dumps(paths))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_files_are_refused_at_once_with_bounded_memory(hostile_results, case) -> None:
    result = hostile_results[case]
    measured = f"refused in {result['seconds']:.4f} s, peak RSS +{result['peak_growth_kib']} KiB"
    assert result["value_error"], f"{result['message']} ({measured})"
    assert re.match(CALLER, result["message"].split(": ", 1)[1]), result["message"]
    assert re.search(HOSTILE[case][1], result["message"]), f"{result['message']} ({measured})"
    assert result["peak_growth_kib"] < 64 * 1024, measured


# Killed saves.  The prefix holds W = 1.0; a subprocess saves W = 2.0 to it and dies
# (os._exit) right after its n-th rename or link, or SIGKILLs itself at its first fsync.
_CRASH = """
import os, signal, sys
import jax.numpy as jnp
import funcgrad as fg

prefix, after = sys.argv[1], int(sys.argv[2])
opt = fg.train.GradientDescentOptimizer(0.1)
state = opt.init({"W": jnp.full(1000, 2.0, jnp.float32)})
calls = [0]

def dying(real):
    def call(*args, **kwargs):
        real(*args, **kwargs)
        calls[0] += 1
        if calls[0] == after:
            os._exit(3)
    return call

if after:
    os.replace, os.link = dying(os.replace), dying(os.link)
else:
    os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
fg.train.save_tf_checkpoint(prefix, state, opt)
"""

# The steps of an overwrite (the design note of _tf_files): after each, the values a
# restore gives, and whether prefix.index is there.
STEPS = [
    pytest.param(1, 1.0, True, id="after_linking_the_old_data"),
    pytest.param(2, 1.0, False, id="after_moving_the_old_index_aside"),
    pytest.param(3, 1.0, False, id="between_the_two_renames"),
    pytest.param(4, 2.0, True, id="after_both_renames"),
]


def _files(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def _save_again_leaves_only_the_checkpoint(prefix: str, others: tuple[str, ...] = ()) -> None:
    fg.train.save_tf_checkpoint(prefix, _state(3.0), OPT)
    names = ["checkpoint", "model.ckpt" + DATA, "model.ckpt.index"]
    assert [n for n in _files(Path(prefix).parent) if n not in others] == names
    np.testing.assert_array_equal(_restored(prefix), 3.0)


@pytest.mark.parametrize(("after", "value", "has_index"), STEPS)
def test_a_save_killed_between_its_renames_leaves_old_or_new(tmp_path, after, value, has_index):
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt"), _state(1.0), OPT)
    done = _python(_CRASH, prefix, str(after))
    assert done.returncode == 3, done.stderr[-3000:]
    assert os.path.exists(prefix + ".index") == has_index
    np.testing.assert_array_equal(_restored(prefix), value)
    np.testing.assert_array_equal(_restored(str(tmp_path)), value)  # by its directory
    _save_again_leaves_only_the_checkpoint(prefix)


def test_a_second_killed_save_keeps_what_the_first_kept(tmp_path) -> None:
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt"), _state(1.0), OPT)
    for after in ("3", "1"):  # between the renames; then, with no index there, the first
        done = _python(_CRASH, prefix, after)
        assert done.returncode == 3, done.stderr[-3000:]
        assert not os.path.exists(prefix + ".index")
        np.testing.assert_array_equal(_restored(prefix), 1.0)
    _save_again_leaves_only_the_checkpoint(prefix)


def test_a_first_save_killed_between_its_renames_is_no_checkpoint(tmp_path) -> None:
    prefix = str(tmp_path / "model.ckpt")
    done = _python(_CRASH, prefix, "1")
    assert done.returncode == 3, done.stderr[-3000:]
    assert [re.sub(r"[0-9a-f]{32}-\d+-[0-9a-f]{8}$", "*", n) for n in _files(tmp_path)] == [
        "model.ckpt" + DATA,
        "model.ckpt.index.tempstate*",
        "model.ckpt.lock",  # unlocked: the next save takes and removes it
    ]
    with pytest.raises(FileNotFoundError, match=r"model.ckpt.index does not exist\); pass"):
        _restored(prefix)


def test_a_save_killed_while_writing_leaves_the_old_and_its_temporary_is_removed(tmp_path):
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt"), _state(1.0), OPT)
    foreign = [  # not this module's temporary files of this prefix: kept
        "model.ckpt.data-00000-of-00001.tempstate1234567890",  # TensorFlow's (decimal)
        "other.ckpt.index.tempstate" + "0" * 32,  # another prefix's
        "foreign-model.ckpt.index.tempstate" + "0" * 32,
    ]
    ours = [  # left by saves killed while copying the old data, or writing the index
        "model.ckpt.data-00000-of-00001.previous.tempstate" + "a" * 32,
        "model.ckpt.index.tempstate" + "b" * 32,
    ]
    for name in foreign + ours:
        (tmp_path / name).write_bytes(b"")
    done = _python(_CRASH, prefix, "0")
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    left = [n for n in _files(tmp_path) if n not in foreign + ours and "tempstate" in n]
    assert len(left) == 1 and left[0].startswith("model.ckpt.data-00000-of-00001.tempstate")
    assert os.path.getsize(tmp_path / left[0]) == os.path.getsize(prefix + DATA)
    np.testing.assert_array_equal(_restored(prefix), 1.0)
    _save_again_leaves_only_the_checkpoint(prefix, tuple(foreign))
    assert all((tmp_path / name).exists() for name in foreign)


# Orphans of other prefixes: a save removes the temporary files of any prefix in its
# directory whose writer is dead (its pid gone from this host), and keeps a live writer's.
_STUCK = """
import os, sys, time
import jax.numpy as jnp
import funcgrad as fg

def stuck(fd):  # the data file is written under its temporary name; flushing it waits
    print("writing", flush=True)
    time.sleep(600)

os.fsync = stuck
opt = fg.train.GradientDescentOptimizer(0.1)
fg.train.save_tf_checkpoint(sys.argv[1], opt.init({"W": jnp.full(1000, 2.0, jnp.float32)}), opt)
"""


def _stuck_writer(prefix: str) -> subprocess.Popen:
    """A save of ``prefix`` in a subprocess, stopped with its data file written."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    return subprocess.Popen(
        [sys.executable, "-c", _STUCK, prefix], env=env, stdout=subprocess.PIPE, text=True
    )


def _temporary(directory: Path) -> list[str]:
    return [n for n in _files(directory) if "tempstate" in n]


def test_a_save_removes_what_killed_saves_of_other_prefixes_left(tmp_path) -> None:
    live, killed = (_stuck_writer(str(tmp_path / f"model.ckpt-{i}")) for i in (1, 2))
    try:
        for child in (live, killed):
            assert child.stdout is not None and child.stdout.readline() == "writing\n"
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=60)
        assert [n.split(".tempstate")[0] for n in _temporary(tmp_path)] == [
            "model.ckpt-1" + DATA,
            "model.ckpt-2" + DATA,
        ]
        (tmp_path / "notes.lock").write_bytes(b"not a checkpoint's")
        fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt-3"), _state(3.0), OPT)
        left = _temporary(tmp_path)  # the live writer's only
        assert len(left) == 1 and re.fullmatch(
            rf"model.ckpt-1{DATA}\.tempstate\w{{32}}-{live.pid}-\w{{8}}", left[0]
        )
        locks = [n for n in _files(tmp_path) if n.endswith(".lock")]
        assert locks == ["model.ckpt-1.lock", "notes.lock"]  # held, and not a save's
    finally:
        for child in (live, killed):
            child.kill()
            child.wait(timeout=60)
            assert child.stdout is not None
            child.stdout.close()
    fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt-4"), _state(4.0), OPT)
    (tmp_path / "notes.lock").unlink()
    assert _files(tmp_path) == [
        "checkpoint",
        "model.ckpt-3" + DATA,
        "model.ckpt-3.index",
        "model.ckpt-4" + DATA,
        "model.ckpt-4.index",
    ]
    np.testing.assert_array_equal(_restored(str(tmp_path / "model.ckpt-3")), 3.0)


def test_only_provably_dead_writers_files_of_other_prefixes_are_removed(tmp_path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait(timeout=60)
    here = _tf_files._HOST
    elsewhere = f"{int(here, 16) ^ 1:08x}"
    dead = [  # this host's, of a pid no process has now: of a data file, a checkpoint file
        f"other.ckpt{DATA}.tempstate{'2' * 32}-{gone.pid}-{here}",
        f"checkpoint.tempstate{'3' * 32}-{gone.pid}-{here}",
    ]
    kept = [
        f"other.ckpt.index.tempstate{'0' * 32}-{gone.pid}-{elsewhere}",  # another host's
        f"other.ckpt.index.tempstate{'0' * 32}",  # named before pids were: no owner known
        f"other.ckpt.index.tempstate{'1' * 32}-{os.getpid()}-{here}",  # this process's
        f"other.ckpt.index.tempstate{'4' * 32}-{os.getppid()}-{here}",  # a live one's
        f"other.ckpt.index.tempstate{'5' * 32}-{'9' * 30}-{here}",  # no pid
    ]
    for name in dead + kept:
        (tmp_path / name).write_bytes(b"")
    fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt"), _state(1.0), OPT)
    assert _temporary(tmp_path) == sorted(kept)


# SIGKILL at arbitrary instants: a subprocess saves W = 1, 2, 3, ... (4 MB each) to one
# prefix in a loop, and is killed after a fixed delay.
_LOOP = """
import sys
import jax.numpy as jnp
import funcgrad as fg

opt = fg.train.GradientDescentOptimizer(0.1)
print("ready", flush=True)
for i in range(1, 10**6):
    fg.train.save_tf_checkpoint(sys.argv[1], opt.init({"W": jnp.full(10**6, i, jnp.float32)}), opt)
"""


@pytest.mark.parametrize("delay", [0.05, 0.3, 0.8])
def test_sigkill_at_any_instant_leaves_a_readable_checkpoint(tmp_path, delay) -> None:
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt"), _state(0.0, 10**6), OPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    child = subprocess.Popen(
        [sys.executable, "-c", _LOOP, prefix], env=env, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    child.stdout.close()
    w = _restored(prefix, 10**6)
    assert (w == w[0]).all() and w[0] == int(w[0]) >= 0, w[:3]
    _save_again_leaves_only_the_checkpoint(prefix)


def test_the_previous_data_is_copied_without_hard_links(tmp_path, monkeypatch) -> None:
    """A file system without hard links: the old data file is copied, and the previous
    pair read while the save is interrupted (here by an exception after the old index is
    moved aside)."""
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt"), _state(1.0), OPT)
    real_replace, calls = os.replace, []

    def no_link(*args):
        raise PermissionError("no hard links here")

    def interrupted(*args):
        real_replace(*args)
        calls.append(args)
        if len(calls) == 3:  # the copy's own rename, the old index's, then the new data's
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "link", no_link)
    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fg.train.save_tf_checkpoint(prefix, _state(2.0), OPT)
    monkeypatch.undo()
    assert not os.path.exists(prefix + ".index")
    assert os.stat(prefix + DATA + _tf_files.PREVIOUS).st_nlink == 1  # a copy, not a link
    np.testing.assert_array_equal(_restored(prefix), 1.0)
    _save_again_leaves_only_the_checkpoint(prefix)


def test_a_directory_where_a_file_goes_is_refused_before_writing(tmp_path) -> None:
    prefix = str(tmp_path / "model.ckpt")
    os.mkdir(prefix + ".index")
    save = re.escape("fg.train.save_tf_checkpoint(path, state, optimizer): ")
    with pytest.raises(
        ValueError, match=rf"^{save}.*model.ckpt.index is a directory where .*remove it"
    ):
        fg.train.save_tf_checkpoint(prefix, _state(1.0), OPT)
    assert _files(tmp_path) == ["model.ckpt.index"]
    os.rmdir(prefix + ".index")
    os.mkdir(tmp_path / "checkpoint")
    with pytest.raises(ValueError, match=rf"^{save}.*checkpoint is a directory where TensorFlow's"):
        fg.train.save_tf_checkpoint(prefix, _state(1.0), OPT)


def test_a_directory_named_like_a_dead_writers_temporary_file_is_left_alone(tmp_path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait(timeout=60)
    name = f"other.ckpt.index.tempstate{'6' * 32}-{gone.pid}-{_tf_files._HOST}"
    (tmp_path / name).mkdir()
    fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt"), _state(1.0), OPT)
    assert (tmp_path / name).is_dir()
    np.testing.assert_array_equal(_restored(str(tmp_path / "model.ckpt")), 1.0)


# Two programs (not one job) saving one prefix at once: each saves its own values, 400 kB,
# as fast as it can, from the same instant.
_RIVAL = """
import os, sys, time
import jax.numpy as jnp
import funcgrad as fg

opt = fg.train.GradientDescentOptimizer(0.1)
prefix, first, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
states = [opt.init({"W": jnp.full(10**5, first + i, jnp.float32)}) for i in range(40)]
while not os.path.exists(go):
    time.sleep(0.001)
for state in states:
    fg.train.save_tf_checkpoint(prefix, state, opt)
"""


def test_two_programs_saving_one_prefix_at_once_lose_nothing(tmp_path) -> None:
    prefix, go = str(tmp_path / "model.ckpt"), tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    rivals = [
        subprocess.Popen(
            [sys.executable, "-c", _RIVAL, prefix, str(first), str(go)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for first in (1000, 2000)
    ]
    time.sleep(2)
    go.write_bytes(b"")
    errors = [rival.communicate(timeout=300)[1] for rival in rivals]
    assert [rival.returncode for rival in rivals] == [0, 0], [e[-2000:] for e in errors]
    w = _restored(prefix, 10**5)
    assert (w == w[0]).all() and w[0] in (1039, 2039), w[:3]  # one program's last, whole
    assert _files(tmp_path) == ["checkpoint", "go", "model.ckpt" + DATA, "model.ckpt.index"]


def _sharded(prefix: str, value: float, shards: int) -> tuple[str, dict[str, str]]:
    """The temporary index and data files of a checkpoint of W = value in ``shards`` data
    files, each a slice of W, as a job of that many processes writes them (before the
    renames)."""
    parts = ts.partition((1000,), shards)
    temporaries, entries = {}, [(b"W", ts.full_entry(1, (1000,), parts))]
    for k, box in enumerate(parts):
        path = _tf_bundle.data_path(prefix, k, shards)
        pieces = [(ts.box_key("W", box), np.full(box[0][1] - box[0][0], value, np.float32))]
        if k == 0:
            pieces.append((b"global_step", np.int64(7)))
        temporaries[path], written = _tf_bundle.write_data(path, pieces, k)
        entries += written
    table = _tf_bundle.index_table(shards, entries)
    return _tf_files.temporary(prefix + ".index", [table]), temporaries


@pytest.mark.parametrize(("old", "new"), [(2, 2), (1, 2), (2, 3), (3, 1)])
def test_a_save_of_several_data_files_stopped_after_each_step_leaves_old_or_new(
    tmp_path, monkeypatch, old, new
) -> None:
    """The renames of a job's save (the design note of _tf_files), several data files of
    any number: stopped after each file operation, a restore gives the old values until
    the new index is in place, the new ones after; the next save leaves only its files."""
    prefix = str(tmp_path / "model.ckpt")
    steps = old + 1 + new + 1  # link each old data file, move the index, rename each new
    for stop in range(1, steps + 1):
        shutil.rmtree(tmp_path)
        tmp_path.mkdir()
        _tf_files.replace(prefix, *_sharded(prefix, 1.0, old))
        index, temporaries = _sharded(prefix, 2.0, new)
        calls = []

        def stopping(real, calls=calls, stop=stop):
            def call(*args):
                real(*args)
                calls.append(args)
                if len(calls) == stop:
                    raise KeyboardInterrupt

            return call

        with monkeypatch.context() as patched:
            patched.setattr(os, "link", stopping(os.link))
            patched.setattr(os, "replace", stopping(os.replace))
            with pytest.raises(KeyboardInterrupt):
                _tf_files.replace(prefix, index, temporaries)
        np.testing.assert_array_equal(_restored(prefix), 2.0 if stop == steps else 1.0)
        _save_again_leaves_only_the_checkpoint(prefix)
