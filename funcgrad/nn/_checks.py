"""Argument checks shared by ``fg.nn``'s functions, in funcgrad's one error voice.

Each check starts at the call (``caller``), says what was given and ends with the next
step, as ``funcgrad._checks`` does for the whole package; a wrong type is a
``TypeError``, a wrong value a ``ValueError``.  What is checked here is what TensorFlow
refuses or what would otherwise come back as a NaN, a truncated id or a hang.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad._checks import as_int
from funcgrad._checks import did_you_mean


def choice(caller: str, name: str, value: Any, valid: Sequence[str]) -> str:
    """``value``, one of the strings ``valid``; anything else is a ``ValueError``."""
    if not isinstance(value, str) or value not in valid:
        raise ValueError(
            f"{caller}: {name}={value!r} is none of {list(valid)}"
            f"{did_you_mean(str(value), valid)}; pass one of those."
        )
    return value


def op_name(caller: str, name: Any) -> None:
    """TensorFlow's ``name`` argument (unused): ``None`` or a string."""
    if name is not None and not isinstance(name, str):
        raise TypeError(
            f"{caller}: name={name!r} is not a string; pass TensorFlow's op name as a "
            "string, or leave it out (it names nothing here)."
        )


def seed(caller: str, seed: Any) -> None:
    """TensorFlow's ``seed`` argument (the draws come from ``key``): ``None`` or an int."""
    if seed is not None:
        as_int(
            caller, "seed", seed, hint="TensorFlow's seed is replaced by key=jax.random.key(seed)"
        )


def integer_ids(caller: str, name: str, ids: Any) -> jax.Array:
    """``ids`` as an integer array; floating ids are a ``TypeError``, never truncated."""
    ids = jnp.asarray(ids)
    if not jnp.issubdtype(ids.dtype, jnp.integer):
        raise TypeError(
            f"{caller}: {name} has dtype {ids.dtype}; pass integer ids (TensorFlow refuses "
            "others), e.g. ids.astype(jnp.int32) if they hold whole numbers."
        )
    return ids


def shards(caller: str, params: Any, name: str = "params") -> list[jax.Array]:
    """``params``, one table or a list of shards, as a list of shards split as
    TensorFlow's partitioners split a table (the first ``V % n`` one row longer)."""
    parts = list(params) if isinstance(params, list | tuple) else [params]
    if not parts:
        raise ValueError(f"{caller}: {name} is an empty list; pass the table or its shards.")
    parts = [jnp.asarray(s) for s in parts]
    rows = [s.shape[0] if s.ndim else 0 for s in parts]
    total, n = sum(rows), len(parts)
    split = [total // n + (p < total % n) for p in range(n)]
    if any(s.ndim < 1 for s in parts) or any(s.shape[1:] != parts[0].shape[1:] for s in parts):
        raise ValueError(
            f"{caller}: {name} has shards of shapes {[s.shape for s in parts]}; every shard "
            "needs the same row shape, one row per id."
        )
    if rows != split:
        raise ValueError(
            f"{caller}: {name} has shards of {rows} rows; TensorFlow's partitioned tables "
            f"split {total} rows as {split} (the first ones one row longer), and its mod and "
            "div strategies assume that split - pass the shards in that layout "
            "(jnp.array_split(table, n) makes it)."
        )
    if len({s.dtype for s in parts}) > 1:
        raise TypeError(
            f"{caller}: {name} has shards of dtypes {[str(s.dtype) for s in parts]}; cast "
            "them to one dtype."
        )
    return parts


def max_norm(caller: str, value: Any) -> Any:
    """``max_norm``: ``None``, a traced value, or a finite number above 0."""
    if value is None or isinstance(value, jax.core.Tracer):
        return value
    try:
        number = None if isinstance(value, bool | np.bool_) else float(np.asarray(value))
    except (TypeError, ValueError):
        number = None
    if number is None:
        raise TypeError(
            f"{caller}: max_norm={value!r} is not a number; pass the largest L2 norm of a "
            "looked-up row, or None."
        )
    if not np.isfinite(number) or number <= 0:
        raise ValueError(
            f"{caller}: max_norm={number} clips no row to a norm (it must be finite and "
            "above 0); pass the largest L2 norm of a looked-up row, or None."
        )
    return value


def key(caller: str, key: Any) -> jax.Array:
    """``key`` as a PRNG key; ``None`` or anything else is an error that says what to pass."""
    if key is None:
        raise TypeError(
            f"{caller}: no key given; TensorFlow draws from a hidden seed, funcgrad from an "
            "explicit one - pass key=jax.random.key(0) (a new key each step)."
        )
    if not isinstance(key, jax.Array) or not (
        jnp.issubdtype(key.dtype, jax.dtypes.prng_key) or key.shape == (2,)
    ):
        raise TypeError(f"{caller}: key={key!r} is no PRNG key; pass jax.random.key(seed).")
    return key
