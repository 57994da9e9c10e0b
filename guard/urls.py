"""The ``url`` operator: a URL of listed schemes, hosts, ports and path prefix
(docs/decisions/0066, sections 2 and 3).

The operand::

    {"scheme": ["https"], "host": ["api.github.com", "*.acme.dev"],
     "pathPrefix": "/repos/acme/", "ports": [8443]}

A value satisfies it when it is a string that

- holds no C0 control, space, DEL or backslash (the WHATWG parser strips or rewrites them;
  other clients do not), starts with ``<scheme>://`` (any case) and holds neither ``@`` nor
  ``%`` in its authority (userinfo, and a percent-encoded host that a client other than a
  browser reads differently);
- parses with ``ada_url.parse_url`` (the WHATWG parser Node uses) without a username or
  password, with a listed scheme;
- has a host that, less one trailing dot (``acme.dev.`` is the same DNS name), equals a host
  entry or ends with ``.`` plus the suffix of a ``*.`` entry after at least one more label.
  The parser lowercases names and converts them to A-labels (``acme.dev`` spelt with a
  Cyrillic U+0430 for the ``a`` is ``xn--cme-5cd.dev``); an IP host, which the parser normalises
  (``127.1`` and ``0x7f.0.0.1`` are ``127.0.0.1``), matches only an IP entry;
- has the scheme's default port (the parser elides ``:443`` for https) or one in ``ports``;
- has a ``pathname`` lying under ``pathPrefix`` by whole segments (``/repos/acme/`` and
  ``/repos/acme`` admit ``/repos/acme`` and everything below it, never ``/repos/acme-x``),
  after the parser resolved ``.``/``..`` segments, ``%2e`` spellings included; a pathname
  still holding ``%2e``, ``%2f``, ``%5c`` or ``%25`` (any case) is refused, since a server
  that decodes would read another path, and so is one whose escapes are not UTF-8 (overlong
  ``%c0%ae`` is ``.`` to lax decoders), holding IIS's ``%u002e`` or a ``..;`` segment (``..``
  to Tomcat), or whose decoded text has a dot segment under NFKC (fullwidth dots).

Query and fragment are free. Host entries are lowercase A-label names (``*.`` entries too)
or IP literals as the parser writes them (``127.0.0.1``, ``[2001:db8::1]``); validation
refuses any other spelling and names the normal form, ``ada_url.idna_to_ascii``'s.

Deny rules read the operand fail-closed (`compile_excluder`): a value is provably outside
only when it passes the same raw checks, parses without userinfo and then fails the scheme,
host, port or path test. Without ``ports`` a deny covers every port (a deny of
``evil.test`` matches ``https://evil.test:8443/``); with ``ports`` it covers those and the
scheme's default. The host test drops every trailing dot, and an IP host also meets
an entry embedding the same IPv4 address (``[::ffff:7f00:1]`` is ``127.0.0.1`` to a
dual-stack client). The path test is made against every reading a server might make
(percent-decoded up to three times, cut at a NUL, without ``;`` parameters, backslashes as
slashes, dot segments resolved, runs of slashes collapsed), casefolded: one reading under the
prefix and the deny holds; a path the matcher refuses for its escapes is never outside.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, NamedTuple
from urllib.parse import unquote, unquote_to_bytes

import ada_url

from guard._document import check_unknown_keys, index_path, key_path, text_problem, type_name
from guard.errors import FieldError

__all__ = [
    "DEFAULT_PORTS",
    "MAX_HOSTS",
    "MAX_PATH_PREFIX_LENGTH",
    "MAX_PORTS",
    "OPERATOR",
    "SCHEMES",
    "check_operand",
    "compile_excluder",
    "compile_matcher",
    "deny_relation",
    "relation",
    "samples",
]

OPERATOR: Final = "url"
#: the special schemes whose URLs have a host to compare, and their default ports
DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}
SCHEMES: Final = tuple(DEFAULT_PORTS)
MAX_HOSTS: Final = 1_000
MAX_PORTS: Final = 1_000
MAX_PATH_PREFIX_LENGTH: Final = 1_000
_MAX_HOST_LENGTH: Final = 253  # a DNS name's limit in its dotted text form
_MAX_LABEL_LENGTH: Final = 63

# parse_url costs ~12 µs a call, 60 times urlsplit: a bounded memory of recent values keeps
# a tool called again with the same URL cheap. Cleared when full, so memory stays bounded
# however varied the values; a long value is not remembered at all.
MAX_REMEMBERED: Final = 1_024
_MAX_REMEMBERED_LENGTH: Final = 4_096

_OPERAND_KEYS: Final = ("scheme", "host", "pathPrefix", "ports")
# C0 controls, space, DEL and backslash: the standard strips tabs and newlines and reads a
# backslash as a slash in special URLs; a client that does neither reads another URL.
_RAW_REFUSED: Final = re.compile(r"[\x00-\x20\x7f\\]")
_AUTHORITY_END: Final = re.compile(r"[/?#]")
# Escapes the parser keeps in a pathname that a decoding server reads as `.`, `/`, `\`
# or a second round of escapes.
_ENCODED_SEPARATOR: Final = re.compile(r"%(?:2e|2f|5c|25)", re.IGNORECASE)
# Spellings some servers decode although the standard leaves them alone: IIS's `%u002e`, and
# `..;/`, which Tomcat and the Java servers behind it read as `../` (a path parameter).
_SERVER_DOT_SPELLING: Final = re.compile(r"%u[0-9a-f]{4}|(?:^|/)\.\.?;", re.IGNORECASE)
_LABEL: Final = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")
_IP_HOST_TYPES: Final = (ada_url.HostType.IPV4, ada_url.HostType.IPV6)
_PARSED_ATTRIBUTES: Final = (
    "username",
    "password",
    "protocol",
    "hostname",
    "host_type",
    "port",
    "pathname",
)
_PATH_DECODINGS: Final = 3
_SAMPLE_LABEL: Final = "www"
_MAX_SAMPLES: Final = 12

Relation = str  # "inside" | "disjoint" | "overlapping" | "undecidable"


class _Reading(NamedTuple):
    """What the parser read in a value that passed the raw checks, without userinfo."""

    scheme: str
    hostname: str
    is_ip: bool
    port: int | None  # None: the scheme's default
    pathname: str


# --- validation ----------------------------------------------------------------------------


def check_operand(operand: object, path: str, errors: list[FieldError]) -> None:
    """Append a FieldError for every problem with a ``url`` operand."""
    if not isinstance(operand, Mapping):
        errors.append(FieldError(path, f"must be an object, not {type_name(operand)}"))
        return
    check_unknown_keys(operand, _OPERAND_KEYS, path, errors)
    for required in ("scheme", "host"):
        if required not in operand:
            errors.append(FieldError(key_path(path, required), "is required"))
    if "scheme" in operand:
        _check_schemes(operand["scheme"], key_path(path, "scheme"), errors)
    if "host" in operand:
        _check_hosts(operand["host"], key_path(path, "host"), errors)
    if "pathPrefix" in operand:
        _check_path_prefix(operand["pathPrefix"], key_path(path, "pathPrefix"), errors)
    if "ports" in operand:
        _check_ports(operand["ports"], key_path(path, "ports"), errors)


def _check_array(value: object, path: str, errors: list[FieldError], *, maximum: int) -> bool:
    if not isinstance(value, list):
        errors.append(FieldError(path, f"must be an array, not {type_name(value)}"))
        return False
    if not value:
        errors.append(FieldError(path, "must not be empty"))
        return False
    if len(value) > maximum:
        errors.append(FieldError(path, f"must have at most {maximum} members"))
        return False
    return True


def _check_unique(value: list[Any], path: str, errors: list[FieldError]) -> None:
    seen: set[Any] = set()
    for index, member in enumerate(value):
        if not isinstance(member, str | int) or isinstance(member, bool):
            continue
        if member in seen:
            errors.append(FieldError(index_path(path, index), f"repeats {member!r}"))
        seen.add(member)


def _check_schemes(value: object, path: str, errors: list[FieldError]) -> None:
    if not _check_array(value, path, errors, maximum=len(SCHEMES)):
        return
    assert isinstance(value, list)
    for index, scheme in enumerate(value):
        if scheme not in SCHEMES or not isinstance(scheme, str):
            expected = ", ".join(SCHEMES)
            errors.append(FieldError(index_path(path, index), f"must be one of {expected}"))
    _check_unique(value, path, errors)


def _check_hosts(value: object, path: str, errors: list[FieldError]) -> None:
    if not _check_array(value, path, errors, maximum=MAX_HOSTS):
        return
    assert isinstance(value, list)
    for index, entry in enumerate(value):
        problem = _host_entry_problem(entry)
        if problem is not None:
            errors.append(FieldError(index_path(path, index), problem))
    _check_unique(value, path, errors)


def _host_entry_problem(entry: object) -> str | None:
    """Why `entry` is no host entry in normal form, or None."""
    if not isinstance(entry, str):
        return f"must be a string, not {type_name(entry)}"
    problem = text_problem(entry)
    if problem is not None:
        return problem
    if not entry:
        return "must not be empty"
    if len(entry) > _MAX_HOST_LENGTH + 2:
        return f"must be at most {_MAX_HOST_LENGTH} characters"
    wildcard = entry.startswith("*.")
    name = entry[2:] if wildcard else entry
    ip_form = _ip_literal_form(name)
    if ip_form is not None:
        if wildcard:
            return "a '*.' entry needs a domain name, not an IP address"
        if ip_form != name:
            return f"must be written as the URL parser writes it: {ip_form!r}"
        return None
    try:
        ascii_name = ada_url.idna_to_ascii(name).decode("ascii")
    except (UnicodeError, ValueError):
        return "must be a domain name or an IP literal"
    if ascii_name != name and ascii_name:
        normal = f"*.{ascii_name}" if wildcard else ascii_name
        return f"must be written in lowercase A-labels: {normal!r}"
    if name.endswith("."):
        return f"must not end with a dot: {entry[:-1]!r} (a trailing dot is matched anyway)"
    labels = name.split(".")
    if len(name) > _MAX_HOST_LENGTH or not all(
        _LABEL.fullmatch(label) and len(label) <= _MAX_LABEL_LENGTH for label in labels
    ):
        hint = " ('*.' only as the first label)" if "*" in name else ""
        return (
            "must be a domain name of letters, digits and hyphens, 1 to 63 per label, "
            f"or an IP literal{hint}"
        )
    reading = _parse_host(name)
    if reading is None or reading[0] != name or reading[1]:
        # The standard reads a name whose last label is a number as an IPv4 address.
        return "must be a domain name the URL parser reads as a name"
    return None


def _ip_literal_form(text: str) -> str | None:
    """The parser's spelling of `text` when it is an IP address (bracketed for IPv6)."""
    candidate = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        pass
    else:
        literal = f"[{address}]" if address.version == 6 else str(address)
        reading = _parse_host(literal)
        return reading[0] if reading is not None and reading[1] else literal
    reading = _parse_host(text)  # 127.1, 0x7f.0.0.1 and other spellings the parser reads
    if reading is not None and reading[1]:
        return reading[0]
    return None


