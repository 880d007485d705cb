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

The canonical key is the 104-bit integer `src | dst | proto | sport | dport` (IPv4 addresses and ports in network
byte order, src in the top bits): `key_int`. A row (a GF(2) linear functional) is a 104-bit mask; its value on a
key is the parity of `row & key`. Pure data: `planner.sim._hashing` evaluates these.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, get_args

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


def ipv4_int(text: str, what: str = "address") -> int:
    """The 32-bit value of a dotted-quad IPv4 address; InputError for anything else (IPv6 included)."""
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "tiers", MappingProxyType(dict(self.tiers)))
        object.__setattr__(self, "switches", _frozen_switches(self.switches))

    def for_switch(self, name: str, tier: SwitchTier) -> SwitchHash | None:
        """The switch's own hash, else its tier's default, else None (the model does not know it)."""
        own = self.switches.get(name)
        return own if own is not None else self.tiers.get(tier)

    @property
    def is_empty(self) -> bool:
        """Whether the model knows no switch at all."""
        return not self.tiers and not self.switches


def tier1_switch_name(leaf: str, plane: int | None) -> str:
    """Name of a tier-1 switch: the leaf itself, or rail switch `plane` of a rail group (`<group>/rail-<d>`)."""
    return leaf if plane is None else f"{leaf}/rail-{plane}"


def spine_switch_name(pod: str, plane: int | None, spine: int) -> str:
    """Name of spine j of a pod (of rail plane `plane` in the rail layout) in a 3-tier fabric."""
    return f"{pod}/spine-{spine}" if plane is None else f"{pod}/rail-{plane}/spine-{spine}"


__all__ = [
    "BUCKET_RULES",
    "FIELD_BYTES",
    "FIELD_OFFSET",
    "HASH_FUNCTIONS",
    "KEY_BITS",
    "KEY_BYTES",
    "KEY_FIELDS",
    "MAX_HASH_BITS",
    "NEXT_HOP_PREFIX",
    "ROCE_UDP_PORT",
    "SWITCH_TIERS",
    "TUPLE_FIELDS",
    "UDP",
    "BucketRule",
    "HashFunction",
    "HashModel",
    "HashSpec",
    "KeyField",
    "LearnedHash",
    "SwitchHash",
    "SwitchTier",
    "ipv4_int",
    "key_int",
    "next_hop_index",
    "spine_switch_name",
    "tier1_switch_name",
]
