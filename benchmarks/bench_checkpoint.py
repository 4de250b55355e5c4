"""Checkpoints of an Adam state: funcgrad's two kinds against the libraries they stand beside.

Four pairs, each operation in a process of its own (so that one's memory is not
another's), the pairs interleaved repeat by repeat:

* ``fg.train.save_tf_checkpoint`` against TensorFlow's ``tf.compat.v1.train.Saver.save``;
* ``fg.train.restore_tf_checkpoint`` against ``Saver.restore`` (the same files);
* ``fg.train.Checkpointer.save`` against orbax's ``StandardCheckpointer`` alone;
* ``fg.train.Checkpointer.restore`` against ``StandardCheckpointer.restore``.

The state: BERT-base's variables (12 layers, hidden 768, vocabulary 30,522: 110M
float32) with Adam's two slots, 1.3 GB, every value random (so that no compressor gains
on zeros).  A TensorFlow graph holds the same variables under the names
``save_tf_checkpoint`` writes.  Each child times its one operation and reports the
growth of its peak resident memory during it (Linux's ``VmHWM``, reset just before);
the templates a restore fills are made before.  Printed: the median seconds of each, the
median of the per-repeat ratios funcgrad / baseline, the median peak growth, and how
long making the checkpoint's size of new memory present takes (the floor of a restore
into new arrays, which ``Saver.restore``, assigning its variables, does not pay).

    PYTHONPATH=. python benchmarks/bench_checkpoint.py --repeats 3
    PYTHONPATH=. python benchmarks/bench_checkpoint.py --layers 1 --hidden 32 --vocab 100 \\
        --repeats 1   # seconds: the tests' smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

#: Each pair: funcgrad's operation, the baseline's, and the operation that writes the
#: files a restore reads (run once, before the repeats).
PAIRS = {
    "save_tf_checkpoint vs Saver.save": ("fg_tf_save", "tf_save"),
    "restore_tf_checkpoint vs Saver.restore": ("fg_tf_restore", "tf_restore"),
    "Checkpointer.save vs StandardCheckpointer.save": ("fg_orbax_save", "orbax_save"),
    "Checkpointer.restore vs StandardCheckpointer.restore": ("fg_orbax_restore", "orbax_restore"),
}
BETAS = (0.9, 0.999)


def _shapes(layers: int, hidden: int, vocab: int) -> dict[str, Any]:
    """BERT's variables, nested as its TensorFlow scopes name them."""
    dense = lambda m, n: {"kernel": (m, n), "bias": (n,)}  # noqa: E731
    norm = {"gamma": (hidden,), "beta": (hidden,)}
    layer = {
        "attention": {
            "self": {k: dense(hidden, hidden) for k in ("query", "key", "value")},
            "output": {"dense": dense(hidden, hidden), "LayerNorm": norm},
        },
        "intermediate": {"dense": dense(hidden, 4 * hidden)},
        "output": {"dense": dense(4 * hidden, hidden), "LayerNorm": norm},
    }
    embeddings = {
        "word_embeddings": (vocab, hidden),
        "position_embeddings": (512, hidden),
        "token_type_embeddings": (2, hidden),
        "LayerNorm": norm,
    }
    encoder = {f"layer_{i}": layer for i in range(layers)}
    return {"bert": {"embeddings": embeddings, "encoder": encoder, "pooler": dense(hidden, hidden)}}


def _is_shape(x: Any) -> bool:
    return isinstance(x, tuple)


def _state(args: argparse.Namespace, random: bool) -> Any:
    """funcgrad's Adam state of BERT's shapes: random values, or zeros (a template)."""
    import jax
    import jax.numpy as jnp

    import funcgrad as fg

    shapes = _shapes(args.layers, args.hidden, args.vocab)
    paths, treedef = jax.tree.flatten(shapes, is_leaf=_is_shape)
    opt = fg.train.AdamOptimizer(1e-3, *BETAS)
    state = opt.init(jax.tree.unflatten(treedef, [jnp.zeros(s) for s in paths]))
    if not random:
        return opt, state
    leaves, treedef = jax.tree.flatten(state)
    keys = jax.random.split(jax.random.key(0), len(leaves))
    filled = [
        jax.random.uniform(k, x.shape, x.dtype, 0.1, 1.0) if x.ndim else x
        for k, x in zip(keys, leaves, strict=True)
    ]
    return opt, jax.block_until_ready(jax.tree.unflatten(treedef, filled))


def _tf_graph(args: argparse.Namespace, tf: Any, filled: bool) -> Any:
    """A session whose variables are those ``save_tf_checkpoint`` writes (read from the
    checkpoint the restores read), zeros or (``filled``) its values, and a ``Saver``."""
    tf.compat.v1.disable_eager_execution()
    reference = os.path.join(args.dir, "tf", "ref")
    names = tf.train.list_variables(reference)
    reader = tf.train.load_checkpoint(reference)
    dtypes = reader.get_variable_to_dtype_map()
    variables = [
        tf.compat.v1.get_variable(
            n, s, dtypes[n], initializer=tf.compat.v1.zeros_initializer(), use_resource=False
        )
        for n, s in names
    ]
    sess = tf.compat.v1.Session()
    sess.run(tf.compat.v1.global_variables_initializer())
    for v, (name, _) in zip(variables, names, strict=True):
        if filled:  # one tensor at a time
            v.load(reader.get_tensor(name), sess)
    return sess, tf.compat.v1.train.Saver(variables)