def _parse_host(host: str) -> tuple[str, bool] | None:
    """The parser's hostname of ``http://<host>/`` and whether it is an IP, or None."""
    if _RAW_REFUSED.search(host) or _AUTHORITY_END.search(host) or "@" in host:
        return None
    try:
        parsed = ada_url.parse_url(f"http://{host}/", attributes=("hostname", "host_type"))
    except (ValueError, UnicodeError):
        return None
    return str(parsed["hostname"]), parsed["host_type"] in _IP_HOST_TYPES


def _check_path_prefix(value: object, path: str, errors: list[FieldError]) -> None:
    if not isinstance(value, str):
        errors.append(FieldError(path, f"must be a string, not {type_name(value)}"))
        return
    problem = text_problem(value)
    if problem is not None:
        errors.append(FieldError(path, problem))
        return
    if len(value) > MAX_PATH_PREFIX_LENGTH:
        errors.append(FieldError(path, f"must be at most {MAX_PATH_PREFIX_LENGTH} characters"))
        return
    if not value.startswith("/"):
        errors.append(FieldError(path, "must start with '/'"))
        return
    problem = _path_problem(value)
    if problem is not None:
        errors.append(FieldError(path, f"{problem}: no admitted URL does"))
        return
    try:
        pathname = str(ada_url.parse_url(f"http://h{value}", attributes=("pathname",))["pathname"])
    except (ValueError, UnicodeError):
        errors.append(FieldError(path, "is not a URL path"))
        return
    if pathname != value:
        errors.append(FieldError(path, f"must be a URL path in normal form: {pathname!r}"))


