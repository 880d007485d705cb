"""The documentation names settings the settings tree has, with the defaults it has.

Read from docs/*.md and README.md: every `section.key` in inline code is a key of `webhook.common.settings`
(`controller.namespace` is not: the loader refuses it), and a value written with it (`planning.routing: pinned`)
is one the loader takes, or else the very message it refuses it with; every default stated next to a key
(`controller.debounceS`, default 0.2 s; `extender.planAttempts` (2); `extender.jobMemoryTtlS`, 15 minutes), in a
settings table (a `setting` or `key` column beside a `default` one) or in a YAML block of "defaults shown" is the
tree's; every other YAML block of settings loads.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from webhook.common.settings import Settings, SettingsError, settings_from_mapping

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"])
DEFAULTS = Settings()
SECTIONS = tuple(msgspec.structs.asdict(DEFAULTS))
NAMES = {"sh", "io", "com", "py", "k8s", "yaml", "json", "md"}
"""Dotted segments that make a code span a name, not a key: label keys and API groups (`volcano.sh/tor`,
`topology.volcano.sh`), files (`volcano.py`)."""
KEY = re.compile(rf"(?:{'|'.join(SECTIONS)})(?:\.[A-Za-z][A-Za-z0-9]*)+")
NUMBER = r"(\d+(?:\.\d+)?)"
STATED = re.compile(rf"^\s*(?:,\s*|\(\s*|=\s*)(?:default\s+)?{NUMBER}(?:\s*-\s*{NUMBER})?\s*(minutes?|min|s|ms|MiB)?\b")
"""A default right after a key: `, default 0.2 s`, ` (2`, ` = 30 s`, `, 15 minutes`, `, 49152-65535`."""
SECONDS: dict[str, Fraction] = {
    "minute": Fraction(60),
    "minutes": Fraction(60),
    "min": Fraction(60),
    "ms": Fraction(1, 1000),
}


@dataclass(frozen=True)
class Mention:
    document: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.document}:{self.line}: {self.text}"


def snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def default_of(path: str) -> Any:
    """The default at a dotted key path (camelCase or snake_case); KeyError when the tree has no such key."""
    node: Any = DEFAULTS
    for segment in path.split("."):
        name = snake(segment)
        if not isinstance(node, msgspec.Struct) or name not in node.__struct_fields__:
            raise KeyError(path)
        node = getattr(node, name)
    return node


def nested(path: str, value: Any) -> dict[str, Any]:
    """{"a": {"b": value}} for "a.b"."""
    result: Any = value
    for segment in reversed(path.split(".")):
        result = {segment: result}
    return dict(result)


def volcano_arguments() -> set[str]:
    """Keys of the `arguments` of Volcano's scheduler plugins in the documented scheduler configurations: Volcano's
    names (`extender.urlPrefix`), not ringroute's settings."""
    found: set[str] = set()
    for document in DOCUMENTS:
        for block in yaml_blocks(document):
            tiers = block.get("tiers") if isinstance(block, Mapping) else None
            for tier in tiers if isinstance(tiers, list) else []:
                for plugin in tier.get("plugins") or [] if isinstance(tier, Mapping) else []:
                    if isinstance(plugin, Mapping) and isinstance(plugin.get("arguments"), Mapping):
                        found.update(plugin["arguments"])
    return found


def yaml_blocks(document: Path) -> Iterator[Any]:
    for match in re.finditer(r"```yaml\n(.*?)```", document.read_text(encoding="utf-8"), re.S):
        try:
            yield from (d for d in yaml.safe_load_all(match.group(1)) if d is not None)
        except yaml.YAMLError:
            continue


def prose(document: Path) -> str:
    """The document without its fenced blocks (kept as blank lines, so line numbers stay)."""
    text = document.read_text(encoding="utf-8")
    return re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def mentions() -> Iterator[tuple[Mention, str, str, str]]:
    """(where, key, what follows it in the code span, the text after the span) of every key in inline code."""
    volcano = volcano_arguments()
    for document in DOCUMENTS:
        text = prose(document)
        flat = text.replace("\n", " ")
        for span in re.finditer(r"`([^`]+)`", flat):
            line = text.count("\n", 0, span.start()) + 1
            for part in span.group(1).split("/") if "/controller." in span.group(1) else [span.group(1)]:
                found = KEY.match(part)
                if found is None or found.group(0) in volcano:
                    continue
                rest = part[found.end() :]
                if rest.startswith(("/", "-", "[")) or NAMES & set(found.group(0).lower().split(".")):
                    continue
                where = Mention(document.relative_to(ROOT).as_posix(), line, span.group(0))
                yield where, found.group(0), rest, flat[span.end() : span.end() + 60]


MENTIONS = list(mentions())


def test_the_documents_name_settings_keys_at_all() -> None:
    assert len(MENTIONS) > 60, "the extraction found too few keys: the patterns no longer match the documents"
    assert {"controller.configmapCreateWorkers", "extender.planTtlS", "admission.server"} <= {
        k for _, k, _, _ in MENTIONS
    }


@pytest.mark.parametrize(("where", "key", "rest", "after"), MENTIONS, ids=lambda v: str(v)[:60])
def test_every_key_in_the_documents_is_a_settings_key(where: Mention, key: str, rest: str, after: str) -> None:
    try:
        default = default_of(key)
    except KeyError:
        pytest.fail(f"{where}: no such settings key ({'; '.join(refusal(nested(key, None)))})")
    value = rest.partition(":")[2].strip() if rest.startswith(":") else None
    if value:
        # `key: value`, or a message of the loader's about the value it starts with (`key: 'x' is not one of ...`)
        problems = [refusal(nested(key, as_yaml(candidate))) for candidate in (value, value.split(" ", 1)[0])]
        said = where.text.strip("`")
        assert not problems[0] or said in problems[1], f"{where}: the loader refuses it: {problems[0]}"
    stated = STATED.match(after) if not rest else None
    if stated is not None:
        assert_default(where, key, default, stated)


