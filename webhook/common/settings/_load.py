"""Reading settings: YAML against the types of `_model`, every problem at once.

msgspec stops at the first error, so the parsed YAML is first read against the same types here, collecting every
problem (unknown keys, wrong types, values outside their choices or limits), then converted by msgspec, then
checked across fields; a bad file is refused with one line per problem, each naming the key as the user spelt it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import msgspec
import msgspec.inspect

from planner import Fabric
from webhook.common.settings._hash_model import read_hash_model_file, resolve_hash_model_path
from webhook.common.settings._model import (
    DEFAULT_PROFILES,
    MIN_VOLCANO_RELEASE,
    NAMESPACE_PATTERN,
    NETWORK_TOPOLOGY_RELEASE,
    AcceleratorProfile,
    AdmissionSettings,
    ControllerSettings,
    ExtenderServerLimits,
    ExtenderSettings,
    HostPathVolume,
    NetworkTopologySettings,
    PlanningSettings,
    PolicySettings,
    ServerLimits,
    Settings,
    SettingsError,
    TopologySettings,
    VolcanoSettings,
    volcano_release,
)


def default_settings() -> Settings:
    """The built-in settings (what a cluster gets with no settings file)."""
    return Settings()


def settings_from_mapping(data: Mapping[str, Any] | None) -> Settings:
    """Build and check the settings tree from parsed YAML (None gives the defaults).

    Raises SettingsError with every problem found, not only the first.
    """
    if data is None:
        return Settings()
    if not isinstance(data, Mapping):
        raise SettingsError(f"the settings must be a mapping of sections, got {_shown(data)}")
    schema, literal_order = _schema()
    reader = _Reader(literal_order)
    normal = reader.value(schema, data, ())
    try:
        settings = msgspec.convert(normal, Settings)
    except msgspec.ValidationError as exc:
        # Only reached if the reader let through what msgspec refuses; still a refusal, not a crash.
        raise SettingsError([*reader.problems, f"settings: {exc}"]) from None
    reader.cross_check(settings)
    if reader.problems:
        raise SettingsError(reader.problems)
    return settings


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Read the settings file (if any), then apply flag overrides given as top-level fields.

    Overrides replace whole sections and are checked like the file. The hash model file the settings name is read
    and checked too, its path made absolute (`settings_hash_model` gives the model). Raises SettingsError naming
    the file.
    """
    source = None if path is None else str(path)
    data = {} if path is None else _read_file(Path(path))
    for name, value in overrides.items():
        data = {key: item for key, item in data.items() if _snake(str(key)) != name}
        data[name] = msgspec.to_builtins(value)
    try:
        settings = settings_from_mapping(data)
    except SettingsError as exc:
        raise SettingsError(exc.problems, source) from None
    model_file = settings.topology.hash_model_file
    if model_file is not None:
        resolved = resolve_hash_model_path(model_file, path)
        try:
            read_hash_model_file(resolved)
        except ValueError as exc:
            raise SettingsError([f"topology.hashModelFile: {exc}"], source) from None
        topology = msgspec.structs.replace(settings.topology, hash_model_file=resolved)
        settings = msgspec.structs.replace(settings, topology=topology)
    return settings


def _read_file(path: Path) -> dict[str, Any]:
    import yaml  # only start-up reads a file; `import webhook.common.settings` stays light

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"cannot read settings: {exc.strerror or exc}", str(path)) from None
    except UnicodeDecodeError:
        raise SettingsError("cannot read settings: not UTF-8 text", str(path)) from None
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SettingsError(f"not valid YAML{where}: {problem}", str(path)) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, Mapping):
        raise SettingsError(f"the settings file must be a mapping of sections, got {_shown(loaded)}", str(path))
    return dict(loaded)


# -- reading YAML against the types -------------------------------------------------------------------------------

_Key = tuple[str | int, ...]
"""Where a value sits in the tree: snake_case field names and list indexes."""
_REFUSED: Any = object()
"""A value the reader refused; the field keeps its default so the rest of the tree can still be checked."""
_PATTERNS = {
    "^/": "must be an absolute path",
    NAMESPACE_PATTERN: "must be a namespace name (at most 63 lowercase letters, digits and '-')",
}
"""What a string pattern in the settings types means, for messages."""


def _volcano_version(version: str) -> str | None:
    if version == "auto":
        return None
    release = volcano_release(version)
    if release is None:
        return f"{version!r} is not auto or a release like 1.7 or 1.10"
    if release < MIN_VOLCANO_RELEASE:
        return f"ringroute supports Volcano 1.7 and later (got {version!r})"
    return None