def _check_ports(value: object, path: str, errors: list[FieldError]) -> None:
    if not _check_array(value, path, errors, maximum=MAX_PORTS):
        return
    assert isinstance(value, list)
    for index, port in enumerate(value):
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            errors.append(FieldError(index_path(path, index), "must be an integer 1..65535"))
    _check_unique(value, path, errors)


# --- reading a value ---------------------------------------------------------------------


def _read(value: Any) -> _Reading | None:
    """The parser's reading of `value`, or None when the value fails the raw checks, does
    not parse, or carries userinfo. Remembered for recent values."""
    if not isinstance(value, str):
        return None
    try:
        return _REMEMBERED[value]
    except KeyError:
        pass
    reading = _read_uncached(value)
    if len(value) <= _MAX_REMEMBERED_LENGTH:
        if len(_REMEMBERED) >= MAX_REMEMBERED:
            _REMEMBERED.clear()
        _REMEMBERED[value] = reading
    return reading


_REMEMBERED: dict[str, _Reading | None] = {}


def _read_uncached(value: str) -> _Reading | None:
    if _RAW_REFUSED.search(value):
        return None
    separator = value.find("://")
    raw_scheme = value[:separator].lower() if separator > 0 else ""
    if raw_scheme not in DEFAULT_PORTS:
        return None
    rest = value[separator + 3 :]
    end = _AUTHORITY_END.search(rest)
    authority = rest[: end.start()] if end else rest
    if not authority or "@" in authority or "%" in authority:
        return None
    try:
        parsed = ada_url.parse_url(value, attributes=_PARSED_ATTRIBUTES)
    except (ValueError, UnicodeError):
        return None
    if parsed["username"] or parsed["password"]:
        return None
    scheme = str(parsed["protocol"]).removesuffix(":")
    if scheme != raw_scheme:
        return None
    port_text = str(parsed["port"])
    try:
        port = int(port_text) if port_text else None
    except ValueError:
        return None
    return _Reading(
        scheme=scheme,
        hostname=str(parsed["hostname"]),
        is_ip=parsed["host_type"] in _IP_HOST_TYPES,
        port=port,
        pathname=str(parsed["pathname"]),
    )


