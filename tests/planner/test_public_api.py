"""`planner`'s public API: every name resolves lazily, type checkers see the same modules, and it loads no numpy."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import planner

INIT = Path(planner.__file__)


def _type_checking_imports() -> dict[str, str]:
    """Name -> module of the imports in `planner/__init__.py`'s `if TYPE_CHECKING:` block."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    )
    return {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module is not None
        for alias in node.names
    }


def test_type_checkers_see_exactly_the_public_names() -> None:
    assert len(planner.__all__) == len(set(planner.__all__))
    assert set(_type_checking_imports()) == set(planner.__all__)


def test_every_public_name_loads_from_the_module_type_checkers_read() -> None:
    for name, module in _type_checking_imports().items():
        assert getattr(planner, name) is getattr(importlib.import_module(module), name), name


def test_dir_lists_the_public_names_and_unknown_names_raise_attribute_error() -> None:
    assert set(planner.__all__) <= set(dir(planner))
    with pytest.raises(AttributeError, match="no attribute 'plan_rank'"):
        _ = planner.plan_rank  # type: ignore[attr-defined]


def test_importing_the_model_loads_neither_numpy_nor_scipy() -> None:
    code = (
        "import json, sys\n"
        "import planner\n"
        "from planner import Device, Fabric, InputError, Placement, Server, Topology\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'scipy'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == []


def test_default_annotation_keys_are_the_built_in_profiles_and_read_a_placement() -> None:
    from tests.support.pods import sample_job_pods
    from webhook.common.settings import DEFAULT_PROFILES

    assert all(profile.device_annotation_keys == planner.DEFAULT_ANNOTATION_KEYS for profile in DEFAULT_PROFILES)
    placement = planner.placement_from_pods(sample_job_pods(), annotation_keys=planner.DEFAULT_ANNOTATION_KEYS)
    assert len(placement.servers) == 12
