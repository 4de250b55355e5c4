"""The built site as a reader's browser shows it, with no network.

The site is built (``mkdocs build --strict``) into a temporary folder and every page is
opened from disk in headless Chromium, driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: no port, nothing but the standard library).  The browser
resolves no host name and its proxy leads nowhere, and every request a page makes is
recorded.  The checks:

* nothing is requested from the network (the math is MathML made at build time, the
  fonts are the system's, the scripts are the site's own);
* the math is typeset: MathML is on the page, a fraction's numerator is drawn above its
  denominator, and no TeX (``\\[``, ``\\frac``) is left as text;
* every entry of the API reference shows its docstring's sections (parameters, returns,
  raises, examples) as rendered sections, none as raw ``Args:`` text;
* no private name reaches the reference (``_TfOptimizer``, ``Bases:``, ``funcgrad._core``);
* a snippet's copy button copies the code without its ``>>>`` prompts.

Chromium is Debian's ``chromium`` (``apt-get install -y chromium``; CI installs it).
Set ``FUNCGRAD_SCREENSHOTS=DIR`` to keep screenshots of the API reference and a concept
page in ``DIR``.
"""

from __future__ import annotations

import base64
import fcntl
import importlib
import importlib.util
import inspect
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
INSTALL = "apt-get update && apt-get install -y chromium"
#: The schemes of a page's own files; anything else came from (or went to) the network.
LOCAL = ("file:", "data:", "blob:", "about:")
#: A docstring section header, and the title mkdocstrings renders it under.
SECTIONS = {
    "Args": "Parameters:",
    "Returns": "Returns:",
    "Raises": "Raises:",
    "Yields": "Yields:",
    "Example": "Examples:",
    "Examples": "Examples:",
}
_SECTION = re.compile(rf"^\s*({'|'.join(SECTIONS)}):\s*$", flags=re.M)

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason=f"headless Chromium is not installed: {INSTALL}"),
    pytest.mark.skipif(
        any(
            importlib.util.find_spec(m) is None for m in ("mkdocs", "mkdocstrings", "latex2mathml")
        ),
        reason="the docs extra is not installed: pip install -e '.[docs]'",
    ),
]


_MOVE_PIPES_AND_EXEC = """
import os, sys
read, write = map(int, sys.argv[1:3])
os.dup2(read, 3)
os.dup2(write, 4)
os.close(read)
os.close(write)
os.execv(sys.argv[3], sys.argv[3:])
"""