def as_yaml(text: str) -> Any:
    """A value as a settings file would hold it (text that is not YAML stays text)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def refusal(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The loader's problems with `data` (none when it takes it)."""
    try:
        settings_from_mapping(data)
    except SettingsError as exc:
        return exc.problems
    return ()


def assert_default(where: Mention, key: str, default: Any, stated: re.Match[str]) -> None:
    first, last, unit = stated.groups()
    factor = SECONDS.get(unit or "", Fraction(1))
    if last is not None:
        assert tuple(default) == (int(first), int(last)), f"{where}: {key} defaults to {default}"
        return
    assert isinstance(default, int | float), f"{where}: {key} defaults to {default!r}, not a number"
    assert Fraction(first) * factor == Fraction(str(default)), (
        f"{where}: {key} defaults to {default}, not {first} {unit}"
    )


# -- settings tables and YAML blocks -------------------------------------------------------------------------------


def tables() -> Iterator[tuple[Mention, str, str]]:
    """(where, key, default cell) of every row of a settings table; a key without a section is under the settings
    group the paragraph before the table names first (`admission.server`)."""
    for document in DOCUMENTS:
        lines = prose(document).splitlines()
        context = paragraph = ""
        for number, line in enumerate(lines):
            if not line.strip():
                context, paragraph = paragraph or context, ""
            if not line.startswith("|"):
                for key in re.findall(r"`([a-z][A-Za-z.]+)`", line):
                    if not paragraph and KEY.fullmatch(key) and isinstance(_maybe(key), msgspec.Struct):
                        paragraph = key
                continue
            context = paragraph or context
            header = [cell.strip().lower() for cell in line.strip("|").split("|")]
            previous = lines[number - 1] if number else ""
            if previous.startswith("|") or header[0] not in ("setting", "key") or "default" not in header:
                continue
            column = header.index("default")
            for row_number in range(number + 2, len(lines)):
                row = lines[row_number]
                if not row.startswith("|"):
                    break
                cells = [cell.strip() for cell in row.strip("|").split("|")]
                key = cells[0].strip("`")
                full = key if KEY.fullmatch(key) else f"{context}.{key}"
                where = Mention(document.relative_to(ROOT).as_posix(), row_number + 1, cells[0])
                yield where, full, cells[column]


def _maybe(key: str) -> Any:
    try:
        return default_of(key)
    except KeyError:
        return None


TABLES = list(tables())


def test_the_settings_tables_are_found() -> None:
    keys = {key for _, key, _ in TABLES}
    assert {"controller.planningTimeoutS", "admission.server.maxConnections", "extender.server.bodyBufferMib"} <= keys


@pytest.mark.parametrize(("where", "key", "cell"), TABLES, ids=lambda v: str(v)[:60])
def test_every_settings_table_gives_the_default(where: Mention, key: str, cell: str) -> None:
    try:
        default = default_of(key)
    except KeyError:
        pytest.fail(f"{where}: no such settings key {key}")
    if cell.lower() == "none":
        assert default is None, f"{where}: {key} defaults to {default!r}"
    elif cell.startswith("`"):
        assert yaml.safe_load(cell.strip("`")) == (list(default) if isinstance(default, tuple) else default), where
    else:
        number = re.match(NUMBER, cell)
        assert number is not None, f"{where}: {cell!r} states no default"
        assert Fraction(number.group(1)) == Fraction(str(default)), f"{where}: {key} defaults to {default}"


def settings_blocks() -> Iterator[tuple[str, bool, Mapping[str, Any], str]]:
    """(where, shows defaults, block, the fenced block after it) of every YAML block whose sections are all
    settings sections."""
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for match in re.finditer(r"```yaml\n(.*?)```", text, re.S):
            documents = list(yaml.safe_load_all(match.group(1)))
            block = documents[0] if len(documents) == 1 else None
            if not isinstance(block, Mapping) or not block or not set(map(snake, block)) <= set(SECTIONS):
                continue
            before = text[max(0, match.start() - 200) : match.start()]
            following = re.match(r"\s*```\w*\n(.*?)```", text[match.end() :], re.S)
            line = text.count("\n", 0, match.start()) + 1
            where = f"{document.relative_to(ROOT).as_posix()}:{line}"
            yield where, "defaults shown" in before, block, following.group(1) if following else ""


BLOCKS = list(settings_blocks())


def leaves(block: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in block.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and isinstance(_maybe(path), msgspec.Struct):
            yield from leaves(value, path)
        else:
            yield path, value


@pytest.mark.parametrize(("where", "defaults", "block", "following"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_every_yaml_block_of_settings_loads_and_one_of_defaults_shows_them(
    where: str, defaults: bool, block: Mapping[str, Any], following: str
) -> None:
    """A block the loader refuses is an example of refusal: the block after it shows every problem it reports."""
    shown = {line.strip() for line in following.splitlines()}
    assert all(problem in shown for problem in refusal(block)), f"{where}: {refusal(block)}"
    if defaults:
        for path, value in leaves(block):
            assert value == default_of(path), f"{where}: {path} defaults to {default_of(path)}, not {value}"
