# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The open-source basics: the BSD-3-Clause LICENSE that pyproject.toml declares, and its SPDX identifier at the
top of every source file (scripts and build files too), as ExecuTorch and oneDNN carry on theirs."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SPDX = "SPDX-License-Identifier: BSD-3-Clause"
SOURCE_SUFFIXES = {".py", ".sh", ".cpp", ".h", ".cmake", ".toml"}
SKIPPED_DIRS = {".git", ".venv", "build", "dist", "results", "__pycache__", ".pytest_cache", ".ruff_cache"}


def _sources() -> list[Path]:
    found: list[Path] = []
    for path in ROOT.rglob("*"):
        if any(part in SKIPPED_DIRS or part.startswith(".venv") for part in path.relative_to(ROOT).parts):
            continue
        if path.is_file() and (path.suffix in SOURCE_SUFFIXES or path.name == "CMakeLists.txt"):
            found.append(path)
    return [*found, ROOT / ".ci" / "run"]


def test_the_license_is_the_one_pyproject_declares() -> None:
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License\n")
    assert 'license = { text = "BSD-3-Clause" }' in (ROOT / "pyproject.toml").read_text()


def test_every_source_file_names_its_license() -> None:
    sources = _sources()
    assert len(sources) > 150, f"only {len(sources)} source files found under {ROOT}"
    missing = [
        str(path.relative_to(ROOT)) for path in sources if SPDX not in "\n".join(path.read_text().splitlines()[:4])
    ]
    assert not missing, f"no '{SPDX}' in the first lines of: {missing}"
