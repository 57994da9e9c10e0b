"""The ``cidr`` operator: an IP address string inside one of a list of networks.

Operand: 1 to 1,000 networks (`MAX_NETWORKS`), each a string in the normal form of
``ipaddress.ip_network(text, strict=True)`` (``10.0.0.0/8``, ``2001:db8::/32``; a bare
address is written with its prefix, ``10.0.0.1/32``). Networks inside ``::ffff:0:0/96``
are refused: an IPv4-mapped address is read as its IPv4 address, so such a network is
written as the IPv4 network, and every address has exactly one reading.

A value satisfies the operand when it is a string that ``ipaddress.ip_address`` parses
(Python 3.11 already refuses what ``inet_aton`` reads otherwise: leading zeros
``010.0.0.1``, hex ``0x0a.0.0.1``, short forms ``10.1``, surrounding whitespace) with no
zone id (``fe80::1%eth0``), and whose *effective address* lies in one of the networks: the
IPv4 address of an IPv4-mapped IPv6 address (``::ffff:10.1.2.3`` is ``10.1.2.3``), else the
address itself. An IPv6 network therefore never admits an IPv4-mapped address.

A deny rule (docs/decisions/0016) passes over a value only when it parses as above and its
effective address *and* every IPv4 address it embeds by NAT64 (``64:ff9b::/96``), 6to4
(``2002::/16``) or Teredo (``2001::/32``, server and client) lie outside every network: a
host may reach ``10.0.0.1`` through ``64:ff9b::a00:1``. Limits, said in the docs: a
network-specific NAT64 prefix (RFC 6052), the local-use ``64:ff9b:1::/48``, IPv4-translated
addresses (``::ffff:0:a00:1``, RFC 2765) and deprecated IPv4-compatible ones
(``::10.0.0.1``) embed an IPv4 address the guard does not read, and a host name is no
address (a tool resolving one must check what it resolves to).
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

from guard._document import index_path, type_name
from guard.errors import FieldError

__all__ = [
    "MAX_NETWORKS",
    "MAX_REMEMBERED",
    "OPERATOR",
    "check_operand",
    "compile_excluder",
    "compile_matcher",
    "deny_relation",
    "relation",
    "samples",
]

OPERATOR: Final = "cidr"
MAX_NETWORKS: Final = 1_000

# The longest address text: an IPv6 address written with an IPv4 tail.
_MAX_ADDRESS_LENGTH: Final = len("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255")
_MAX_NETWORK_LENGTH: Final = _MAX_ADDRESS_LENGTH + len("/128")
# What an address may hold: refuses a zone id, whitespace and every other character before
# the parser sees it.
_ADDRESS_CHARACTERS: Final = re.compile(r"[0-9A-Fa-f:.]+")

_MAPPED: Final = ipaddress.IPv6Network("::ffff:0:0/96")
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR: Final = ipaddress.IPv6Network("2002::/16")
_TEREDO: Final = ipaddress.IPv6Network("2001::/32")
_EMBEDDING: Final = (_NAT64, _SIX_TO_FOUR, _TEREDO)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# Closed integer ranges [first, last] of addresses, sorted, merged and never adjacent.
Ranges = list[tuple[int, int]]


# --- validation ---------------------------------------------------------------------------


def check_operand(operand: object, path: str, errors: list[FieldError]) -> None:
    """Append a FieldError for every problem with a ``cidr`` operand (an array of networks
    in normal form; the error's path is the network's, ``path[i]``)."""
    if not isinstance(operand, list):
        errors.append(FieldError(path, f"must be an array of networks, not {type_name(operand)}"))
        return
    if not operand:
        errors.append(FieldError(path, "must hold at least one network"))
        return
    if len(operand) > MAX_NETWORKS:
        errors.append(FieldError(path, f"must hold at most {MAX_NETWORKS} networks"))
        return
    for index, item in enumerate(operand):
        problem = _network_problem(item)
        if problem is not None:
            errors.append(FieldError(index_path(path, index), problem))


def _network_problem(item: object) -> str | None:
    if not isinstance(item, str):
        return f"must be a network string, not {type_name(item)}"
    if not item or len(item) > _MAX_NETWORK_LENGTH or "%" in item:
        return "is not an IPv4 or IPv6 network (such as 10.0.0.0/8 or 2001:db8::/32)"
    try:
        network = ipaddress.ip_network(item, strict=True)
    except ValueError:
        try:
            loose = ipaddress.ip_network(item, strict=False)
        except ValueError:
            return "is not an IPv4 or IPv6 network (such as 10.0.0.0/8 or 2001:db8::/32)"
        return f"has host bits set: write {loose}"
    if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(_MAPPED):
        first = network.network_address.ipv4_mapped
        assert first is not None
        ipv4 = ipaddress.IPv4Network((first, network.prefixlen - 96))
        return f"lies inside ::ffff:0:0/96 (IPv4-mapped addresses): write {ipv4}"
    if str(network) != item:
        return f"is not in normal form: write {network}"
    return None


# --- reading values -----------------------------------------------------------------------

# A dotted quad as ipaddress reads it: ASCII decimal octets without a leading zero, read
# here at half ipaddress's cost; anything else goes to ipaddress.
_DOTTED_QUAD: Final = re.compile(
    r"(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})"
)

# What a value reads as: its IP version, its effective address as an int, and the IPv4
# addresses it embeds (NAT64, 6to4, Teredo), as ints.
Reading = tuple[int, int, tuple[int, ...]]
# Readings of the strings seen last (ipaddress costs 7 to 25 us a value), bounded as
# guard.relation bounds its memory.
MAX_REMEMBERED: Final = 1_024
_REMEMBERED: dict[str, Reading | None] = {}


def _parse(value: Any) -> Address | None:
    """The address a value writes, or None: strings only, no zone id, no whitespace."""
    if (
        not isinstance(value, str)
        or len(value) > _MAX_ADDRESS_LENGTH
        or not _ADDRESS_CHARACTERS.fullmatch(value)
    ):
        return None
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def _reading(value: Any) -> Reading | None:
    """How a value reads (None: not an address string); never raises."""
    if not isinstance(value, str) or len(value) > _MAX_ADDRESS_LENGTH:
        return None
    try:
        return _REMEMBERED[value]
    except KeyError:
        pass
    reading = _read(value)
    if len(_REMEMBERED) >= MAX_REMEMBERED:
        _REMEMBERED.clear()  # memory stays bounded however varied the values
    _REMEMBERED[value] = reading
    return reading


def _read(text: str) -> Reading | None:
    quad = _DOTTED_QUAD.fullmatch(text)
    if quad is not None:
        first, second, third, fourth = (int(octet) for octet in quad.groups())
        if max(first, second, third, fourth) > 255:
            return None
        return 4, (first << 24) | (second << 16) | (third << 8) | fourth, ()
    address = _parse(text)
    if address is None:
        return None
    effective = _effective(address)
    return effective.version, int(effective), tuple(int(ipv4) for ipv4 in _embedded(address))


def _effective(address: Address) -> Address:
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped
        if mapped is not None:
            return mapped
    return address


def _embedded(address: Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries by NAT64, 6to4 or Teredo."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found: list[ipaddress.IPv4Address] = []
    if address in _NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if (six_to_four := address.sixtofour) is not None:
        found.append(six_to_four)
    if (teredo := address.teredo) is not None:
        found.extend(teredo)
    return found


# --- ranges of addresses ------------------------------------------------------------------


def _merge(ranges: Sequence[tuple[int, int]]) -> Ranges:
    merged: Ranges = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            if last > merged[-1][1]:
                merged[-1] = (merged[-1][0], last)
        else:
            merged.append((first, last))
    return merged


def _network_ranges(network: Network) -> list[tuple[int, int]]:
    """The addresses a network admits as effective addresses: an IPv6 network loses the
    IPv4-mapped block, whose addresses read as IPv4."""
    first, last = int(network.network_address), int(network.broadcast_address)
    if isinstance(network, ipaddress.IPv4Network) or not network.overlaps(_MAPPED):
        return [(first, last)]
    mapped_first, mapped_last = int(_MAPPED.network_address), int(_MAPPED.broadcast_address)
    pieces = ((first, min(last, mapped_first - 1)), (max(first, mapped_last + 1), last))
    return [piece for piece in pieces if piece[0] <= piece[1]]


def _ranges(operand: Sequence[str]) -> dict[int, Ranges]:
    """The effective addresses of an operand, by IP version."""
    by_version: dict[int, list[tuple[int, int]]] = {4: [], 6: []}
    for text in operand:
        if not isinstance(text, str):
            raise TypeError(f"a network is a string, not {type_name(text)}")
        network = ipaddress.ip_network(text, strict=True)
        by_version[network.version].extend(_network_ranges(network))
    return {version: _merge(ranges) for version, ranges in by_version.items()}


def _contains(ranges: Ranges, starts: list[int], number: int) -> bool:
    position = bisect.bisect_right(starts, number) - 1
    return position >= 0 and number <= ranges[position][1]


def _covered(inner: Ranges, outer: Ranges) -> bool:
    """Every address of `inner` lies in `outer` (both merged: each inner range lies in one
    outer range)."""
    starts = [first for first, _ in outer]
    for first, last in inner:
        position = bisect.bisect_right(starts, first) - 1
        if position < 0 or last > outer[position][1]:
            return False
    return True


def _meet(left: Ranges, right: Ranges) -> bool:
    i = j = 0
    while i < len(left) and j < len(right):
        if left[i][1] < right[j][0]:
            i += 1
        elif right[j][1] < left[i][0]:
            j += 1
        else:
            return True
    return False


class _Networks:
    """An operand's effective addresses, ready for membership tests."""

    __slots__ = ("ranges", "starts")

    def __init__(self, operand: Sequence[str]) -> None:
        self.ranges = _ranges(operand)
        self.starts = {version: [f for f, _ in r] for version, r in self.ranges.items()}

    def hold(self, version: int, number: int) -> bool:
        return _contains(self.ranges[version], self.starts[version], number)


