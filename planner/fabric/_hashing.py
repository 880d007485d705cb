"""Switch hashes evaluated: the declared family, and every hash compiled to byte tables for numpy.

Every function of the family is affine over GF(2) in the key bits for a key of fixed length (a CRC is linear in
the message and its init value; an XOR fold is linear), and so are a seed, an output window and a learned hash.
Such a map is the XOR of one table entry per key byte plus a constant: `KeyMap` holds the 13 x 256 tables of the
canonical key, built once per switch hash from the reference implementation (the `crc` package for CRCs) by
linearity, so a million 5-tuples hash in a few numpy gathers. `hash_output` is the reference itself, one key at a
time, which the tests compare the tables with. The checks of a hash (`check_switch_hash`, `check_hash_spec`) live
beside the data in `planner._hash_model` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from types import MappingProxyType
from typing import Final

import numpy as np
from crc import Calculator, Configuration

from planner._hash_model import (
    FIELD_BYTES,
    FIELD_OFFSET,
    FUNCTION_WIDTHS,
    KEY_BYTES,
    NEXT_HOP_PREFIX,
    ROCE_UDP_PORT,
    UDP,
    HashFunction,
    HashSpec,
    KeyField,
    LearnedHash,
    SwitchHash,
    SwitchTier,
    check_hash_spec,
    check_switch_hash,
    next_hop_index,
)

CRC_CONFIGURATIONS: Final[Mapping[HashFunction, Configuration]] = MappingProxyType(
    {
        # (width, polynomial, init, final xor, reflected input, reflected output); check value of b"123456789"
        "crc32": Configuration(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True),  # CRC-32 (zlib): 0xCBF43926
        "crc32-msb": Configuration(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, False, False),  # CRC-32/BZIP2: 0xFC891918
        "crc32c": Configuration(32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, True, True),  # CRC-32C (iSCSI): 0xE3069283
        "crc16-ccitt": Configuration(16, 0x1021, 0xFFFF, 0, False, False),  # CRC-16/CCITT-FALSE: 0x29B1
        "crc16-ccitt-lsb": Configuration(16, 0x1021, 0, 0, True, True),  # CRC-16/KERMIT: 0x2189
        "crc16-ibm": Configuration(16, 0x8005, 0, 0, True, True),  # CRC-16/ARC (IBM): 0xBB3D
        "crc16-ibm-msb": Configuration(16, 0x8005, 0, 0, False, False),  # CRC-16/UMTS (BUYPASS): 0xFEE8
    }
)
"""The CRCs of the family, as the `crc` package parameterises them (the catalogue of parametrised CRCs names them)."""
XOR_WIDTHS: Final[Mapping[HashFunction, int]] = MappingProxyType({"xor32": 32, "xor16": 16, "xor8": 8})
"""XOR folds: the key cut into big-endian words of this many bits (the last one zero-padded), XORed together."""


def function_width(function: HashFunction) -> int:
    """Output bits of a function of the family."""
    return FUNCTION_WIDTHS[function]


@cache
def _calculator(function: HashFunction, init: int | None) -> Calculator:
    base = CRC_CONFIGURATIONS[function]
    if init is None or init == base.init_value:
        return Calculator(base, optimized=True)
    configuration = Configuration(
        base.width, base.polynomial, init, base.final_xor_value, base.reverse_input, base.reverse_output
    )
    return Calculator(configuration, optimized=True)


def _xor_fold(data: bytes, width: int) -> int:
    step = width // 8
    padded = data + bytes(-len(data) % step)
    folded = 0
    for start in range(0, len(padded), step):
        folded ^= int.from_bytes(padded[start : start + step], "big")
    return folded


def function_output(function: HashFunction, data: bytes, init: int | None = None) -> int:
    """The function of the family on a message (reference implementation: one message at a time)."""
    if function in XOR_WIDTHS:
        return _xor_fold(data, XOR_WIDTHS[function])
    return int(_calculator(function, init).checksum(data))


def key_bytes(spec: HashSpec, src: int, dst: int, sport: int, *, dport: int = ROCE_UDP_PORT, proto: int = UDP) -> bytes:
    """The bytes a switch with `spec` hashes for a 5-tuple: the spec's fields in order, network byte order."""
    values = {"src": src, "dst": dst, "proto": proto, "sport": sport, "dport": dport}
    return b"".join(
        values.get(name, 0).to_bytes(FIELD_BYTES[name], "big")  # pads are zero
        for name in spec.key
    )


