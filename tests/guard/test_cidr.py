"""The ``cidr`` operator (guard.addresses, decision 0066): operand validation, the matcher
and the deny reading against a corpus of attacks and against plainly written oracles, and
both relations against brute force over every address of a small universe."""

from __future__ import annotations

import ipaddress
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from guard import addresses
from guard.addresses import (
    MAX_NETWORKS,
    check_operand,
    compile_excluder,
    compile_matcher,
    deny_relation,
    relation,
    samples,
)
from guard.errors import FieldError

INSIDE_MAPPED = "lies inside ::ffff:0:0/96 (IPv4-mapped addresses)"
CORPUS = json.loads((Path(__file__).parent / "corpus" / "addresses.json").read_text())


def problems(operand: object) -> list[FieldError]:
    errors: list[FieldError] = []
    check_operand(operand, "steps[0].args.ip.cidr", errors)
    return errors


def valid(operand: list[str]) -> list[str]:
    assert problems(operand) == []
    return operand


# --- corpus ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry", CORPUS["values"], ids=[repr(entry["value"]) for entry in CORPUS["values"]]
)
def test_corpus_value_gets_its_verdict(entry: dict[str, Any]) -> None:
    operand = valid(entry.get("operand", CORPUS["operand"]))
    value = entry["value"]
    admitted = compile_matcher(operand)(value)
    if entry["verdict"] == "admitted":
        assert admitted, entry["why"]
        assert compile_excluder(valid(CORPUS["elsewhere"]))(value), entry["why"]
        assert not compile_excluder(operand)(value), entry["why"]
    elif entry["verdict"] == "refused":
        assert not admitted, entry["why"]
        reaches = valid(entry.get("reaches", operand))
        assert not compile_excluder(reaches)(value), entry["why"]
    else:
        assert entry["verdict"] == "outside"
        assert not admitted, entry["why"]
        assert compile_excluder(operand)(value), entry["why"]


def test_corpus_holds_the_attacks_the_decision_names() -> None:
    values = {entry["value"] for entry in CORPUS["values"] if isinstance(entry["value"], str)}
    for attack in ("010.0.0.1", "0x0a.0.0.1", "10.1", " 10.0.0.1", "fe80::1%eth0"):
        assert attack in values
    assert {"::ffff:10.1.2.3", "64:ff9b::a00:1", "2002:a00:1::1"} <= values


# --- validation -----------------------------------------------------------------------------


def test_valid_operands_have_no_problem() -> None:
    assert problems(["10.0.0.0/8"]) == []
    assert problems(["0.0.0.0/0", "::/0", "2001:db8::/32", "10.0.0.1/32", "::1/128"]) == []
    assert problems(["::/80"]) == []  # holds the IPv4-mapped block, not inside it


@pytest.mark.parametrize(
    ("network", "detail"),
    [
        ("10.0.0.1/8", "has host bits set: write 10.0.0.0/8"),
        ("10.0.0.1", "is not in normal form: write 10.0.0.1/32"),
        ("10.0.0.0/255.0.0.0", "is not in normal form: write 10.0.0.0/8"),
        ("2001:DB8::/32", "is not in normal form: write 2001:db8::/32"),
        ("2001:0db8::/32", "is not in normal form: write 2001:db8::/32"),
        (
            "::ffff:10.0.0.0/104",
            "lies inside ::ffff:0:0/96 (IPv4-mapped addresses): write 10.0.0.0/8",
        ),
        ("::ffff:0:0/96", "lies inside ::ffff:0:0/96 (IPv4-mapped addresses): write 0.0.0.0/0"),
        (
            "::ffff:a01:203/128",
            "lies inside ::ffff:0:0/96 (IPv4-mapped addresses): write 10.1.2.3/32",
        ),
    ],
)
def test_network_not_in_normal_form_is_refused_with_the_form_to_write(
    network: str, detail: str
) -> None:
    assert problems(["10.0.0.0/8", network]) == [FieldError("steps[0].args.ip.cidr[1]", detail)]


@pytest.mark.parametrize(
    "network",
    ["010.0.0.0/8", "10.0.0.0/33", " 10.0.0.0/8", "10.0.0.0/8 ", "fe80::%eth0/64", "", "x", "10/8"],
)
def test_garbage_network_is_refused_at_its_index(network: str) -> None:
    errors = problems([network])
    assert [error.path for error in errors] == ["steps[0].args.ip.cidr[0]"]
    assert "is not an IPv4 or IPv6 network" in errors[0].detail


