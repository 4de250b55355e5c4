"""A griffe extension for the API reference: funcgrad's docstrings as the site renders them.

funcgrad's docstrings are Google style with a few reStructuredText habits that read well
in ``help()`` and in an editor; mkdocstrings renders Markdown.  mkdocs.yml loads this file
under mkdocstrings' ``extensions``; it rewrites every docstring griffe loads:

* the ``Example:`` section header becomes ``Examples:``, the one griffe renders as code;
* a cross-reference role (``:func:`gradients```, ``:class:`~funcgrad.train.TrainState```,
  ``:meth:`compute_gradients```) becomes an autorefs link to the object's entry in the
  API reference, found by importing the name from the docstring's own scope;
* a parameter whose default is a private sentinel (there so that a call without it
  reaches a clear error) is shown as required;
* a package's docstring is cut to its first paragraph: the rest maps its modules,
  private ones included, for a reader of the source;
* ``:math:`x``` and ``.. math::`` blocks become ``\\(x\\)`` and ``\\[...\\]``, which
  ``pymdownx.arithmatex`` marks and tools/mathml.py renders as MathML.

A role whose name cannot be found is left as it is, so the site test that looks for
leaked roles reports it.
"""

import importlib
import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", flags=re.M)
_ROLE = re.compile(r":(func|class|meth|attr|data|mod|exc):`(~?)([\w.]+)`")
_MATH_ROLE = re.compile(r":math:`([^`]+)`")
# A block is its header, then lines indented deeper than it, or blank: ``[ \t]``, not ``\s``,
# which would match a line break and take the sections after a block into it.
_MATH_BLOCK = re.compile(r"^([ \t]*)\.\. math::[ \t]*\n((?:\1[ \t]+\S.*\n|[ \t]*\n)+)", flags=re.M)


def _target(obj: griffe.Object, name: str) -> str | None:
    """The import path of ``name`` as seen from ``obj``'s docstring, or ``None``."""
    module_path = obj.module.path
    scopes = []
    if obj.is_function and obj.parent is not None and obj.parent.is_class:
        scopes.append(obj.parent.path)  # a method's docstring: its class first
    if obj.is_class:
        scopes.append(obj.path)
    scopes += [module_path, "funcgrad", "funcgrad.train", ""]
    for scope in scopes:
        path = f"{scope}.{name}" if scope else name
        found = _import(path)
        if found is not None:
            return _canonical(found, path)
    return None


def _import(path: str) -> Any:
    """``path`` as Python reads it: the first module, then attributes (so
    ``funcgrad.gradients`` is the function that ``funcgrad`` exports, not its module)."""
    parts = path.split(".")
    try:
        value: Any = importlib.import_module(parts[0])
    except ImportError:
        return None
    for i, attribute in enumerate(parts[1:], start=1):
        if hasattr(value, attribute):
            value = getattr(value, attribute)
            continue
        try:
            value = importlib.import_module(".".join(parts[: i + 1]))
        except ImportError:
            return None
    return value


def _canonical(value: Any, path: str) -> str:
    """The path where the value is defined (mkdocstrings registers that anchor too)."""
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname:
        return f"{module}.{qualname}"
    return path


def _links(obj: griffe.Object, text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        _, short, name = match.groups()
        target = _target(obj, name)
        if target is None:
            return match.group(0)
        shown = name.rsplit(".", 1)[-1] if short else name
        return f"[`{shown}`][{target}]"

    return _ROLE.sub(replace, text)


def _math(text: str) -> str:
    def block(match: re.Match[str]) -> str:
        indent, body = match.groups()
        lines = [line.strip() for line in body.splitlines() if line.strip()]
        return f"{indent}\\[\n{indent}" + f"\n{indent}".join(lines) + f"\n{indent}\\]\n\n"

    return _MATH_ROLE.sub(r"\\(\1\\)", _MATH_BLOCK.sub(block, text))


class Docstrings(griffe.Extension):
    """Rewrites the docstring of every object griffe loads (see the module docstring)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrites one object's docstring."""
        if isinstance(obj, griffe.Function):
            for parameter in obj.parameters:
                if str(parameter.default).startswith("_"):
                    parameter.default = None  # a private sentinel: the argument is required
        if obj.docstring is None:
            return
        if isinstance(obj, griffe.Module) and obj.is_init_module:
            # A package's docstring goes on to map its modules, private ones included,
            # for a reader of the source; the reference lists the public names instead.
            obj.docstring.value = obj.docstring.value.split("\n\n", 1)[0]
        else:
            text = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
            obj.docstring.value = _math(_links(obj, text))