# --- the operand, compiled ---------------------------------------------------------------


@dataclass(frozen=True)
class _Shape:
    schemes: frozenset[str]
    exact_hosts: frozenset[str]  # names and IP literals
    suffixes: tuple[str, ...]  # ".acme.dev" for "*.acme.dev"
    suffix_set: frozenset[str]
    ports: frozenset[int]
    ports_listed: bool  # False: the deny reading covers every port
    prefix: str  # the pathPrefix less one trailing slash; "/" for none
    ip_aliases: frozenset[str]  # the IP entries and the IPv4 addresses they embed

    @classmethod
    def of(cls, operand: Mapping[str, Any]) -> _Shape:
        hosts = list(operand["host"])
        suffixes = tuple(host[1:] for host in hosts if host.startswith("*."))
        return cls(
            schemes=frozenset(operand["scheme"]),
            exact_hosts=frozenset(host for host in hosts if not host.startswith("*.")),
            suffixes=suffixes,
            suffix_set=frozenset(suffixes),
            ports=frozenset(operand.get("ports", ())),
            ports_listed="ports" in operand,
            prefix=_strip_slash(operand.get("pathPrefix", "/")),
            ip_aliases=frozenset(
                alias for host in hosts if _is_ip_literal(host) for alias in _ip_aliases(host)
            ),
        )

    def admits_host(self, host: str, is_ip: bool) -> bool:
        """`host` has no trailing dot; an IP host only equals an IP entry."""
        if host in self.exact_hosts:
            return True
        if is_ip or not self.suffixes or host.startswith(".") or host.endswith(".") or ".." in host:
            return False
        # Each parent of the host, from the longest: one set look-up per label.
        dot = host.find(".")
        while dot != -1:
            if host[dot:] in self.suffix_set:
                return True
            dot = host.find(".", dot + 1)
        return False

    def admits_host_aliased(self, host: str, is_ip: bool) -> bool:
        """`admits_host`, where an IP host also meets an entry that embeds the same IPv4
        address or that it embeds (``[::ffff:7f00:1]`` reaches ``127.0.0.1``): the deny
        reading, since a dual-stack client connects to the embedded address."""
        if self.admits_host(host, is_ip):
            return True
        return is_ip and not _ip_aliases(host).isdisjoint(self.ip_aliases)

    def admits_port(self, port: int | None) -> bool:
        return port is None or port in self.ports

    def denies_port(self, port: int | None) -> bool:
        """The deny reading: without ``ports`` every port, fail-closed."""
        return not self.ports_listed or self.admits_port(port)

    def effective_ports(self, scheme: str) -> frozenset[int]:
        return self.ports | {DEFAULT_PORTS[scheme]}


