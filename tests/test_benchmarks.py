"""The benchmarks' smoke form: every workload, row and script runs on tiny sizes.

The full runs (`python benchmarks/run.py`, the `bench_*.py` scripts) take minutes and are
recorded by hand in `benchmarks/RESULTS.md`; here `run.py --quick` checks that every
implementation runs and reaches the same final cost, and each script runs with tiny
sizes and prints its headline row.  Nothing is written.
"""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _run(script: str, *args: str) -> str:
    """The stdout of ``python benchmarks/<script> <args>``, which must exit 0."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_run_quick_runs_every_workload() -> None:
    stdout = _run("run.py", "--quick")
    for heading in ("### Targets", "### W1", "### W2", "### W3", "### W4", "### W5"):
        assert heading in stdout
    for row in ("| funcgrad, whole run in one lax.scan |", "| fg.py_func, value + gradient |"):
        assert row in stdout


SCRIPTS = {
    "bench_adafactor.py": (
        ["--vocab", "50", "--d", "8", "--seq", "4", "--repeats", "1", "--number", "1"],
        "optimizer state",
    ),
    "bench_conventions.py": (
        ["--repeats", "1", "--number", "1", "--batch", "8", "--compiles", "1"],
        "ratio tensorflow_conventions / plain",
    ),
    "bench_gradients.py": (["--repeats", "1", "--number", "1"], "ratio fg.gradients / jax.vjp"),
    "bench_higher_order.py": (
        ["--size", "1000", "--max-order", "2", "--repeats", "1", "--first-repeats", "1"],
        "| nth_derivative first (s) |",
    ),
    "bench_optimizers.py": (
        ["--repeats", "2", "--number", "1", "--traces", "1", "--only", "GradientDescent", "AdamW"],
        "| optimizer | dense: ratio to optax.sgd (IQR) | sparse: ratio (IQR) | trace ratio (IQR) |",
    ),
    "bench_overrides.py": (
        ["--batch", "8", "--hidden", "16", "--runs", "2", "--compiles", "1"],
        "gradients bit-identical: True",
    ),
    "bench_py_func.py": (["--size", "10", "--calls", "2", "--repeats", "1"], "ratio fg.py_func"),
    "bench_scale.py": (
        ["--micro", "8", "--repeats", "2", "--number", "1"],
        "minimize_in_microbatches k=4",
    ),
    "bench_sparse.py": (
        ["--rows", "1000", "--steps", "2", "--repeats", "1", "--dense-max", "1000"],
        "| funcgrad MomentumOptimizer (IndexedSlices) |",
    ),
    "bench_tf1_projects.py": (
        [
            "--vocab",
            "64",
            "--d",
            "16",
            "--layers",
            "1",
            "--batch",
            "2",
            "--seq",
            "4",
            "--repeats",
            "1",
            "--number",
            "1",
        ],
        "| **ratio fg / optax** |",
    ),
    "bench_trace.py": (
        [
            "--vocab",
            "64",
            "--d",
            "16",
            "--layers",
            "1",
            "--heads",
            "2",
            "--batch",
            "2",
            "--seq",
            "8",
            "--repeats",
            "1",
            "--trace-only",
        ],
        "gradients: trace, CPU",
    ),
    "bench_train.py": (
        ["--repeats", "1", "--loop-steps", "2", "--examples", "256"],
        "epoch (2 steps, lax.scan)",
    ),
}


def test_bench_sparse_compares_a_lookup_over_shards_on_tiny_sizes() -> None:
    stdout = _run(
        "bench_sparse.py", "--shards", "4", "--rows", "1000", "--ids", "64", "--steps", "2",
        "--repeats", "1",
    )  # fmt: skip
    assert "| Momentum step: one array in 4 parts, fg.nn.embedding_lookup" in stdout


def test_bench_optimizers_compares_two_checkouts_on_tiny_sizes() -> None:
    stdout = _run(
        "bench_optimizers.py", "--compare", str(ROOT), str(ROOT), "--rounds", "1",
        "--repeats", "2", "--number", "1", "--traces", "1", "--only", "GradientDescent",
    )  # fmt: skip
    assert "| GradientDescentOptimizer | sparse |" in stdout
    assert "| optimizer | trace ratio before (IQR) | after (IQR) |" in stdout
    assert "optax.sgd per step (after): dense" in stdout


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_benchmark_script_runs_on_tiny_sizes(script: str) -> None:
    args, expected = SCRIPTS[script]
    assert expected in _run(script, *args)
