"""The hash model file: what `ringroute fabric calibrate` writes and `--hash-model FILE` reads (YAML or JSON).

    apiVersion: ringroute.io/v1alpha1
    kind: HashModel
    tiers:                                   # defaults per switch tier
      leaf: {function: crc16-ccitt, seed: 0x5a5a, bucket: low-bits}
      spine: {function: crc32, bits: [16, 32], bucket: modulo}
    switches:                                # switches that differ, by name
      leaf-03: {function: crc32c, seed: 0x1234abcd, bucket: modulo, members: [spine-2, spine-0, spine-3, spine-1],
                source: fitted, samples: 120}
      leaf-04:
        learned: {rows: [0x...], table: [spine-1, spine-0], origin: 0x..., checks: [0x...]}
        samples: 120
    unknown: [leaf-07]                       # no hash known: never the tier default

A declared entry has `function` and optionally `init`, `seed` (integers, or hex strings such as "0x1d0f", as JSON
has no hex numbers), `key` (hashed fields in order), `bits` ([low, high) of the output), `bucket` (low-bits or
modulo), `members` (next hop of each bucket), `source` (declared or fitted) and `samples`. A learned entry holds
GF(2) functionals over the 104-bit key as hex strings. docs/simulator.md ("Hash model") has the semantics.

Every error is one InputError naming the field path, and the file's line where the loader knows it:
`hash model: line 4: tiers.leaf.function: 'crc64' is not one of crc32, ...`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import yaml

from planner._errors import InputError
from planner._hash_model import (
    FUNCTION_WIDTHS,
    HASH_FUNCTIONS,
    KEY_BITS,
    MAX_LEARNED_ROWS,
    SWITCH_TIERS,
    TUPLE_FIELDS,
    HashModel,
    HashSpec,
    LearnedHash,
    SwitchHash,
    SwitchTier,
    check_switch_hash,
    tier_of_switch_name,
)
from planner.io._numbers import shown
from planner.io._topology_file import natural_key

HASH_MODEL_API_VERSION = "ringroute.io/v1alpha1"
HASH_MODEL_KIND = "HashModel"
MAX_HASH_MODEL_CHARS = 16 << 20
"""Largest hash model file read: a learned switch takes about 2 KB, so this holds thousands of switches."""
MAX_HASH_MODEL_SWITCHES = 100_000
"""Most switches one model lists (switches plus unknown)."""
_MAX_NUMBER_CHARS = 40
"""Longest number written as a string (a 104-bit mask is 28 characters as 0x and 26 hex digits)."""

_DECLARED_FIELDS = ("function", "init", "seed", "key", "bits", "bucket", "members", "source", "samples")
_LEARNED_ENTRY_FIELDS = ("learned", "source", "samples")
_LEARNED_FIELDS = ("rows", "table", "origin", "checks")
_TOP_FIELDS = ("apiVersion", "kind", "metadata", "tiers", "switches", "unknown")
_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9_/-]+")
_HEX = re.compile(r"0[xX][0-9a-fA-F]+")
_DECIMAL = re.compile(r"[0-9]+")
_SUFFIX = re.compile(r"((?:\.[A-Za-z_]+(?:\[[0-9]+\])?)*): ")
_SUFFIX_SEGMENT = re.compile(r"\.([A-Za-z_]+)(?:\[([0-9]+)\])?")

Path = tuple[str | int, ...]
T = TypeVar("T")


class _FieldError(Exception):
    """A mistake at a field path, before the path and line are rendered."""

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(detail)
        self.path = path
        self.detail = detail


def render_path(path: Path) -> str:
    """`tiers.leaf.members[2]`; a name with other characters is quoted: `switches["leaf.03"]`."""
    text = ""
    for segment in path:
        if isinstance(segment, int):
            text += f"[{segment}]"
        elif _PLAIN_SEGMENT.fullmatch(segment):
            text += f".{segment}" if text else segment
        else:
            text += f"[{json.dumps(segment)}]"
    return text


# -- reading ------------------------------------------------------------------------------------------------------


def _mapping(value: Any, path: Path, what: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise _FieldError(path, f"expected a mapping of {what}, got {shown(value)}")
    return value


def _list(value: Any, path: Path, what: str, limit: int) -> list[Any]:
    if not isinstance(value, list):
        raise _FieldError(path, f"expected a list of {what}, got {shown(value)}")
    if len(value) > limit:
        raise _FieldError(path, f"at most {limit:,} entries, got {len(value):,}")
    return value


def _known_fields(entry: Mapping[Any, Any], known: Sequence[str], path: Path) -> None:
    for key in entry:
        if key not in known:
            raise _FieldError((*path, str(key)), f"unknown field (known: {', '.join(known)})")


def _integer(value: Any, path: Path, what: str) -> int:
    """An integer given as a number, or as a string of hex (0x...) or decimal digits."""
    if isinstance(value, bool):
        raise _FieldError(path, f"expected {what}, got {shown(value)}")
    if isinstance(value, int):
        if value.bit_length() > KEY_BITS:
            raise _FieldError(path, f"expected {what}, got {shown(value)}")
        return value
    if isinstance(value, str) and len(value) <= _MAX_NUMBER_CHARS:
        if _HEX.fullmatch(value):
            return int(value, 16)
        if _DECIMAL.fullmatch(value):
            return int(value)
    raise _FieldError(path, f'expected {what} (a number, or a string such as "0x1d0f"), got {shown(value)}')


def _string(value: Any, path: Path, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise _FieldError(path, f"expected {what}, got {shown(value)}")
    return value


def _name(value: Any, path: Path) -> str:
    """A switch name; YAML reads a name of digits alone (a label value may be one) as a number."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _string(value, path, "a switch name")