def _strip_slash(prefix: str) -> str:
    return prefix[:-1] if len(prefix) > 1 and prefix.endswith("/") else prefix


def _under(pathname: str, prefix: str) -> bool:
    """`pathname` lies under `prefix` (no trailing slash but for "/") by whole segments."""
    return prefix == "/" or pathname == prefix or pathname.startswith(prefix + "/")


def compile_matcher(operand: Any) -> Callable[[Any], bool]:
    """value -> True when the value satisfies the validated operand. Never raises."""
    shape = _Shape.of(operand)

    def matches(value: Any) -> bool:
        reading = _read(value)
        if reading is None or reading.scheme not in shape.schemes:
            return False
        host = reading.hostname
        if host.endswith("."):
            host = host[:-1]  # one trailing dot: the same DNS name
        if not shape.admits_host(host, reading.is_ip) or not shape.admits_port(reading.port):
            return False
        pathname = reading.pathname
        return _under(pathname, shape.prefix) and _path_problem(pathname) is None

    return matches


def _path_problem(pathname: str) -> str | None:
    """Why a decoding server might read `pathname` as another path, or None."""
    if "%" not in pathname and ";" not in pathname:
        return None
    if _ENCODED_SEPARATOR.search(pathname):
        return "holds %2e, %2f, %5c or %25"
    if _SERVER_DOT_SPELLING.search(pathname):
        return "holds %u escapes or a '.;' or '..;' segment"
    try:
        decoded = unquote_to_bytes(pathname).decode("utf-8")
    except UnicodeDecodeError:
        # Overlong forms such as %c0%ae are '.' to decoders that accept them.
        return "holds percent-escapes that are not UTF-8"
    if not decoded.isascii():
        # Fullwidth dots and solidus (U+FF0E, U+FF0F) are '.' and '/' to a server using NFKC.
        folded = unicodedata.normalize("NFKC", decoded).replace("\\", "/")
        if any(segment in (".", "..") for segment in folded.split("/")):
            return "reads as a dot segment under NFKC"
    return None


