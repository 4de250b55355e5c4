"""The strict test harness, for tests, docstring examples and docs pages alike.

Strict dtype promotion, ``rank_promotion="raise"``, 8 fake CPU devices and warnings as
errors (``filterwarnings`` in ``pyproject.toml``).  The root ``conftest.py`` imports this
module so that the same settings hold for the doctests outside ``tests/``.

Each test process keeps its own XLA compilation cache, shared with the scripts it starts
(docs pages, examples, benchmarks): most of the suite's time is XLA compiling, and many
tests compile the same program again (an eager and a jitted run, a fresh optimizer object,
a donated and a re-jitted step).  JAX's persistent cache gives those the executable
compiled first, keyed by the program, its compile options and devices, JAX's version and
``XLA_FLAGS``.  One cache per process: JAX writes an entry in place, so a process reading
another's half-written entry would see a corrupt one.  A cache named by
``JAX_COMPILATION_CACHE_DIR`` is used instead where one is set.
"""

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

_OWN_XLA_CACHE = (
    None if "JAX_COMPILATION_CACHE_DIR" in os.environ else tempfile.mkdtemp(prefix="funcgrad-xla-")
)
if _OWN_XLA_CACHE:
    atexit.register(shutil.rmtree, _OWN_XLA_CACHE, ignore_errors=True)
    jax.config.update("jax_compilation_cache_dir", _OWN_XLA_CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """An xdist worker that has sent its results leaves without the interpreter's teardown.

    Freeing the thousands of executables a worker compiled, and every object of JAX and
    TensorFlow, took the two workers about half a minute at the end of the suite, with
    every result already reported.  Its XLA cache is removed first, as ``atexit`` would.
    """
    if not hasattr(config, "workeroutput"):  # the main process, or a run without xdist
        return
    if _OWN_XLA_CACHE:
        shutil.rmtree(_OWN_XLA_CACHE, ignore_errors=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@pytest.fixture(autouse=True, scope="session")
def xla_cache() -> Iterator[None]:
    """Hands this process's XLA cache to the scripts it starts (``atexit`` removes it)."""
    with pytest.MonkeyPatch.context() as env:
        if _OWN_XLA_CACHE:
            env.setenv("JAX_COMPILATION_CACHE_DIR", _OWN_XLA_CACHE)
            env.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
        yield


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
