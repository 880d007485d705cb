"""No product file over 650 lines (DESIGN.md): a module past that holds more than one concern, and is split."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("planner", "webhook", "certs")
MAX_LINES = 650


def test_no_product_module_is_over_650_lines() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for folder in PRODUCT
        for path in (ROOT / folder).rglob("*.py")
    }
    assert sizes, "no product modules found"
    assert {name: lines for name, lines in sizes.items() if lines > MAX_LINES} == {}
