"""The docs site: every public name documented, every code block run, the strict build."""

import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

import funcgrad as fg
from tests.test_docs_standalone import python_blocks

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: Pages written by hand; the API reference is generated from the docstrings.
PAGES = sorted(p for p in DOCS.glob("*.md") if p.name != "api.md")


def _public_names() -> list[tuple[str, str]]:
    return (
        [("fg.", n) for n in fg.__all__]
        + [("fg.nn.", n) for n in fg.nn.__all__]
        + [("fg.train.", n) for n in fg.train.__all__]
        + [("fg.testing.", n) for n in fg.testing.__all__]
    )


@pytest.mark.parametrize(("namespace", "name"), _public_names(), ids="".join)
def test_public_name_is_on_a_docs_page(namespace: str, name: str) -> None:
    # Written out in full (fg.train.AdamOptimizer) or opening a code span (`AdamOptimizer`).
    pattern = re.compile(rf"(?:{re.escape(namespace)}|`){re.escape(name)}(?![\w])")
    pages = [p.name for p in PAGES if pattern.search(p.read_text())]
    assert pages, f"{namespace}{name} is on no page of docs/ (api.md aside); show it on its page"


def _python_blocks() -> list:
    return [
        pytest.param(page, body, id=f"{page.name}:{n}")
        for page in sorted(DOCS.glob("*.md"))
        for n, (_, body) in enumerate(python_blocks(page.read_text()), start=1)
    ]


@pytest.mark.parametrize(("page", "body"), _python_blocks())
def test_python_block_runs_as_a_doctest(page: pathlib.Path, body: str) -> None:
    lines = body.split("\n")
    assert any(line.startswith(">>> ") for line in lines), (
        f"{page.name}: a ```python block with no >>> prompt would never run; "
        "write it as a doctest, or fence it as ```text if it is not Python to run"
    )
    assert body.endswith("\n\n"), f"{page.name}: end the doctest block with a blank line"


def _nav_pages() -> list[str]:
    return re.findall(r":\s*([\w/-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), flags=re.M)


def test_nav_and_pages_match() -> None:
    nav = _nav_pages()
    on_disk = sorted(p.name for p in DOCS.glob("*.md"))
    assert sorted(nav) == on_disk, (
        f"not in mkdocs.yml's nav: {sorted(set(on_disk) - set(nav))}; "
        f"in the nav but missing: {sorted(set(nav) - set(on_disk))}"
    )


def test_api_reference_covers_every_namespace() -> None:
    text = (DOCS / "api.md").read_text()
    for namespace in ("funcgrad", "funcgrad.nn", "funcgrad.train", "funcgrad.testing"):
        assert f"::: {namespace}\n" in text


_NAMESPACES = {"fg.": fg, "fg.nn.": fg.nn, "fg.train.": fg.train, "fg.testing.": fg.testing}
#: A reStructuredText role or directive that reached the site as text instead of a link.
_LEAKED_ROLE = re.compile(
    r":(?:func|class|meth|attr|data|mod|exc|math|obj):(?:`|<code>)|\.\. math::"
)


def _anchors(html: str) -> set[str]:
    return set(re.findall(r'id="([^"]+)"', html))


def _missing_anchors(html: str) -> list[str]:
    """The public names with no entry in the built API reference.

    A name's entry is ``funcgrad.NAME`` (``funcgrad.train.NAME``, ...) or, for a name its
    module shadows (``fg.gradients``), the path of its definition.
    """
    anchors = _anchors(html)
    missing = []
    for namespace, name in _public_names():
        module = _NAMESPACES[namespace]
        public = f"{module.__name__}.{name}"
        value = getattr(module, name)
        defined = f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', name)}"
        if not {public, defined} & anchors:
            missing.append(f"{namespace}{name}")
    return missing


def _leaked_roles(site: pathlib.Path) -> list[str]:
    return [
        f"{page.relative_to(site)}: {match.group(0)}"
        for page in sorted(site.rglob("*.html"))
        for match in _LEAKED_ROLE.finditer(page.read_text())
    ]


def test_the_site_checks_can_fail(tmp_path: pathlib.Path) -> None:
    every = "".join(f'<h2 id="{_NAMESPACES[ns].__name__}.{n}"></h2>' for ns, n in _public_names())
    assert _missing_anchors(every) == []
    assert _missing_anchors(every.replace('id="funcgrad.hessians"', "")) == ["fg.hessians"]
    (tmp_path / "page.html").write_text("see :func:<code>gradients</code> and .. math::")
    assert _leaked_roles(tmp_path) == [
        "page.html: :func:<code>",
        "page.html: .. math::",
    ]


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("mkdocs", "mkdocstrings", "latex2mathml")),
    reason="the docs extra is not installed: pip install -e '.[docs]'",
)
def test_site_builds_strict(tmp_path: pathlib.Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "migration" / "index.html").is_file()
    assert "fg.train.RMSPropOptimizer" in (tmp_path / "migration" / "index.html").read_text()
    api = (tmp_path / "api" / "index.html").read_text()
    missing = _missing_anchors(api)
    assert not missing, f"no entry in the API reference for {missing}; add them to docs/api.md"
    leaked = _leaked_roles(tmp_path)
    assert not leaked, f"reST that reached the site as text: {leaked}"
    # A cross-reference renders as a link to the entry it names.
    assert 'href="#funcgrad.gradients.gradients"' in api