def _choice(value: Any, path: Path, choices: Sequence[str]) -> Any:
    if not isinstance(value, str) or value not in choices:
        raise _FieldError(path, f"{shown(value)} is not one of {', '.join(choices)}")
    return value


def _declared(entry: Mapping[Any, Any], path: Path) -> SwitchHash:
    _known_fields(entry, _DECLARED_FIELDS, path)
    if "function" not in entry:
        raise _FieldError(path, "give function (one of the family, or learned: for a learned hash)")
    function = _choice(entry["function"], (*path, "function"), HASH_FUNCTIONS)
    width = FUNCTION_WIDTHS[function]
    init = entry.get("init")
    if init is not None:
        init = _integer(init, (*path, "init"), f"a {width}-bit integer")
    seed = _integer(entry.get("seed", 0), (*path, "seed"), f"a {width}-bit integer")
    key: tuple[Any, ...] = TUPLE_FIELDS
    if "key" in entry:
        fields = _list(entry["key"], (*path, "key"), "fields such as src, dst, proto, sport, dport", 16)
        key = tuple(_string(f, (*path, "key", i), "a field name") for i, f in enumerate(fields))
    bits = None
    if entry.get("bits") is not None:
        window = _list(entry["bits"], (*path, "bits"), "two integers [low, high)", 2)
        if len(window) != 2:
            raise _FieldError((*path, "bits"), f"expected [low, high), the output bits used, got {shown(window)}")
        low, high = (_integer(v, (*path, "bits", i), "a bit position") for i, v in enumerate(window))
        bits = (low, high)
    bucket = _choice(entry.get("bucket", "modulo"), (*path, "bucket"), ("low-bits", "modulo"))
    members = None
    if entry.get("members") is not None:
        names = _list(entry["members"], (*path, "members"), "next hops (spine-<n>, core-<n>)", 1 << MAX_LEARNED_ROWS)
        members = tuple(_string(m, (*path, "members", i), "a next hop name") for i, m in enumerate(names))
    source = _choice(entry.get("source", "declared"), (*path, "source"), ("declared", "fitted"))
    samples = _integer(entry.get("samples", 0), (*path, "samples"), "a sample count")
    spec = HashSpec(function, init, seed, key, bits, bucket, members)
    return SwitchHash(spec, source, samples)


def _mask(value: Any, path: Path) -> int:
    mask = _integer(value, path, "a mask of the 104 key bits")
    if mask >> KEY_BITS:
        raise _FieldError(path, f"a mask of the {KEY_BITS} key bits, got {mask.bit_length()} bits")
    return mask


def _learned(entry: Mapping[Any, Any], path: Path) -> SwitchHash:
    _known_fields(entry, _LEARNED_ENTRY_FIELDS, path)
    _choice(entry.get("source", "learned"), (*path, "source"), ("learned",))
    samples = _integer(entry.get("samples", 0), (*path, "samples"), "a sample count")
    where = (*path, "learned")
    learned = _mapping(entry["learned"], where, "rows, table, origin, checks")
    _known_fields(learned, _LEARNED_FIELDS, where)
    for name in _LEARNED_FIELDS:
        if name not in learned:
            raise _FieldError((*where, name), "missing; a learned hash has rows, table, origin and checks")
    rows = _list(learned["rows"], (*where, "rows"), "hex masks", MAX_LEARNED_ROWS)
    table = _list(learned["table"], (*where, "table"), "next hops (null: never seen)", 1 << MAX_LEARNED_ROWS)
    checks = _list(learned["checks"], (*where, "checks"), "hex masks", KEY_BITS)
    hops: list[str | None] = []
    for i, hop in enumerate(table):
        hops.append(None if hop is None else _string(hop, (*where, "table", i), "a next hop name or null"))
    spec = LearnedHash(
        rows=tuple(_mask(r, (*where, "rows", i)) for i, r in enumerate(rows)),
        table=tuple(hops),
        origin=_mask(learned["origin"], (*where, "origin")),
        checks=tuple(_mask(c, (*where, "checks", i)) for i, c in enumerate(checks)),
    )
    return SwitchHash(spec, "learned", samples)


