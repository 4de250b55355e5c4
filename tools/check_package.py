"""funcgrad as a user installs it: the release files, and the README's editable install.

Run by .ci/run from the test venv (``build``, ``twine`` and ``mypy`` come with the
``test`` extra); each step stops the run with what went wrong.

1. ``python -m build`` makes the sdist and, from it, the wheel; ``twine check --strict``
   reads their metadata (the long description renders, the license is Apache-2.0).
2. The wheel holds the package, ``py.typed`` and the license, and nothing else of the
   checkout (no tests, tools or examples); the sdist holds the license and the README.
3. The wheel, and the sdist, each installed (``--no-deps``) in a fresh venv that borrows
   its dependencies from this one (a ``.pth`` line), run the README's example and the
   main example from a folder outside the checkout: ``funcgrad`` is the installed copy.
4. ``pip install -e .``, the README's editable install, in a fresh venv: ``mypy`` on a
   file that imports funcgrad sees its types (setuptools' import-hook editable installs
   hid them: "Cannot find implementation or library stub").

    python tools/check_package.py
"""

import pathlib
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import textwrap
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(*command: str | pathlib.Path, cwd: pathlib.Path) -> str:
    """Runs ``command``; its output, or ``SystemExit`` with the output when it fails."""
    result = subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        sys.exit(f"{' '.join(map(str, command))} failed:\n{result.stdout}{result.stderr}")
    return result.stdout + result.stderr


def fresh_venv(where: pathlib.Path) -> pathlib.Path:
    """A new venv whose imports fall back to this interpreter's packages; its python."""
    run(sys.executable, "-m", "venv", where, cwd=where.parent)
    python = where / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=where)
    (pathlib.Path(site.strip()) / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"])
    return python


def check_contents(wheel: pathlib.Path, sdist: pathlib.Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    outside = sorted({n.split("/")[0] for n in names if not n.startswith("funcgrad")})
    assert outside == [], f"the wheel holds more than funcgrad: {outside}"
    assert "funcgrad/py.typed" in names, "the wheel has no funcgrad/py.typed"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "no LICENSE in wheel"
    with tarfile.open(sdist) as archive:
        members = {m.split("/", 1)[-1] for m in archive.getnames()}
    assert {"LICENSE", "README.md", "pyproject.toml"} <= members, "the sdist lacks a file"


def check_installed(archive: pathlib.Path, tmp: pathlib.Path) -> None:
    """``archive`` installed in a fresh venv runs the README's and the main example."""
    python = fresh_venv(tmp / f"venv-{archive.suffix.strip('.')}")
    run(python, "-m", "pip", "install", "-q", "--no-deps", archive, cwd=tmp)
    away = tmp / f"run-{archive.suffix.strip('.')}"
    away.mkdir()
    where = run(python, "-c", "import funcgrad; print(funcgrad.__file__)", cwd=away)
    assert where.startswith(str(python.parent.parent)), f"funcgrad imported from {where}"
    (away / "README.md").write_text((ROOT / "README.md").read_text())
    flags = ("-o", "NORMALIZE_WHITESPACE", "-o", "ELLIPSIS")
    run(python, "-m", "doctest", *flags, "README.md", cwd=away)
    out = run(python, ROOT / "examples" / "mnist_softmax.py", "--epochs", "1", cwd=away)
    print(f"{archive.name}: installed, README example and examples/mnist_softmax.py ran")
    print(textwrap.indent(out.strip().splitlines()[-1], "    "))


def check_editable_types(tmp: pathlib.Path) -> None:
    python = fresh_venv(tmp / "venv-editable")
    run(python, "-m", "pip", "install", "-q", "--no-deps", "-e", ROOT, cwd=tmp)
    user = tmp / "user.py"
    user.write_text("import funcgrad as fg\n\nreveal_type(fg.gradients)\n")
    out = run(
        sys.executable, "-m", "mypy", "--no-incremental", "--python-executable", python, user,
        cwd=tmp,
    )  # fmt: skip
    assert 'Revealed type is "def (f:' in out, f"mypy does not see funcgrad's types:\n{out}"
    print("pip install -e .: mypy sees funcgrad's types")


def main() -> None:
    with tempfile.TemporaryDirectory() as name:
        tmp = pathlib.Path(name)
        run(sys.executable, "-m", "build", "--outdir", tmp / "dist", ROOT, cwd=ROOT)
        (wheel,) = (tmp / "dist").glob("*.whl")
        (sdist,) = (tmp / "dist").glob("*.tar.gz")
        print(run(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist, cwd=tmp))
        check_contents(wheel, sdist)
        check_installed(wheel, tmp)
        check_installed(sdist, tmp)
        check_editable_types(tmp)


if __name__ == "__main__":
    main()
