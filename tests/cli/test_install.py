"""`make install` puts `ringroute` and `kubectl-ringroute` on PATH without pip's user scheme.

It runs in a copy of the tree, so nothing is written into the checkout; the copy's `.venv` lends it the
checkout's commands (and is up to date for make, so no install runs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = (".git", ".venv", "node_modules", "__pycache__", ".hypothesis", ".mypy_cache", ".ruff_cache", "out")


def tree_copy(destination: Path) -> Path:
    """The tree without its environment and caches, with a `.venv` whose `bin` is the checkout's."""
    shutil.copytree(ROOT, destination, ignore=shutil.ignore_patterns(*LEFT_OUT), symlinks=True)
    stamp = subprocess.run(
        ["make", "-s", "--no-print-directory", "--eval", "print-stamp: ; @echo $(STAMP)", "print-stamp"],
        cwd=destination,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (destination / ".venv").mkdir()
    (destination / ".venv" / "bin").symlink_to(ROOT / ".venv" / "bin")
    (destination / stamp).touch()  # newer than the copied pyproject.toml: make installs nothing
    return destination


def test_without_pipx_make_install_links_both_commands_into_the_bin_directory(tmp_path: Path) -> None:
    tree = tree_copy(tmp_path / "ringroute")
    bin_dir = tmp_path / "bin"
    before = sorted(p.name for p in (ROOT / ".venv").iterdir())
    result = subprocess.run(
        ["make", "--no-print-directory", "install", "PIPX=", f"BIN_DIR={bin_dir}"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert f"into {bin_dir}" in result.stdout
    assert "pip install" not in result.stdout + result.stderr, "nothing was installed"
    for command in ("ringroute", "kubectl-ringroute"):
        link = bin_dir / command
        assert link.is_symlink()
        assert Path(os.readlink(link)) == tree / ".venv" / "bin" / command
        shown = subprocess.run([str(link), "--version"], capture_output=True, text=True, check=True)
        assert shown.stdout.startswith("ringroute ")
    # Run again: the links are replaced, not refused.
    subprocess.run(["make", "install", "PIPX=", f"BIN_DIR={bin_dir}"], cwd=tree, capture_output=True, check=True)
    assert sorted(p.name for p in (ROOT / ".venv").iterdir()) == before, "the checkout's environment is untouched"
