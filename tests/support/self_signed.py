"""What the self-managed certificate tests share: the Secret's coordinates and webhook configurations."""

from __future__ import annotations

from typing import Any

NS, SECRET = "ringroute-system", "ringroute-webhook-tls"
"""Namespace and name of the self-managed TLS Secret."""


def webhook_configuration(name: str, hooks: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "webhooks": [
            {"name": f"hook-{i}.ringroute.io", "clientConfig": {"service": {"name": "ringroute-webhook"}}}
            for i in range(hooks)
        ],
    }
