"""Each Volcano release's struct keys (`webhook.extender.volcano_releases`) against the Go sources at the release tag,
and release names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from webhook.extender import volcano_releases as releases

RELEASES = releases.RELEASES


# -------------------------------------------------------------------------- field tables against Volcano's source

GO_SOURCES = Path(__file__).resolve().parents[1] / "data" / "volcano"
"""Excerpts of Volcano's Go sources at each release tag (tests/data/volcano/PROVENANCE.yaml)."""


def _go_json_keys(source: str, struct: str) -> tuple[str, ...]:
    """JSON keys encoding/json writes for `struct` in `source`: exported fields in order, `json:"-"` dropped, tag
    names used, untagged embedded structs of the same file promoted in place."""
    match = re.search(rf"^type {struct} struct \{{\n(.*?)^\}}", source, re.S | re.M)
    assert match, struct
    keys: list[str] = []
    for raw_line in match.group(1).splitlines():
        line = re.sub(r"//.*$", "", raw_line).strip()
        if not line:
            continue
        tag = re.search(r'json:"([^"]*)"', line)
        parts = re.sub(r"`.*`", "", line).split()
        if len(parts) == 1:  # embedded
            keys.extend(_go_json_keys(source, parts[0]))
            continue
        name = parts[0]
        if (tag and tag.group(1).split(",")[0] == "-") or not name[0].isupper():
            continue
        keys.append(tag.group(1).split(",")[0] if tag and tag.group(1).split(",")[0] else name)
    return tuple(keys)


@pytest.mark.parametrize("release", RELEASES)
def test_field_tables_equal_the_exported_fields_of_volcanos_structs_at_the_release_tag(release: str) -> None:
    checked = set()
    for path in sorted((GO_SOURCES / releases.RELEASE_TAGS[release]).rglob("*.go")):
        source = path.read_text(encoding="utf-8")
        for struct in re.findall(r"^type (\w+) struct", source, re.M):
            if struct in releases.GO_FIELDS[release]:
                assert _go_json_keys(source, struct) == releases.GO_FIELDS[release][struct], (release, struct)
                checked.add(struct)
    assert {"TaskInfo", "NodeInfo", "JobInfo", "QueueInfo", "PredicateRequest", "PrioritizeRequest"} <= checked


def test_release_names_normalise_and_unknown_ones_are_refused() -> None:
    assert releases.normalize_release("v1.14.3") == "1.14"
    assert releases.normalize_release("master") == "1.16"
    assert releases.normalize_release("v1.16.0-alpha.1") == "1.16"
    with pytest.raises(ValueError, match=r"1\.7"):
        releases.normalize_release("1.6")