def compile_excluder(operand: Any) -> Callable[[Any], bool]:
    """value -> True only when the value is provably outside the operand: it passes the raw
    checks, parses without userinfo and fails the scheme, host, port or path test, the path
    under every reading a server might make; without ``ports`` no port is outside. Never
    raises."""
    shape = _Shape.of(operand)
    prefixes = _path_readings(shape.prefix) if shape.prefix != "/" else None

    def excluded(value: Any) -> bool:
        try:
            reading = _read(value)
            if reading is None:
                return False
            if reading.scheme not in shape.schemes or not shape.denies_port(reading.port):
                return True
            # Every trailing dot goes (a resolver may drop them); an empty label proves nothing.
            host = reading.hostname.rstrip(".")
            readable = bool(host) and "" not in host.split(".")
            if readable and not shape.admits_host_aliased(host, reading.is_ip):
                return True
            if prefixes is None or _path_problem(reading.pathname) is not None:
                return False
            return not any(
                _under(candidate, prefix)
                for candidate in _path_readings(reading.pathname)
                for prefix in prefixes
            )
        except Exception:  # a deny rule fails closed on anything unforeseen
            return False

    return excluded


def _path_readings(pathname: str) -> frozenset[str]:
    if len(pathname) > _MAX_REMEMBERED_LENGTH:
        return _read_path(pathname)
    return _remembered_path_readings(pathname)


def _read_path(pathname: str) -> frozenset[str]:
    """Every reading of `pathname` a server might make, casefolded: as written and decoded
    up to three times, each also cut at a NUL, without path parameters (`;x=1`), and with
    backslashes as slashes, dot segments resolved and empty segments dropped. Each ends
    without a slash but for "/"."""
    spellings = [pathname]
    for _ in range(_PATH_DECODINGS):
        decoded = unquote(spellings[-1], errors="replace")
        if decoded == spellings[-1]:
            break
        spellings.append(decoded)
    for spelling in list(spellings):
        if "\x00" in spelling:
            spellings.append(spelling.partition("\x00")[0])
    for spelling in list(spellings):
        if ";" in spelling:
            spellings.append("/".join(part.partition(";")[0] for part in spelling.split("/")))
    readings: set[str] = set()
    for spelling in spellings:
        readings.add(_strip_slash(spelling).casefold())
        readings.add(_resolve(spelling.replace("\\", "/")).casefold())
    return frozenset(readings)


_remembered_path_readings: Final = lru_cache(maxsize=MAX_REMEMBERED)(_read_path)


def _resolve(path: str) -> str:
    segments: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if segments:
                segments.pop()
            continue
        segments.append(segment)
    return "/" + "/".join(segments)


# --- relations ---------------------------------------------------------------------------


def relation(step: Any, rule: Any) -> Relation:
    """The values `step` admits against the values `rule` admits (validated operands)."""
    step_shape, rule_shape = _Shape.of(step), _Shape.of(rule)
    path = _prefix_relation(step_shape.prefix, rule_shape.prefix)
    return _combine(step_shape, rule_shape, path, aliased=False)


def deny_relation(step: Any, rule: Any) -> Relation:
    """The values `step` admits against the values a deny rule with operand `rule` matches,
    `compile_excluder`'s complement."""
    step_shape, rule_shape = _Shape.of(step), _Shape.of(rule)
    if rule_shape.prefix == "/":
        path = "inside"
    else:
        path = _readings_relation(
            _path_readings(step_shape.prefix), _path_readings(rule_shape.prefix)
        )
    return _combine(step_shape, rule_shape, path, aliased=True)


def _prefix_relation(step: str, rule: str) -> Relation:
    if _under(step, rule):
        return "inside"
    if _under(rule, step):
        return "overlapping"
    return "disjoint"


def _readings_relation(step: Iterable[str], rule: frozenset[str]) -> Relation:
    """Every path under the step's prefix has readings that extend the step prefix's: one
    of those under one of the rule's makes every such path match (inside); none comparable
    with any of the rule's leaves every path outside (disjoint)."""
    relations = {_prefix_relation(reading, prefix) for reading in step for prefix in rule}
    if "inside" in relations:
        return "inside"
    if "overlapping" in relations:
        return "overlapping"
    return "disjoint"


