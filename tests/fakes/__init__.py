"""Test doubles shared by the test suites and `bench/`: one in-process Kubernetes API server (`apiserver.py`)."""

from tests.fakes.apiserver import FakeApiServer, Fault, Request, merge_patch

__all__ = ["FakeApiServer", "Fault", "Request", "merge_patch"]
