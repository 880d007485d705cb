"""The samples file as admins fill it in: comments, blank lines, repeated questions; and every kind of mistake (garbage,
missing and extra fields, IPv6, ports out of range, next hops of another tier, unknown switches, contradicting
answers) one error naming the line and the field."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import FabricSwitch, HashProbe, HashSample, InputError, dump_hash_probes, read_hash_samples
from planner.io import _hash_samples
from planner.io._hash_samples import MAX_SAMPLE_LINE_CHARS

GOOD = {"switch": "leaf-03", "src": "192.168.1.2", "dst": "192.168.5.9", "sport": 50123, "dport": 4791}
TOPOLOGY = {
    "leaf-03": FabricSwitch("leaf-03", "leaf", 4),
    "leaf-04": FabricSwitch("leaf-04", "leaf", 4),
    "pod-0/spine-1": FabricSwitch("pod-0/spine-1", "spine", 2),
}


def line(**changes: Any) -> str:
    record: dict[str, Any] = {**GOOD, "next_hop": "spine-2", **changes}
    return json.dumps({k: v for k, v in record.items() if v is not ...})


def error(lines: list[str], **kwargs: Any) -> str:
    with pytest.raises(InputError) as raised:
        read_hash_samples(lines, **kwargs)
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_samples_are_read_with_comments_blank_lines_and_an_optional_protocol() -> None:
    lines = [
        "\ufeff# asked on leaf-03 with `show routing hash`\n",
        line() + "\n",
        "\n",
        "   # another switch\n",
        line(switch="pod-0/spine-1", next_hop="core-1", proto=6, sport=1) + "\r\n",
    ]
    samples = read_hash_samples(lines)
    assert samples == (
        HashSample("leaf-03", 0xC0A80102, 0xC0A80509, 50123, "spine-2", dport=4791, proto=17, line=2),
        HashSample("pod-0/spine-1", 0xC0A80102, 0xC0A80509, 1, "core-1", dport=4791, proto=6, line=5),
    )
    assert samples[0].tier == "leaf"
    assert samples[1].tier == "spine"


def test_a_tuple_asked_twice_with_the_same_answer_is_kept_once() -> None:
    samples = read_hash_samples([line(), line(), line(sport=1)])
    assert [s.line for s in samples] == [1, 3]


def test_a_tuple_asked_twice_with_different_answers_names_both_lines() -> None:
    message = error([line(), line(sport=7), "", line(next_hop="spine-3")])
    assert message == (
        "lines 1 and 4: leaf-03 answered spine-2 and spine-3 for the same 5-tuple (192.168.1.2 -> 192.168.5.9, "
        "sport 50123, dport 4791, proto 17); a switch's hash gives one answer: ask again and keep the right line"
    )


def test_the_same_tuple_on_two_switches_is_two_samples() -> None:
    assert len(read_hash_samples([line(), line(switch="leaf-04", next_hop="spine-0")])) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("switch=leaf-03 next_hop=spine-2", "line 1: not JSON (Expecting value); one JSON object per line, switch, "),
        ("[1, 2]", "line 1: expected a JSON object with switch, src, dst, sport, dport, next_hop (and optionally "),
        ('{"switch": "leaf-03"', "line 1: not JSON (Expecting ',' delimiter)"),
        (line(dport=...), "line 1: dport: missing; every sample gives switch, src, dst, sport, dport, next_hop"),
        (line(vlan=100), "line 1: 'vlan': unknown field (known: switch, src, dst, sport, dport, next_hop (and "),
        (
            '{"switch": "leaf-03", "switch": "leaf-04", "src": "1.1.1.1"}',
            "line 1: 'switch': given twice; give each field once",
        ),
        (line(src="2001:db8::1"), "line 1: src: '2001:db8::1' is IPv6; HCCL's RoCE ports and ringroute's hash model"),
        (line(dst="192.168.5.300"), "line 1: dst: '192.168.5.300' is not an IPv4 address"),
        (line(dst="192.168.005.9"), "line 1: dst: '192.168.005.9' is not an IPv4 address"),
        (line(src=3232235778), "line 1: src: expected a dotted IPv4 address such as 192.168.1.2, got 3232235778"),
        (line(sport=65536), "line 1: sport: 65536 is out of range 0..65535"),
        (line(sport=-1), "line 1: sport: -1 is out of range 0..65535"),
        (line(dport=4791.0), "line 1: dport: expected an integer 0..65535, got 4791.0"),
        (line(sport=True), "line 1: sport: expected an integer 0..65535, got True"),
        (line(sport="50123"), "line 1: sport: expected an integer 0..65535, got '50123'"),
        (line(proto=256), "line 1: proto: 256 is out of range 0..255"),
        (line().replace("50123", "9" * 3900), "line 1: sport: an integer of 12956 bits is out of range 0..65535"),
        (line(switch=""), "line 1: switch: expected a switch name (its leaf's topology name, e.g. leaf-03), got ''"),
        (line(next_hop=None), "line 1: next_hop: not filled in (null); put the switch's answer here, or delete"),
        (
            line(next_hop="core-1"),
            "line 1: next_hop: leaf-03 is a leaf switch; next hop 'core-1': a leaf switch's next hops are named "
            "spine-<n>, as routes.json numbers them",
        ),
        (
            line(switch="pod-0/spine-1"),
            "line 1: next_hop: pod-0/spine-1 is a spine switch; next hop 'spine-2': a spine switch's next hops are "
            "named core-<n>",
        ),
        (line(next_hop="spine-02"), "line 1: next_hop: leaf-03 is a leaf switch; next hop 'spine-02': "),
        (line(next_hop=2), "line 1: next_hop: expected a name such as spine-2, got 2"),
        ("[" * 3000 + "]" * 3000, "line 1: longer than 4096 characters; one sample (one JSON object) a line"),
        ("[" * 2000 + "]" * 2000, "line 1: "),
    ],
)
def test_a_bad_line_is_one_error_naming_the_line_and_the_field(text: str, message: str) -> None:
    assert error(["# header", text])[:6] == "line 2"
    assert error([text]).startswith(message)


def test_switches_of_a_topology_bound_names_and_next_hops() -> None:
    samples = read_hash_samples([line(), line(switch="pod-0/spine-1", next_hop="core-1")], switches=TOPOLOGY)
    assert len(samples) == 2
    assert error([line(), line(switch="leaf03")], switches=TOPOLOGY) == (
        "line 2: switch: 'leaf03' is not a switch of the topology (3 switches: a tier-1 switch is named as its "
        "leaf, a rail switch <group>/rail-<d>, a spine <pod>/spine-<j>); did you mean leaf-03?"
    )
    assert error([line(next_hop="spine-4")], switches=TOPOLOGY) == (
        "line 1: next_hop: spine-4: leaf-03 has 4 equal-cost next hops in the topology (spine-0..spine-3)"
    )
    # the topology says the tier, whatever the name looks like
    odd = {"x/spine-1": FabricSwitch("x/spine-1", "leaf", 4)}
    assert read_hash_samples([line(switch="x/spine-1")], switches=odd)[0].tier == "leaf"


def test_more_samples_than_the_cap_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_hash_samples, "MAX_SAMPLES", 3)
    lines = [line(sport=port) for port in range(4)]
    assert len(read_hash_samples(lines[:3])) == 3
    assert error(lines) == (
        "line 4: more than 3 samples; a few hundred per switch suffice, calibrate the switches in parts"
    )


def test_a_line_at_the_length_cap_is_read() -> None:
    text = line()
    padded = text[:-1] + " " * (MAX_SAMPLE_LINE_CHARS - len(text)) + "}"
    assert len(padded) == MAX_SAMPLE_LINE_CHARS
    assert len(read_hash_samples([padded])) == 1


@settings(max_examples=50, deadline=None)
@given(
    src=st.integers(0, 2**32 - 1),
    dst=st.integers(0, 2**32 - 1),
    sport=st.integers(0, 65535),
    proto=st.sampled_from((17, 6)),
    hop=st.integers(0, 63),
)
def test_a_probe_line_filled_in_reads_back_as_the_sample_of_that_tuple(
    src: int, dst: int, sport: int, proto: int, hop: int
) -> None:
    probe = HashProbe("leaf-03", src, dst, sport, proto=proto)
    (text,) = dump_hash_probes([probe])
    record = json.loads(text)
    assert record["next_hop"] is None
    assert record["src"] == str(ipaddress.IPv4Address(src))
    record["next_hop"] = f"spine-{hop}"
    (sample,) = read_hash_samples([json.dumps(record)])
    assert sample.key == probe.key
    assert sample.next_hop == f"spine-{hop}"