def _combine(step: _Shape, rule: _Shape, path: Relation, *, aliased: bool) -> Relation:
    """A URL's scheme, host, port and path vary independently (the port's default with the
    scheme): the sets are products, inside when every dimension is, disjoint when one is.
    Both sides admit the default port of every scheme they share, so ports never part them;
    a deny rule (`aliased`) without ``ports`` covers every port."""
    common = step.schemes & rule.schemes
    if not common or path == "disjoint" or not _hosts_meet(step, rule, aliased=aliased):
        return "disjoint"
    inside = (
        path == "inside"
        and step.schemes <= rule.schemes
        and _hosts_inside(step, rule, aliased=aliased)
        and ((aliased and not rule.ports_listed) or _ports_inside(step, rule, common))
    )
    return "inside" if inside else "overlapping"


def _ports_inside(step: _Shape, rule: _Shape, schemes: Iterable[str]) -> bool:
    return all(step.effective_ports(scheme) <= rule.effective_ports(scheme) for scheme in schemes)


def _hosts_inside(step: _Shape, rule: _Shape, *, aliased: bool) -> bool:
    # A '*.' entry admits infinitely many names: only a '*.' entry of the rule whose suffix
    # ends its own covers it (no union of exact names does, nor of deeper wildcards).
    admits = rule.admits_host_aliased if aliased else rule.admits_host
    if not all(admits(host, _is_ip_literal(host)) for host in step.exact_hosts):
        return False
    return all(any(suffix.endswith(other) for other in rule.suffixes) for suffix in step.suffixes)


def _hosts_meet(step: _Shape, rule: _Shape, *, aliased: bool) -> bool:
    admits = rule.admits_host_aliased if aliased else rule.admits_host
    if any(admits(host, _is_ip_literal(host)) for host in step.exact_hosts):
        return True
    if any(step.admits_host(host, _is_ip_literal(host)) for host in rule.exact_hosts):
        return True
    return any(
        mine.endswith(theirs) or theirs.endswith(mine)
        for mine in step.suffixes
        for theirs in rule.suffixes
    )


def _is_ip_literal(host: str) -> bool:
    return host.startswith("[") or host.replace(".", "").isdigit()


_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE: Final = ipaddress.IPv6Network("::/96")


def _ip_aliases(host: str) -> frozenset[str]:
    """An IP host as the parser writes it, with every IPv4 address its IPv6 form embeds:
    IPv4-mapped, IPv4-compatible, NAT64 (64:ff9b::/96), 6to4 and Teredo."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return frozenset((host,))
    aliases = {host}
    if isinstance(address, ipaddress.IPv6Address):
        embedded = [address.ipv4_mapped, address.sixtofour, *(address.teredo or ())]
        if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
            embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        aliases.update(str(ipv4) for ipv4 in embedded if ipv4 is not None)
    return frozenset(aliases)


# --- samples -----------------------------------------------------------------------------


def samples(operand: Any) -> list[str]:
    """A few URLs the operand admits: its first scheme with each host (a ``*.`` entry gets a
    label), its other schemes with its first host, and a path below the prefix."""
    schemes = list(operand["scheme"])
    hosts = [
        f"{_SAMPLE_LABEL}{host[1:]}" if host.startswith("*.") else host for host in operand["host"]
    ]
    prefix = operand.get("pathPrefix", "/")
    child = prefix + ("" if prefix.endswith("/") else "/") + "item"
    values = [f"{schemes[0]}://{host}{prefix}" for host in hosts[: _MAX_SAMPLES - 4]]
    values += [f"{scheme}://{hosts[0]}{prefix}" for scheme in schemes[1:]]
    values.append(f"{schemes[0]}://{hosts[0]}{child}")
    return list(dict.fromkeys(values))
