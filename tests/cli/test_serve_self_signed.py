"""`ringroute serve --self-signed-secret` end to end against the in-process API server: the Secret is made,
the server becomes ready over TLS with it, and the webhook configurations trust its CA."""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
from pathlib import Path

from emulation.apiserver import FakeApiServer
from tests.support.self_signed import NS, SECRET, webhook_configuration
from webhook.cli import serve as cli_serve


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_serve_with_a_self_signed_secret_becomes_ready_with_the_secrets_certificate(tmp_path: Path) -> None:
    async with FakeApiServer() as api:
        await api.apply("mutatingwebhookconfigurations", webhook_configuration("ringroute", 1))
        await api.apply("validatingwebhookconfigurations", webhook_configuration("ringroute", 1))
        host = api.url
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            f"clusters: [{{name: fake, cluster: {{server: '{host}'}}}}]\n"
            "users: [{name: fake, user: {token: fake-token}}]\n"
            "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n"
        )
        (tmp_path / "tls").mkdir()
        config = tmp_path / "config.yaml"
        config.write_text("extender:\n  enabled: false\n")
        port = free_port()
        options = cli_serve.ServeOptions(
            host="127.0.0.1",
            port=port,
            cert_dir=tmp_path / "tls",
            config=config,
            kubeconfig=str(kubeconfig),
            workers=1,
            controller=False,
            extender=False,
            extender_listen=None,
            self_signed_secret=f"{NS}/{SECRET}",
        )
        stop = asyncio.Event()
        server = asyncio.create_task(cli_serve.run_worker(options, primary=True, stop=stop))
        try:
            secret = None
            for _ in range(200):
                await asyncio.sleep(0.025)
                secret = api.get("secrets", NS, SECRET)
                if secret is not None and (tmp_path / "tls" / "tls.crt").exists():
                    break
            assert secret is not None
            ca_pem = base64.b64decode(secret["data"]["ca.crt"]).decode()
            context = ssl.create_default_context(cadata=ca_pem)
            status = b""
            for _ in range(100):
                try:
                    reader, writer = await asyncio.open_connection(
                        "127.0.0.1", port, ssl=context, server_hostname="ringroute-webhook.ringroute-system.svc"
                    )
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                status = await reader.readline()
                writer.close()
                break
            assert status.startswith(b"HTTP/1.1 200")
            for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
                configuration = api.get(kind, None, "ringroute")
                assert configuration is not None
                assert configuration["webhooks"][0]["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
        finally:
            stop.set()
            assert await asyncio.wait_for(server, 20) == 0