# --- the interface ------------------------------------------------------------------------


def compile_matcher(operand: Any) -> Callable[[Any], bool]:
    """``value -> bool`` for a validated operand: True when the value is an address string
    whose effective address lies in one of the networks. Never raises."""
    networks = _Networks(operand)

    def match_cidr(value: Any) -> bool:
        reading = _reading(value)
        return reading is not None and networks.hold(reading[0], reading[1])

    return match_cidr


def compile_excluder(operand: Any) -> Callable[[Any], bool]:
    """``value -> bool`` for a validated operand: True only when the value is an address
    string whose effective address and every IPv4 address it embeds (NAT64, 6to4, Teredo)
    lie outside every network, the fail-closed reading of a deny rule. Never raises."""
    networks = _Networks(operand)

    def exclude_cidr(value: Any) -> bool:
        reading = _reading(value)
        if reading is None:
            return False
        version, effective, embedded = reading
        if networks.hold(version, effective):
            return False
        return not any(networks.hold(4, ipv4) for ipv4 in embedded)

    return exclude_cidr


def relation(step: Any, rule: Any) -> str:
    """How the addresses a step's operand admits stand to those a rule's admits: exact, by
    ranges of effective addresses (IPv4 and IPv6 apart; an IPv6 network less the
    IPv4-mapped block)."""
    try:
        step_ranges, rule_ranges = _ranges(step), _ranges(rule)
    except (TypeError, ValueError):  # not a validated operand
        return "undecidable"
    if all(_covered(step_ranges[v], rule_ranges[v]) for v in (4, 6)):
        return "inside"
    if not any(_meet(step_ranges[v], rule_ranges[v]) for v in (4, 6)):
        return "disjoint"
    return "overlapping"


