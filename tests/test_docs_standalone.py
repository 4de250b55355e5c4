"""Every docs page runs in a plain Python session, with only what the page itself sets up.

The harness (``tests/conftest.py``) runs the pages with 8 CPU devices, strict dtype
promotion and ``jax``, ``jnp``, ``np`` and ``fg`` already imported; a reader who types a
page into ``python`` has none of that.  Here each page runs in a fresh interpreter that
imports neither ``conftest.py`` nor funcgrad beforehand: its ```` ```python ```` blocks in
order, in one namespace, with the doctest options of ``pyproject.toml``.  The first
failing block stops the page, and the failure names the page, the block and the line.

What a block prints is compared by the standard library's ``doctest`` checker, as the
reader's ``python`` prints it: no pytest ``NUMBER`` option that would let a page show
``0.1`` where Python prints ``0.10000000149011612`` (a page that wants fewer digits rounds
in the snippet).  Only whitespace is normalised and ``...`` elides (tracebacks, addresses).

Run one page by hand: ``python -m tests.test_docs_standalone docs/scale.md``.
"""

from __future__ import annotations

import doctest
import os
import pathlib
import re
import subprocess
import sys
import tomllib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.M | re.S)
PYTHON = ("python", "py", "pycon")


def python_blocks(text: str) -> list[tuple[int, str]]:
    """The page's Python code blocks as ``(line index of the first code line, body)``."""
    return [
        (text.count("\n", 0, m.start(2)), m.group(2))
        for m in FENCE.finditer(text)
        if m.group(1) in PYTHON
    ]


#: The doctest options a page may rely on: what Python prints, up to whitespace and ``...``.
EXACT_OPTIONS = {"NORMALIZE_WHITESPACE", "ELLIPSIS"}


def _option_names() -> list[str]:
    """The ``doctest_optionflags`` of ``pyproject.toml``."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        names: list[str] = tomllib.load(f)["tool"]["pytest"]["ini_options"]["doctest_optionflags"]
    return names


def _option_flags() -> int:
    """The standard library's flags for :func:`_option_names`."""
    return sum(doctest.OPTIONFLAGS_BY_NAME[name] for name in set(_option_names()))


def test_doctest_options_compare_what_python_prints() -> None:
    extra = set(_option_names()) - EXACT_OPTIONS
    assert not extra, (
        f"pyproject.toml's doctest_optionflags has {sorted(extra)}: the pages would show other "
        f"numbers than a reader's python prints; round in the snippet instead"
    )


def test_the_checker_tells_float32_digits_apart() -> None:
    # A float32 0.1 read as a Python float: what NUMBER would let a page print as 0.1.
    test = doctest.DocTestParser().get_doctest(
        ">>> float(np.float32(0.1))\n0.1\n", {"np": np}, "float32", None, 0
    )
    runner = doctest.DocTestRunner(optionflags=_option_flags())
    assert runner.run(test, out=lambda _: None).failed == 1


def run_page(page: pathlib.Path) -> int:
    """Runs ``page``'s Python blocks in order in this interpreter; 1 at the first failure."""
    text = page.read_text()
    flags = _option_flags() | doctest.REPORT_ONLY_FIRST_FAILURE
    runner = doctest.DocTestRunner(checker=doctest.OutputChecker(), optionflags=flags)
    parser = doctest.DocTestParser()
    namespace: dict = {"__name__": "__main__"}
    for n, (line, body) in enumerate(python_blocks(text), start=1):
        name = f"{page.name}, code block {n}"
        test = parser.get_doctest(body, namespace, name, str(page), line)
        failed, _ = runner.run(test, clear_globs=False)
        namespace = test.globs  # a DocTest runs in a copy: carry it to the next block
        if failed:
            print(f"{name} (line {line + 1}) fails in a plain Python session")
            return 1
    return 0


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_runs_in_a_plain_python_session(page: pathlib.Path) -> None:
    if not python_blocks(page.read_text()):
        return
    # The environment as it is (XLA_FLAGS included); only this checkout is put first.
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-m", "tests.test_docs_standalone", str(page.relative_to(ROOT))],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, (
        f"{page.name} does not run on its own (import or set up at the top of the page what it "
        f"uses):\n{result.stdout[:4000]}{result.stderr[-2000:]}"
    )


if __name__ == "__main__":
    sys.exit(run_page(pathlib.Path(sys.argv[1])))
