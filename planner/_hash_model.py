"""How the fabric's switches pick an ECMP next hop from a packet's 5-tuple: the hash model, as plain data.

A switch with several equal-cost next hops towards a destination hashes the key fields of each packet, takes a
bucket from the hash, and forwards to the member of the group in that bucket. RoCEv2 packets are UDP to port 4791,
so the only field a host can choose per queue pair is the UDP source port: with the switch's hash known, a source
port can be picked whose packets take a planned spine (`planner.steer_source_ports`).

Two kinds of switch hash are modelled:
- `HashSpec`, a *declared* function from a documented family (CRC32, CRC32C, CRC16-CCITT, CRC16-IBM, XOR folds)
  with its seed, key layout, output bits, bucket rule and member order: what a vendor documents, or what
  `ringroute fabric calibrate` fitted to samples;
- `LearnedHash`, a hash *learned* from samples without naming it: every CRC or XOR hash is affine over GF(2) in
  the key bits, so with a power-of-two member count and low-bit buckets the member is a function of a few parity
  checks of the key. It is only known within the span of the samples it was learned from (`origin`, `checks`).

`HashSample` is one answer of a switch (which next hop it takes for a 5-tuple), what calibration learns from;
`FabricSwitch` names a switch of a topology with its tier and next-hop count. The checks of every value live here
too, beside the data, so that the file readers (`planner.io`) and the evaluation (`planner.fabric`) share them.

The canonical key is the 104-bit integer `src | dst | proto | sport | dport` (IPv4 addresses and ports in network
byte order, src in the top bits): `key_int`. A row (a GF(2) linear functional) is a 104-bit mask; its value on a
key is the parity of `row & key`. Pure data: `planner.fabric._hashing` evaluates these.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal, get_args

from planner._errors import InputError

HashFunction = Literal[
    "crc32",
    "crc32-msb",
    "crc32c",
    "crc16-ccitt",
    "crc16-ccitt-lsb",
    "crc16-ibm",
    "crc16-ibm-msb",
    "xor32",
    "xor16",
    "xor8",
]
"""The declared hash family (docs/simulator.md, "Hash model", has each one's parameters and check value)."""
HASH_FUNCTIONS: tuple[HashFunction, ...] = get_args(HashFunction)
FUNCTION_WIDTHS: Final[Mapping[HashFunction, int]] = MappingProxyType(
    {
        "crc32": 32,
        "crc32-msb": 32,
        "crc32c": 32,
        "crc16-ccitt": 16,
        "crc16-ccitt-lsb": 16,
        "crc16-ibm": 16,
        "crc16-ibm-msb": 16,
        "xor32": 32,
        "xor16": 16,
        "xor8": 8,
    }
)
"""Output bits of each function of the family."""
XOR_FUNCTIONS: tuple[HashFunction, ...] = ("xor32", "xor16", "xor8")
"""The XOR folds: they have no register, so no init value (a seed is their only constant)."""

KeyField = Literal["src", "dst", "proto", "sport", "dport", "pad8", "pad16", "pad32"]
"""A field of the hashed key: the 5-tuple's fields (network byte order), or zero padding of 1, 2 or 4 bytes."""
KEY_FIELDS: tuple[KeyField, ...] = get_args(KeyField)
TUPLE_FIELDS: tuple[KeyField, ...] = ("src", "dst", "proto", "sport", "dport")
"""The canonical key's fields, in its order; also the default key layout."""
FIELD_BYTES: Mapping[KeyField, int] = MappingProxyType(
    {"src": 4, "dst": 4, "proto": 1, "sport": 2, "dport": 2, "pad8": 1, "pad16": 2, "pad32": 4}
)
KEY_BYTES = 13
"""Bytes of the canonical key (src 4, dst 4, proto 1, sport 2, dport 2)."""
KEY_BITS = 8 * KEY_BYTES
FIELD_OFFSET: Mapping[KeyField, int] = MappingProxyType({"src": 0, "dst": 4, "proto": 8, "sport": 9, "dport": 11})
"""Byte offset of each 5-tuple field in the canonical key."""

BucketRule = Literal["low-bits", "modulo"]
"""How a bucket is taken from the hash: its low log2(m) bits (m a power of two), or the hash modulo m."""
BUCKET_RULES: tuple[BucketRule, ...] = get_args(BucketRule)

SwitchTier = Literal["leaf", "spine"]
"""Switches that choose among equal-cost uplinks: tier-1 switches (leaf or rail switch; next hop a spine) and, in
3-tier fabrics, spines (next hop a core)."""
SWITCH_TIERS: tuple[SwitchTier, ...] = get_args(SwitchTier)
NEXT_HOP_PREFIX: Mapping[SwitchTier, str] = MappingProxyType({"leaf": "spine-", "spine": "core-"})
"""Next hops are named as `routes.json` numbers them: uplink j of a tier-1 switch is `spine-j`, uplink c of a spine
`core-c`."""

ROCE_UDP_PORT = 4791
"""UDP destination port of RoCEv2."""
UDP = 17
"""IP protocol number of UDP."""
MAX_HASH_BITS = 32
"""Widest hash output modelled."""
MAX_LEARNED_ROWS = 16
"""Most parity checks a learned hash indexes its next hops by (a table of 65,536 entries): 2**rows is at least the
member count, and ECMP groups have at most a few hundred members."""

_NEXT_HOP = re.compile(r"(spine|core)-(0|[1-9][0-9]{0,4})")


def next_hop_index(name: str, tier: SwitchTier) -> int:
    """j of `spine-j` (tier-1 switches) or c of `core-c` (spines); raises InputError for any other name."""
    matched = _NEXT_HOP.fullmatch(name)
    if matched is None or matched.group(1) + "-" != NEXT_HOP_PREFIX[tier]:
        raise InputError(
            f"next hop {name!r}: a {tier} switch's next hops are named {NEXT_HOP_PREFIX[tier]}<n>, "
            "as routes.json numbers them"
        )
    return int(matched.group(2))


_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
CANONICAL_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
"""A regular expression of an IPv4 address in canonical dotted-quad form (no leading zeros, no spaces)."""
_CANONICAL = re.compile(CANONICAL_IPV4)


def canonical_ipv4(text: str) -> int | None:
    """The value of `text` when it is an IPv4 address in canonical dotted-quad form (what ringroute writes and
    HCCL matches), else None: the fast path of every address a rank table or port file holds."""
    if _CANONICAL.fullmatch(text) is None:
        return None
    a, b, c, d = text.split(".")
    return (int(a) << 24) | (int(b) << 16) | (int(c) << 8) | int(d)


def ipv4_int(text: str, what: str = "address") -> int:
    """The 32-bit value of a dotted-quad IPv4 address; InputError for anything else (IPv6 included)."""
    fast = canonical_ipv4(text)
    if fast is not None:
        return fast
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise InputError(f"{what}: {text!r} is not an IPv4 address") from None
    if address.version != 4:
        raise InputError(f"{what}: {text!r} is IPv6; HCCL's RoCE ports and ringroute's hash model are IPv4")
    return int(address)


def key_int(src: int, dst: int, sport: int, dport: int = ROCE_UDP_PORT, proto: int = UDP) -> int:
    """The canonical 104-bit key of a 5-tuple (addresses as 32-bit integers)."""
    return (((((src << 32) | dst) << 8 | proto) << 16 | sport) << 16) | dport


@dataclass(frozen=True, slots=True)
class HashSpec:
    """A declared switch hash: a function of the family over a key layout, its seed, output bits and buckets."""

    function: HashFunction
    init: int | None = None
    """The CRC register's initial value; None: the function's standard one (XOR folds have none). For a key of
    fixed length a different init only XORs a constant into the output, as `seed` does."""
    seed: int = 0
    """XORed into the function's output before the output bits are taken (a switch's hash seed)."""
    key: tuple[KeyField, ...] = TUPLE_FIELDS
    """Hashed fields in order, each in network byte order (pad8/pad16/pad32: zero bytes)."""
    bits: tuple[int, int] | None = None
    """Output bits [low, high) the bucket is taken from (low = 0 is the least significant); None: all."""
    bucket: BucketRule = "modulo"
    members: tuple[str, ...] | None = None
    """Next hop of each bucket in bucket order (`spine-2`, ...); None: bucket j is `spine-j` (`core-j`)."""


@dataclass(frozen=True, slots=True)
class LearnedHash:
    """A switch hash learned from samples: the next hop is `table[z]`, z the values of `rows` on the key.

    Valid only for keys in the affine span of the samples (every check of `checks` has the value it has on
    `origin`); elsewhere the hash is unknown.
    """

    rows: tuple[int, ...]
    """GF(2) functionals over the canonical key whose values (bit i = row i) index `table`."""
    table: tuple[str | None, ...]
    """Next hop for each of the 2**len(rows) values of the rows; None for a value no sample showed."""
    origin: int
    """A key of the span (one of the samples)."""
    checks: tuple[int, ...]
    """Functionals that vanish on `key ^ origin` exactly when the key lies in the span of the samples."""


@dataclass(frozen=True, slots=True)
class SwitchHash:
    """The hash of one switch (or the default of a tier), and where it came from."""

    hash: HashSpec | LearnedHash
    source: Literal["declared", "fitted", "learned"] = "declared"
    """`declared` by an admin, `fitted` (a declared function's seed or member order fitted to samples) or
    `learned` from samples alone."""
    samples: int = 0
    """Samples it was calibrated from (0 for a declared hash)."""


def _frozen_switches(items: Mapping[str, SwitchHash]) -> Mapping[str, SwitchHash]:
    return MappingProxyType(dict(items))


@dataclass(frozen=True, slots=True)
class HashModel:
    """The fabric's hash: a default per switch tier, and switches that differ from it by name.

    Switch names: a tier-1 switch is its leaf's topology name (`leaf-03`), in the rail layout `<group>/rail-<d>`;
    a spine of a 3-tier fabric is `<pod>/spine-<j>` (`<pod>/rail-<d>/spine-<j>` in the rail layout).
    """

    tiers: Mapping[SwitchTier, SwitchHash] = field(default_factory=lambda: MappingProxyType({}))
    switches: Mapping[str, SwitchHash] = field(default_factory=lambda: MappingProxyType({}))
    unknown: AbstractSet[str] = frozenset()
    """Switches whose hash is not known: their samples contradict every model calibration tried, or were too
    few. Their tier's default never applies to them (it would disagree with what they answered)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tiers", MappingProxyType(dict(self.tiers)))
        object.__setattr__(self, "switches", _frozen_switches(self.switches))
        object.__setattr__(self, "unknown", frozenset(self.unknown))

    def for_switch(self, name: str, tier: SwitchTier) -> SwitchHash | None:
        """The switch's own hash, else its tier's default, else None (the model does not know it; always None
        for a switch listed in `unknown`)."""
        own = self.switches.get(name)
        if own is not None:
            return own
        return None if name in self.unknown else self.tiers.get(tier)

    @property
    def is_empty(self) -> bool:
        """Whether the model knows no switch at all."""
        return not self.tiers and not self.switches

    def __reduce__(
        self,
    ) -> tuple[type[HashModel], tuple[dict[SwitchTier, SwitchHash], dict[str, SwitchHash], frozenset[str]]]:
        # The read-only mappings do not pickle; the controller hands the model to its planning process.
        return (HashModel, (dict(self.tiers), dict(self.switches), frozenset(self.unknown)))


@dataclass(frozen=True, slots=True)
class HashSample:
    """One answer of a switch: the next hop it takes for a 5-tuple (a line of a samples file)."""

    switch: str
    src: int
    """Source IPv4 address as a 32-bit integer."""
    dst: int
    sport: int
    next_hop: str
    """`spine-<j>` for a tier-1 switch, `core-<c>` for a spine."""
    dport: int = ROCE_UDP_PORT
    proto: int = UDP
    line: int = 0
    """Line of the samples file it was read from (0: not from a file), for messages."""

    @property
    def key(self) -> int:
        """The canonical 104-bit key of its 5-tuple."""
        return key_int(self.src, self.dst, self.sport, self.dport, self.proto)

    @property
    def tier(self) -> SwitchTier:
        """The switch's tier, as its next hop's name says (`spine-` from a tier-1 switch, `core-` from a spine)."""
        return "spine" if self.next_hop.startswith(NEXT_HOP_PREFIX["spine"]) else "leaf"


@dataclass(frozen=True, slots=True)
class HashProbe:
    """A 5-tuple to ask a switch about: which next hop does it take (a line of `--print-probes`)."""

    switch: str
    src: int
    dst: int
    sport: int
    dport: int = ROCE_UDP_PORT
    proto: int = UDP

    @property
    def key(self) -> int:
        """The canonical 104-bit key of its 5-tuple."""
        return key_int(self.src, self.dst, self.sport, self.dport, self.proto)


@dataclass(frozen=True, slots=True)
class FabricSwitch:
    """A switch of a topology that chooses among equal-cost next hops."""

    name: str
    """As `tier1_switch_name` / `spine_switch_name` name it."""
    tier: SwitchTier
    next_hops: int
    """Equal-cost next hops: the uplinks of a tier-1 switch (spines), of a spine (cores)."""


def tier1_switch_name(leaf: str, plane: int | None) -> str:
    """Name of a tier-1 switch: the leaf itself, or rail switch `plane` of a rail group (`<group>/rail-<d>`)."""
    return leaf if plane is None else f"{leaf}/rail-{plane}"


def spine_switch_name(pod: str, plane: int | None, spine: int) -> str:
    """Name of spine j of a pod (of rail plane `plane` in the rail layout) in a 3-tier fabric."""
    return f"{pod}/spine-{spine}" if plane is None else f"{pod}/rail-{plane}/spine-{spine}"


_SPINE_SWITCH = re.compile(r".+/spine-(0|[1-9][0-9]{0,4})")


def tier_of_switch_name(name: str) -> SwitchTier:
    """The tier a switch's name says: `<pod>/spine-<j>` (or `<pod>/rail-<d>/spine-<j>`) is a spine, any other
    name a tier-1 switch (for switches not looked up in a topology)."""
    return "spine" if _SPINE_SWITCH.fullmatch(name) else "leaf"


# -- checks ------------------------------------------------------------------------------------------------------


def check_switch_hash(switch: SwitchHash, tier: SwitchTier, where: str) -> SwitchHash:
    """Return the switch hash after checking every value; raise InputError naming the field (`where.<field>`)."""
    if switch.samples < 0:
        raise InputError(f"{where}.samples: must be 0 or more, got {switch.samples}")
    if isinstance(switch.hash, LearnedHash):
        _check_learned(switch.hash, tier, where)
    else:
        check_hash_spec(switch.hash, tier, where)
    return switch


def check_hash_spec(spec: HashSpec, tier: SwitchTier, where: str) -> HashSpec:
    """Return the spec after checking it; raise InputError naming the field (`where.<field>`)."""
    if spec.function not in HASH_FUNCTIONS:
        raise InputError(f"{where}.function: {spec.function!r} is not one of {', '.join(HASH_FUNCTIONS)}")
    width = FUNCTION_WIDTHS[spec.function]
    if spec.init is not None:
        if spec.function in XOR_FUNCTIONS:
            raise InputError(f"{where}.init: {spec.function} has no init value; use seed")
        if not 0 <= spec.init < 1 << width:
            raise InputError(f"{where}.init: must be 0..{(1 << width) - 1} for {spec.function}, got {spec.init}")
    if not 0 <= spec.seed < 1 << width:
        raise InputError(f"{where}.seed: must be 0..{(1 << width) - 1} for {spec.function}, got {spec.seed}")
    _check_key(spec.key, where)
    low, high = spec.bits if spec.bits is not None else (0, width)
    if not 0 <= low < high <= width:
        raise InputError(f"{where}.bits: [low, high) within 0..{width} of {spec.function}, got [{low}, {high})")
    if spec.bucket not in BUCKET_RULES:
        raise InputError(f"{where}.bucket: {spec.bucket!r} is not one of {', '.join(BUCKET_RULES)}")
    if spec.members is not None:
        if not spec.members:
            raise InputError(f"{where}.members: list at least one next hop, or leave it out")
        for index, name in enumerate(spec.members):
            try:
                next_hop_index(name, tier)
            except InputError as exc:
                raise InputError(f"{where}.members[{index}]: {exc}") from None
        _check_bucket_count(spec, len(spec.members), high - low, f"{where}.members")
    return spec


def _check_bucket_count(spec: HashSpec, members: int, bits: int, where: str) -> None:
    if spec.bucket == "low-bits" and members & (members - 1):
        raise InputError(f"{where}: low-bits buckets need a power-of-two member count, got {members}; use modulo")
    if spec.bucket == "low-bits" and members > 1 << bits:
        raise InputError(f"{where}: {members} members need more than the {bits} output bits")


def _check_key(key: Sequence[KeyField], where: str) -> None:
    if not key:
        raise InputError(f"{where}.key: list the hashed fields, e.g. [src, dst, proto, sport, dport]")
    seen: set[str] = set()
    for index, name in enumerate(key):
        if name not in KEY_FIELDS:
            raise InputError(f"{where}.key[{index}]: {name!r} is not one of {', '.join(KEY_FIELDS)}")
        if name in TUPLE_FIELDS and name in seen:
            raise InputError(f"{where}.key[{index}]: {name} appears twice")
        seen.add(name)
    if len(key) > 16:
        raise InputError(f"{where}.key: at most 16 fields, got {len(key)}")


def _check_learned(learned: LearnedHash, tier: SwitchTier, where: str) -> None:
    rows = len(learned.rows)
    if rows > MAX_LEARNED_ROWS:
        raise InputError(f"{where}.learned.rows: at most {MAX_LEARNED_ROWS} (65,536 next-hop values), got {rows}")
    if len(learned.table) != 1 << rows:
        raise InputError(f"{where}.learned.table: {1 << rows} entries for {rows} rows, got {len(learned.table)}")
    limit = 1 << (8 * KEY_BYTES)
    for name, values in (("rows", learned.rows), ("checks", learned.checks)):
        for index, row in enumerate(values):
            if not 0 < row < limit:
                raise InputError(f"{where}.learned.{name}[{index}]: a non-zero mask of the 104 key bits")
    if not 0 <= learned.origin < limit:
        raise InputError(f"{where}.learned.origin: a 104-bit key")
    for index, hop in enumerate(learned.table):
        if hop is not None:
            try:
                next_hop_index(hop, tier)
            except InputError as exc:
                raise InputError(f"{where}.learned.table[{index}]: {exc}") from None


__all__ = [
    "BUCKET_RULES",
    "FIELD_BYTES",
    "FIELD_OFFSET",
    "FUNCTION_WIDTHS",
    "HASH_FUNCTIONS",
    "KEY_BITS",
    "KEY_BYTES",
    "KEY_FIELDS",
    "MAX_HASH_BITS",
    "MAX_LEARNED_ROWS",
    "NEXT_HOP_PREFIX",
    "ROCE_UDP_PORT",
    "SWITCH_TIERS",
    "TUPLE_FIELDS",
    "UDP",
    "XOR_FUNCTIONS",
    "BucketRule",
    "FabricSwitch",
    "HashFunction",
    "HashModel",
    "HashProbe",
    "HashSample",
    "HashSpec",
    "KeyField",
    "LearnedHash",
    "SwitchHash",
    "SwitchTier",
    "check_hash_spec",
    "check_switch_hash",
    "ipv4_int",
    "key_int",
    "next_hop_index",
    "spine_switch_name",
    "tier1_switch_name",
    "tier_of_switch_name",
]
