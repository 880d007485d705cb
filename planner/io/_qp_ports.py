"""`MultiQpSrcPort.cfg`, the file HCCL reads per-QP UDP source ports from (`HCCL_RDMA_QP_PORT_CONFIG_PATH`).

HCCL (hcomm's `EnvConfigPathCache::LoadMultiQpSrcPortFromFile`) reads it once at communicator init: per line,
spaces and tabs removed, `#` starts a comment, then `srcIP,dstIP=port0,port1,...`; each pair at most once (a
second line for it fails init), 1 to 32 ports (the number of queue pairs, data split evenly), lines past 131,072
ignored without a word. Lookups are by the readable address strings, so addresses are written in canonical dotted
form; ports in plain decimal 1-65535 (HCCL also takes 0, octal and hex, which ringroute never writes).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from planner._errors import InputError
from planner._hash_model import CANONICAL_IPV4, canonical_ipv4

QP_PORT_CONFIG_FILE = "MultiQpSrcPort.cfg"
"""The file name HCCL opens in $HCCL_RDMA_QP_PORT_CONFIG_PATH."""
MAX_CONFIG_LINES = 131_072
"""HCCL stops reading after this many lines (comments and blank lines count)."""
MAX_PORTS_PER_LINE = 32
"""HCCL's limit of ports (queue pairs) per address pair."""
MAX_CONFIG_BYTES = 16 * 1024 * 1024
"""Largest file `read_qp_port_config` takes (131,072 lines of 32 ports fit in 26 MB; ringroute writes 4 or 8)."""


@dataclass(frozen=True, slots=True)
class QpPortLine:
    """One address pair and the UDP source port of each of its queue pairs."""

    src: str
    dst: str
    ports: tuple[int, ...]


def render_qp_port_config(lines: Iterable[QpPortLine], header: Sequence[str] = ()) -> Iterator[str]:
    """The file's text in pieces (one per line, newline-terminated): `# ` header lines, then one line per pair.

    Raises InputError for an address that is not canonical IPv4, a pair written twice, a port count outside
    1-32, a port outside 1-65535, or more lines than HCCL reads (the header counts).
    """
    count = 0
    seen: set[tuple[str, str]] = set()
    for text in header:
        if "\n" in text or "\r" in text:
            raise InputError("MultiQpSrcPort.cfg header: one line per entry")
        count += 1
        yield f"# {text}\n"
    for line in lines:
        count += 1
        if count > MAX_CONFIG_LINES:
            raise InputError(f"{QP_PORT_CONFIG_FILE}: more than {MAX_CONFIG_LINES} lines, which HCCL would not read")
        for address in (line.src, line.dst):
            _canonical_ipv4(address, f"{QP_PORT_CONFIG_FILE} line {count}")
        if (line.src, line.dst) in seen:
            raise InputError(f"{QP_PORT_CONFIG_FILE} line {count}: {line.src},{line.dst} written twice")
        seen.add((line.src, line.dst))
        if not 1 <= len(line.ports) <= MAX_PORTS_PER_LINE:
            raise InputError(f"{QP_PORT_CONFIG_FILE} line {count}: {len(line.ports)} ports; HCCL takes 1 to 32")
        if any(not 1 <= port <= 65535 for port in line.ports):
            raise InputError(f"{QP_PORT_CONFIG_FILE} line {count}: a port outside 1-65535")
        yield f"{line.src},{line.dst}=" + ",".join(str(port) for port in line.ports) + "\n"


def _canonical_ipv4(text: str, where: str) -> str:
    if canonical_ipv4(text) is not None:
        return text
    try:
        address = ipaddress.IPv4Address(text)
    except ValueError:
        raise InputError(f"{where}: {text!r} is not an IPv4 address") from None
    if str(address) != text:
        raise InputError(f"{where}: {text!r} is not in canonical form ({address}); HCCL matches the text exactly")
    return text


_PORT = r"[1-9][0-9]{0,4}"
_LINE = re.compile(rf"({CANONICAL_IPV4}),({CANONICAL_IPV4})=({_PORT}(?:,{_PORT})*)")


def read_qp_port_config(text: str) -> list[QpPortLine]:
    """The lines of a MultiQpSrcPort.cfg as HCCL reads them, checked as ringroute writes them.

    Blank lines and `#` comments are skipped, spaces and tabs removed; lines past 131,072 are ignored as HCCL
    ignores them. Raises InputError naming the line for anything HCCL would refuse, and for what it would read
    differently from its text (non-canonical addresses, which lookups never match; ports with leading zeros,
    which it reads as octal; port 0).
    """
    if len(text) > MAX_CONFIG_BYTES:
        raise InputError(f"{QP_PORT_CONFIG_FILE}: over {MAX_CONFIG_BYTES} bytes")
    out: list[QpPortLine] = []
    seen: dict[tuple[str, str], int] = {}
    for number, raw in enumerate(text.split("\n"), start=1):
        if number > MAX_CONFIG_LINES:
            break
        line = raw.replace(" ", "").replace("\t", "").split("#", 1)[0]
        if not line:
            continue
        fast = _LINE.fullmatch(line)
        if fast is not None:  # as ringroute writes it: canonical addresses, plain ports (range checked below)
            src, dst, ports_text = fast.groups()
            given = tuple(int(p) for p in ports_text.split(","))
            if len(given) <= MAX_PORTS_PER_LINE and max(given) <= 65535 and (src, dst) not in seen:
                seen[src, dst] = number
                out.append(QpPortLine(src, dst, given))
                continue
        where = f"{QP_PORT_CONFIG_FILE} line {number}"
        pair, equals, ports_text = line.partition("=")
        if not equals or "=" in ports_text:
            raise InputError(f"{where}: expected srcIP,dstIP=port0,port1,...")
        addresses = pair.split(",")
        if len(addresses) != 2:
            raise InputError(f"{where}: expected two addresses before '=', got {len(addresses)}")
        src, dst = (_canonical_ipv4(a, where) for a in addresses)
        parts = ports_text.split(",")
        if not 1 <= len(parts) <= MAX_PORTS_PER_LINE:
            raise InputError(f"{where}: {len(parts)} ports; HCCL takes 1 to {MAX_PORTS_PER_LINE}")
        ports: list[int] = []
        for part in parts:
            if not part.isascii() or not part.isdigit() or (len(part) > 1 and part[0] == "0"):
                raise InputError(f"{where}: port {part!r} is not a plain decimal number")
            port = int(part)
            if not 1 <= port <= 65535:
                raise InputError(f"{where}: port {port} is outside 1-65535")
            ports.append(port)
        if (src, dst) in seen:
            raise InputError(f"{where}: {src},{dst} already on line {seen[src, dst]} (HCCL fails init on it)")
        seen[src, dst] = number
        out.append(QpPortLine(src, dst, tuple(ports)))
    return out


__all__ = [
    "MAX_CONFIG_LINES",
    "MAX_PORTS_PER_LINE",
    "QP_PORT_CONFIG_FILE",
    "QpPortLine",
    "read_qp_port_config",
    "render_qp_port_config",
]