def _checked(switch: SwitchHash, tier: SwitchTier, path: Path) -> SwitchHash:
    """`check_switch_hash`, its error put at the field it names."""
    where = render_path(path)
    try:
        return check_switch_hash(switch, tier, where)
    except InputError as exc:
        message = str(exc)
        if not message.startswith(where):
            raise _FieldError(path, message) from None
        matched = _SUFFIX.match(message, len(where))
        if matched is None:
            raise _FieldError(path, message[len(where) :].lstrip(": ")) from None
        field_path = list(path)
        for segment in _SUFFIX_SEGMENT.finditer(matched.group(1)):
            field_path.append(segment.group(1))
            if segment.group(2) is not None:
                field_path.append(int(segment.group(2)))
        raise _FieldError(tuple(field_path), message[matched.end() :]) from None


def _switch_hash(entry: Any, tier: SwitchTier, path: Path) -> SwitchHash:
    entry = _mapping(entry, path, "hash fields (function, seed, ...) or learned")
    switch = _learned(entry, path) if "learned" in entry else _declared(entry, path)
    return _checked(switch, tier, path)


def _model(data: Any, path: Path) -> HashModel:
    data = _mapping(data, path, "tiers, switches and unknown")
    _known_fields(data, _TOP_FIELDS, path)
    kind = data.get("kind", HASH_MODEL_KIND)
    if kind != HASH_MODEL_KIND:
        raise _FieldError((*path, "kind"), f"expected {HASH_MODEL_KIND}, got {shown(kind)}")
    api_version = data.get("apiVersion", HASH_MODEL_API_VERSION)
    if api_version != HASH_MODEL_API_VERSION:
        raise _FieldError((*path, "apiVersion"), f"expected {HASH_MODEL_API_VERSION}, got {shown(api_version)}")
    tiers: dict[SwitchTier, SwitchHash] = {}
    tier_entries = _mapping(data.get("tiers") or {}, (*path, "tiers"), "tier (leaf, spine) to hash")
    for tier, entry in tier_entries.items():
        checked_tier: SwitchTier = _choice(tier, (*path, "tiers", str(tier)), SWITCH_TIERS)
        tiers[checked_tier] = _switch_hash(entry, checked_tier, (*path, "tiers", checked_tier))
    switches: dict[str, SwitchHash] = {}
    switch_entries = _mapping(data.get("switches") or {}, (*path, "switches"), "switch name to hash")
    if len(switch_entries) > MAX_HASH_MODEL_SWITCHES:
        raise _FieldError((*path, "switches"), f"at most {MAX_HASH_MODEL_SWITCHES:,} switches")
    for key, entry in switch_entries.items():
        name = _name(key, (*path, "switches", str(key)))
        switches[name] = _switch_hash(entry, tier_of_switch_name(name), (*path, "switches", name))
    names = _list(data.get("unknown") or [], (*path, "unknown"), "switch names", MAX_HASH_MODEL_SWITCHES)
    unknown: set[str] = set()
    for i, key in enumerate(names):
        name = _name(key, (*path, "unknown", i))
        if name in switches:
            raise _FieldError((*path, "unknown", i), f"{name} has a hash under switches; list it in one place")
        unknown.add(name)
    return HashModel(tiers=tiers, switches=switches, unknown=frozenset(unknown))


def _rendered(error: _FieldError, where: str, line: int | None) -> InputError:
    field = render_path(error.path)
    at = f"line {line}: " if line is not None else ""
    return InputError(f"{where}: {at}{field + ': ' if field else ''}{error.detail}")


def read_hash_model(data: Any, where: str = "hash model") -> HashModel:
    """The hash model in a mapping already parsed (the file's content, or a settings file's section); raise
    InputError `where: field.path: detail`."""
    try:
        return _model(data, ())
    except _FieldError as exc:
        raise _rendered(exc, where, None) from None


# -- the file, with lines ---------------------------------------------------------------------------------------


