"""The strict test harness, for tests, docstring examples and docs pages alike.

Strict dtype promotion, ``rank_promotion="raise"``, 8 fake CPU devices and warnings as
errors (``filterwarnings`` in ``pyproject.toml``).  The root ``conftest.py`` imports this
module so that the same settings hold for the doctests outside ``tests/``.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(autouse=True)
def doctest_names(doctest_namespace: dict) -> None:
    """Every doctest starts with ``jax``, ``jnp``, ``np`` and ``fg`` imported."""
    doctest_namespace.update(jax=jax, jnp=jnp, np=np, fg=funcgrad)


@pytest.fixture(
    params=[pytest.param(jax.jit, id="with_jit"), pytest.param(lambda f: f, id="without_jit")]
)
def variant(request: pytest.FixtureRequest):
    """Run a test both traced under ``jax.jit`` and eagerly, as ``chex.variants`` does."""
    return request.param


@pytest.fixture
def printed_jaxprs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one each time a jaxpr is printed (``str`` of a jaxpr).

    JAX names a traced callable that has no code (a ``functools.partial``, the function
    ``jax.vjp`` returns) by its ``str()``, which prints every jaxpr it holds: on a
    model, a good part of the trace time, for a name.
    """
    printed: list[int] = []
    pretty_print = jax.extend.core.Jaxpr.pretty_print

    def counted(*args: object, **kwargs: object) -> str:
        printed.append(1)
        return pretty_print(*args, **kwargs)

    monkeypatch.setattr(jax.extend.core.Jaxpr, "pretty_print", counted)
    return printed
