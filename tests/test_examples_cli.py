"""Every example's command line: --help, usage errors, and the --plot / --logdir outputs."""

import argparse
import pathlib
import re

import jax
import numpy as np
import pytest

from tests import example_scripts

EXAMPLES = sorted(p.stem for p in example_scripts.EXAMPLES.glob("*.py"))

# example: (an option its --help lists, argument lists that must be refused)
CASES = {
    "mnist_softmax": ("--dataset {digits,fashion-mnist,mnist}", [
        ["--epochs", "0"], ["--batch-size", "0"], ["--learning-rate", "-1"],
    ]),
    "dqn_cartpole": ("--variant", [["--steps", "0"], ["--eval-every", "0"], ["--hidden", "0"]]),
    "clip_gradients": ("--clip-norm", [["--clip-norm", "0"], ["--length", "1"], ["--seeds", "0"]]),
    "gradient_ascent": ("--learning-rate", [
        ["--steps", "0"], ["--samples", "1"], ["--learning-rate", "0"], ["--true-sigma", "-1"],
    ]),
    "gradient_reversal": ("--domain-weight", [["--steps", "0"], ["--domain-weight", "0"]]),
    "straight_through": ("--hidden", [["--epochs", "0"]]),
    "py_func_relu": ("--batch", [["--steps", "0"], ["--lr", "0"]]),
    "data_parallel": ("--cpu-devices", [["--steps", "0"], ["--cpu-devices", "-1"]]),
    "simclr_lars": ("--classic-momentum {true,false}", [
        ["--steps", "0"], ["--learning-rate", "0"], ["--warmup-steps", "200"],
    ]),
}  # fmt: skip

# Training examples, each with arguments that make a run take seconds, and the function
# that starts its training (it must not be reached when an output path is bad).
TRAINING = {
    "mnist_softmax": (["--epochs", "1"], "train"),
    "dqn_cartpole": ([
        "--steps", "1300", "--warmup", "1000", "--eval-every", "650", "--eval-episodes", "2",
        "--log-every", "100",
    ], "train"),
    "clip_gradients": (["--steps", "20", "--seeds", "2"], "train"),
    "gradient_ascent": (["--steps", "10"], "ascend_by_hand"),
    "gradient_reversal": (["--steps", "10", "--seeds", "2"], "train"),
    "straight_through": (["--epochs", "1", "--hidden", "16"], "train"),
    "py_func_relu": (["--steps", "5"], "train"),
    "data_parallel": (["--steps", "3"], "train"),
    "simclr_lars": (["--steps", "5", "--warmup-steps", "1"], "train"),
}  # fmt: skip


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("name", EXAMPLES)
def test_help_shows_every_option_with_its_default(name: str, capsys: pytest.CaptureFixture) -> None:
    module = example_scripts.load(name)
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0 and out.startswith("usage:")
    assert name not in CASES or CASES[name][0] in out
    help_text = _flat(out)
    for action in module.build_parser()._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{name}: {action.dest} has no help string"
        if action.default is not None:
            assert f"(default: {action.default})" in help_text, (name, action.dest)
    # Help text is plain: no reST ``literals`` or :func:`roles` from the docstrings.
    assert "``" not in out and not re.search(r":\w+:`", out), out


@pytest.mark.parametrize(
    ("name", "argv"),
    [pytest.param(n, a, id=f"{n}:{' '.join(a)}") for n, (_, bad) in CASES.items() for a in bad],
)
def test_bad_arguments_are_usage_errors(
    name: str, argv: list[str], capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        example_scripts.load(name).main(argv)
    assert exit_info.value.code == 2 and "must be" in capsys.readouterr().err


def _bad_paths(tmp_path: pathlib.Path) -> list[tuple[list[str], str]]:
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    return [
        (["--plot", "/nonexistent/x.png"], "--plot /nonexistent/x.png: no directory /nonexistent"),
        (["--plot", str(tmp_path / "x.nosuchformat")], "cannot write a .nosuchformat file"),
        (["--plot", str(tmp_path)], "a directory; name a file in it"),
        (["--logdir", str(a_file / "runs")], f"--logdir {a_file}/runs: cannot write in {a_file}"),
    ]


@pytest.mark.parametrize("name", TRAINING)
def test_bad_output_paths_stop_before_training(
    name: str,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    module = example_scripts.load(name)
    _, start = TRAINING[name]
    monkeypatch.setattr(module, start, lambda *a, **k: pytest.fail("training started"))
    for argv, message in _bad_paths(tmp_path):
        with pytest.raises(SystemExit) as exit_info:
            module.main(argv)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err.splitlines()[-1], err
        assert err.startswith("usage:") and err.count("error:") == 1  # one line, no traceback


@pytest.mark.parametrize("name", TRAINING)
def test_plot_and_logdir_write_curves(
    name: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture
) -> None:
    png, logdir = tmp_path / "new" / "curves.png", tmp_path / "runs" / name
    png.parent.mkdir()
    argv = [*TRAINING[name][0], "--plot", str(png), "--logdir", str(logdir)]
    # optax.adam (straight_through) mixes a Python float with an int32 count, which the
    # harness's strict promotion rejects; the scripts run under JAX's default.
    with jax.numpy_dtype_promotion("standard"):
        example_scripts.load(name).main(argv)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"curves saved to {png}" in capsys.readouterr().out
    scalars = example_scripts.tensorboard_scalars(logdir)
    losses = [t for t in scalars if t.endswith(("/loss", "/label_loss", "/objective"))]
    norms = [t for t in scalars if t.endswith(("/gradient_norm", "/global_norm"))]
    assert losses and norms, sorted(scalars)
    assert all(np.isfinite(v) for tag in losses + norms for _, v in scalars[tag])