def hash_output(spec: HashSpec, src: int, dst: int, sport: int, *, dport: int = ROCE_UDP_PORT, proto: int = UDP) -> int:
    """The hash value a bucket is taken from (seed applied, output bits taken): reference, one tuple at a time."""
    data = key_bytes(spec, src, dst, sport, dport=dport, proto=proto)
    value = function_output(spec.function, data, spec.init) ^ spec.seed
    low, high = spec.bits if spec.bits is not None else (0, function_width(spec.function))
    return (value >> low) & ((1 << (high - low)) - 1)


def bucket_of(spec: HashSpec, value: int, members: int) -> int:
    """The bucket a hash value falls into among `members` next hops."""
    if spec.bucket == "low-bits":
        return value & (members - 1)
    return value % members


# -- compiled evaluation -----------------------------------------------------------------------------------------


def _byte_columns(key: Sequence[KeyField]) -> dict[int, int]:
    """Canonical key byte -> its position in a spec's key bytes (canonical bytes the key leaves out are absent)."""
    positions: dict[int, int] = {}
    at = 0
    for name in key:
        if name in FIELD_OFFSET:
            for k in range(FIELD_BYTES[name]):
                positions[FIELD_OFFSET[name] + k] = at + k
        at += FIELD_BYTES[name]
    return positions


def _tables_from_bits(bit_values: np.ndarray) -> np.ndarray:
    """(13, 256) tables from the value of each of the 104 canonical key bits (bit 0 = MSB of byte 0)."""
    per_bit = bit_values.reshape(KEY_BYTES, 8)  # [byte, bit from the most significant]
    values = np.arange(256, dtype=np.uint64)
    tables = np.zeros((KEY_BYTES, 256), dtype=np.uint64)
    for k in range(8):
        has_bit = ((values >> np.uint64(7 - k)) & np.uint64(1)).astype(bool)
        tables[:, has_bit] ^= per_bit[:, k : k + 1]
    return tables


