"""The parity tolerance rule of ``tests/README.md``: funcgrad against TensorFlow on any CPU.

TensorFlow's float32 kernels round differently on each CPU, so a parity test whose
TensorFlow value drifts compares both sides to a float64 reference and accepts funcgrad
when it is no further from it than TensorFlow is on this CPU, plus a few units in the
last place of its own rounding.
"""

from __future__ import annotations

import numpy as np


def ulps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many float32 values lie between ``a`` and ``b`` (the sign of a zero ignored)."""

    def ordered(v: np.ndarray) -> np.ndarray:
        i = v.astype(np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    return np.abs(ordered(a) - ordered(b))


def within_tensorflows_error(
    want: np.ndarray, got: np.ndarray, exact: np.ndarray, ulps: int, scale: object = 0.0
) -> np.ndarray:
    """Whether funcgrad is no further from the exact value than TensorFlow is on this CPU,
    plus ``ulps`` units of float32 rounding (the rule of ``tests/README.md``), counted at
    the value's magnitude or at ``scale`` (one, or one per value), that of the terms that
    cancel into it.

    Where the float64 reference is not a finite float32 number, TensorFlow's value is the
    reference: ``got`` within ``ulps`` of ``want``.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        exact32 = exact.astype(np.float32)
        magnitude = np.maximum(np.maximum(np.abs(exact32), np.abs(want)), np.float32(scale))
        unit = np.spacing(magnitude).astype(np.float64)
        tf_error = np.abs(want.astype(np.float64) - exact)
        error = np.abs(got.astype(np.float64) - exact)
        close = error <= tf_error + ulps * unit
    return np.where(np.isfinite(exact32), close, ulps_apart(want, got) <= ulps)


def assert_as_close_as_tensorflow(
    got: object, want: object, exact: object, ulps: int = 4, err_msg: str = "", scale: object = 0.0
) -> None:
    """Assert ``got`` (funcgrad) is within TensorFlow's error of ``exact``, plus ``ulps``
    at the magnitude of the value or at ``scale`` (:func:`within_tensorflows_error`).

    Non-finite entries must match TensorFlow's exactly (NaN for NaN, inf of the same sign).
    """
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    exact = np.broadcast_to(np.asarray(exact, np.float64), want.shape)
    same = (np.isnan(want) & np.isnan(got)) | (want == got)
    close = within_tensorflows_error(want, got, exact, ulps, scale)
    same |= np.isfinite(want) & np.isfinite(got) & close
    bad = np.flatnonzero(~same.ravel())
    assert not bad.size, f"{err_msg}: " + "; ".join(
        f"[{i}] funcgrad {got.ravel()[i]!r}, TensorFlow {want.ravel()[i]!r}, "
        f"exact {exact.ravel()[i]!r}"
        for i in bad[:8]
    )