def _measure(operation: Callable[[], Any]) -> dict[str, float]:
    """Seconds of ``operation()`` and the growth of the peak resident memory during it."""
    with open("/proc/self/clear_refs", "w") as f:  # reset VmHWM to the current VmRSS
        f.write("5")
    before = _status("VmRSS")
    start = time.perf_counter()
    operation()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_growth": _status("VmHWM") - before}


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _child(args: argparse.Namespace) -> dict[str, float]:
    """Run the one operation ``args.child`` in this process; return its measurement."""
    import jax

    import funcgrad as fg

    op, out = args.child, os.path.join(args.dir, f"out-{args.child}")
    shutil.rmtree(out, ignore_errors=True)
    if op == "prepare":
        return {"size": _prepare(args)}
    if op == "fg_tf_save":
        opt, state = _state(args, random=True)
        return _measure(lambda: fg.train.save_tf_checkpoint(out + "/model", state, opt))
    if op == "fresh_memory":  # the floor of a restore into new memory: making it present
        import numpy as np

        size = _prepare_size(args)
        return _measure(lambda: np.ones(size, np.uint8))
    if op == "fg_tf_restore":
        opt, template = _state(args, random=False)
        prefix = os.path.join(args.dir, "tf", "ref")
        return _measure(
            lambda: jax.block_until_ready(fg.train.restore_tf_checkpoint(prefix, template, opt))
        )
    if op in ("tf_save", "tf_restore"):
        import tensorflow as tf

        sess, saver = _tf_graph(args, tf, filled=op == "tf_save")
        if op == "tf_save":
            return _measure(lambda: saver.save(sess, out + "/model", write_meta_graph=False))
        return _measure(lambda: saver.restore(sess, os.path.join(args.dir, "tf", "ref")))
    import orbax.checkpoint as ocp

    if op == "fg_orbax_save":
        _, state = _state(args, random=True)

        def save() -> None:
            with fg.train.Checkpointer(out) as ckpt:
                ckpt.save(state)

        return _measure(save)
    if op == "orbax_save":
        _, state = _state(args, random=True)

        def save_alone() -> None:
            with ocp.StandardCheckpointer() as ckptr:
                ckptr.save(os.path.join(out, "0"), state)
                ckptr.wait_until_finished()

        return _measure(save_alone)
    _, template = _state(args, random=False)
    if op == "fg_orbax_restore":

        def restore() -> None:
            with fg.train.Checkpointer(os.path.join(args.dir, "orbax")) as ckpt:
                jax.block_until_ready(ckpt.restore(template))

        return _measure(restore)
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, template)

    def restore_alone() -> None:
        with ocp.StandardCheckpointer() as ckptr:
            jax.block_until_ready(
                ckptr.restore(os.path.join(args.dir, "orbax", "0", "default"), abstract)
            )

    return _measure(restore_alone)


def _prepare(args: argparse.Namespace) -> int:
    """Write the files the restores read; return the TF checkpoint's size in bytes."""
    import funcgrad as fg

    opt, state = _state(args, random=True)
    fg.train.save_tf_checkpoint(os.path.join(args.dir, "tf", "ref"), state, opt)
    with fg.train.Checkpointer(os.path.join(args.dir, "orbax")) as ckpt:
        ckpt.save(state)
    return _prepare_size(args)


def _prepare_size(args: argparse.Namespace) -> int:
    prefix = os.path.join(args.dir, "tf", "ref")
    return sum(os.path.getsize(prefix + s) for s in (".index", ".data-00000-of-00001"))


def _run_child(args: argparse.Namespace, op: str) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", op, "--dir", args.dir]
    command += [
        "--layers",
        str(args.layers),
        "--hidden",
        str(args.hidden),
        "--vocab",
        str(args.vocab),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{op} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--vocab", type=int, default=30522)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        print(json.dumps(_child(args)))
        return
    with tempfile.TemporaryDirectory() as directory:
        args.dir = directory
        size = int(_run_child(args, "prepare")["size"])  # the files the restores read
        results: dict[str, list[dict[str, float]]] = {
            op: [] for pair in PAIRS.values() for op in pair
        }
        for _ in range(args.repeats):
            for pair in PAIRS.values():
                for op in pair:
                    results[op].append(_run_child(args, op))
            results.setdefault("fresh_memory", []).append(_run_child(args, "fresh_memory"))
    _report(results, size, args)


def _report(
    results: dict[str, list[dict[str, float]]], size: int, args: argparse.Namespace
) -> None:
    gib = 1 << 30
    print(
        f"state: BERT-like, {args.layers} layers, hidden {args.hidden}, vocabulary "
        f"{args.vocab}, Adam; TF checkpoint {size / 1e9:.3f} GB; {args.repeats} repeats, "
        "each operation in its own process"
    )
    fresh = statistics.median(x["seconds"] for x in results["fresh_memory"])
    print(
        f"making {size / 1e9:.3f} GB of new memory present takes {fresh:.2f} s here: the floor "
        "of a restore into new arrays, which Saver.restore (assigning its variables) avoids"
    )
    print()
    print(
        "| operation | funcgrad (s) | baseline (s) | ratio | peak growth funcgrad / "
        "baseline (GiB) | funcgrad growth / checkpoint size |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for label, (ours, theirs) in PAIRS.items():
        a, b = results[ours], results[theirs]
        ratio = statistics.median(x["seconds"] / y["seconds"] for x, y in zip(a, b, strict=True))
        grow_a = statistics.median(x["peak_growth"] for x in a)
        grow_b = statistics.median(x["peak_growth"] for x in b)
        print(
            f"| {label} | {statistics.median(x['seconds'] for x in a):.2f} | "
            f"{statistics.median(x['seconds'] for x in b):.2f} | {ratio:.2f} | "
            f"{grow_a / gib:.2f} / {grow_b / gib:.2f} | {grow_a / size:.2f} |"
        )


if __name__ == "__main__":
    main()
