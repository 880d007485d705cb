"""MultiQpSrcPort.cfg as ringroute writes it is read by HCCL's rules with exactly the ports written."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import InputError, QpPortLine
from planner.io._qp_ports import MAX_CONFIG_LINES, read_qp_port_config, render_qp_port_config
from tests.support import hccl_multi_qp

addresses = st.ip_addresses(v=4).map(str)
line = st.builds(QpPortLine, addresses, addresses, st.lists(st.integers(1, 65535), min_size=1, max_size=32).map(tuple))


@given(st.lists(line, max_size=40, unique_by=lambda entry: (entry.src, entry.dst)))
@settings(max_examples=100)
def test_hccl_reads_every_written_line_with_its_ports(lines: list[QpPortLine]) -> None:
    text = "".join(render_qp_port_config(lines, ["ringroute test", "second header line"]))
    cache = hccl_multi_qp.load(text)
    assert len(cache) == len(lines)
    for entry in lines:
        assert hccl_multi_qp.source_ports(cache, entry.src, entry.dst) == list(entry.ports)
    assert read_qp_port_config(text) == lines


def test_a_pair_written_twice_is_refused_before_hccl_would_fail_init() -> None:
    twice = [QpPortLine("10.0.0.1", "10.0.0.2", (50000,)), QpPortLine("10.0.0.1", "10.0.0.2", (50001,))]
    with pytest.raises(InputError, match="written twice"):
        "".join(render_qp_port_config(twice))
    with pytest.raises(hccl_multi_qp.HcclConfigError, match="has existed"):
        hccl_multi_qp.load("10.0.0.1,10.0.0.2=1\n10.0.0.1,10.0.0.2=2\n")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (QpPortLine("10.0.0.01", "10.0.0.2", (1,)), "not an IPv4 address|canonical"),
        (QpPortLine("fe80::1", "10.0.0.2", (1,)), "not an IPv4 address"),
        (QpPortLine("10.0.0.1", "10.0.0.2", ()), "HCCL takes 1 to 32"),
        (QpPortLine("10.0.0.1", "10.0.0.2", tuple(range(1, 34))), "HCCL takes 1 to 32"),
        (QpPortLine("10.0.0.1", "10.0.0.2", (0,)), "outside 1-65535"),
        (QpPortLine("10.0.0.1", "10.0.0.2", (65536,)), "outside 1-65535"),
    ],
)
def test_what_hccl_would_refuse_or_misread_is_never_written(entry: QpPortLine, message: str) -> None:
    with pytest.raises(InputError, match=message):
        "".join(render_qp_port_config([entry]))


def test_never_more_lines_than_hccl_reads() -> None:
    many = (QpPortLine(f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}", "10.255.255.255", (1,)) for i in range(1 << 18))
    with pytest.raises(InputError, match=f"more than {MAX_CONFIG_LINES} lines"):
        for _ in render_qp_port_config(many, ["header"]):
            pass


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("10.0.0.1,10.0.0.2\n", "expected srcIP,dstIP=port0"),
        ("10.0.0.1=5\n", "two addresses"),
        ("10.0.0.1,10.0.0.2=010\n", "plain decimal"),
        ("10.0.0.1,10.0.0.2=0x10\n", "plain decimal"),
        ("10.0.0.1,10.0.0.2=0\n", "outside 1-65535"),
        ("10.0.0.1,10.0.0.2=1\r\n", "plain decimal"),
        ("10.0.0.1,10.0.0.2=1\n10.0.0.1,10.0.0.2=2\n", "already on line 1"),
    ],
)
def test_the_reader_names_the_line_of_what_hccl_would_refuse_or_misread(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_qp_port_config(text)


def test_hccl_reads_leading_zeros_as_octal_and_takes_port_zero_which_is_why_they_are_never_written() -> None:
    cache = hccl_multi_qp.load("10.0.0.1,10.0.0.2=010,0x10,0\n")
    assert cache["10.0.0.1,10.0.0.2"] == [8, 16, 0]


def test_comments_blank_lines_and_spaces_are_skipped_as_hccl_does() -> None:
    text = "# header\n\n 10.0.0.1 ,\t10.0.0.2 = 50000 , 50001 # two queue pairs\n"
    assert read_qp_port_config(text) == [QpPortLine("10.0.0.1", "10.0.0.2", (50000, 50001))]
    assert hccl_multi_qp.load(text) == {"10.0.0.1,10.0.0.2": [50000, 50001]}
