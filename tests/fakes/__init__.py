"""Test doubles shared by the test suites and `bench/`: one in-process Kubernetes API server (`apiserver.py`)."""

from tests.fakes.apiserver import AdmissionWebhook, FakeApiServer, Fault, Request, http_webhook, merge_patch

__all__ = ["AdmissionWebhook", "FakeApiServer", "Fault", "Request", "http_webhook", "merge_patch"]
