"""Applies the test harness of ``tests/conftest.py`` to docs pages and docstrings too."""

from tests.conftest import doctest_names  # noqa: F401
from tests.conftest import xla_cache  # noqa: F401
