"""Save and restore a ``TrainState`` with orbax-checkpoint.

orbax-checkpoint (the ``checkpoint`` extra) writes each step into a temporary
directory and renames it into place only when every array and its metadata are on
disk, so a run killed while saving leaves the previous checkpoints as they were and
the unfinished one is never listed.  Arrays are stored with TensorStore and metadata
as JSON: restoring never loads a pickle.  :class:`Checkpointer` adds what a training
loop needs on top: the step taken from ``global_step``, the last ``N`` kept, a save
after a rollback that wins over the abandoned steps, and clear errors — before
anything is written — for a bad step or a directory that holds something else.

Verification: orbax checksums none of the array data (TensorStore's zarr3 format puts
a ``crc32c`` on a shard's index only), so a flipped bit restores as a wrong number.
Each save therefore records, for every leaf, its path, dtype, shape and the CRC-32C of
its bytes (C order, little-endian; a PRNG key's data) in the step's own metadata
(orbax's ``custom_metadata``, written inside the temporary directory, so it commits with
the step).  :meth:`Checkpointer.restore` refuses a template whose leaves differ in path,
dtype or shape — orbax would cast — and recomputes the CRCs of what it read, where it
lies.  ``_leaf_checksums`` computes them on the host, at the speed the CPU's CRC32
instruction reads memory; nothing is compiled.  A leaf spread over the processes of a job
is checked in shares, each process its own boxes, combined without gathering the leaf;
the record does not depend on the layout, so a step saved by one process restores into a
job's sharding and back.  Steps saved by earlier versions recorded a pair of sums computed
by XLA instead; they are still checked.

Several processes (``jax.distributed``): every process calls :meth:`Checkpointer.save`
and :meth:`Checkpointer.restore`, and orbax coordinates the write.  A leaf that each
process holds a copy of (``opt.init(params)`` of params built on each host, before the
first step makes the state global) is compared across processes by its CRC and saved as
one global array, replicated: orbax saves no array of one process's devices in a job.

A restored leaf is committed as the template's is (orbax commits every array it
restores; a fresh ``init``'s arrays are uncommitted), so a jitted step compiles once for
a fresh state, a restored one and their successors.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from types import TracebackType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad import _checks
from funcgrad.train.checkpoints import _leaf_checksums
from funcgrad.train.checkpoints import _processes

__all__ = ["Checkpointer"]

#: What orbax writes into the directory: finished steps and unfinished (tmp) steps.
_OWN_ENTRY = re.compile(r"^\d+(\.orbax-checkpoint-tmp.*)?$")
#: The key of the leaf record in a step's ``custom_metadata``.
_RECORD = "funcgrad_leaves"
_STEP_HINT = "pass a step number >= 0, e.g. int(state.global_step)"


def _orbax(caller: str) -> ModuleType:
    try:
        import orbax.checkpoint as ocp
    except ImportError as error:  # pragma: no cover - the extra is installed in CI
        raise ImportError(
            f"{caller}: checkpoints need orbax-checkpoint; install it with "
            "pip install 'funcgrad[checkpoint]'."
        ) from error
    return ocp


def _check_directory(caller: str, directory: Path) -> None:
    """Raise, before anything is written, unless ``directory`` is new or only ours."""
    if not directory.exists():
        return
    if not directory.is_dir():
        raise ValueError(
            f"{caller}: {directory} exists and is not a directory; pass a new or "
            "empty directory for the checkpoints."
        )
    try:
        entries = sorted(os.listdir(directory))
    except OSError as error:
        raise PermissionError(
            f"{caller}: {directory} cannot be read ({error.strerror}); fix its "
            "permissions or pass another directory."
        ) from error
    foreign = [name for name in entries if not _OWN_ENTRY.match(name)]
    if foreign:
        raise ValueError(
            f"{caller}: {directory} holds entries that are not checkpoints "
            f"({_few(foreign)}); nothing was written — "
            "pass a new or empty directory for the checkpoints."
        )


def _few(items: list[Any], n: int = 5) -> str:
    """The first ``n`` of ``items`` and how many more there are."""
    return f"{items[:n]}{f' and {len(items) - n} more' if len(items) > n else ''}"


def _describe(tree: Any) -> list[list[Any]]:
    """``[path, dtype, shape]`` of each leaf of ``tree``, paths as ``"params/w"``."""
    described = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if not (hasattr(leaf, "dtype") and hasattr(leaf, "shape")):
            leaf = jnp.asarray(leaf)
        name = jax.tree_util.keystr(path, simple=True, separator="/")
        described.append([name, str(leaf.dtype), list(leaf.shape)])
    return described


def _record(caller: str, state: Any) -> list[list[Any]]:
    """What a save records of ``state``: each leaf's path, dtype, shape and CRC-32C."""
    described = _describe(state)
    leaves = [jnp.asarray(leaf) for leaf in jax.tree.leaves(state)]
    crcs = _leaf_checksums.record(caller, [d[0] for d in described], leaves)
    return [[*d, crc] for d, crc in zip(described, crcs, strict=True)]


