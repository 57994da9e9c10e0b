"""The `url` operator (guard.urls; docs/decisions/0066, sections 2 and 3): the bypass corpus
(tests/guard/corpus/urls.json), what ada-url reads for 0066's table, operand validation with
paths, the matcher against a plainly written oracle over URLs built from parts, and the
relations against brute force over a universe of URLs."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import ada_url
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard import urls
from guard.errors import FieldError

CORPUS = json.loads((Path(__file__).parent / "corpus" / "urls.json").read_text())
SHAPES: dict[str, dict[str, Any]] = CORPUS["shapes"]
ACME = SHAPES["acme"]


def problems(operand: object) -> list[FieldError]:
    errors: list[FieldError] = []
    urls.check_operand(operand, "args.url.url", errors)
    return errors


def corpus_id(entry: dict[str, Any]) -> str:
    return f"{entry['verdict']}:{entry['value']!r}"[:80]


# --- the corpus --------------------------------------------------------------------------


def test_every_corpus_shape_is_a_valid_operand():
    for name, shape in SHAPES.items():
        assert problems(shape) == [], name


@pytest.mark.parametrize("entry", CORPUS["values"], ids=corpus_id)
def test_corpus_value(entry):
    operand = SHAPES[entry.get("operand", CORPUS["operand"])]
    value = entry["value"]
    admitted = urls.compile_matcher(operand)(value)
    outside_operand = urls.compile_excluder(operand)(value)
    if entry["verdict"] == "admitted":
        assert admitted, entry["why"]
        assert not outside_operand, "a deny of the same operand must match an admitted value"
        assert urls.compile_excluder(SHAPES[CORPUS["elsewhere"]])(value), entry["why"]
    elif entry["verdict"] == "refused":
        assert not admitted, entry["why"]
        assert not outside_operand, f"a deny of the operand must still match: {entry['why']}"
    else:
        assert entry["verdict"] == "outside"
        assert not admitted, entry["why"]
        assert outside_operand, f"plainly elsewhere, a deny of the operand holds: {entry['why']}"
    for name in entry.get("reaches", ()):
        assert not urls.compile_excluder(SHAPES[name])(value), f"evades a deny of {name}"


def test_the_corpus_covers_the_issue_and_decision_0066s_table():
    values = {entry["value"] for entry in CORPUS["values"] if isinstance(entry["value"], str)}
    assert {
        "https://acme.dev@evil.test",
        "https://evil.test\\@acme.dev",
        "https://acme.dev.evil.test",
        "https://ACME.dev./repos/acme/",
        "https://acme.dev:443/repos/acme/",
        "https://acme.dev:8443/repos/acme/",
        "https://acme.dev/repos/acme/%2e%2e/%2e%2e/admin",
        "https://acme.dev/repos/acme/%2e%2e%2fadmin",
        "https://\u0430cme.dev/repos/acme/",
        "https://\u0430\u0440\u0440\u04cf\u0435.com/",
        "https://acme\uff0edev/repos/acme/",
        "https://acme%2Edev/repos/acme/",
        "https://acme.dev\t.evil.test/repos/acme/",
        "https:acme.dev",
        "https://127.1/repos/acme/",
        "https://0x7f.0.0.1/repos/acme/",
        "//acme.dev/repos/acme/",
    } <= values
    verdicts = {entry["verdict"] for entry in CORPUS["values"]}
    assert verdicts == {"admitted", "refused", "outside"}


# 0066's table: what ada-url reads. A newer ada-url reading otherwise fails here first.
@pytest.mark.parametrize(
    ("value", "attribute", "expected"),
    [
        ("https://acme.dev@evil.test", "username", "acme.dev"),
        ("https://acme.dev@evil.test", "hostname", "evil.test"),
        ("https://evil.test\\@acme.dev", "hostname", "evil.test"),
        ("https://evil.test\\@acme.dev", "pathname", "/@acme.dev"),
        ("https://ACME.dev.", "hostname", "acme.dev."),
        ("https://acme.dev:443/", "port", ""),
        ("https://acme.dev:8443/", "port", "8443"),
        ("https://acme.dev/repos/acme/%2e%2e/%2e%2e/admin", "pathname", "/admin"),
        ("https://acme.dev/repos/acme/%2e%2e%2fadmin", "pathname", "/repos/acme/%2e%2e%2fadmin"),
        ("https://\u0430cme.dev/", "hostname", "xn--cme-5cd.dev"),
        ("https://acme\uff0edev/", "hostname", "acme.dev"),
        ("https://acme%2Edev/", "hostname", "acme.dev"),
        ("https://acme.dev\t.evil.test/", "hostname", "acme.dev.evil.test"),
        ("https:acme.dev", "href", "https://acme.dev/"),
        ("https://127.1/", "hostname", "127.0.0.1"),
        ("https://0x7f.0.0.1/", "hostname", "127.0.0.1"),
    ],
)
def test_ada_url_reads_what_0066_says(value, attribute, expected):
    assert ada_url.parse_url(value)[attribute] == expected


def test_ada_url_reads_ip_hosts_as_ips_and_refuses_a_protocol_relative_url():
    assert ada_url.parse_url("https://127.1/")["host_type"] == ada_url.HostType.IPV4
    assert ada_url.parse_url("https://[0:0::1]/")["host_type"] == ada_url.HostType.IPV6
    assert ada_url.idna_to_ascii("\u0430\u0440\u0440\u04cf\u0435.com") == b"xn--80ak6aa92e.com"
    with pytest.raises(ValueError):
        ada_url.parse_url("//acme.dev/x")


# --- the operand -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "operand",
    [
        {"scheme": ["https"], "host": ["api.github.com", "*.acme.dev"], "pathPrefix": "/x/"},
        {"scheme": ["http", "https", "ws", "wss"], "host": ["acme.dev"], "ports": [8080, 8443]},
        {"scheme": ["https"], "host": ["127.0.0.1", "[2001:db8::1]", "xn--cme-5cd.dev"]},
        {"scheme": ["https"], "host": ["*.dev"], "pathPrefix": "/"},
        {"scheme": ["wss"], "host": ["a-b.c0.dev"], "pathPrefix": "/caf%C3%A9//x"},
    ],
)
def test_valid_operands_have_no_problems(operand):
    assert problems(operand) == []


@pytest.mark.parametrize(
    ("operand", "path", "detail"),
    [
        ("https://acme.dev", "args.url.url", "must be an object, not string"),
        ({"host": ["acme.dev"]}, "args.url.url.scheme", "is required"),
        ({"scheme": ["https"]}, "args.url.url.host", "is required"),
        (
            {"scheme": ["https"], "host": ["acme.dev"], "hosts": []},
            "args.url.url.hosts",
            "unknown field (expected host, pathPrefix, ports, scheme)",
        ),
        ({"scheme": [], "host": ["acme.dev"]}, "args.url.url.scheme", "must not be empty"),
        ({"scheme": "https", "host": ["acme.dev"]}, "args.url.url.scheme", "must be an array"),
        (
            {"scheme": ["ftp"], "host": ["acme.dev"]},
            "args.url.url.scheme[0]",
            "must be one of http, https, ws, wss",
        ),
        (
            {"scheme": ["https", "https"], "host": ["acme.dev"]},
            "args.url.url.scheme[1]",
            "repeats 'https'",
        ),
        ({"scheme": ["https"], "host": []}, "args.url.url.host", "must not be empty"),
        (
            {"scheme": ["https"], "host": ["acme.dev", "ACME.dev"]},
            "args.url.url.host[1]",
            "must be written in lowercase A-labels: 'acme.dev'",
        ),
        (
            {"scheme": ["https"], "host": ["\u0430cme.dev"]},
            "args.url.url.host[0]",
            "must be written in lowercase A-labels: 'xn--cme-5cd.dev'",
        ),
        (
            {"scheme": ["https"], "host": ["*.B\u00fccher.de"]},
            "args.url.url.host[0]",
            "must be written in lowercase A-labels: '*.xn--bcher-kva.de'",
        ),
        (
            {"scheme": ["https"], "host": ["acme.dev."]},
            "args.url.url.host[0]",
            "must not end with a dot",
        ),
        (
            {"scheme": ["https"], "host": ["127.1"]},
            "args.url.url.host[0]",
            "must be written as the URL parser writes it: '127.0.0.1'",
        ),
        (
            {"scheme": ["https"], "host": ["2001:db8::1"]},
            "args.url.url.host[0]",
            "must be written as the URL parser writes it: '[2001:db8::1]'",
        ),
        (
            {"scheme": ["https"], "host": ["[::ffff:127.0.0.1]"]},
            "args.url.url.host[0]",
            "must be written as the URL parser writes it: '[::ffff:7f00:1]'",
        ),
        (
            {"scheme": ["https"], "host": ["*.10.0.0.1"]},
            "args.url.url.host[0]",
            "a '*.' entry needs a domain name",
        ),
        ({"scheme": ["https"], "host": ["a.*.dev"]}, "args.url.url.host[0]", "'*.' only as"),
        ({"scheme": ["https"], "host": ["*"]}, "args.url.url.host[0]", "must be a domain name"),
        ({"scheme": ["https"], "host": ["a_b.dev"]}, "args.url.url.host[0]", "letters, digits"),
        ({"scheme": ["https"], "host": ["-a.dev"]}, "args.url.url.host[0]", "letters, digits"),
        ({"scheme": ["https"], "host": ["a..dev"]}, "args.url.url.host[0]", "letters, digits"),
        ({"scheme": ["https"], "host": ["x" * 64 + ".dev"]}, "args.url.url.host[0]", "1 to 63"),
        ({"scheme": ["https"], "host": ["acme.123"]}, "args.url.url.host[0]", "reads as a name"),
        ({"scheme": ["https"], "host": [""]}, "args.url.url.host[0]", "must not be empty"),
        ({"scheme": ["https"], "host": [7]}, "args.url.url.host[0]", "must be a string"),
        (
            {"scheme": ["https"], "host": ["a.dev", "a.dev"]},
            "args.url.url.host[1]",
            "repeats 'a.dev'",
        ),
        (
            {"scheme": ["https"], "host": ["a.dev"], "pathPrefix": "repos"},
            "args.url.url.pathPrefix",
            "must start with '/'",
        ),
        (
            {"scheme": ["https"], "host": ["a.dev"], "pathPrefix": "/a b/../c"},
            "args.url.url.pathPrefix",
            "must be a URL path in normal form: '/c'",
        ),
        (
            {"scheme": ["https"], "host": ["a.dev"], "pathPrefix": "/a\\b"},
            "args.url.url.pathPrefix",
            "normal form: '/a/b'",
        ),
        (
            {"scheme": ["https"], "host": ["a.dev"], "pathPrefix": "/a?b"},
            "args.url.url.pathPrefix",
            "normal form: '/a'",
        ),
        (
            {"scheme": ["https"], "host": ["a.dev"], "pathPrefix": "/a/%2Fb"},
            "args.url.url.pathPrefix",
            "holds %2e, %2f, %5c or %25: no admitted URL does",
        ),
        (
            {"scheme": ["https"], "host": ["a.dev"], "pathPrefix": 3},
            "args.url.url.pathPrefix",
            "must be a string",
        ),
        (
            {"scheme": ["https"], "host": ["a.dev"], "ports": []},
            "args.url.url.ports",
            "must not be empty",
        ),
        (
            {"scheme": ["https"], "host": ["a.dev"], "ports": [0]},
            "args.url.url.ports[0]",
            "must be an integer 1..65535",
        ),
        (
            {"scheme": ["https"], "host": ["a.dev"], "ports": [443, 65536]},
            "args.url.url.ports[1]",
            "must be an integer 1..65535",
        ),
        (
            {"scheme": ["https"], "host": ["a.dev"], "ports": [True]},
            "args.url.url.ports[0]",
            "must be an integer 1..65535",
        ),
        (
            {"scheme": ["https"], "host": ["a.dev"], "ports": [8443, 8443]},
            "args.url.url.ports[1]",
            "repeats 8443",
        ),
    ],
)
def test_invalid_operands_are_refused_at_their_path(operand, path, detail):
    found = problems(operand)
    assert any(error.path == path and detail in error.detail for error in found), found


def test_every_problem_of_an_operand_is_reported():
    found = problems(
        {"scheme": ["ftp"], "host": ["ACME.dev", "ok.dev", "127.1"], "ports": [0], "x": 1}
    )
    assert {error.path for error in found} == {
        "args.url.url.scheme[0]",
        "args.url.url.host[0]",
        "args.url.url.host[2]",
        "args.url.url.ports[0]",
        "args.url.url.x",
    }


def test_sizes_are_bounded():
    hosts = [f"h{index}.dev" for index in range(urls.MAX_HOSTS + 1)]
    assert [error.detail for error in problems({"scheme": ["https"], "host": hosts})] == [
        f"must have at most {urls.MAX_HOSTS} members"
    ]
    prefix = "/" + "a" * urls.MAX_PATH_PREFIX_LENGTH
    found = problems({"scheme": ["https"], "host": ["a.dev"], "pathPrefix": prefix})
    assert [error.path for error in found] == ["args.url.url.pathPrefix"]


# --- matcher and excluder ----------------------------------------------------------------


def test_the_matcher_and_excluder_take_any_value_without_raising():
    matcher, excluder = urls.compile_matcher(ACME), urls.compile_excluder(ACME)
    for value in (None, 1, 1.5, True, [], {}, b"https://acme.dev/repos/acme/", "\ud800"):
        assert matcher(value) is False
        assert excluder(value) is False


def test_a_remembered_reading_gives_the_same_verdict_and_memory_stays_bounded():
    matcher = urls.compile_matcher(ACME)
    honest, attack = "https://acme.dev/repos/acme/x", "https://acme.dev@evil.test/repos/acme/"
    assert [matcher(honest), matcher(attack)] == [True, False]
    assert [matcher(honest), matcher(attack)] == [True, False]  # now from memory
    for index in range(urls.MAX_REMEMBERED + 10):
        matcher(f"https://acme.dev/repos/acme/{index}")
    assert len(urls._REMEMBERED) <= urls.MAX_REMEMBERED
    assert [matcher(honest), matcher(attack)] == [True, False]
    long_value = "https://acme.dev/repos/acme/" + "a" * 10_000
    assert matcher(long_value)
    assert long_value not in urls._REMEMBERED


def test_without_ports_only_the_schemes_default_port_is_admitted():
    operand = {"scheme": ["http", "wss"], "host": ["acme.dev"]}
    matcher = urls.compile_matcher(operand)
    assert matcher("http://acme.dev:80/") and matcher("wss://acme.dev:443/")
    assert not matcher("http://acme.dev:443/") and not matcher("wss://acme.dev:80/")


def test_a_deny_without_ports_covers_every_port():
    evil = {"scheme": ["https"], "host": ["evil.test"]}
    excluded = urls.compile_excluder(evil)
    for value in ("https://evil.test/", "https://evil.test:8443/", "https://evil.test:1/x"):
        assert not excluded(value), value
    assert excluded("http://evil.test:8443/") and excluded("https://acme.dev:8443/")
    listed = urls.compile_excluder({**evil, "ports": [8443]})
    assert not listed("https://evil.test:8443/") and not listed("https://evil.test/")
    assert listed("https://evil.test:8080/")
    step = {"scheme": ["https"], "host": ["evil.test"], "ports": [8443, 9000]}
    assert urls.deny_relation(step, evil) == "inside"
    assert urls.deny_relation(step, {**evil, "ports": [8443]}) == "overlapping"
    assert urls.relation(step, evil) == "overlapping"  # the allow reading: default port only


def test_a_wildcard_needs_at_least_one_more_label():
    matcher = urls.compile_matcher({"scheme": ["https"], "host": ["*.acme.dev"]})
    assert matcher("https://api.acme.dev/")
    assert not matcher("https://acme.dev/")
    assert not matcher("https://.acme.dev/")


def test_samples_are_admitted_by_their_operand():
    for shape in SHAPES.values():
        values = urls.samples(shape)
        assert values
        assert all(urls.compile_matcher(shape)(value) for value in values), values
    values = urls.samples(ACME)
    assert "https://www.acme.dev/repos/acme/" in values
    assert "https://acme.dev/repos/acme/item" in values


# --- the matcher against an oracle over URLs built from parts ----------------------------

# (as written, the hostname the standard reads, an IP)
HOSTS = [
    ("acme.dev", "acme.dev", False),
    ("ACME.Dev", "acme.dev", False),
    ("acme.dev.", "acme.dev.", False),
    ("acme.dev..", "acme.dev..", False),
    ("api.acme.dev", "api.acme.dev", False),
    ("Api.Acme.Dev.", "api.acme.dev.", False),
    ("a.b.acme.dev", "a.b.acme.dev", False),
    ("x..acme.dev", "x..acme.dev", False),
    ("acme.dev.evil.test", "acme.dev.evil.test", False),
    ("evilacme.dev", "evilacme.dev", False),
    ("evil.test", "evil.test", False),
    ("acme\uff0edev", "acme.dev", False),
    ("\u0430cme.dev", "xn--cme-5cd.dev", False),
    ("acme%2Edev", "acme.dev", False),
    ("127.0.0.1", "127.0.0.1", True),
    ("127.1", "127.0.0.1", True),
    ("0x7f.0.0.1", "127.0.0.1", True),
    ("[::1]", "[::1]", True),
    ("[0:0::1]", "[::1]", True),
    ("[::ffff:127.0.0.1]", "[::ffff:7f00:1]", True),
]
SEGMENTS = [
    "repos", "acme", "Acme", "acme-x", "app", "", ".", "..", "%2e", "%2E", "%2e%2e", ".%2e",
    "%2e.", "%2E%2e", "%2f", "a%2fb", "%5c", "%25", "%252e", "%41", "a@b", "..;", ".;x",
    "a;v=1", "%c0%ae", "%u002e", "%ff", "caf%C3%A9",
]  # fmt: skip
SINGLE_DOTS = {".", "%2e"}
DOUBLE_DOTS = {"..", ".%2e", "%2e.", "%2e%2e"}
POISON = ["\t", "\n", " ", "\\", "\x00", "\x7f"]

url_parts = st.fixed_dictionaries(
    {
        "scheme": st.sampled_from(["https", "HTTPS", "http", "Http", "ws", "wss", "ftp"]),
        "separator": st.sampled_from(["://", "://", "://", ":/", ":", ":///"]),
        "userinfo": st.sampled_from([None, None, None, "user", "user:pw", "acme.dev", ""]),
        "host": st.sampled_from(HOSTS),
        "port": st.sampled_from([None, None, "", "80", "443", "8443", "0"]),
        "segments": st.none() | st.lists(st.sampled_from(SEGMENTS), max_size=5),
        "query": st.sampled_from([None, "?q=%2e%2e/x", "?next=https://evil.test/"]),
        "fragment": st.sampled_from([None, "#/../admin", "#x"]),
        "poison": st.none() | st.tuples(st.sampled_from(POISON), st.integers(0, 200)),
    }
)

operands = st.fixed_dictionaries(
    {
        "scheme": st.lists(st.sampled_from(urls.SCHEMES), min_size=1, unique=True),
        "host": st.lists(
            st.sampled_from(
                [
                    *("acme.dev", "*.acme.dev", "*.dev", "api.acme.dev"),
                    *("evil.test", "*.evil.test", "127.0.0.1", "[::1]", "[::ffff:7f00:1]"),
                ]
            ),
            min_size=1,
            max_size=3,
            unique=True,
        ),
    },
    optional={
        "ports": st.lists(st.sampled_from([80, 443, 8443]), min_size=1, unique=True),
        "pathPrefix": st.sampled_from(
            ["/", "/repos", "/repos/", "/repos/acme/", "/repos/acme", "/app", "/Repos/acme"]
        ),
    },
)


def written(parts: dict[str, Any]) -> str:
    text = parts["scheme"] + parts["separator"]
    if parts["userinfo"] is not None:
        text += parts["userinfo"] + "@"
    text += parts["host"][0]
    if parts["port"] is not None:
        text += ":" + parts["port"]
    if parts["segments"] is not None:
        text += "/" + "/".join(parts["segments"])
    text += (parts["query"] or "") + (parts["fragment"] or "")
    if parts["poison"] is not None:
        character, position = parts["poison"]
        position %= len(text) + 1
        text = text[:position] + character + text[position:]
    return text


def oracle_pathname(segments: list[str] | None) -> str:
    """The WHATWG path state for these plain ASCII segments."""
    kept: list[str] = []
    for index, segment in enumerate(segments or [""]):
        last = index == len(segments or [""]) - 1
        if segment.lower() in DOUBLE_DOTS:
            if kept:
                kept.pop()
            if last:
                kept.append("")
        elif segment.lower() in SINGLE_DOTS:
            if last:
                kept.append("")
        else:
            kept.append(segment)
    return "/" + "/".join(kept)


def oracle(parts: dict[str, Any], operand: dict[str, Any]) -> bool:
    """The url operator, written out plainly from the parts a URL was built of."""
    raw_host, hostname, is_ip = parts["host"]
    scheme = parts["scheme"].lower()
    if parts["poison"] is not None or parts["separator"] != "://":
        return False
    if parts["userinfo"] is not None or "%" in raw_host:
        return False
    if scheme not in operand["scheme"]:
        return False
    if hostname.endswith("."):
        hostname = hostname[:-1]
    if "" in hostname.split("."):
        return False
    host_ok = False
    for entry in operand["host"]:
        if entry.startswith("*."):
            suffix = entry[1:]
            host_ok |= not is_ip and hostname.endswith(suffix) and hostname != suffix[1:]
        else:
            host_ok |= hostname == entry
    if not host_ok:
        return False
    default = {"http": 80, "ws": 80, "https": 443, "wss": 443}[scheme]
    port = int(parts["port"] or default)
    if port != default and port not in operand.get("ports", []):
        return False
    pathname = oracle_pathname(parts["segments"])
    refused_escapes = ("%2e", "%2f", "%5c", "%25", "%u002e", "%c0", "%ff")
    if any(escape in pathname.lower() for escape in refused_escapes):
        return False
    if any(segment.startswith((".;", "..;")) for segment in pathname.split("/")):
        return False
    prefix = operand.get("pathPrefix", "/")
    if prefix != "/" and prefix.endswith("/"):
        prefix = prefix[:-1]
    return prefix == "/" or pathname == prefix or pathname.startswith(prefix + "/")


# Five times the profile: a URL is built from nine independent parts, each with many choices.
@settings(max_examples=5 * settings().max_examples)
@given(parts=url_parts, operand=operands)
def test_the_matcher_agrees_with_a_plain_oracle(parts, operand):
    assert problems(operand) == []
    value = written(parts)
    assert urls.compile_matcher(operand)(value) == oracle(parts, operand), value


@given(parts=url_parts, operand=operands)
def test_no_value_is_both_admitted_and_provably_outside(parts, operand):
    value = written(parts)
    assert not (urls.compile_matcher(operand)(value) and urls.compile_excluder(operand)(value))


@given(value=st.text(max_size=60) | st.text(alphabet="htps:/@%\\.acme2e[]1:", max_size=40))
def test_arbitrary_text_never_raises(value):
    assert isinstance(urls.compile_matcher(ACME)(value), bool)
    assert isinstance(urls.compile_excluder(ACME)(value), bool)


# --- relations against brute force ------------------------------------------------------

UNIVERSE_HOSTS = [
    "acme.dev", "api.acme.dev", "x.api.acme.dev", "evil.test", "a.evil.test", "b.dev",
    "127.0.0.1", "[::1]", "[::ffff:7f00:1]",
]  # fmt: skip
UNIVERSE_PORTS = ["", ":80", ":443", ":8443"]
UNIVERSE_PATHS = ["/", "/repos", "/repos/acme", "/repos/acme/x", "/app/x", "/Repos/acme/x"]
UNIVERSE = [
    f"{scheme}://{host}{port}{path}"
    for scheme, host, port, path in itertools.product(
        urls.SCHEMES, UNIVERSE_HOSTS, UNIVERSE_PORTS, UNIVERSE_PATHS
    )
]
assert len(UNIVERSE) < urls.MAX_REMEMBERED  # every reading stays remembered across examples


def check_against_brute_force(answer: str, step: list[bool], rule: list[bool]) -> None:
    both = [s and r for s, r in zip(step, rule, strict=True)]
    step_only = [s and not r for s, r in zip(step, rule, strict=True)]
    assert answer in ("inside", "disjoint", "overlapping")
    if answer == "inside":
        assert not any(step_only)
    elif answer == "disjoint":
        assert not any(both)
    else:  # the universe holds a witness of each side of an overlap
        assert any(both) and any(step_only)


@given(step=operands, rule=operands)
def test_relation_against_brute_force(step, rule):
    admitted_by_step = [urls.compile_matcher(step)(value) for value in UNIVERSE]
    admitted_by_rule = [urls.compile_matcher(rule)(value) for value in UNIVERSE]
    check_against_brute_force(urls.relation(step, rule), admitted_by_step, admitted_by_rule)


@given(step=operands, rule=operands)
def test_deny_relation_against_brute_force(step, rule):
    excluded = urls.compile_excluder(rule)
    admitted_by_step = [urls.compile_matcher(step)(value) for value in UNIVERSE]
    matched_by_deny = [not excluded(value) for value in UNIVERSE]
    check_against_brute_force(urls.deny_relation(step, rule), admitted_by_step, matched_by_deny)


@given(operand=operands)
def test_an_operand_lies_inside_itself(operand):
    assert urls.relation(operand, operand) == "inside"
    assert urls.deny_relation(operand, operand) == "inside"


A_DEV = {"host": ["acme.dev"]}


@pytest.mark.parametrize(
    ("step", "rule", "expected"),
    [
        ({"host": ["api.acme.dev"]}, {"host": ["*.acme.dev"]}, "inside"),
        ({"host": ["*.acme.dev"]}, {"host": ["*.dev"]}, "inside"),
        ({"host": ["*.dev"]}, {"host": ["*.acme.dev"]}, "overlapping"),
        ({"host": ["*.acme.dev"]}, A_DEV, "disjoint"),
        (A_DEV, {**A_DEV, "scheme": ["http"]}, "disjoint"),
        ({**A_DEV, "ports": [8443]}, A_DEV, "overlapping"),
        (A_DEV, {**A_DEV, "ports": [8443]}, "inside"),
        ({**A_DEV, "pathPrefix": "/a/b"}, {**A_DEV, "pathPrefix": "/a/"}, "inside"),
        ({**A_DEV, "pathPrefix": "/a"}, {**A_DEV, "pathPrefix": "/a/b"}, "overlapping"),
        ({**A_DEV, "pathPrefix": "/a"}, {**A_DEV, "pathPrefix": "/ab"}, "disjoint"),
        ({"host": ["127.0.0.1"]}, {"host": ["*.dev"]}, "disjoint"),
    ],
)
def test_relation_examples(step, rule, expected):
    step = {"scheme": ["https"], **step}
    rule = {"scheme": ["https"], **rule}
    assert urls.relation(step, rule) == expected


def test_a_deny_reads_the_path_casefolded():
    step = {"scheme": ["https"], "host": ["acme.dev"], "pathPrefix": "/Admin"}
    deny = {"scheme": ["https"], "host": ["acme.dev"], "pathPrefix": "/admin"}
    assert urls.relation(step, deny) == "disjoint"
    assert urls.deny_relation(step, deny) == "inside"


def test_a_deny_of_an_ip_reaches_the_ipv6_forms_that_embed_it():
    loopback = {"scheme": ["https"], "host": ["127.0.0.1"]}
    mapped = {"scheme": ["https"], "host": ["[::ffff:7f00:1]"]}
    assert urls.relation(mapped, loopback) == "disjoint"
    assert urls.deny_relation(mapped, loopback) == "inside"
    assert urls.deny_relation(loopback, mapped) == "inside"
    excluder = urls.compile_excluder(loopback)
    assert not excluder("https://[::ffff:127.0.0.1]/")
    assert excluder("https://[::2]/")
    assert urls.compile_excluder(mapped)("https://127.0.0.2/")
    assert not urls.compile_excluder(mapped)("https://127.0.0.1/")
