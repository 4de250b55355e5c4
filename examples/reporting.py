"""What the training examples share: their command line, progress, and curves.

- ``make_parser``: an argument parser whose ``--help`` shows every default and the
  script's docstring without its markup; ``add_output_arguments`` adds ``--plot`` and
  ``--logdir``, and ``check_output_arguments`` refuses paths that cannot be written,
  before any training starts.
- ``progress``: a tqdm bar on a terminal; elsewhere (``python examples/x.py > log``)
  a plain line on stdout at every tenth of the way, so that a log shows progress.
- ``scan_in_chunks``: a jitted ``lax.scan`` over all steps, run a chunk of steps at a
  time so that it can report progress.
- ``Curves``: loss and gradient-norm curves (steps numbered from 1), drawn by ``--plot``
  (matplotlib's Agg backend) and written by ``--logdir`` (TensorBoard, with tensorboardX).

This module is imported by the examples; run on its own, it only prints this help.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

import funcgrad as fg


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """``--help`` with every default shown, except where there is none (``None``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


def plain(text: str) -> str:
    """reST's inline markup dropped: ``code`` and :func:`name` become code and name."""
    return re.sub(r"(?::\w+:)?`{1,2}([^`]+)`{1,2}", r"\1", text)


def make_parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser described by ``doc``'s first paragraph, its command lines as the epilog."""
    paragraphs = (doc or "").split("\n\n")
    commands = [p for p in paragraphs if p.startswith("    ")]
    return argparse.ArgumentParser(
        description=plain(paragraphs[0]),
        epilog="examples:\n" + "\n".join(commands) if commands else None,
        formatter_class=HelpFormatter,
    )


def add_output_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--plot PATH.png`` and ``--logdir DIR``; ``what`` names the curves."""
    parser.add_argument("--plot", type=pathlib.Path, help=f"save a plot of {what} to this image")
    parser.add_argument(
        "--logdir", type=pathlib.Path, help=f"write {what} as TensorBoard summaries here"
    )


def check_output_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exits with a usage error when ``--plot`` or ``--logdir`` cannot be written."""
    if args.plot is not None:
        from matplotlib.figure import Figure

        folder, suffix = args.plot.parent, args.plot.suffix
        if args.plot.is_dir():
            parser.error(f"--plot {args.plot}: a directory; name a file in it, such as curves.png")
        if not folder.is_dir():
            parser.error(f"--plot {args.plot}: no directory {folder}; create it or pick another")
        if not os.access(folder, os.W_OK | os.X_OK):
            parser.error(f"--plot {args.plot}: cannot write in {folder}; pick another directory")
        if suffix.lstrip(".").lower() not in Figure().canvas.get_supported_filetypes():
            parser.error(
                f"--plot {args.plot}: matplotlib cannot write a {suffix or 'nameless'} file; "
                "end the name with .png (or .pdf, .svg, .jpg, ...)"
            )
    if args.logdir is not None:
        existing = next(p for p in (args.logdir, *args.logdir.parents) if p.exists())
        if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            parser.error(
                f"--logdir {args.logdir}: cannot write in {existing}; pick a directory you "
                "can write to (it is created if missing)"
            )


class Lines:
    """tqdm's stand-in when stdout is not a terminal: a plain line at each tenth of ``total``."""

    def __init__(self, iterable: Iterable | None, total: int | None, desc: str, unit: str) -> None:
        self.iterable = iterable
        self.total = len(iterable) if total is None else total
        self.desc, self.unit = desc, unit
        self.n, self.postfix = 0, ""
        self.marks = sorted({max(1, self.total * k // 10) for k in range(1, 11)})
        self.start = time.perf_counter()

    def __iter__(self) -> Any:
        for item in () if self.iterable is None else self.iterable:
            yield item
            self.update()

    def update(self, n: int = 1) -> None:
        """Counts ``n`` more units done; prints a line when that passes a tenth."""
        passed = [m for m in self.marks if self.n < m <= self.n + n]
        self.n += n
        if passed:
            seconds = time.perf_counter() - self.start
            print(
                f"{self.desc}: {self.n}/{self.total} {self.unit}s, {seconds:.1f} s elapsed"
                f"{self.postfix}",
                flush=True,
            )

    def set_postfix(self, **values: float) -> None:
        """Values to show at the end of the next lines, as tqdm's ``set_postfix``."""
        self.postfix = "".join(f", {k} {v:.4g}" for k, v in values.items())

    def close(self) -> None:
        """Nothing to clear (tqdm's bar is removed here)."""


def progress(
    iterable: Iterable | None = None, *, total: int | None = None, desc: str, unit: str = "step"
) -> Any:
    """A tqdm bar (on stderr) when stdout is a terminal, ``Lines`` on stdout when not."""
    if sys.stdout.isatty():
        from tqdm import tqdm

        return tqdm(iterable, total=total, desc=desc, unit=unit, leave=False)
    return Lines(iterable, total, desc, unit)


def scan_in_chunks(
    run: Callable[[Any, Any], tuple[Any, Any]],
    carry: Any,
    xs: Any,
    *,
    desc: str,
    axis: int = 0,
    chunk: int = 100,
) -> tuple[Any, Any]:
    """``run(carry, xs)``, a jitted ``lax.scan`` over ``xs``, a chunk of steps at a time.

    ``xs`` is cut along ``axis`` (its steps) into pieces of ``chunk`` steps; ``run`` is
    called on each in turn (it compiles once, and once more for a shorter last piece)
    and the outputs are joined along ``axis``: what one call on all of ``xs`` returns,
    with a progress report after each piece.
    """
    total = jax.tree.leaves(xs)[0].shape[axis]
    bar = progress(total=total, desc=desc)
    pieces = []
    for start in range(0, total, chunk):
        part = (slice(None),) * axis + (slice(start, start + chunk),)
        carry, ys = run(carry, jax.tree.map(lambda x, part=part: x[part], xs))
        pieces.append(jax.tree.map(np.asarray, ys))
        bar.update(min(chunk, total - start))
    bar.close()
    return carry, jax.tree.map(lambda *ys: np.concatenate(ys, axis=axis), *pieces)


def yscale(values: np.ndarray) -> str:
    """``"log"`` for positive values over two orders of magnitude or more (a loss, a
    norm), ``"linear"`` for the others (a return, an accuracy, a log-likelihood)."""
    spread = values.size > 0 and values.min() > 0 and values.max() >= 100 * values.min()
    return "log" if spread else "linear"


def tag(text: str) -> str:
    """``text`` as a TensorBoard tag: each run of other characters than letters, digits,
    ``_`` and ``.`` becomes one ``_``."""
    return re.sub(r"[^\w.]+", "_", text).strip("_")


class Curves:
    """Per-run curves (loss, gradient norm, ...) for ``--plot`` and ``--logdir``.

    Each finite point is written to TensorBoard as it is added, under ``{run}/{panel}``
    made tags (``tag("clip_norm = 1.0")`` is ``clip_norm_1.0``); ``close`` draws the
    plot.  Without either option it records nothing, so that a run costs the same as before.
    """

    def __init__(self, args: argparse.Namespace, title: str) -> None:
        self.title, self.path = title, args.plot
        self.panels: dict[str, dict[str, tuple[list, list]]] = {}
        self.writer = None
        if args.logdir is not None:
            from tensorboardX import SummaryWriter

            self.writer = SummaryWriter(str(args.logdir))

    @property
    def active(self) -> bool:
        """Whether anything is drawn or written."""
        return self.writer is not None or self.path is not None

    def add(self, panel: str, run: str, steps: Sequence[int], values: Sequence[float]) -> None:
        """Points ``(step, value)`` of ``run``'s curve in ``panel``."""
        if not self.active:
            return
        xs, ys = self.panels.setdefault(panel, {}).setdefault(run, ([], []))
        for step, value in zip(
            np.asarray(steps).tolist(), np.asarray(values).tolist(), strict=True
        ):
            xs.append(step)
            ys.append(value)
            if self.writer is not None and np.isfinite(value):  # a diverged run stops there
                self.writer.add_scalar(f"{tag(run)}/{tag(panel)}", value, step)

    def add_gradients(
        self, run: str, step: int, summary: fg.GradientSummary, names: Sequence[str]
    ) -> None:
        """A ``fg.gradient_summary`` at ``step``: its global norm, and all of it for TensorBoard.

        The TensorBoard tags are ``{run}/{name}/norm``, ``{run}/global_norm``, ... (see
        ``fg.write_gradient_summary``).
        """
        if not self.active:
            return
        xs, ys = self.panels.setdefault("gradient norm", {}).setdefault(run, ([], []))
        xs.append(step)
        ys.append(float(summary.global_norm))
        if self.writer is not None:
            fg.write_gradient_summary(self.writer, summary, step, names, prefix=tag(run))

    def close(self) -> None:
        """Flushes the TensorBoard files and saves the plot."""
        if self.writer is not None:
            self.writer.close()
        if self.path is not None:
            self._plot()
            print(f"curves saved to {self.path}")

    def _plot(self) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        # Loss first, gradient norm last, the others as they came.
        names = sorted(self.panels, key=lambda p: (p != "loss") + (p == "gradient norm"))
        runs = list(dict.fromkeys(run for panel in names for run in self.panels[panel]))
        fig, axes = plt.subplots(len(names), 1, figsize=(7, 3 * len(names)), sharex=True)
        for ax, panel in zip(np.atleast_1d(axes), names, strict=True):
            finite = []
            for i, (run, (xs, ys)) in enumerate(self.panels[panel].items()):
                y = np.asarray(ys, np.float64)
                y[~np.isfinite(y)] = np.nan  # a diverged run's curve ends where it diverged
                finite.append(y[np.isfinite(y)])
                style = ("-", "--", ":", "-.")[i % 4]  # curves that coincide stay visible
                ax.plot(xs, y, style, color=f"C{runs.index(run) % 10}", linewidth=0.8, label=run)
            ax.set(ylabel=panel, yscale=yscale(np.concatenate(finite)))
            ax.legend(fontsize=8)
        ax.set(xlabel="step")
        fig.suptitle(self.title)
        fig.savefig(self.path, dpi=120, bbox_inches="tight")
        plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    """The command line: only ``--help``."""
    return make_parser(__doc__)


def main(argv: Sequence[str] | None = None) -> None:
    """Prints the help (this module only serves the examples)."""
    build_parser().parse_args(argv or ["--help"])


if __name__ == "__main__":
    main()
