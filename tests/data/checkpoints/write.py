"""Write the checkpoint fixtures of ``cases.py`` with the funcgrad on ``PYTHONPATH``.

``PYTHONPATH=<checkout> python tests/data/checkpoints/write.py tests/data/checkpoints/<name>``
writes, for each case, ``<case>/orbax/`` (an ``fg.train.Checkpointer`` directory),
``<case>/tf/model.ckpt-3.*`` (``fg.train.save_tf_checkpoint``, where that funcgrad has
it) and ``<case>/values.npz``: every leaf of the saved state (``saved<path>``) and of
the state after one more step (``next<path>``), paths as ``jax.tree_util.keystr``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import cases

import funcgrad as fg


def _leaves(prefix: str, tree: Any) -> dict[str, np.ndarray]:
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {prefix + jax.tree_util.keystr(p): np.asarray(v) for p, v in flat}


def main(out: Path) -> None:
    for name, case in cases.cases().items():
        where = out / name
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        opt = case.make()
        state = cases.init(case)
        for n in range(cases.STEPS):
            state = cases.step(case, opt, state, n)
        after = cases.step(case, opt, state, cases.STEPS)
        np.savez(where / "values.npz", **_leaves("saved", state), **_leaves("next", after))
        checkpointer = fg.train.Checkpointer(where / "orbax")
        checkpointer.save(state, step=cases.STEPS)
        checkpointer.close()
        if case.tf:
            (where / "tf").mkdir()
            prefix = str(where / "tf" / f"model.ckpt-{cases.STEPS}")
            if case.ema:
                fg.train.save_tf_checkpoint(prefix, state[0], opt, ema_state=state[1])
            else:
                fg.train.save_tf_checkpoint(prefix, state, opt)
        print(name, "tf" if case.tf else "orbax only")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