@dataclass(frozen=True, eq=False)
class KeyMap:
    """A GF(2)-affine map from the canonical key to at most 64 bits: XOR of one table entry per key byte, plus a
    constant."""

    tables: np.ndarray
    """(13, 256) uint64: the contribution of each value of each canonical key byte."""
    constant: int

    @classmethod
    def from_rows(cls, rows: Sequence[int], origin: int = 0) -> KeyMap:
        """The map whose output bit i is the parity of `rows[i] & key`, XOR its value on `origin` (at most 64
        rows): zero exactly on keys whose values equal those of `origin`."""
        if len(rows) > 64:
            raise ValueError("a KeyMap has at most 64 output bits")
        bit_values = np.zeros(8 * KEY_BYTES, dtype=np.uint64)
        if rows:
            # (rows, 104) bits, most significant key bit first; output bit i weighs 2**i
            packed = np.frombuffer(b"".join(row.to_bytes(KEY_BYTES, "big") for row in rows), dtype=np.uint8)
            bits = np.unpackbits(packed.reshape(len(rows), KEY_BYTES), axis=1).astype(np.uint64)
            weights = np.uint64(1) << np.arange(len(rows), dtype=np.uint64)
            bit_values = np.bitwise_or.reduce(bits * weights[:, None], axis=0)
        constant = sum(1 << i for i, row in enumerate(rows) if (row & origin).bit_count() & 1)
        return cls(_tables_from_bits(bit_values), constant)

    @classmethod
    def from_spec(cls, spec: HashSpec) -> KeyMap:
        """The map from a 5-tuple's canonical key to `hash_output(spec, ...)` (seed applied, bits taken)."""
        width = function_width(spec.function)
        low, high = spec.bits if spec.bits is not None else (0, width)
        mask = (1 << (high - low)) - 1
        columns = _byte_columns(spec.key)
        length = sum(FIELD_BYTES[name] for name in spec.key)
        zero = function_output(spec.function, bytes(length), spec.init)
        bit_values = np.zeros(8 * KEY_BYTES, dtype=np.uint64)
        for byte, position in columns.items():
            for k in range(8):
                message = bytearray(length)
                message[position] = 0x80 >> k
                linear = function_output(spec.function, bytes(message), spec.init) ^ zero
                bit_values[8 * byte + k] = np.uint64((linear >> low) & mask)
        return cls(_tables_from_bits(bit_values), ((zero ^ spec.seed) >> low) & mask)

    def fixed(self, src: np.ndarray, dst: np.ndarray, dport: np.ndarray | int, proto: np.ndarray | int) -> np.ndarray:
        """The map's value on keys with source port 0 (XOR `port_values()[sport]` for the whole value)."""
        t = self.tables
        src = np.asarray(src, dtype=np.uint64)
        dst = np.asarray(dst, dtype=np.uint64)
        dport = np.asarray(dport, dtype=np.uint64)
        proto = np.asarray(proto, dtype=np.uint64)
        m = np.uint64(0xFF)
        out = np.full(np.broadcast(src, dst, dport, proto).shape, self.constant, dtype=np.uint64)
        for offset, value in ((0, src), (4, dst)):
            for k in range(4):
                out ^= t[offset + k][((value >> np.uint64(24 - 8 * k)) & m).astype(np.intp)]
        out ^= t[8][(proto & m).astype(np.intp)]
        out ^= t[11][((dport >> np.uint64(8)) & m).astype(np.intp)]
        out ^= t[12][(dport & m).astype(np.intp)]
        return out

    @cached_property
    def port_values(self) -> np.ndarray:
        """(65536,) the contribution of every source port."""
        ports = np.arange(65536, dtype=np.intp)
        values: np.ndarray = self.tables[9][ports >> 8] ^ self.tables[10][ports & 0xFF]
        return values

    @cached_property
    def _rows(self) -> list[list[int]]:
        return self.tables.tolist()  # type: ignore[no-any-return]

    def fixed_one(self, src: int, dst: int, dport: int = ROCE_UDP_PORT, proto: int = UDP) -> int:
        """`fixed` of one address pair, in Python integers (no array overhead: a queue pair tried alone)."""
        t = self._rows
        out = self.constant
        for offset, value in ((0, src), (4, dst)):
            for k in range(4):
                out ^= t[offset + k][(value >> (24 - 8 * k)) & 0xFF]
        return out ^ t[8][proto & 0xFF] ^ t[11][(dport >> 8) & 0xFF] ^ t[12][dport & 0xFF]

    def port_part(self, sport: np.ndarray) -> np.ndarray:
        """The contribution of source ports (two gathers from 256-entry tables; XOR with `fixed` for the value)."""
        ports = np.asarray(sport, dtype=np.intp)
        part: np.ndarray = self.tables[9][ports >> 8] ^ self.tables[10][ports & 0xFF]
        return part

    def reads_port(self) -> bool:
        """Whether the source port changes the value at all."""
        return bool(self.tables[9].any() or self.tables[10].any())

    def __call__(
        self, src: np.ndarray, dst: np.ndarray, sport: np.ndarray, dport: np.ndarray | int, proto: np.ndarray | int
    ) -> np.ndarray:
        """The map's value on 5-tuples (arrays broadcast together)."""
        value: np.ndarray = self.fixed(src, dst, dport, proto) ^ self.port_part(sport)
        return value