def _global(leaf: Any) -> Any:
    """In a job, a leaf this process holds a copy of as one global array (orbax writes no
    array of one process's devices there)."""
    if _processes.count() > 1 and isinstance(leaf, jax.Array) and leaf.is_fully_addressable:
        return _processes.replicated(leaf)
    return leaf


def _entries(record: Any) -> dict[str, list[Any]]:
    """A step's record by leaf path; empty unless it is a list of 4-item entries."""
    if not isinstance(record, list) or not all(
        isinstance(e, list) and len(e) == 4 and isinstance(e[0], str) for e in record
    ):
        return {}
    return {e[0]: e for e in record}


def _mismatches(saved: dict[str, list[Any]], like: Any) -> list[str]:
    """Every difference in leaf paths, dtypes and shapes between a record and ``like``."""
    given = {d[0]: d for d in _describe(like)}
    problems = [
        f"{path} was saved as {s[1]}{s[2]}, like has {given[path][1]}{given[path][2]}"
        for path, s in saved.items()
        if path in given and s[1:3] != given[path][1:3]
    ]
    missing = [path for path in saved if path not in given]
    extra = [path for path in given if path not in saved]
    if missing:
        problems.append(f"like lacks the saved leaves {_few(missing)}")
    if extra:
        problems.append(f"like has leaves that were not saved: {_few(extra)}")
    return problems[:10] + ([f"and {len(problems) - 10} more"] if len(problems) > 10 else [])


def _verified(saved: dict[str, list[Any]], restored: Any, like: Any) -> tuple[Any, list[str]]:
    """``restored`` with each leaf committed as ``like``'s, and the paths of the leaves
    whose CRC-32C (or older checksum) differs from the record's."""
    leaves, treedef = jax.tree.flatten(restored)
    paths = [d[0] for d in _describe(restored)]
    bad = _leaf_checksums.damaged([saved[path][3] for path in paths], leaves)
    placed = [_committed_as(leaf, t) for leaf, t in zip(leaves, jax.tree.leaves(like), strict=True)]
    return jax.tree.unflatten(treedef, placed), [paths[i] for i in bad]


def _committed_as(leaf: Any, like: Any) -> Any:
    """``leaf`` (committed by orbax), uncommitted when ``like`` is (as a fresh ``init``'s
    arrays are), through the host: on a CPU the same memory, not a copy."""
    if not isinstance(leaf, jax.Array) or not isinstance(like, jax.Array) or like.committed:
        return leaf
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        data = jax.device_put(np.asarray(jax.random.key_data(leaf)))
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(leaf))
    return jax.device_put(np.asarray(leaf))


