"""`make install` puts `ringroute` and `kubectl-ringroute` on PATH without pip's user scheme."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_without_pipx_make_install_links_both_commands_into_the_bin_directory(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    result = subprocess.run(
        ["make", "--no-print-directory", "install", "PIPX=", f"BIN_DIR={bin_dir}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert f"into {bin_dir}" in result.stdout
    for command in ("ringroute", "kubectl-ringroute"):
        link = bin_dir / command
        assert link.is_symlink()
        assert link.resolve() == (ROOT / ".venv" / "bin" / command).resolve()
        shown = subprocess.run([str(link), "--version"], capture_output=True, text=True, check=True)
        assert shown.stdout.startswith("ringroute ")
    # Run again: the links are replaced, not refused.
    subprocess.run(["make", "install", "PIPX=", f"BIN_DIR={bin_dir}"], cwd=ROOT, capture_output=True, check=True)