@pytest.mark.parametrize(
    ("operand", "path", "detail"),
    [
        ("10.0.0.0/8", "steps[0].args.ip.cidr", "must be an array of networks, not string"),
        ({}, "steps[0].args.ip.cidr", "must be an array of networks, not object"),
        ([], "steps[0].args.ip.cidr", "must hold at least one network"),
        (
            ["10.0.0.0/8"] * (MAX_NETWORKS + 1),
            "steps[0].args.ip.cidr",
            f"must hold at most {MAX_NETWORKS} networks",
        ),
        ([167772160], "steps[0].args.ip.cidr[0]", "must be a network string, not integer"),
        (["10.0.0.0/8", None], "steps[0].args.ip.cidr[1]", "must be a network string, not null"),
    ],
)
def test_operand_shape_is_checked(operand: object, path: str, detail: str) -> None:
    assert problems(operand) == [FieldError(path, detail)]


def test_a_thousand_networks_are_accepted() -> None:
    operand = [f"10.{i // 256}.{i % 256}.0/24" for i in range(MAX_NETWORKS)]
    assert problems(operand) == []
    assert compile_matcher(operand)("10.3.231.7")  # network 999
    assert not compile_matcher(operand)("10.3.232.7")


def test_every_error_is_reported() -> None:
    errors = problems(["10.0.0.1/8", "10.0.0.0/8", "x", "::ffff:0:0/96"])
    assert [error.path for error in errors] == [
        "steps[0].args.ip.cidr[0]",
        "steps[0].args.ip.cidr[2]",
        "steps[0].args.ip.cidr[3]",
    ]


# --- oracles --------------------------------------------------------------------------------


