"""The samples file `ringroute fabric calibrate --samples` reads, and the probes `--print-probes` writes.

JSON lines, one answer of a switch each (docs/fabric-calibration.md):

    {"switch": "leaf-03", "src": "192.168.1.2", "dst": "192.168.5.9", "sport": 50123, "dport": 4791,
     "next_hop": "spine-2"}

`proto` is optional (17, UDP); blank lines and lines starting with `#` are skipped. A probe is the same line with
`"next_hop": null`, for the admin to fill in with what the switch answers. Every mistake is one InputError naming
the line and the field; the reader holds at most MAX_SAMPLES samples of at most MAX_SAMPLE_LINE_CHARS characters.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator, Mapping
from ipaddress import IPv4Address
from typing import Any

from planner._errors import InputError
from planner._hash_model import (
    NEXT_HOP_PREFIX,
    UDP,
    FabricSwitch,
    HashProbe,
    HashSample,
    SwitchTier,
    ipv4_int,
    next_hop_index,
    tier_of_switch_name,
)
from planner.io._numbers import shown

MAX_SAMPLE_LINE_CHARS = 4096
"""Longest line of a samples file: a sample takes about 120 characters."""
MAX_SAMPLES = 1_000_000
"""Most samples one file holds: a few hundred per switch suffice, so this covers thousands of switches."""
MAX_SWITCH_NAME_CHARS = 256
REQUIRED_FIELDS = ("switch", "src", "dst", "sport", "dport", "next_hop")
OPTIONAL_FIELDS = ("proto",)
_PORT_MAX = 65535
_PROTO_MAX = 255
_FIELD_LIST = ", ".join(REQUIRED_FIELDS) + " (and optionally proto)"


class _LineError(Exception):
    """A mistake on one line, before the line number is put in front."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for key, value in pairs:
        if key in record:
            raise _LineError(f"{shown(key)}: given twice; give each field once")
        record[key] = value
    return record


def _port(record: Mapping[str, Any], field: str, maximum: int) -> int:
    value = record[field]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _LineError(f"{field}: expected an integer 0..{maximum}, got {shown(value)}")
    if not 0 <= value <= maximum:
        raise _LineError(f"{field}: {shown(value)} is out of range 0..{maximum}")
    return value


def _address(record: Mapping[str, Any], field: str) -> int:
    value = record[field]
    if not isinstance(value, str):
        raise _LineError(f"{field}: expected a dotted IPv4 address such as 192.168.1.2, got {shown(value)}")
    try:
        return ipv4_int(value, field)
    except InputError as exc:
        raise _LineError(str(exc)) from None


