"""End-to-end tests need a real kube-apiserver: they run only when RINGROUTE_E2E_KUBECONFIG is set."""

from __future__ import annotations

import os

import pytest

KUBECONFIG = os.environ.get("RINGROUTE_E2E_KUBECONFIG")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if KUBECONFIG:
        return
    skip = pytest.mark.skip(reason="set RINGROUTE_E2E_KUBECONFIG to the kubeconfig of a test cluster")
    for item in items:
        if "tests/e2e" in str(item.fspath):
            item.add_marker(skip)
