"""The README, CI and documentation agree with each other.

* the README's install, test and documentation commands are the ones ``.ci/run`` runs;
* the README states the Python version ``pyproject.toml`` requires;
* every gallery example is where sphinx-gallery finds it and uses the public API only;
* the generated API pages list every public name.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"
EXAMPLES = ROOT / "examples"
PUBLIC_MODULES = {"corrpriors", "corrpriors.kernels", "corrpriors.applications", "corrpriors.mdp",
                  "corrpriors.envs", "corrpriors.plotting"}

pytestmark = pytest.mark.skipif(not README.exists() or not CI.exists(),
                                reason="needs a source checkout (README.md and .ci/run)")


def readme_commands() -> list[str]:
    """Every command line of the README's ``bash`` blocks (joined at ``&&``)."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    out = []
    for block in blocks:
        for line in block.splitlines():
            line = line.split(" #")[0].strip()
            out += [part.strip() for part in line.split("&&") if part.strip()]
    return out


def ci_commands() -> list[str]:
    """The command lines of ``.ci/run`` (comments and blank lines dropped)."""
    lines = [line.strip() for line in CI.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def pip_install_extras(command: str) -> set[str] | None:
    """The extras of a ``pip install .`` / ``pip install ".[a,b]"`` command, None otherwise."""
    words = shlex.split(command)
    if words[:2] == ["python", "-m"]:
        words = words[2:]
    if words[:2] != ["pip", "install"]:
        return None
    targets = [w for w in words[2:] if not w.startswith("-")]
    if len(targets) != 1 or not re.fullmatch(r"\.(\[[a-z,]+\])?", targets[0]):
        return None
    match = re.search(r"\[([a-z,]+)\]", targets[0])
    return set(match.group(1).split(",")) if match else set()


def test_readme_install_commands_are_what_ci_installs():
    readme = [e for e in map(pip_install_extras, readme_commands()) if e is not None]
    ci = [e for e in map(pip_install_extras, ci_commands()) if e is not None]
    assert set() in readme, "README: expected the plain install command `pip install .`"
    assert len(ci) == 1, f".ci/run: expected one `pip install .[...]` of the package, got {ci}"
    for extras in readme:
        assert extras <= ci[0], f"README installs extras {extras} that CI does not ({ci[0]})"
    assert {"test", "docs"} <= ci[0]


def test_readme_test_command_is_the_ci_test_command():
    readme = [c for c in readme_commands() if "pytest" in c]
    ci = [c for c in ci_commands() if "pytest" in c]
    assert readme == ["python -m pytest"]
    assert ci == readme


def test_readme_lint_commands_are_the_ci_lint_commands():
    def lint(commands):
        return [c for c in commands if c.split()[0] in ("ruff", "mypy")]

    readme = lint(readme_commands())
    assert readme == ["ruff check src tests benchmarks examples", "mypy"]
    assert lint(ci_commands()) == readme


def test_readme_docs_command_is_the_ci_docs_command():
    readme = [c for c in readme_commands() if "sphinx" in c]
    ci = [c for c in ci_commands() if "sphinx" in c]
    assert len(readme) == 1 and len(ci) == 1
    assert "-W" in readme[0].split(), "the documentation build must treat warnings as errors"
    # CI adds -q (warnings and errors only) so that the test summary stays the last line
    assert ci[0].split() == readme[0].split()[:3] + ["-q"] + readme[0].split()[3:]


def test_readme_states_the_required_python_and_a_venv():
    text = README.read_text(encoding="utf-8")
    requires = re.search(r'requires-python\s*=\s*">=(\d+\.\d+)"',
                         (ROOT / "pyproject.toml").read_text(encoding="utf-8")).group(1)
    assert f"Python {requires} or newer" in text
    assert "python3 -m venv" in text


def example_files() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*.py") if p.name != "make_example_data.py")


def test_gallery_examples_are_where_sphinx_gallery_finds_them():
    files = example_files()
    assert len(files) >= 6
    assert (EXAMPLES / "GALLERY_HEADER.rst").exists()
    for path in files:
        assert path.name.startswith("plot_"), f"{path}: gallery examples are named plot_*.py"
        assert (path.parent / "GALLERY_HEADER.rst").exists(), f"{path.parent}: no GALLERY_HEADER.rst"
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert doc, f"{path}: needs a module docstring (the example's title and introduction)"
        title, underline = doc.splitlines()[:2]
        assert set(underline) == {"="} and len(underline) >= len(title), \
            f"{path}: the title must be underlined with '='"


def test_gallery_examples_use_the_public_api_only():
    for path in example_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("corrpriors"):
                assert node.module in PUBLIC_MODULES, f"{path}: imports from {node.module}"
                assert not any(a.name.startswith("_") for a in node.names), path
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("corrpriors"):
                        assert alias.name in PUBLIC_MODULES, f"{path}: imports {alias.name}"


def test_api_pages_list_every_public_name(tmp_path):
    pytest.importorskip("sphinx")
    spec = importlib.util.spec_from_file_location("_apigen", ROOT / "docs" / "_apigen.py")
    apigen = importlib.util.module_from_spec(spec)
    sys.modules["_apigen"] = apigen
    try:
        spec.loader.exec_module(apigen)
        apigen.write_api_pages(tmp_path)
    finally:
        del sys.modules["_apigen"]
    index = (tmp_path / "index.rst").read_text(encoding="utf-8")
    for module, _, _ in apigen.MODULES:
        assert f"   {module}\n" in index
        page = (tmp_path / f"{module}.rst").read_text(encoding="utf-8")
        for name in apigen.public_names(module):
            listed = re.search(rf"^(   {re.escape(name)}|\.\. py:data:: {re.escape(name)})$",
                               page, flags=re.M)
            also = f"``{name}`` (:obj:" in page
            assert listed or also, f"{module}.{name} is missing from the API page"