def _namespace_name(value: str) -> str | None:
    namespace, slash, name = value.partition("/")
    if slash and namespace and name and "/" not in name:
        return None
    return f"expected namespace/name such as kube-system/basic-tor-node-cm, got {value!r}"


def _address(value: str) -> str | None:
    _host, colon, port = value.rpartition(":")
    if colon and port.isascii() and port.isdigit() and len(port) <= 5 and int(port) <= 65535:
        return None
    return f"expected ADDR:PORT such as 0.0.0.0:8888, got {value!r}"


def _limits(meta: msgspec.Meta) -> Callable[[Any], str | None]:
    return lambda value: _outside(value, meta)


_FIELD_CHECKS: dict[tuple[type, str], Callable[[Any], str | None]] = {
    (VolcanoSettings, "version"): _volcano_version,
    (TopologySettings, "tor_configmap"): _namespace_name,
    (ExtenderSettings, "listen"): _address,
    # Fabric is the planner's plain dataclass; its limits (planner check_fabric) are applied here.
    (Fabric, "nics_per_server"): _limits(msgspec.Meta(ge=1)),
    (Fabric, "link_gbps"): _limits(msgspec.Meta(gt=0)),
    (Fabric, "leaf_oversubscription"): _limits(msgspec.Meta(gt=0)),
    (Fabric, "spine_oversubscription"): _limits(msgspec.Meta(gt=0)),
    (Fabric, "leaf_uplinks"): _limits(msgspec.Meta(ge=1)),
}
"""Checks of one field's value that its type cannot say; each returns what is wrong, or None."""

_SECTIONS: tuple[type, ...] = (
    Settings,
    AcceleratorProfile,
    HostPathVolume,
    PolicySettings,
    TopologySettings,
    Fabric,
    PlanningSettings,
    ControllerSettings,
    ExtenderSettings,
    VolcanoSettings,
    NetworkTopologySettings,
    AdmissionSettings,
    ServerLimits,
    ExtenderServerLimits,
)


@functools.cache
def _schema() -> tuple[msgspec.inspect.Type, dict[frozenset[Any], tuple[Any, ...]]]:
    """The settings types as msgspec sees them, and each Literal's choices in declared order (msgspec sorts them)."""
    order: dict[frozenset[Any], tuple[Any, ...]] = {}

    def collect(hint: Any) -> None:
        if get_origin(hint) is Literal:
            order.setdefault(frozenset(get_args(hint)), get_args(hint))
        for arg in get_args(hint):
            collect(arg)

    for section in _SECTIONS:
        for hint in get_type_hints(section, include_extras=True).values():
            collect(hint)
    return msgspec.inspect.type_info(Settings), order