def deny_relation(step: Any, rule: Any) -> str:
    """How the addresses a step's operand admits stand to those a deny rule with operand
    `rule` matches (every value not provably outside it). A step's IPv6 network meeting
    NAT64, 6to4 or Teredo admits addresses whose embedded IPv4 address the deny also reads:
    undecidable. Otherwise a step's value embeds nothing and the answer is `relation`'s."""
    try:
        networks = [ipaddress.ip_network(text, strict=True) for text in step]
    except (TypeError, ValueError):
        return "undecidable"
    for network in networks:
        if isinstance(network, ipaddress.IPv6Network) and any(
            network.overlaps(prefix) for prefix in _EMBEDDING
        ):
            return "undecidable"
    return relation(step, rule)


def samples(operand: Any) -> list[Any]:
    """Honest values of a validated operand: the first and last effective addresses of its
    first network, and the first in its IPv4-mapped form when that network is IPv4."""
    network = ipaddress.ip_network(operand[0], strict=True)
    ranges = _network_ranges(network)
    first, last = ranges[0][0], ranges[-1][1]
    found: list[Any] = []
    if network.version == 4:
        found = [str(ipaddress.IPv4Address(first)), str(ipaddress.IPv4Address(last))]
        found.append(f"::ffff:{ipaddress.IPv4Address(first)}")
    else:
        found = [str(ipaddress.IPv6Address(first)), str(ipaddress.IPv6Address(last))]
    return list(dict.fromkeys(found))
