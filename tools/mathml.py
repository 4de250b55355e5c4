"""A mkdocs hook: the site's math as MathML, rendered at build time, so no page needs the network.

``pymdownx.arithmatex`` (``generic: true``) marks each formula of a page or docstring as
``<span class="arithmatex">\\(...\\)</span>`` or ``<div class="arithmatex">\\[...\\]</div>``
and leaves it as TeX for a script to typeset in the browser.  This hook (mkdocs.yml's
``hooks``) converts each one to MathML with ``latex2mathml`` when the page is built; every
current browser draws MathML itself, with no script and no font download.

A formula that ``latex2mathml`` cannot read stops the build with the page and the TeX.
"""

import html
import re
from typing import Any

from latex2mathml.converter import convert

#: ``\text{...}``, where TeX escapes an underscore (``\_``) that latex2mathml would show.
_TEXT = re.compile(r"\\text\{[^}]*\}")
_MARKED = re.compile(
    r'<(span|div) class="arithmatex">\s*(?:\\\((.*?)\\\)|\\\[(.*?)\\\])\s*</\1>', flags=re.S
)


def _mathml(match: re.Match[str], where: str) -> str:
    tag, inline, block = match.groups()
    tex = html.unescape(inline if inline is not None else block).strip()
    tex = _TEXT.sub(lambda text: text.group(0).replace("\\_", "_"), tex)
    display = "inline" if inline is not None else "block"
    try:
        rendered = convert(tex, display=display)
    except Exception as error:  # latex2mathml raises its own types and plain ones
        raise ValueError(f"{where}: latex2mathml cannot render the TeX {tex!r}: {error}") from error
    return f'<{tag} class="arithmatex">{rendered}</{tag}>'


def on_page_content(html_text: str, page: Any, **kwargs: Any) -> str:
    """Replaces every arithmatex formula of a built page by its MathML."""
    return _MARKED.sub(lambda m: _mathml(m, page.file.src_path), html_text)