def _yaml_loader() -> Callable[[str], Any]:
    """libyaml's parser when PyYAML has it (ten times faster), else PyYAML's own."""
    loader: Callable[[str], Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return loader


def _lines_of(node: yaml.Node, lines: dict[Path, int]) -> dict[Path, int]:
    """Line (1-based) of every value in the document, by field path, into `lines`; refuses anchors and aliases,
    which could make a small file expand into a huge one."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, Path]] = [(node, ())]
    while stack:
        current, path = stack.pop()
        lines.setdefault(path, current.start_mark.line + 1)
        if id(current) in seen:
            raise _FieldError(path, "anchors and aliases (& and *) are not read in a hash model; write the value out")

        seen.add(id(current))
        if isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                if isinstance(key, yaml.ScalarNode):
                    stack.append((value, (*path, str(key.value))))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend((item, (*path, i)) for i, item in enumerate(current.value))
    return lines


def _line(lines: Mapping[Path, int], path: Path) -> int | None:
    for end in range(len(path), -1, -1):
        line = lines.get(path[:end])
        if line is not None:
            return line
    return None


def load_hash_model(text: str, where: str = "hash model") -> HashModel:
    """Parse a hash model file (YAML or JSON); raise InputError `where: line N: field.path: detail`."""
    if len(text) > MAX_HASH_MODEL_CHARS:
        raise InputError(f"{where}: larger than {MAX_HASH_MODEL_CHARS >> 20} MiB; is this a hash model file?")
    loader = _yaml_loader()(text)
    lines_so_far: dict[Path, int] = {}
    try:
        node = loader.get_single_node()
        if node is None:
            raise InputError(f"{where}: the file is empty; give apiVersion, kind: {HASH_MODEL_KIND}, tiers, switches")
        lines = _lines_of(node, lines_so_far)
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or "cannot parse"
        raise InputError(f"{where}: {at}malformed YAML: {problem}; fix the file") from None
    except _FieldError as exc:  # an alias: the line is where the repeated value is used
        raise _rendered(exc, where, _line(lines_so_far, exc.path)) from None
    except InputError:
        raise
    except RecursionError:
        raise InputError(f"{where}: nested too deeply; fix the file") from None
    except ValueError as exc:  # PyYAML's int() of a number of thousands of digits
        raise InputError(f"{where}: unreadable ({str(exc).splitlines()[0][:120]}); fix the file") from None
    finally:
        loader.dispose()
    try:
        return _model(data, ())
    except _FieldError as exc:
        raise _rendered(exc, where, _line(lines, exc.path)) from None


# -- writing ------------------------------------------------------------------------------------------------------


def _hex(value: int, bits: int) -> str:
    return f"0x{value:0{(bits + 3) // 4}x}"


def _entry(switch: SwitchHash) -> dict[str, Any]:
    spec = switch.hash
    if isinstance(spec, LearnedHash):
        entry: dict[str, Any] = {
            "learned": {
                "rows": [_hex(row, KEY_BITS) for row in spec.rows],
                "table": list(spec.table),
                "origin": _hex(spec.origin, KEY_BITS),
                "checks": [_hex(check, KEY_BITS) for check in spec.checks],
            },
            "source": "learned",
        }
    else:
        width = FUNCTION_WIDTHS[spec.function]
        entry = {"function": spec.function}
        if spec.init is not None:
            entry["init"] = _hex(spec.init, width)
        if spec.seed:
            entry["seed"] = _hex(spec.seed, width)
        if spec.key != TUPLE_FIELDS:
            entry["key"] = list(spec.key)
        if spec.bits is not None:
            entry["bits"] = list(spec.bits)
        entry["bucket"] = spec.bucket
        if spec.members is not None:
            entry["members"] = list(spec.members)
        entry["source"] = switch.source
    if switch.samples:
        entry["samples"] = switch.samples
    return entry


def hash_model_document(model: HashModel) -> dict[str, Any]:
    """The hash model as the file's mapping (switches in natural name order), for YAML, JSON or a settings file."""
    document: dict[str, Any] = {"apiVersion": HASH_MODEL_API_VERSION, "kind": HASH_MODEL_KIND}
    if model.tiers:
        document["tiers"] = {tier: _entry(model.tiers[tier]) for tier in SWITCH_TIERS if tier in model.tiers}
    if model.switches:
        document["switches"] = {name: _entry(model.switches[name]) for name in sorted(model.switches, key=natural_key)}
    if model.unknown:
        document["unknown"] = sorted(model.unknown, key=natural_key)
    return document


def dump_hash_model(model: HashModel, *, as_json: bool = False) -> str:
    """The hash model file: YAML (or JSON with `as_json`), deterministic; `load_hash_model` reads it back to an
    equal model."""
    document = hash_model_document(model)
    if as_json:
        return json.dumps(document, indent=2) + "\n"
    header = "# ringroute hash model (docs/simulator.md, Hash model)\n"
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=None, width=120)


__all__ = [
    "HASH_MODEL_API_VERSION",
    "HASH_MODEL_KIND",
    "MAX_HASH_MODEL_CHARS",
    "dump_hash_model",
    "hash_model_document",
    "load_hash_model",
    "read_hash_model",
    "render_path",
]