class _Reader:
    """Reads parsed YAML against the settings types: normalises keys to snake_case and mappings of pairs to lists,
    collects every problem, and drops refused values so that msgspec can still build the rest."""

    def __init__(self, literal_order: Mapping[frozenset[Any], tuple[Any, ...]]) -> None:
        self.problems: list[str] = []
        self.refused: list[_Key] = []
        self.spelling: dict[_Key, str] = {}
        """How the user wrote each key; keys they did not write are shown in camelCase."""
        self._literal_order = literal_order

    def problem(self, key: _Key, message: str) -> None:
        self.problems.append(f"{self.name(key)}: {message}")
        self.refused.append(key)

    def name(self, key: _Key) -> str:
        """The key path as the user wrote it: `profiles[0].allowedCards`."""
        out = ""
        for i, part in enumerate(key):
            if isinstance(part, int):
                out += f"[{part}]"
            else:
                shown = self.spelling.get(key[: i + 1], _camel(part))
                out += f".{shown}" if out else shown
        return out

    def clean(self, *keys: _Key) -> bool:
        """None of these values, nor anything inside or around them, was refused (so a check across them is fair)."""
        return not any(key[: len(bad)] == bad or bad[: len(key)] == key for key in keys for bad in self.refused)

    def value(self, kind: msgspec.inspect.Type, data: Any, key: _Key) -> Any:
        if isinstance(kind, msgspec.inspect.StructType | msgspec.inspect.DataclassType):
            return self.fields(kind, data, key)
        if isinstance(kind, msgspec.inspect.UnionType):
            # The settings only use `X | None`.
            if data is None and any(isinstance(t, msgspec.inspect.NoneType) for t in kind.types):
                return None
            (inner,) = (t for t in kind.types if not isinstance(t, msgspec.inspect.NoneType))
            return self.value(inner, data, key)
        if isinstance(kind, msgspec.inspect.VarTupleType):
            return self.sequence(kind, data, key)
        if isinstance(kind, msgspec.inspect.TupleType):
            return self.pair(kind, data, key)
        message = self.scalar(kind, data)
        if message is not None:
            self.problem(key, message)
            return _REFUSED
        return data

    def fields(self, kind: msgspec.inspect.StructType | msgspec.inspect.DataclassType, data: Any, key: _Key) -> Any:
        if data is None:
            data = {}  # a section whose keys are all commented out: its defaults
        if not isinstance(data, Mapping):
            self.problem(key, f"expected a mapping, got {_shown(data)}")
            return _REFUSED
        base: Any = None
        if kind.cls is AcceleratorProfile:
            data, base = self.base_profile(data, key)
        fields = {field.name: field for field in kind.fields}
        out: dict[str, Any] = {}
        given: dict[str, str] = {}
        for raw, item in data.items():
            spelt = str(raw)
            name = _snake(spelt)
            field = fields.get(name)
            if field is None or name in given:
                self.spelling[(*key, spelt)] = spelt
                refusal = self.unknown(spelt, fields) if field is None else f"given twice (also as {given[name]})"
                self.problem((*key, spelt), refusal)
                continue
            given[name] = spelt
            self.spelling[(*key, name)] = spelt
            got = self.value(field.type, item, (*key, name))
            check = _FIELD_CHECKS.get((kind.cls, name))
            if got is not _REFUSED and got is not None and check is not None:
                message = check(got)
                if message is not None:
                    self.problem((*key, name), message)
                    got = _REFUSED
            if got is not _REFUSED:
                out[name] = got
        missing = [field.name for field in kind.fields if field.required and field.name not in out]
        for name in missing:
            if name not in given:
                self.problem((*key, name), "required")
        if missing or base is _REFUSED:
            return _REFUSED
        return out if base is None else {**base, **out}

    def base_profile(self, data: Mapping[Any, Any], key: _Key) -> tuple[Mapping[Any, Any], Any]:
        """Profiles may start from a built-in one (`base: ascend-1980`); its fields come first, the user's win."""
        if "base" not in data:
            return data, None
        rest = {raw: item for raw, item in data.items() if raw != "base"}
        built_in = {profile.label_value: profile for profile in DEFAULT_PROFILES}
        name = data["base"]
        if isinstance(name, str) and name in built_in:
            return rest, msgspec.to_builtins(built_in[name])
        self.problem((*key, "base"), f"unknown built-in profile {_shown(name)} (built-in: {', '.join(built_in)})")
        return rest, _REFUSED

    def unknown(self, spelt: str, fields: Mapping[str, Any]) -> str:
        import difflib  # only on the error path

        known = [name if "_" in spelt else _camel(name) for name in fields]
        close = difflib.get_close_matches(spelt, known, n=1)
        if close:
            return f"unknown setting; did you mean {close[0]}?"
        return f"unknown setting (known: {', '.join(known)})"

    def sequence(self, kind: msgspec.inspect.VarTupleType, data: Any, key: _Key) -> Any:
        item = kind.item_type
        if isinstance(data, Mapping) and isinstance(item, msgspec.inspect.TupleType) and len(item.item_types) == 2:
            # A mapping stands for its (key, value) pairs: `ruleModes: {working-dir-local: warn}`.
            pairs = []
            for raw, value in data.items():
                at = (*key, str(raw))
                self.spelling[at] = str(raw)
                first = self.value(item.item_types[0], raw, at)
                second = self.value(item.item_types[1], value, at)
                if first is not _REFUSED and second is not _REFUSED:
                    pairs.append([first, second])
            return pairs
        if not isinstance(data, list | tuple):
            self.problem(key, f"expected a list, got {_shown(data)}")
            return _REFUSED
        if kind.min_length is not None and len(data) < kind.min_length:
            self.problem(key, "must not be empty")
            return _REFUSED
        out = []
        for i, element in enumerate(data):
            got = self.value(item, element, (*key, i))
            if got is _REFUSED and isinstance(item, msgspec.inspect.StructType):
                if any(field.required for field in item.fields):
                    continue
                # Stand-in defaults keep later items at the index the user wrote; checks skip this one.
                got = {}
                self.refused.append((*key, i))
            if got is not _REFUSED:
                out.append(got)
        return out

    def pair(self, kind: msgspec.inspect.TupleType, data: Any, key: _Key) -> Any:
        if not isinstance(data, list | tuple) or len(data) != len(kind.item_types):
            self.problem(key, f"expected {len(kind.item_types)} values, got {_shown(data)}")
            return _REFUSED
        out = [
            self.value(item, element, (*key, i))
            for i, (item, element) in enumerate(zip(kind.item_types, data, strict=True))
        ]
        return _REFUSED if any(element is _REFUSED for element in out) else out

    def scalar(self, kind: msgspec.inspect.Type, data: Any) -> str | None:
        """What is wrong with a scalar value, or None."""
        if isinstance(kind, msgspec.inspect.BoolType):
            return None if isinstance(data, bool) else f"expected true or false, got {_shown(data)}"
        if isinstance(kind, msgspec.inspect.IntType):
            if not isinstance(data, int) or isinstance(data, bool):
                return f"expected an integer, got {_shown(data)}"
            return _outside(data, kind)
        if isinstance(kind, msgspec.inspect.FloatType):
            if not isinstance(data, int | float) or isinstance(data, bool):
                return f"expected a number, got {_shown(data)}"
            if not math.isfinite(data):
                return f"expected a finite number, got {data}"
            return _outside(data, kind)
        if isinstance(kind, msgspec.inspect.StrType):
            if not isinstance(data, str):
                return f"expected a string, got {_shown(data)}{_quote_hint(data)}"
            if kind.min_length is not None and len(data) < kind.min_length:
                return "must not be empty"
            if kind.pattern is not None and not re.search(kind.pattern, data):
                return f"{_PATTERNS.get(kind.pattern, f'must match {kind.pattern}')}, got {data!r}"
            return None
        if isinstance(kind, msgspec.inspect.LiteralType):
            if isinstance(data, str) and data in kind.values:
                return None
            choices = ", ".join(map(str, self._literal_order.get(frozenset(kind.values), kind.values)))
            if isinstance(data, str):
                renamed = _RENAMED_VALUES.get((frozenset(kind.values), data), "")
                return f"{data!r} is not one of {choices}{renamed}"
            return f"expected one of {choices}, got {_shown(data)}{_quote_hint(data)}"
        if isinstance(kind, msgspec.inspect.NoneType):
            return None if data is None else f"expected null, got {_shown(data)}"
        raise TypeError(f"settings reader: no rule for {kind!r}")

    def cross_check(self, settings: Settings) -> None:
        """Checks that read several fields; each runs only when those fields were not refused already."""
        first_of: dict[str, int] = {}
        for i, profile in enumerate(settings.profiles):
            label = ("profiles", i, "label_value")
            if self.clean(label):
                first = first_of.setdefault(profile.label_value, i)
                if first != i:
                    other = self.name(("profiles", first))
                    self.problem(label, f"duplicate profile {profile.label_value!r} (also {other})")
            cards, per_node = ("profiles", i, "allowed_cards"), ("profiles", i, "cards_per_node")
            if self.clean(cards, per_node):
                outside = ", ".join(str(c) for c in profile.allowed_cards if c > profile.cards_per_node)
                if outside:
                    limit = f"1..{self.name(per_node).rpartition('.')[2]} ({profile.cards_per_node})"
                    self.problem(cards, f"every count must be in {limit}, got {outside}")
        controller = settings.controller
        for i, namespace in enumerate(controller.namespaces):
            key = ("controller", "namespaces", i)
            if self.clean(key) and namespace in controller.namespaces[:i]:
                self.problem(key, f"duplicate namespace {namespace!r}")
        retry = ("controller", "retry_period_s")
        renew = ("controller", "renew_deadline_s")
        lease = ("controller", "lease_duration_s")
        if self.clean(retry, renew) and not controller.retry_period_s < controller.renew_deadline_s:
            self.problem(
                retry,
                f"must be shorter than {self.name(renew)} ({controller.renew_deadline_s:g}), "
                f"got {controller.retry_period_s:g}",
            )
        if self.clean(renew, lease) and not controller.renew_deadline_s < controller.lease_duration_s:
            self.problem(
                renew,
                f"must be shorter than {self.name(lease)} ({controller.lease_duration_s:g}), "
                f"got {controller.renew_deadline_s:g}",
            )
        timeout = ("controller", "planning_timeout_s")
        time_limit = ("planning", "time_limit_s")
        if self.clean(timeout, time_limit) and not controller.planning_timeout_s > settings.planning.time_limit_s:
            self.problem(
                timeout,
                f"must be longer than {self.name(time_limit)} ({settings.planning.time_limit_s:g}), "
                f"got {controller.planning_timeout_s:g}",
            )
        steering = ("planning", "steering_time_limit_s")
        both = settings.planning.time_limit_s + settings.planning.steering_time_limit_s
        if self.clean(timeout, time_limit, steering) and not controller.planning_timeout_s > both:
            self.problem(
                timeout,
                f"must be longer than {self.name(time_limit)} + {self.name(steering)} ({both:g}), "
                f"got {controller.planning_timeout_s:g}",
            )
        largest = {
            "admission": 7,  # webhook.admission.server.MAX_BODY_BYTES
            "extender": max(settings.extender.max_body_mib, settings.extender.max_session_open_mib),
        }
        for section, limits in (("admission", settings.admission.server), ("extender", settings.extender.server)):
            buffer = (section, "server", "body_buffer_mib")
            bodies = (("extender", "max_body_mib"), ("extender", "max_session_open_mib"))
            if self.clean(buffer, *bodies) and limits.body_buffer_mib < largest[section]:
                self.problem(
                    buffer,
                    f"must hold the largest request body the server reads ({largest[section]} MiB), "
                    f"got {limits.body_buffer_mib}",
                )
        ports = ("planning", "source_ports")
        if self.clean(ports) and settings.planning.source_ports[0] > settings.planning.source_ports[1]:
            low, high = settings.planning.source_ports
            self.problem(ports, f"[first, last] with first <= last, got [{low}, {high}]")
        version = ("volcano", "version")
        inject = ("volcano", "network_topology", "inject")
        volcano = settings.volcano
        if self.clean(version, inject) and volcano.network_topology.inject == "fixed":
            release = None if volcano.version == "auto" else volcano_release(volcano.version)
            if release is not None and release < NETWORK_TOPOLOGY_RELEASE:
                self.problem(
                    inject,
                    "fixed needs Volcano 1.12 or later (spec.networkTopology); "
                    f"{self.name(version)} is {volcano.version!r}: use sized or never, and the scheduler extender",
                )


