"""HCCL's reading of MultiQpSrcPort.cfg, rule for rule, to check the files ringroute writes against.

From hcomm's `EnvConfigPathCache::LoadMultiQpSrcPortFromFile`, `GetIpPairFromString`, `GetSrcPortsFromString`,
`DevStrToUint16` and `GetSpecialSourcePortsByIpPair` (multi_qpInfo_manager.cc): every line read with getline
(split at '\\n' only), spaces and tabs removed, everything from the first '#' dropped, an empty rest skipped; the rest
split at '=' into exactly two parts, the first at ',' into two addresses that inet_pton accepts (IPv4 or IPv6), the
second at ',' into 1..32 ports, each read by `std::stoul(text, &pos, 0)` (C prefixes: 0x hex, 0 octal; a sign is
accepted), the whole text consumed and at most 0xFFFF; the key is the address text as written; a key seen twice
fails init; after the line numbered 131,072 (comment lines count) nothing more is read. Lookup is by the readable
(inet_ntop) strings: `src,dst`, then `0.0.0.0,dst`, `src,0.0.0.0`, `0.0.0.0,0.0.0.0`.
"""

from __future__ import annotations

import ipaddress
import socket

LINE_MAX = 131_072
PORTS_MAX = 32


class HcclConfigError(ValueError):
    """HCCL refuses the file (HCCL_E_PARA): communicator init fails."""


def _stoul_base0(text: str) -> int:
    """std::stoul(text, &pos, 0) requiring pos == len(text), as DevStrToUint16 checks."""
    body = text
    negative = False
    if body[:1] in "+-" and body:
        negative = body[0] == "-"
        body = body[1:]
    if body[:2].lower() == "0x":
        digits, base = body[2:], 16
    elif body.startswith("0") and len(body) > 1:
        digits, base = body[1:], 8
    else:
        digits, base = body, 10
    if not digits:
        if base == 8:  # "0" alone is handled above as decimal; "0x" alone reads "0" and stops at 'x'
            raise HcclConfigError(f"not a number: {text!r}")
        raise HcclConfigError(f"not a valid unsigned integer: {text!r}")
    try:
        value = int(digits, base)
    except ValueError:
        raise HcclConfigError(f"not a valid unsigned integer: {text!r}") from None
    if negative:
        value = (1 << 64) - value if value else 0  # stoul wraps a negated value
    return value


def _address(text: str) -> None:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, text)
        except OSError:
            continue
        return
    raise HcclConfigError(f"invalid ip format: {text!r}")


def load(text: str) -> dict[str, list[int]]:
    """The cache HCCL builds from the file's text (raises HcclConfigError where HCCL fails init)."""
    cache: dict[str, list[int]] = {}
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # getline yields no empty line after the final newline
    for line_count, raw in enumerate(lines, start=1):
        line = raw.replace(" ", "").replace("\t", "")
        info = line.split("#")[0]
        if not info:
            continue
        parts = info.split("=")
        if len(parts) != 2:
            raise HcclConfigError(f"line {line_count}: expected format srcIP,dstIP=ports")
        addresses = parts[0].split(",")
        if len(addresses) != 2:
            raise HcclConfigError(f"line {line_count}: invalid Ip format")
        for address in addresses:
            _address(address)
        texts = parts[1].split(",")
        if len(texts) > PORTS_MAX or not texts:
            raise HcclConfigError(f"line {line_count}: {len(texts)} ports")
        ports: list[int] = []
        for value in texts:
            if not value:
                raise HcclConfigError(f"line {line_count}: empty port")
            number = _stoul_base0(value)
            if number > 0xFFFF:
                raise HcclConfigError(f"line {line_count}: port {value!r} greater than 0xFFFF")
            ports.append(number)
        if parts[0] in cache:
            raise HcclConfigError(f"line {line_count}: ip pair {parts[0]} has existed")
        cache[parts[0]] = ports
        if line_count >= LINE_MAX:
            break
    return cache


def source_ports(cache: dict[str, list[int]], src: str, dst: str) -> list[int]:
    """The ports HCCL gives a connection from `src` to `dst` (inet_ntop strings), [] when no line matches."""
    readable_src, readable_dst = str(ipaddress.ip_address(src)), str(ipaddress.ip_address(dst))
    for key in (
        f"{readable_src},{readable_dst}",
        f"0.0.0.0,{readable_dst}",
        f"{readable_src},0.0.0.0",
        "0.0.0.0,0.0.0.0",
    ):
        if key in cache:
            return cache[key]
    return []
