"""The planner is a pure library, and admission policy/mutation do no I/O: checked on the import graph."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN_IN_PURE = ("aiohttp", "kubernetes_asyncio", "webhook", "certs", "socket", "asyncio")
PURE_WEBHOOK_MODULES = ("policy", "mutation", "admission_types", "settings")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def offending(path: Path, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        name for name in imported_modules(path) if any(name == f or name.startswith(f + ".") for f in forbidden)
    )


def test_planner_imports_no_service_framework_or_webhook_code() -> None:
    files = sorted((ROOT / "planner").rglob("*.py"))
    assert files, "planner/ has no modules"
    bad = {str(p.relative_to(ROOT)): offending(p, FORBIDDEN_IN_PURE) for p in files}
    assert {k: v for k, v in bad.items() if v} == {}


def test_admission_policy_and_mutation_do_no_io() -> None:
    forbidden = ("aiohttp", "kubernetes_asyncio", "socket", "asyncio", "webhook.kube", "webhook.server")
    checked = 0
    for name in PURE_WEBHOOK_MODULES:
        for path in [ROOT / "webhook" / f"{name}.py", *sorted((ROOT / "webhook" / name).glob("*.py"))]:
            if path.exists():
                checked += 1
                assert offending(path, forbidden) == [], path
    assert checked >= 1


def test_layer_check_detects_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import aiohttp\nfrom webhook.settings import Settings\n", encoding="utf-8")
    assert offending(bad, FORBIDDEN_IN_PURE) == ["aiohttp", "webhook.settings"]


def test_import_linter_contracts_hold() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "importlinter.cli", "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if "No module named importlinter.cli" in result.stderr:
        result = subprocess.run(
            [str(Path(sys.executable).parent / "lint-imports")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
    assert result.returncode == 0, result.stdout + result.stderr
