"""funcgrad._core.host_errors: each kept error is raised for the caller its message names."""

import jax
import pytest

from funcgrad._core import host_errors as _host_errors


class _KeptError(RuntimeError):
    pass


def _runtime_error(text):
    return jax.errors.JaxRuntimeError(f"INTERNAL: CpuCallback error: {text}")


def test_the_error_a_message_names_is_raised_once_then_forgotten():
    tag = _host_errors.keep(_KeptError, "first")
    other = _host_errors.keep(_KeptError, "second")
    with pytest.raises(_KeptError, match=r"'first'"), _host_errors.raised_as_kept():
        raise _runtime_error(tag)
    # Taken already: the JaxRuntimeError stays what it is.
    with pytest.raises(jax.errors.JaxRuntimeError), _host_errors.raised_as_kept():
        raise _runtime_error(tag)
    with pytest.raises(_KeptError, match=r"'second'"), _host_errors.raised_as_kept():
        raise _runtime_error(other)


def test_errors_nobody_takes_are_dropped_oldest_first():
    first = _host_errors.keep(_KeptError, "oldest")
    for _ in range(_host_errors._LIMIT):
        _host_errors.keep(_KeptError, "newer")
    assert len(_host_errors._KEPT) <= _host_errors._LIMIT
    with pytest.raises(jax.errors.JaxRuntimeError), _host_errors.raised_as_kept():
        raise _runtime_error(first)
