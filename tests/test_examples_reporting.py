"""examples/reporting.py: progress that reaches a log file, chunked scans, plain help text."""

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import example_scripts

reporting = example_scripts.load("reporting")


def test_progress_lines_are_printed_while_the_loop_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    printed_before = [capsys.readouterr().out for _ in reporting.progress(range(20), desc="run")]
    # A line at every tenth of the way, as soon as that tenth is done (not at the end).
    assert printed_before[2].startswith("run: 2/20 steps, ") and printed_before[3] == ""
    assert [out.split(",")[0] for out in printed_before if out] == [
        f"run: {n}/20 steps" for n in range(2, 20, 2)
    ]
    assert capsys.readouterr().out.startswith("run: 20/20 steps, ")


def test_progress_counts_updates_and_shows_a_postfix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    bar = reporting.progress(total=1000, desc="dqn")
    bar.set_postfix(greedy_return=9.4231)
    bar.update(250)  # passes the marks at 100 and 200: one line
    bar.update(50)
    bar.close()
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(",")[0] for line in lines] == ["dqn: 250/1000 steps", "dqn: 300/1000 steps"]
    assert lines[0].endswith(", greedy_return 9.423")


def test_progress_is_a_tqdm_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from tqdm import tqdm

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    bar = reporting.progress(range(3), desc="run")
    assert isinstance(bar, tqdm) and list(bar) == [0, 1, 2]


def test_a_piped_run_logs_progress_before_its_results() -> None:
    script = example_scripts.EXAMPLES / "gradient_ascent.py"
    env = {**os.environ, "PYTHONPATH": str(script.parent.parent)}
    out = subprocess.run(
        [sys.executable, str(script), "--steps", "200"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.splitlines()
    assert out[0].startswith("by hand: 100/200 steps, ") and out[0].endswith(" s elapsed")
    table = out.index("maximising the mean log-likelihood of 1000 samples of N(3.0, 2.0^2)")
    assert [line.split(",")[0] for line in out[:table]] == [
        f"{run}: {n}/200 steps"
        for run in ("by hand", "minimize(-f)", "Adam on -f")
        for n in (100, 200)
    ]


@pytest.mark.parametrize("axis", [0, 1])
def test_scan_in_chunks_is_one_scan(axis: int) -> None:
    xs = jnp.arange(2 * 23, dtype=jnp.int32).reshape((23, 2) if axis == 0 else (2, 23))

    def scan(carry: jax.Array, x: jax.Array) -> tuple[jax.Array, tuple]:
        return jax.lax.scan(lambda c, v: (c + v, (c + v, v)), carry, x)

    run = jax.jit(scan if axis == 0 else jax.vmap(scan))
    carry0 = jnp.zeros(2, jnp.int32)
    carry, (sums, seen) = reporting.scan_in_chunks(run, carry0, xs, desc="t", axis=axis, chunk=5)
    np.testing.assert_array_equal(seen, xs)
    np.testing.assert_array_equal(sums, np.cumsum(np.asarray(xs), axis=axis))
    np.testing.assert_array_equal(carry, np.asarray(xs).sum(axis=axis))


def test_plain_drops_rest_markup() -> None:
    text = "tamed by ``clip_by_global_norm`` and :func:`fg.gradients`, or `x`."
    assert reporting.plain(text) == "tamed by clip_by_global_norm and fg.gradients, or x."


def test_curves_without_outputs_record_nothing(tmp_path: pathlib.Path) -> None:
    args = reporting.build_parser().parse_args([])
    args.plot = args.logdir = None
    curves = reporting.Curves(args, "t")
    curves.add("loss", "run", [0, 1], [1.0, 0.5])
    curves.close()
    assert not curves.active and curves.panels == {} and list(tmp_path.iterdir()) == []


def test_tensorboard_tags_are_made_of_the_legend_text() -> None:
    assert reporting.tag("clip_norm = 1.0") == "clip_norm_1.0"
    assert reporting.tag("clipped, before clipping") == "clipped_before_clipping"
    assert reporting.tag("minimize(-f)") == "minimize_f"


def test_log_axis_only_for_values_over_orders_of_magnitude() -> None:
    assert reporting.yscale(np.array([2.3, 0.4, 0.02])) == "log"  # a loss
    assert reporting.yscale(np.array([9.0, 23.0, 221.0, 500.0])) == "linear"  # DQN's returns
    assert reporting.yscale(np.array([-7.0, -2.1])) == "linear"  # a log-likelihood
    assert reporting.yscale(np.array([])) == "linear"