def oracle_address(value: object) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """Plainly: a string of address characters only (no zone id, no space), that
    ipaddress parses."""
    if not isinstance(value, str) or value == "":
        return None
    if any(character not in "0123456789abcdefABCDEF:." for character in value):
        return None
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def oracle_effective(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if address.version == 6 and int(address) >> 32 == 0xFFFF:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def oracle_match(operand: list[str], value: object) -> bool:
    address = oracle_address(value)
    if address is None:
        return False
    effective = oracle_effective(address)
    return any(effective in ipaddress.ip_network(network) for network in operand)


def oracle_embedded(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses RFC 6052 (64:ff9b::/96), RFC 3056 (2002::/16) and RFC 4380
    (2001::/32, the client's bits inverted) put inside an IPv6 address."""
    if address.version == 4:
        return []
    number = int(address)
    found = []
    if number >> 32 == 0x0064FF9B << 64:
        found.append(ipaddress.IPv4Address(number & 0xFFFFFFFF))
    if number >> 112 == 0x2002:
        found.append(ipaddress.IPv4Address((number >> 80) & 0xFFFFFFFF))
    if number >> 96 == 0x20010000:
        found.append(ipaddress.IPv4Address((number >> 64) & 0xFFFFFFFF))
        found.append(ipaddress.IPv4Address(~number & 0xFFFFFFFF))
    return found


def oracle_excluded(operand: list[str], value: object) -> bool:
    address = oracle_address(value)
    if address is None:
        return False
    readings = [oracle_effective(address), *oracle_embedded(address)]
    networks = [ipaddress.ip_network(network) for network in operand]
    return not any(
        reading in network
        for reading in readings
        for network in networks
        if reading.version == network.version
    )


# --- strategies -----------------------------------------------------------------------------


def network_text(address: ipaddress.IPv4Address | ipaddress.IPv6Address, prefix: int) -> str:
    return str(ipaddress.ip_network((address, prefix), strict=False))


@st.composite
def networks(draw: st.DrawFn) -> str:
    """A valid network: any address, any prefix, outside the IPv4-mapped block."""
    address = draw(st.ip_addresses())
    prefix = draw(st.integers(0, address.max_prefixlen))
    text = network_text(address, prefix)
    assume(not addresses._network_problem(text))
    return text


operands = st.lists(networks(), min_size=1, max_size=6)


def spellings(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[str]:
    """Ways an address string can be written, honest or not."""
    written = [str(address), str(address).upper()]
    if address.version == 4:
        written += [f"::ffff:{address}", f"::ffff:{int(address):x}", f"64:ff9b::{address}"]
        written += [".".join(f"0{octet}" for octet in str(address).split(".")), f" {address}"]
    else:
        written += [address.exploded, f"{address}%eth0", f"[{address}]"]
    return written


@st.composite
def values_near(draw: st.DrawFn, operand: list[str]) -> object:
    """Addresses in or next to the operand's networks, spelt every way; or junk."""
    network = ipaddress.ip_network(draw(st.sampled_from(operand)))
    offset = draw(st.integers(-2, network.num_addresses + 1))
    number = (int(network.network_address) + offset) % 2**network.max_prefixlen
    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    if network.version == 4:
        address = ipaddress.IPv4Address(number)
    else:
        address = ipaddress.IPv6Address(number)
    if draw(st.booleans()):
        address = draw(st.ip_addresses())
    choice = draw(st.sampled_from([*spellings(address), "junk"]))
    if choice == "junk":
        return draw(st.text(max_size=12) | st.integers() | st.none())
    return choice


embedded_forms = st.ip_addresses(v=4).flatmap(
    lambda ipv4: st.sampled_from(
        [
            str(ipaddress.IPv6Address((0x0064FF9B << 96) | int(ipv4))),
            str(ipaddress.IPv6Address((0x2002 << 112) | (int(ipv4) << 80) | 1)),
            str(ipaddress.IPv6Address((0x20010000 << 96) | (int(ipv4) << 64) | 0xFFFF0000)),
            str(
                ipaddress.IPv6Address(
                    (0x20010000 << 96) | (0x01020304 << 64) | (int(ipv4) ^ 0xFFFFFFFF)
                )
            ),
        ]
    )
)


@given(st.data(), operands)
def test_matcher_agrees_with_the_oracle(data: st.DataObject, operand: list[str]) -> None:
    value = data.draw(values_near(operand) | embedded_forms)
    assert compile_matcher(operand)(value) == oracle_match(operand, value)


@given(st.data(), operands)
def test_excluder_agrees_with_the_oracle(data: st.DataObject, operand: list[str]) -> None:
    value = data.draw(values_near(operand) | embedded_forms)
    excluded = compile_excluder(operand)(value)
    assert excluded == oracle_excluded(operand, value)
    assert not (excluded and compile_matcher(operand)(value))


@given(st.text(max_size=50) | st.integers() | st.binary(max_size=16) | st.none())
def test_matcher_and_excluder_never_raise(value: object) -> None:
    operand = ["10.0.0.0/8", "::/0"]
    assert compile_matcher(operand)(value) == oracle_match(operand, value)
    assert compile_excluder(operand)(value) == oracle_excluded(operand, value)


dotted_quads = st.lists(
    st.from_regex(r"[0-9]{1,4}", fullmatch=True) | st.sampled_from(["", "0x1", "\uff11"]),
    min_size=3,
    max_size=5,
).map(".".join)


@given(dotted_quads)
def test_dotted_quads_read_as_ipaddress_reads_them(value: str) -> None:
    # guard.addresses reads dotted quads itself; ipaddress is the reference.
    assert compile_matcher(["0.0.0.0/1"])(value) == oracle_match(["0.0.0.0/1"], value)
    assert compile_excluder(["0.0.0.0/1"])(value) == oracle_excluded(["0.0.0.0/1"], value)


def test_remembered_readings_stay_bounded_and_right() -> None:
    matches = compile_matcher(["2001:db8::/32"])
    values = [f"2001:db8::{index:x}" for index in range(addresses.MAX_REMEMBERED + 10)]
    assert all(matches(value) for value in values)
    assert len(addresses._REMEMBERED) <= addresses.MAX_REMEMBERED
    assert all(matches(value) for value in values)  # read again after the clear
    assert not matches("2001:db9::1")
    assert not matches("2001:db9::1")  # remembered as outside


@given(operands)
def test_samples_satisfy_the_operand(operand: list[str]) -> None:
    found = samples(operand)
    assert found
    assert all(compile_matcher(operand)(value) for value in found)


def test_samples_are_first_and_last_addresses() -> None:
    assert samples(["10.0.0.0/8", "::/0"]) == ["10.0.0.0", "10.255.255.255", "::ffff:10.0.0.0"]
    assert samples(["2001:db8::/127"]) == ["2001:db8::", "2001:db8::1"]
    assert samples(["10.0.0.1/32"]) == ["10.0.0.1", "::ffff:10.0.0.1"]
    # ::/80 ends inside the IPv4-mapped block, which it never admits.
    assert samples(["::/80"]) == ["::", "::fffe:ffff:ffff"]


def test_an_ipv6_network_never_admits_an_ipv4_mapped_address() -> None:
    matches = compile_matcher(["::/0"])
    assert matches("::1")
    assert not matches("::ffff:10.0.0.1")
    assert not compile_excluder(["10.0.0.0/8"])("::ffff:10.0.0.1")
    assert compile_excluder(["::/0"])("::ffff:10.0.0.1")


# --- relations against brute force ---------------------------------------------------------

# A universe small enough to enumerate: 10.0.0.0/28 and fd00::/124, every address of them
# spelt plainly and IPv4-mapped, and a few addresses beyond them. Networks drawn from the
# small blocks have every witness of a relation in it.
V4_BLOCK = ipaddress.IPv4Network("10.0.0.0/28")
V6_BLOCK = ipaddress.IPv6Network("fd00::/124")
BEYOND = [
    "0.0.0.0",  # noqa: S104 (an address to match, not a binding)
    "255.255.255.255",
    "11.0.0.1",
    "::",
    "::1",
    "ffff::",
    "fd00::10",
]
UNIVERSE = (
    [str(address) for address in V4_BLOCK]
    + [f"::ffff:{address}" for address in V4_BLOCK]
    + [str(address) for address in V6_BLOCK]
    + BEYOND
)
EMBEDDING = [
    "64:ff9b::a00:1",
    "64:ff9b::a00:7",
    "2002:a00:3::1",
    "2001:0:a00:5::ffff:ffff",
    "2001:0:102:304::f5ff:fff5",  # Teredo client 10.0.0.10
    "64:ff9b::b00:1",
]

small_networks = st.one_of(
    st.builds(network_text, st.sampled_from(list(V4_BLOCK)), st.integers(28, 32)),
    st.builds(network_text, st.sampled_from(list(V6_BLOCK)), st.integers(124, 128)),
)
small_operands = st.lists(small_networks, min_size=1, max_size=4)
wide_networks = st.sampled_from(
    ["0.0.0.0/0", "10.0.0.0/8", "::/0", "::/1", "8000::/1", "::/80", "::fffe:0:0/95", "fd00::/8"]
)
mixed_operands = st.lists(small_networks | wide_networks, min_size=1, max_size=4)


@cache
def admitted(operand: tuple[str, ...], universe: tuple[str, ...]) -> frozenset[str]:
    matches = compile_matcher(list(operand))
    return frozenset(value for value in universe if matches(value))


@cache
def matched_by_deny(operand: tuple[str, ...], universe: tuple[str, ...]) -> frozenset[str]:
    excludes = compile_excluder(list(operand))
    return frozenset(value for value in universe if not excludes(value))


def brute_force(step_values: frozenset[str], rule_values: frozenset[str]) -> str:
    assert step_values, "every valid operand admits some address"
    if step_values <= rule_values:
        return "inside"
    if not step_values & rule_values:
        return "disjoint"
    return "overlapping"


@given(small_operands, small_operands)
def test_relation_is_exact_on_small_networks(step: list[str], rule: list[str]) -> None:
    universe = tuple(UNIVERSE)
    expected = brute_force(admitted(tuple(step), universe), admitted(tuple(rule), universe))
    assert relation(step, rule) == expected


@given(mixed_operands, mixed_operands)
def test_relation_is_never_contradicted_by_a_value(step: list[str], rule: list[str]) -> None:
    universe = (*UNIVERSE, *EMBEDDING)
    answer = relation(step, rule)
    step_values = admitted(tuple(step), universe)
    rule_values = admitted(tuple(rule), universe)
    if answer == "inside":
        assert step_values <= rule_values
    elif answer == "disjoint":
        assert not step_values & rule_values
    else:
        assert answer == "overlapping"
        if fits_universe(step):  # then both witnesses are in it
            assert step_values - rule_values
            assert step_values & rule_values


def fits_universe(operand: list[str]) -> bool:
    for text in operand:
        network = ipaddress.ip_network(text)
        if isinstance(network, ipaddress.IPv4Network):
            if not network.subnet_of(V4_BLOCK):
                return False
        elif not network.subnet_of(V6_BLOCK):
            return False
    return True


def test_the_ipv4_mapped_block_does_not_widen_an_ipv6_network() -> None:
    mapped = ipaddress.IPv6Network("::ffff:0:0/96")
    for wide in ("::/0", "::/80", "::fffe:0:0/95"):
        network = ipaddress.IPv6Network(wide)
        rest = sorted(str(part) for part in network.address_exclude(mapped))
        assert relation(valid([wide]), valid(rest)) == "inside"
        assert relation(valid([wide]), valid(rest[:-1] or ["::fffe:0:0/112"])) == "overlapping"


@pytest.mark.parametrize(
    ("step", "rule", "expected"),
    [
        (["10.0.0.0/9"], ["10.0.0.0/8"], "inside"),
        (["10.0.0.0/7"], ["10.0.0.0/8"], "overlapping"),
        (["10.0.0.0/8"], ["11.0.0.0/8"], "disjoint"),
        (["10.0.0.0/8"], ["10.0.0.0/9", "10.128.0.0/9"], "inside"),
        (["::/0"], ["::/1", "8000::/1"], "inside"),
        (["::/80"], ["::/81", "::8000:0:0/81"], "inside"),
        (["::/80"], ["::/81"], "overlapping"),
        # ::/80 less ::/81 is ::8000:0:0/81, which holds the IPv4-mapped block (admitted by
        # neither) and more.
        (["::/80"], ["::/81", "::8000:0:0/82"], "overlapping"),
        (["::/0"], ["0.0.0.0/0"], "disjoint"),
        (["10.0.0.0/8", "::/0"], ["0.0.0.0/0"], "overlapping"),
        (["0.0.0.0/0"], ["::/0"], "disjoint"),
    ],
)
def test_relation_named_cases(step: list[str], rule: list[str], expected: str) -> None:
    assert relation(valid(step), valid(rule)) == expected


# The deny reading: the universe adds addresses embedding 10.0.0.0/28 by NAT64, 6to4 and
# Teredo, which a step network avoiding those prefixes never admits.


@given(small_operands, small_operands)
def test_deny_relation_is_exact_for_steps_clear_of_embedding_prefixes(
    step: list[str], rule: list[str]
) -> None:
    universe = (*UNIVERSE, *EMBEDDING)
    expected = brute_force(admitted(tuple(step), universe), matched_by_deny(tuple(rule), universe))
    assert deny_relation(step, rule) == expected


@given(mixed_operands, mixed_operands)
def test_deny_relation_is_never_contradicted_by_a_value(step: list[str], rule: list[str]) -> None:
    universe = (*UNIVERSE, *EMBEDDING)
    answer = deny_relation(step, rule)
    step_values = admitted(tuple(step), universe)
    denied = matched_by_deny(tuple(rule), universe)
    if answer == "inside":
        assert step_values <= denied
    elif answer == "disjoint":
        assert not step_values & denied


@pytest.mark.parametrize(
    ("step", "rule", "expected"),
    [
        (["10.0.0.0/8"], ["10.0.0.0/8"], "inside"),
        (["10.0.0.0/8"], ["192.168.0.0/16"], "disjoint"),
        (["2001:db8::/32"], ["10.0.0.0/8"], "disjoint"),
        # These admit 64:ff9b::a00:1, 2002:a00:1::1 or a Teredo address: the deny on
        # 10.0.0.0/8 reads the IPv4 address they carry.
        (["::/0"], ["10.0.0.0/8"], "undecidable"),
        (["64:ff9b::/96"], ["10.0.0.0/8"], "undecidable"),
        (["2002::/16"], ["192.168.0.0/16"], "undecidable"),
        (["2001::/32"], ["10.0.0.0/8"], "undecidable"),
        (["2001::/16"], ["10.0.0.0/8"], "undecidable"),
        (["10.0.0.0/8", "2002:a00::/24"], ["10.0.0.0/8"], "undecidable"),
    ],
)
def test_deny_relation_named_cases(step: list[str], rule: list[str], expected: str) -> None:
    assert deny_relation(valid(step), valid(rule)) == expected


def test_a_step_admitting_an_embedding_address_is_matched_by_the_deny() -> None:
    # Why deny_relation cannot answer "disjoint" here: the step admits this value, the
    # deny on 10.0.0.0/8 matches it.
    assert compile_matcher(["64:ff9b::/96"])("64:ff9b::a00:1")
    assert not compile_excluder(["10.0.0.0/8"])("64:ff9b::a00:1")
    assert relation(["64:ff9b::/96"], ["10.0.0.0/8"]) == "disjoint"


def test_relations_of_garbage_are_undecidable() -> None:
    assert relation(["not a network"], ["10.0.0.0/8"]) == "undecidable"
    assert relation([167772160], ["10.0.0.0/8"]) == "undecidable"
    assert deny_relation(["10.0.0.0/8"], None) == "undecidable"