def _outside(value: float, limits: Any) -> str | None:
    """What bound of `limits` (ge, gt, le, lt) the value breaks, or None."""
    if limits.ge is not None and not value >= limits.ge:
        rule = "must be zero or more" if limits.ge == 0 else f"must be at least {limits.ge}"
    elif limits.gt is not None and not value > limits.gt:
        rule = "must be positive" if limits.gt == 0 else f"must be more than {limits.gt}"
    elif limits.le is not None and not value <= limits.le:
        rule = f"must be at most {limits.le}"
    elif limits.lt is not None and not value < limits.lt:
        rule = f"must be less than {limits.lt}"
    else:
        return None
    return f"{rule}, got {value!r}"


def _shown(data: Any) -> str:
    """A value as the user wrote it in YAML, or what kind of thing it is."""
    if isinstance(data, bool):
        return "true" if data else "false"
    if data is None:
        return "null"
    if isinstance(data, Mapping):
        return "a mapping"
    if isinstance(data, list | tuple):
        return "a list"
    if isinstance(data, str | int | float):
        return repr(data)
    return type(data).__name__


_RENAMED_VALUES: dict[tuple[frozenset[Any], str], str] = {
    (frozenset({"sized", "fixed", "never"}), "auto"): (
        " (auto, which asked for a fixed tier once HyperNodes existed, became sized: the lowest tier that holds the "
        "job; fixed keeps one tier for every job)"
    ),
    (frozenset({"sized", "fixed", "never"}), "always"): " (always became fixed)",
}
"""Values of earlier releases, with what replaced them (appended to the problem)."""


def _quote_hint(data: Any) -> str:
    # YAML reads `version: 1.10` as the number 1.1.
    if isinstance(data, int | float) and not isinstance(data, bool):
        return " (a number: quote it in YAML)"
    return ""


def _snake(key: str) -> str:
    """Accept camelCase keys (Kubernetes style) as well as snake_case."""
    out = []
    for ch in key:
        if ch.isupper():
            out.append("_")
            out.append(ch.lower())
        else:
            out.append(ch)
    return "".join(out).replace("-", "_")


def _camel(name: str) -> str:
    """The camelCase spelling of a snake_case field name (`debounce_s` -> `debounceS`)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


__all__ = ["default_settings", "load_settings", "settings_from_mapping"]
