"""Floors that only look down: no library module imports the package facade.

(The floor-by-floor contracts are import-linter contracts in pyproject.toml, run
by ``lint-imports`` in ``make test``; this test covers what import-linter cannot
express: ``dyngraph/__init__.py`` itself is the top floor.)
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "dyngraph"

# modules allowed to reach the facade, and why
ALLOWED = {
    "run_torch.py": "a program (python -m dyngraph.run_torch) that maps torch onto dg, not a library floor",
    "version.py": "torch.version surface: re-exports the version string the facade defines",
}


def facade_imports(path: pathlib.Path, rel: pathlib.PurePath) -> list:
    """(line, what) for each import of names from ``dyngraph/__init__.py`` in ``path``."""
    subs = {p.stem for p in ROOT.glob("*.py")} | {p.name for p in ROOT.iterdir() if p.is_dir()}
    subs |= {p.stem for p in ROOT.glob("*.c")}   # the C extensions (_speedups, _kernels): submodules
    depth = len(rel.parts) - 1
    out = []
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom):
            root = (n.level and n.level - 1 == depth and not n.module) or \
                (n.level == 0 and n.module == "dyngraph")
            if root:
                out += [(n.lineno, a.name) for a in n.names if a.name not in subs]
        elif isinstance(n, ast.Import):
            out += [(n.lineno, "import dyngraph") for a in n.names if a.name == "dyngraph"]
    return out


def test_no_library_module_imports_the_facade():
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] == "examples" or rel.as_posix() in ("__init__.py", *ALLOWED):
            continue
        bad += [f"dyngraph/{rel.as_posix()}:{line}: {what}" for line, what in facade_imports(path, rel)]
    assert not bad, "library modules importing the package facade (import the defining module):\n  " \
        + "\n  ".join(bad)


def test_the_scan_sees_a_facade_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from .. import cat\nfrom .. import tensor\nimport dyngraph\n")
    assert facade_imports(probe, pathlib.PurePath("ops/probe.py")) == [(1, "cat"), (3, "import dyngraph")]
