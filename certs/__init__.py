"""Certificates of the admission webhook: make a CA and serving pair, serve it, reload it when it rotates."""

from certs._generate import (
    CA_FILE,
    CA_KEY_FILE,
    CERT_FILE,
    KEY_FILE,
    CertBundle,
    CertificateError,
    CertificateInfo,
    certificate_info,
    generate_bundle,
    issue_bundle,
    service_dns_names,
    write_tls_files,
)
from certs._serving import MAX_WATCH_INTERVAL_S, ServingCertificates

__all__ = [
    "CA_FILE",
    "CA_KEY_FILE",
    "CERT_FILE",
    "KEY_FILE",
    "MAX_WATCH_INTERVAL_S",
    "CertBundle",
    "CertificateError",
    "CertificateInfo",
    "ServingCertificates",
    "certificate_info",
    "generate_bundle",
    "issue_bundle",
    "service_dns_names",
    "write_tls_files",
]