class Browser:
    """Headless Chromium, offline, driven over the DevTools protocol on a pipe."""

    def __init__(self, profile: pathlib.Path) -> None:
        to_browser, self._commands = os.pipe()
        self._replies, from_browser = os.pipe()

        # --remote-debugging-pipe reads fd 3 and writes fd 4: a small Python moves the
        # pipes there and execs Chromium (a preexec_fn would fork this process, which JAX
        # warns against), from copies above 9 so that neither is already 3 or 4.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser, from_browser)]
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _MOVE_PIPES_AND_EXEC,
                *map(str, high),
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--proxy-server=127.0.0.1:9",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            pass_fds=tuple(high),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for fd in (to_browser, from_browser, *high):
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self.requests: list[str] = []  # every URL any page asked for

    def call(self, method: str, session: str | None = None, **params: Any) -> dict:
        """Sends one command and returns its result (events on the way are recorded)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def _receive(self) -> dict:
        while b"\0" not in self._buffer:
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict = json.loads(raw)
        if message.get("method") == "Network.requestWillBeSent":
            self.requests.append(message["params"]["request"]["url"])
        return message

    def open(self, url: str) -> str:
        """A new tab showing ``url``, loaded; returns its session."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session: str = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.call("Network.enable", session)
        self.call("Page.enable", session)
        self.call("Emulation.setDeviceMetricsOverride", session, width=1280, height=900,
                  deviceScaleFactor=1, mobile=False)  # fmt: skip
        self.call("Page.navigate", session, url=url)
        while True:
            message = self._receive()
            if (
                message.get("method") == "Page.loadEventFired"
                and message.get("sessionId") == session
            ):
                return session

    def evaluate(self, session: str, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the tab."""
        result = self.call(
            "Runtime.evaluate",
            session,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:60]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, session: str, path: pathlib.Path) -> None:
        data = self.call("Page.captureScreenshot", session, format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        self._process.kill()
        self._process.wait(timeout=30)
        os.close(self._commands)
        os.close(self._replies)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    chromium = Browser(tmp_path_factory.mktemp("profile"))
    yield chromium
    chromium.close()


# --- what a page shows (each a function of an open tab, tried on a bad page below) -------

#: TeX left as text: ``\[``, ``\(``, ``\]`` or a command the docstrings' math uses.
_RAW_TEX = re.compile(r"\\[\[(\]]|\\(?:frac|leftarrow|sqrt|beta|eta)\b")


def raw_tex(browser: Browser, tab: str) -> list[str]:
    """The lines of the page's text that still show TeX."""
    text = browser.evaluate(tab, "document.querySelector('article').innerText")
    return [line for line in text.splitlines() if _RAW_TEX.search(line)]


def fractions_typeset(browser: Browser, tab: str) -> list[bool]:
    """For each MathML fraction: is its numerator drawn above its denominator?"""
    return browser.evaluate(
        tab,
        """[...document.querySelectorAll('math mfrac')].map((f) => {
               const [top, bottom] = [...f.children].map((c) => c.getBoundingClientRect());
               return top.height > 0 && top.bottom <= bottom.top + 1;
           })""",
    )


def external(requests: list[str]) -> list[str]:
    return [url for url in requests if not url.startswith(LOCAL)]


def test_the_checks_can_fail(browser: Browser, tmp_path: pathlib.Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text(
        "<article><p>\\[ w \\leftarrow w - \\eta g \\]</p>"
        '<img src="https://example.com/logo.png"></article>'
    )
    seen = len(browser.requests)
    tab = browser.open(page.as_uri())
    assert raw_tex(browser, tab) == ["\\[ w \\leftarrow w - \\eta g \\]"]
    assert fractions_typeset(browser, tab) == []
    assert external(browser.requests[seen:]) == ["https://example.com/logo.png"]


def _pages(site: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in site.rglob("index.html") if "assets" not in p.parts)


def test_no_page_loads_anything_from_the_network(browser: Browser, site: pathlib.Path) -> None:
    seen = len(browser.requests)
    for page in _pages(site):
        tab = browser.open(page.as_uri())
        assert raw_tex(browser, tab) == [], f"{page.relative_to(site)} shows TeX as text"
    assert len(browser.requests) - seen > len(_pages(site))  # the pages and their assets
    assert external(browser.requests[seen:]) == []


@pytest.fixture(scope="module")
def api(browser: Browser, site: pathlib.Path) -> str:
    return browser.open((site / "api" / "index.html").as_uri())


def test_math_is_typeset(browser: Browser, api: str) -> None:
    assert browser.evaluate(api, "document.querySelectorAll('math').length") > 50
    typeset = fractions_typeset(browser, api)
    assert typeset, "no fraction on the API reference (the optimizers' update rules have some)"
    assert all(typeset)
    assert raw_tex(browser, api) == []


def _docstring(path: str) -> str | None:
    """The docstring of the object at the import path ``path`` (a heading's id)."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:  # a class or function: take it from its module below
            continue
        for attribute in parts[split:]:
            value = getattr(value, attribute)
        documented = inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value)
        return inspect.getdoc(value) if documented or isinstance(value, property) else None
    raise AssertionError(f"{path} names nothing importable")


def test_every_api_entry_renders_its_sections(browser: Browser, api: str) -> None:
    entries = browser.evaluate(
        api,
        """[...document.querySelectorAll('.doc-heading[id]')].map((h) => {
               const entry = h.closest('.doc-object');
               const own = (el) => el.closest('.doc-object') === entry;
               const titles = [...entry.querySelectorAll('.doc-section-title')].filter(own);
               const paragraphs = [...entry.querySelectorAll('.doc-contents p')]
                   .filter((p) => own(p) && !p.querySelector('.doc-section-title'));
               return {
                   id: h.id,
                   titles: titles.map((t) => t.innerText.trim()),
                   text: paragraphs.map((p) => p.innerText).join('\\n'),
               };
           })""",
    )
    assert len(entries) > 100
    problems = []
    for entry in entries:
        docstring = _docstring(entry["id"])
        if docstring is None:
            continue
        wanted = {SECTIONS[name] for name in _SECTION.findall(docstring)}
        if missing := wanted - set(entry["titles"]):
            problems.append(f"{entry['id']}: no rendered {sorted(missing)}")
        if raw := _SECTION.findall(entry["text"]):
            problems.append(f"{entry['id']}: {raw} as text")
    assert not problems, problems


def test_no_private_name_in_the_reference(browser: Browser, api: str) -> None:
    text = browser.evaluate(api, "document.body.innerText")
    private = re.findall(r"(?<![\w.])_[A-Z]\w*|\bBases:|\bfuncgrad(?:\.\w+)*\._[a-z]\w*", text)
    assert private == []


def test_copy_button_copies_code_without_prompts(browser: Browser, site: pathlib.Path) -> None:
    tab = browser.open((site / "gradients" / "index.html").as_uri())
    copies = browser.evaluate(
        tab,
        """[...document.querySelectorAll('.highlight code')]
               .filter((c) => c.textContent.includes('>>> '))
               .map((c) => c.getAttribute('data-copy'))""",
    )
    assert copies and all(c is not None for c in copies)
    assert not [c for c in copies if ">>>" in c or "..." in c.split("\n")[0]]
    # The first snippet, pasted into python, is valid code.
    compile(copies[0], "<copied>", "exec")


def test_screenshots(
    browser: Browser, site: pathlib.Path, api: str, tmp_path: pathlib.Path
) -> None:
    folder = pathlib.Path(os.environ.get("FUNCGRAD_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    browser.evaluate(
        api, "document.getElementById('funcgrad.train.AdamOptimizer').scrollIntoView()"
    )
    browser.screenshot(api, folder / "api_adam.png")
    concept = browser.open((site / "gradients" / "index.html").as_uri())
    browser.screenshot(concept, folder / "gradients.png")
    for shot in ("api_adam.png", "gradients.png"):
        assert (folder / shot).stat().st_size > 10_000  # a page, not a blank image