def _switch_name(record: Mapping[str, Any], switches: Mapping[str, FabricSwitch] | None) -> tuple[str, SwitchTier]:
    name = record["switch"]
    if not isinstance(name, str) or not name or len(name) > MAX_SWITCH_NAME_CHARS or not name.isprintable():
        raise _LineError(f"switch: expected a switch name (its leaf's topology name, e.g. leaf-03), got {shown(name)}")
    if switches is None:
        return name, tier_of_switch_name(name)
    known = switches.get(name)
    if known is None:
        close = difflib.get_close_matches(name, list(switches), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise _LineError(
            f"switch: {shown(name)} is not a switch of the topology ({len(switches)} switches: a tier-1 switch is "
            f"named as its leaf, a rail switch <group>/rail-<d>, a spine <pod>/spine-<j>){hint}"
        )
    return name, known.tier


def _next_hop(record: Mapping[str, Any], switch: str, tier: SwitchTier, known: FabricSwitch | None) -> str:
    value = record["next_hop"]
    if value is None:
        raise _LineError("next_hop: not filled in (null); put the switch's answer here, or delete the line")
    if not isinstance(value, str):
        raise _LineError(f"next_hop: expected a name such as {NEXT_HOP_PREFIX[tier]}2, got {shown(value)}")
    try:
        index = next_hop_index(value, tier)
    except InputError as exc:
        raise _LineError(f"next_hop: {switch} is a {tier} switch; {exc}") from None
    if known is not None and index >= known.next_hops:
        last = f"{NEXT_HOP_PREFIX[tier]}{known.next_hops - 1}"
        raise _LineError(
            f"next_hop: {value}: {switch} has {known.next_hops} equal-cost next hops in the topology "
            f"({NEXT_HOP_PREFIX[tier]}0..{last})"
        )
    return value


def _sample(text: str, line: int, switches: Mapping[str, FabricSwitch] | None) -> HashSample:
    try:
        record = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except _LineError:
        raise
    except RecursionError:
        raise _LineError("nested too deeply; one flat JSON object per line") from None
    except ValueError as exc:  # JSONDecodeError, and int() of a number of thousands of digits
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "a number too long to read"
        raise _LineError(f"not JSON ({detail}); one JSON object per line, {_FIELD_LIST}") from None
    if not isinstance(record, dict):
        raise _LineError(f"expected a JSON object with {_FIELD_LIST}, got {type(record).__name__}")
    for field in REQUIRED_FIELDS:
        if field not in record:
            raise _LineError(f"{field}: missing; every sample gives {_FIELD_LIST}")
    for field in record:
        if field not in REQUIRED_FIELDS and field not in OPTIONAL_FIELDS:
            raise _LineError(f"{shown(field)}: unknown field (known: {_FIELD_LIST})")
    switch, tier = _switch_name(record, switches)
    src = _address(record, "src")
    dst = _address(record, "dst")
    sport = _port(record, "sport", _PORT_MAX)
    dport = _port(record, "dport", _PORT_MAX)
    proto = _port(record, "proto", _PROTO_MAX) if "proto" in record else UDP
    known = switches.get(switch) if switches is not None else None
    next_hop = _next_hop(record, switch, tier, known)
    return HashSample(switch, src, dst, sport, next_hop, dport=dport, proto=proto, line=line)


def _describe(sample: HashSample) -> str:
    return (
        f"{IPv4Address(sample.src)} -> {IPv4Address(sample.dst)}, sport {sample.sport}, dport {sample.dport}, "
        f"proto {sample.proto}"
    )


def read_hash_samples(
    lines: Iterable[str], *, switches: Mapping[str, FabricSwitch] | None = None
) -> tuple[HashSample, ...]:
    """The samples of a samples file, given line by line, in file order.

    `switches` (name -> FabricSwitch, from the topology) makes a sample of any other switch an error, and bounds
    next hops by the switch's next-hop count; without it a switch's tier is what its name says
    (`tier_of_switch_name`). A 5-tuple asked twice of one switch is kept once when the answers agree and is an
    error naming both lines when they differ. Raises InputError `line N: field: ...`.
    """
    samples: list[HashSample] = []
    seen: dict[tuple[str, int], HashSample] = {}
    for number, raw in enumerate(lines, start=1):
        if len(raw) > MAX_SAMPLE_LINE_CHARS:
            raise InputError(
                f"line {number}: longer than {MAX_SAMPLE_LINE_CHARS} characters; one sample (one JSON object) a line"
            )
        text = raw.lstrip("\ufeff") if number == 1 else raw
        text = text.strip()
        if not text or text.startswith("#"):
            continue
        try:
            sample = _sample(text, number, switches)
        except _LineError as exc:
            raise InputError(f"line {number}: {exc}") from None
        first = seen.setdefault((sample.switch, sample.key), sample)
        if first is not sample:
            if first.next_hop != sample.next_hop:
                raise InputError(
                    f"lines {first.line} and {number}: {sample.switch} answered {first.next_hop} and "
                    f"{sample.next_hop} for the same 5-tuple ({_describe(sample)}); a switch's hash gives one "
                    "answer: ask again and keep the right line"
                )
            continue
        if len(samples) == MAX_SAMPLES:
            raise InputError(
                f"line {number}: more than {MAX_SAMPLES:,} samples; a few hundred per switch suffice, "
                "calibrate the switches in parts"
            )
        samples.append(sample)
    return tuple(samples)


def probe_line(probe: HashProbe) -> str:
    """One line of a probes file: the sample with `"next_hop": null`, for the switch's answer."""
    record: dict[str, Any] = {
        "switch": probe.switch,
        "src": str(IPv4Address(probe.src)),
        "dst": str(IPv4Address(probe.dst)),
        "sport": probe.sport,
        "dport": probe.dport,
    }
    if probe.proto != UDP:
        record["proto"] = probe.proto
    record["next_hop"] = None
    return json.dumps(record, separators=(", ", ": "))


def dump_hash_probes(probes: Iterable[HashProbe]) -> Iterator[str]:
    """The lines of a probes file (each ending in a newline), in the order given."""
    for probe in probes:
        yield probe_line(probe) + "\n"


__all__ = [
    "MAX_SAMPLES",
    "MAX_SAMPLE_LINE_CHARS",
    "dump_hash_probes",
    "probe_line",
    "read_hash_samples",
]