class Checkpointer:
    """Keep the last ``max_to_keep`` checkpoints of a ``TrainState`` in ``directory``.

    Each :meth:`save` writes one step (by default ``state.global_step``) and returns
    when it is complete on disk; older steps beyond ``max_to_keep`` are deleted.
    :meth:`restore` reads a step back into the structure, dtypes and shardings of a
    template state, so training resumed from it continues exactly — bit for bit — as
    it would have without the interruption.  Every leaf is checked against a checksum
    written with it: damaged files are an error, never numbers.

    After a rollback the newest save wins.  Saving a step below the newest one (after
    restoring an older step because the run diverged) first deletes the steps above
    it, which belong to the abandoned run; so :meth:`latest_step` — what a resumed
    run restores — is always the last step saved, and ``max_to_keep`` counts the
    steps of the run that goes on.  Restoring alone deletes nothing: copy a step
    elsewhere before saving below it if it is worth keeping.

    Differences from ``tf.train.Saver``: one directory per run holding only
    checkpoints, no ``checkpoint`` index file (the step directories are the index),
    no ``latest_filename``; after a rollback the Saver keeps the abandoned steps until
    ``max_to_keep`` newer saves push them out (by the order of saving, so older steps
    of the run that goes on are deleted first), where this class deletes them at the
    first lower save.

    Args:
      directory: where the step directories go; created if missing.  It must be new,
        empty, or hold only this class's checkpoints.
      max_to_keep: how many of the newest steps to keep, ``>= 1``.

    Raises:
      ValueError: ``directory`` is a file or holds entries that are not checkpoints,
        or ``max_to_keep`` is below 1 (nothing is written).
      TypeError: ``max_to_keep`` is not an integer.
      PermissionError: ``directory`` cannot be read.
      ImportError: orbax-checkpoint is not installed.

    Example:
      >>> import tempfile
      >>> opt = fg.train.GradientDescentOptimizer(0.5)
      >>> state = opt.init({"w": jnp.array([1.0, 2.0])})
      >>> with fg.train.Checkpointer(tempfile.mkdtemp(), max_to_keep=2) as ckpt:
      ...     for _ in range(3):
      ...         state, _ = opt.minimize(lambda p: jnp.sum(p["w"] ** 2), state)
      ...         _ = ckpt.save(state)
      ...     print(ckpt.all_steps(), ckpt.restore(state).params["w"].tolist())
      [2, 3] [0.0, 0.0]
    """

    def __init__(self, directory: str | os.PathLike[str], *, max_to_keep: int = 3) -> None:
        caller = "fg.train.Checkpointer(directory, max_to_keep)"
        max_to_keep = _checks.as_int(
            caller,
            "max_to_keep",
            max_to_keep,
            minimum=1,
            hint="pass how many of the newest checkpoints to keep, e.g. 3",
        )
        self._ocp = _orbax(caller)
        self.directory = Path(directory).absolute()
        _check_directory(caller, self.directory)
        options = self._ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, enable_async_checkpointing=False
        )
        self._manager = self._ocp.CheckpointManager(self.directory, options=options)

    def save(self, state: Any, step: int | None = None) -> int:
        """Write ``state`` as checkpoint ``step`` and wait until it is complete.

        A step below the newest saved one is a rollback: the steps above it are
        deleted first (see the class docstring), then ``step`` is written.

        Args:
          state: the ``TrainState`` (any pytree of arrays).
          step: the step number, an integer ``>= 0``; ``None`` takes
            ``state.global_step``.

        Returns:
          The step number written.

        Raises:
          TypeError: ``step`` is not an integer (``2.7``), or it is ``None`` and
            ``state`` has no ``global_step``.
          ValueError: ``step`` is negative, that step is already saved (it is not
            overwritten), the directory now holds entries that are not checkpoints, or
            (in a job) copies of a leaf that each process holds differ between them.
            Nothing is written or deleted.
          RuntimeError: orbax declined to write the step.

        Example:
          >>> import tempfile
          >>> opt = fg.train.GradientDescentOptimizer(0.1)
          >>> state = opt.init(jnp.zeros(2))
          >>> ckpt = fg.train.Checkpointer(tempfile.mkdtemp())
          >>> ckpt.save(state, step=5), ckpt.save(state, step=10)
          (5, 10)
          >>> rolled_back = ckpt.restore(state, step=5)
          >>> ckpt.save(rolled_back, step=6), ckpt.all_steps()  # 10 was abandoned
          (6, [5, 6])
        """
        caller = "fg.train.Checkpointer.save(state, step)"
        if step is None and not hasattr(state, "global_step"):
            raise TypeError(
                f"{caller}: step is None and state (a {type(state).__name__}) has no "
                "global_step; pass step=, e.g. save(state, step=100)."
            )
        given = state.global_step if step is None else step
        step = _checks.as_int(caller, "step", given, minimum=0, hint=_STEP_HINT)
        _check_directory(caller, self.directory)
        steps = self.all_steps()
        if step in steps:
            raise ValueError(
                f"{caller}: step {step} is already saved in {self.directory}; it was "
                "not overwritten — pass another step or restore that one."
            )
        record = _record(caller, state)
        for abandoned in (s for s in steps if s > step):
            self._manager.delete(abandoned)
        saved = self._manager.save(
            step,
            args=self._ocp.args.StandardSave(jax.tree.map(_global, state)),
            custom_metadata={_RECORD: record},
        )
        self._manager.wait_until_finished()
        if not saved:
            raise RuntimeError(
                f"{caller}: orbax-checkpoint declined to write step {step} in "
                f"{self.directory} (complete steps: {self.all_steps()}); nothing was "
                "saved — pass a step above the newest, or report this as a bug."
            )
        return step

    def all_steps(self) -> list[int]:
        """The steps saved and complete, oldest first (unfinished writes are not listed)."""
        return sorted(self._manager.all_steps())

    def latest_step(self) -> int | None:
        """The newest complete step — the last one saved — or ``None`` when there is none."""
        return self._manager.latest_step()

    def restore(self, like: Any, step: int | None = None) -> Any:
        """Read checkpoint ``step`` into the structure, dtypes and shardings of ``like``.

        The saved leaves must have ``like``'s paths, dtypes and shapes (nothing is
        cast), and each must match the checksum saved with it.

        Args:
          like: a template with the saved state's structure, e.g. ``opt.init(params)``
            (its values are not used; its arrays' shardings are the restored ones).
          step: the step, an integer; ``None`` takes :meth:`latest_step`.

        Returns:
          The restored state, of ``like``'s type, each array on ``like``'s sharding and
          committed or not as ``like``'s is (so a jitted step compiled for ``like``
          serves it).

        Raises:
          FileNotFoundError: there is no complete checkpoint, or not that step.
          TypeError: ``step`` is not an integer.
          ValueError: the step's leaves differ from ``like``'s in path, dtype or shape
            (every difference is listed), or its files are damaged (a leaf's data
            does not match its checksum, or orbax cannot read them); the message
            lists the steps there are.

        Example:
          >>> import tempfile
          >>> state = fg.train.AdamOptimizer().init({"w": jnp.zeros(2)})
          >>> ckpt = fg.train.Checkpointer(tempfile.mkdtemp())
          >>> ckpt.save(state)
          0
          >>> half = fg.train.AdamOptimizer().init({"w": jnp.zeros(2, jnp.bfloat16)})
          >>> ckpt.restore(half)  # doctest: +ELLIPSIS
          Traceback (most recent call last):
          ValueError: ... params/w was saved as float32[2], like has bfloat16[2]; ...
        """
        caller = "fg.train.Checkpointer.restore(like, step)"
        _check_directory(caller, self.directory)
        steps = self.all_steps()
        if step is not None:
            step = _checks.as_int(caller, "step", step, hint=f"pass one of the steps {steps}")
        step = self.latest_step() if step is None else step
        if step is None or step not in steps:
            raise FileNotFoundError(
                f"{caller}: no complete checkpoint {'' if step is None else step} in "
                f"{self.directory} (complete steps: {steps}); save one first or pass one "
                "of those steps."
            )
        where = f"{caller}: step {step} in {self.directory}"
        metadata = self._read(where, steps, lambda: self._manager.metadata(step))
        saved = _entries(metadata.custom_metadata.get(_RECORD))
        if not saved:
            raise ValueError(
                f"{where} has no record of its leaves (its _CHECKPOINT_METADATA is damaged, "
                f"or another program wrote it); restore another step of {steps}."
            )
        _checks.raise_collected(
            f"{where} does not match like",
            _mismatches(saved, like),
            "pass the template the run saved (same optimizer, params and dtypes), or "
            f"another step of {steps}",
        )
        abstract = jax.tree.map(self._ocp.utils.to_shape_dtype_struct, like)
        args = self._ocp.args.StandardRestore(abstract)
        restored = self._read(where, steps, lambda: self._manager.restore(step, args=args))
        restored, damaged = _verified(saved, restored, like)
        _checks.raise_collected(
            f"{where} is damaged",
            [f"the data of {_few(damaged)} does not match the checksum saved with it"]
            if damaged
            else [],
            f"restore another step of {steps}",
        )
        return restored

    def _read(self, where: str, steps: list[int], read: Callable[[], Any]) -> Any:
        """``read()``, with any failure of orbax to read the files as a ``ValueError``."""
        try:
            return read()
        except Exception as error:
            reason = str(error).split(" [tensorstore_spec=")[0].splitlines()[0][:300]
            raise ValueError(
                f"{where} cannot be read ({type(error).__name__}: {reason}); its files are "
                f"damaged — restore another step of {steps} (the full error is the cause)."
            ) from error

    def close(self) -> None:
        """Wait for pending work and release the checkpoint manager."""
        self._manager.close()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
