"""Side-by-side timing helpers shared by the benchmark scripts."""

import statistics
import time
from collections.abc import Callable

import jax


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    """The first quartile, the median and the third quartile of ``xs``."""
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


def with_iqr(xs: list[float], digits: int = 3) -> str:
    """``xs``' median and, in brackets, its interquartile range: ``1.002 (0.981-1.020)``."""
    q1, q2, q3 = quartiles(xs)
    return f"{q2:.{digits}f} ({q1:.{digits}f}-{q3:.{digits}f})"


def time_call(fn: Callable[[], object], number: int) -> float:
    """Seconds per call of ``fn`` (its result blocked on), over ``number`` calls."""
    start = time.perf_counter()
    for _ in range(number):
        out = fn()
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / number


def _samples(
    fns: dict[str, Callable[[], object]], repeats: int, number: int, *, rotate: bool
) -> dict[str, list[float]]:
    """Seconds per call of each function, one sample per repeat, all timed in each repeat.

    After one warm-up call each (compilation), every repeat times every function once:
    in the given order, or, with ``rotate``, starting one further along each repeat.
    """
    for fn in fns.values():  # warm-up: compile and run once
        jax.block_until_ready(fn())
    names = list(fns)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        shift = r % len(names) if rotate else 0
        for name in names[shift:] + names[:shift]:
            samples[name].append(time_call(fns[name], number))
    return samples


def interleaved(fns: dict[str, Callable[[], object]], repeats: int, number: int) -> dict:
    """Median seconds per call of each function, timed in turn within each repeat."""
    samples = _samples(fns, repeats, number, rotate=False)
    return {name: statistics.median(s) for name, s in samples.items()}


def paired(
    fns: dict[str, Callable[[], object]], repeats: int, number: int
) -> dict[str, tuple[float, list[float]]]:
    """Each function's median seconds per call and its ratio to the first, per repeat.

    Every repeat times all functions once, in an order rotated from repeat to repeat, and
    divides each time by the first function's time in the same repeat: a ratio of two
    measurements taken moments apart, which drift on a shared machine moves far less
    than it moves either time.  Returns ``{name: (median seconds, [ratio per repeat])}``.
    """
    samples = _samples(fns, repeats, number, rotate=True)
    base = samples[next(iter(fns))]
    return {
        name: (statistics.median(s), [t / b for t, b in zip(s, base, strict=True)])
        for name, s in samples.items()
    }