@dataclass(frozen=True, eq=False)
class CompiledHash:
    """A switch hash ready to evaluate on arrays: 5-tuple -> next-hop index (j of spine-j, c of core-c), or -1
    where it is unknown (a learned value no sample showed, a key outside the learned span)."""

    switch: SwitchHash
    value: KeyMap
    checks: tuple[KeyMap, ...] = ()
    """Learned hashes: maps that are zero exactly on keys in the span of the samples."""
    member_of_bucket: np.ndarray | None = None
    """Declared with members: the next-hop index of each bucket."""
    learned_table: np.ndarray | None = None
    """Learned: the next-hop index of each value of the rows (-1 unknown)."""

    @property
    def reads_port(self) -> bool:
        """Whether the source port can change the next hop (else no port steers it)."""
        return self.value.reads_port()

    def next_hops(self, value: np.ndarray, choices: np.ndarray | int, outside: np.ndarray | None = None) -> np.ndarray:
        """Next-hop index for hash values `value` (from `value`'s KeyMap) among `choices` equal-cost next hops;
        `outside` marks keys outside a learned span (-1 there)."""
        spec = self.switch.hash
        if isinstance(spec, LearnedHash):
            assert self.learned_table is not None
            hops = self.learned_table[value.astype(np.intp)]
        else:
            count = np.asarray(choices if self.member_of_bucket is None else self.member_of_bucket.size)
            count = count.astype(np.uint64)
            buckets = value & (count - np.uint64(1)) if spec.bucket == "low-bits" else value % count
            buckets = buckets.astype(np.int64)
            hops = buckets if self.member_of_bucket is None else self.member_of_bucket[buckets]
            if spec.bucket == "low-bits" and self.member_of_bucket is None:
                # a low-bits bucket over a group that is not a power of two is not what the spec declares
                power = np.asarray(choices) & (np.asarray(choices) - 1)
                hops = np.where(power == 0, hops, -1)
        hops = np.asarray(hops, dtype=np.int64)
        if outside is not None:
            hops = np.where(outside, -1, hops)
        return hops

    def outside(self, src: np.ndarray, dst: np.ndarray, sport: np.ndarray, dport: int, proto: int) -> np.ndarray:
        """Mask of 5-tuples outside a learned span (all False for declared hashes)."""
        shape = np.broadcast(np.asarray(src), np.asarray(dst), np.asarray(sport)).shape
        mask = np.zeros(shape, dtype=bool)
        for check in self.checks:
            mask |= check(src, dst, sport, dport, proto) != 0
        return mask

    def evaluate(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        sport: np.ndarray,
        choices: np.ndarray | int,
        *,
        dport: int = ROCE_UDP_PORT,
        proto: int = UDP,
    ) -> np.ndarray:
        """Next-hop index of each 5-tuple (arrays broadcast together), -1 where unknown."""
        value = self.value(src, dst, sport, dport, proto)
        outside = self.outside(src, dst, sport, dport, proto) if self.checks else None
        return self.next_hops(value, choices, outside)

    def prepare(self, src: np.ndarray, dst: np.ndarray, *, dport: int = ROCE_UDP_PORT, proto: int = UDP) -> np.ndarray:
        """(n, 1 + checks) the value and span checks of n address pairs with source port 0, for `hops_at`: what
        stays the same while ports are tried."""
        maps = (self.value, *self.checks)
        if np.size(src) == 1 and np.size(dst) == 1:
            one = [keymap.fixed_one(int(np.ravel(src)[0]), int(np.ravel(dst)[0]), dport, proto) for keymap in maps]
            return np.array([one], dtype=np.uint64)
        return np.stack([keymap.fixed(src, dst, dport, proto) for keymap in maps], axis=-1)

    def hops_at(self, prepared: np.ndarray, sport: np.ndarray, choices: np.ndarray | int) -> np.ndarray:
        """Next hops of the address pairs `prepared` ((n, 1 + checks), from `prepare`) with source ports `sport`
        ((n, k)), among `choices` ((n, 1) or a number); -1 where unknown."""
        value = prepared[:, :1] ^ self.value.port_part(sport)
        outside = None
        for index, check in enumerate(self.checks, start=1):
            off = (prepared[:, index : index + 1] ^ check.port_part(sport)) != 0
            outside = off if outside is None else outside | off
        return self.next_hops(value, choices, outside)


def compile_switch_hash(switch: SwitchHash, tier: SwitchTier) -> CompiledHash:
    """Byte tables of a (checked) switch hash, for `CompiledHash.evaluate`."""
    spec = switch.hash
    if isinstance(spec, LearnedHash):
        table = np.array([-1 if name is None else next_hop_index(name, tier) for name in spec.table], dtype=np.int64)
        checks = tuple(
            KeyMap.from_rows(spec.checks[start : start + 64], spec.origin) for start in range(0, len(spec.checks), 64)
        )
        return CompiledHash(switch, KeyMap.from_rows(spec.rows), checks, learned_table=table)
    members = None
    if spec.members is not None:
        members = np.array([next_hop_index(name, tier) for name in spec.members], dtype=np.int64)
    return CompiledHash(switch, KeyMap.from_spec(spec), member_of_bucket=members)


def next_hop_name(index: int, tier: SwitchTier) -> str:
    """`spine-j` or `core-c`."""
    return f"{NEXT_HOP_PREFIX[tier]}{index}"


__all__ = [
    "CRC_CONFIGURATIONS",
    "XOR_WIDTHS",
    "CompiledHash",
    "KeyMap",
    "bucket_of",
    "check_hash_spec",
    "check_switch_hash",
    "compile_switch_hash",
    "function_output",
    "function_width",
    "hash_output",
    "key_bytes",
    "next_hop_name",
]
