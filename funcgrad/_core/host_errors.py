"""Errors raised in host callbacks, carried per call back to the caller — private.

Design note
-----------
JAX delivers an exception raised inside a host callback (``jax.pure_callback``,
``io_callback``) as ``jax.errors.JaxRuntimeError``: the exception's text is in the
message, the exception object is lost.  So the callback keeps each error under a
number of its own, which its message carries (``"(host error #17)"``), and a caller
that catches the ``JaxRuntimeError`` — ``fg.py_func`` called outside ``jax.jit``,
``fg.gradients`` evaluating eagerly — runs inside :func:`raised_as_kept`, which raises
the error that its own message names.  Each error has its own number and a caller
takes only the numbers in its own message, so errors raised at once in several threads
reach their own callers.  Errors no caller takes (inside a user's ``jax.jit``, where the
``JaxRuntimeError`` reaches the user) are dropped oldest first beyond ``_LIMIT``.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import re
import threading
from collections.abc import Iterator

import jax

_LIMIT = 1024
_LOCK = threading.Lock()
_KEPT: collections.OrderedDict[int, BaseException] = collections.OrderedDict()
_NUMBERS = itertools.count(1)
_TAG = re.compile(r"\(host error #(\d+)\)")


def keep(make: type[BaseException], *args: object) -> str:
    """Keep ``make(*args, tag)`` for its caller and return ``tag``, the text that names it."""
    number = next(_NUMBERS)
    tag = f"(host error #{number})"
    with _LOCK:
        _KEPT[number] = make(*args, tag)
        while len(_KEPT) > _LIMIT:
            _KEPT.popitem(last=False)
    return tag


@contextlib.contextmanager
def raised_as_kept() -> Iterator[None]:
    """Turn a ``JaxRuntimeError`` raised inside into the kept error its message names.

    An executable that several threads run at once may report a callback's failure as
    a ``ValueError`` with the same text (``INTERNAL: CpuCallback error``); it is taken
    the same way.  Any other error, or one naming no kept error, passes unchanged.

    A context manager, and a decorator when called: ``@raised_as_kept()``.
    """
    try:
        yield
    except (jax.errors.JaxRuntimeError, ValueError) as error:
        numbers = [int(n) for n in _TAG.findall(str(error))]
        with _LOCK:
            kept = [_KEPT.pop(n) for n in numbers if n in _KEPT]
        if kept:
            raise kept[0] from None
        raise
