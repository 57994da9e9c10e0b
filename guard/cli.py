"""``plangate``: the guard's command line. Validate a plan or a policy, see the decision the
guard would make on a call, run a policy's test cases, verify or read an intent token:
offline, with the code the control plane and the guard run (guard.plan, guard.policy,
guard.offline, guard.tokens), never a second copy of it. ``plangate policy diff|preview|push``
works on a folder of policies against a control plane's admin API (guard.policy_repo).

Exit status: 0 valid / allowed / every case passed / token verified; 1 invalid / not
allowed / a case failed / token refused; 2 the question could not be asked (bad usage, an
unreadable or non-JSON file, an invalid policy or cases file, no key set).

``python -m guard.cli`` runs it too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, NoReturn, TextIO

from guard.decisions import Decision
from guard.errors import DocumentInvalid, FieldError, TokenInvalid, WrongIssuer
from guard.plan import plan_hash, validate_plan
from guard.policy import policy_hash, validate_policy
from guard.tokens import GUARD_CLOCK_SKEW_SECONDS

__all__ = ["main"]

OK: Final = 0
REFUSED: Final = 1
USAGE: Final = 2

PLAN: Final = "plan"
POLICY: Final = "policy"
INVALID_PLAN: Final = "invalid_plan"
INVALID_POLICY: Final = "invalid_policy"
TOKEN_INVALID: Final = Decision.TOKEN_INVALID.value
TOKEN_EXPIRED: Final = Decision.TOKEN_EXPIRED.value
#: the path of the key set under a control plane's URL (GET /v1/keys/jwks)
JWKS_PATH: Final = "/v1/keys/jwks"
JWKS_TIMEOUT_SECONDS: Final = 10.0
UNVERIFIED_WARNING: Final = (
    "UNVERIFIED: neither the signature, the issuer nor the expiry of this token was checked;"
    " do not trust these claims (plangate token verify checks them)"
)

# Members only one of the two documents has: they tell a plan from a policy.
_PLAN_ONLY: Final = frozenset({"goal", "user", "steps"})
_POLICY_ONLY: Final = frozenset({"default", "rules"})


class UsageError(Exception):
    """The command cannot run as asked: exit 2 with this message."""


# --- reading input ------------------------------------------------------------------------


def _reject_constant(name: str) -> NoReturn:
    # As the API's parser: NaN and Infinity are not JSON.
    raise ValueError(f"{name} is not valid JSON")


def parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise UsageError(f"{what} is nested too deeply") from None
    except ValueError as error:
        raise UsageError(f"{what} is not JSON: {error}") from None


def read_text(name: str) -> str:
    """The text of file ``name``, or of standard input for ``-``."""
    try:
        if name == "-":
            return sys.stdin.read()
        return Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {name}: {error}") from None


def read_json(name: str) -> Any:
    return parse_json(read_text(name), "standard input" if name == "-" else name)


def document_kind(document: object, name: str) -> str:
    """``plan`` or ``policy``, from the members only one of them has."""
    if isinstance(document, Mapping):
        plan_like = bool(_PLAN_ONLY & document.keys())
        policy_like = bool(_POLICY_ONLY & document.keys())
        if plan_like != policy_like:
            return PLAN if plan_like else POLICY
    raise UsageError(
        f"cannot tell whether {name} is a plan or a policy: pass --kind plan or --kind policy"
    )


def server_errors(kind: str, error: DocumentInvalid) -> list[FieldError]:
    """The errors as the control plane answers them: a plan's under ``plan`` (the body of
    POST /v1/plans holds it there, plans.services.plan_document_validate), a policy's at
    the document's own paths (policies.services.policy_document_validate)."""
    if kind == PLAN:
        return [item.prefixed("plan") for item in error.errors]
    return list(error.errors)


def _errors_json(errors: Sequence[FieldError]) -> list[dict[str, str]]:
    return [{"path": error.path, "detail": error.detail} for error in errors]


def _print_errors(errors: Sequence[FieldError], out: TextIO, indent: str = "") -> None:
    for error in errors:
        print(f"{indent}{error.path or '(document)'}: {error.detail}", file=out)


def _dump(value: object, out: TextIO) -> None:
    json.dump(value, out, indent=2, ensure_ascii=False)
    out.write("\n")


def load_policy(name: str) -> dict[str, Any]:
    """The validated policy in file ``name``; UsageError with every path when invalid (no
    question can be asked of an invalid policy)."""
    try:
        return validate_policy(read_json(name))
    except DocumentInvalid as error:
        lines = "\n".join(f"  {item}" for item in error.errors)
        raise UsageError(f"{name}: {INVALID_POLICY}: the policy is invalid\n{lines}") from None


# --- plangate validate --------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    document = read_json(args.file)
    name = "standard input" if args.file == "-" else args.file
    kind = args.kind or document_kind(document, name)
    validate: Callable[[object], dict[str, Any]] = (
        validate_plan if kind == PLAN else validate_policy
    )
    try:
        normalized = validate(document)
    except DocumentInvalid as error:
        code = INVALID_PLAN if kind == PLAN else INVALID_POLICY
        errors = server_errors(kind, error)
        if args.json:
            _dump(
                {"valid": False, "kind": kind, "code": code, "errors": _errors_json(errors)},
                sys.stdout,
            )
        else:
            _print_errors(errors, sys.stdout)
            count = len(errors)
            print(f"{code}: {name}: {count} error{'s' if count != 1 else ''}", file=sys.stderr)
        return REFUSED
    digest = plan_hash(normalized) if kind == PLAN else policy_hash(normalized)
    if args.json:
        _dump({"valid": True, "kind": kind, "hash": digest}, sys.stdout)
    else:
        print(f"valid {kind}: {name} (hash {digest})")
    return OK


# --- plangate check -----------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    from guard.offline import call_decide, member_groups, plan_answer, simulated_token

    policy = load_policy(args.policy)
    document = read_json(args.plan)
    call_args = parse_json(args.args, "ARGS_JSON")
    if args.user is not None and isinstance(document, Mapping):
        document = {**document, "user": args.user}
    groups = member_groups(args.group)
    user = document.get("user") if isinstance(document, Mapping) else None
    member = {"user": user, "role": args.role, "groups": list(groups)}
    try:
        plan = validate_plan(document)
    except DocumentInvalid as error:
        errors = server_errors(PLAN, error)
        return _plan_refused(args, member, INVALID_PLAN, "The plan is invalid.", errors)
    answer = plan_answer(policy=policy, plan=plan, role=args.role, groups=groups)
    if not answer.allowed:
        detail = f"The policy denies {len(answer.denials)} step(s) of the plan."
        return _plan_refused(args, member, answer.decision, detail, answer.refusal_errors())
    token = simulated_token(plan=plan, policy=policy, role=args.role, groups=groups)
    (decision,) = call_decide(token, [(args.tool, call_args)])
    rule_text = decision.rule_description
    warnings = [
        {"path": f"plan.{warning.path}", "code": warning.code, "detail": warning.detail}
        for warning in answer.warnings
    ]
    review = [
        {"path": f"plan.{item.path}", "tool": item.tool, "rule": item.rule}
        for item in answer.reviews
    ]
    if args.json:
        _dump(
            {
                "plan": {
                    "decision": answer.decision,
                    **member,
                    "user": plan["user"],
                    "warnings": warnings,
                    "review": review,
                },
                "call": {
                    "tool": args.tool,
                    "decision": decision.code.value,
                    "step": decision.step,
                    "stepIndex": decision.step,
                    "stepNumber": decision.step_number,
                    "rule": decision.rule,
                    "ruleDescription": rule_text,
                    "reason": decision.reason,
                },
            },
            sys.stdout,
        )
    else:
        print(f"decision: {decision.code.value}")
        # For people: the step counted from 1, as the reason below counts it.
        print(f"step: {'-' if decision.step_number is None else decision.step_number}")
        # The description ends with the rule's index, "(rules[0])".
        print(f"rule: {rule_text or '-'}")
        print(f"reason: {decision.reason}")
        for warning in answer.warnings:
            print(f"warning: plan.{warning.path}: {warning.detail}")
        if answer.reviews:
            steps = ", ".join(f"plan.{item.path}" for item in answer.reviews)
            print(f"note: a person approves {steps} before the token is signed")
    return OK if decision.allowed else REFUSED


def _plan_refused(
    args: argparse.Namespace,
    member: dict[str, Any],
    code: str,
    detail: str,
    errors: Sequence[FieldError],
) -> int:
    """Issuance refuses the plan: no token, so the guard decides no call."""
    if args.json:
        _dump(
            {
                "plan": {
                    "decision": code,
                    **member,
                    "detail": detail,
                    "errors": _errors_json(errors),
                },
                "call": None,
            },
            sys.stdout,
        )
    else:
        print(f"plan refused: {code}: {detail}")
        _print_errors(errors, sys.stdout, indent="  ")
    return REFUSED


# --- plangate test ------------------------------------------------------------------------


def cmd_test(args: argparse.Namespace) -> int:
    from guard.policy_cases import cases_json_schema, run_case, validate_cases

    if args.schema:
        _dump(cases_json_schema(), sys.stdout)
        return OK
    if args.policy is None or args.cases is None:
        raise UsageError("plangate test needs POLICY and CASES (or --schema)")
    policy = load_policy(args.policy)
    try:
        cases = validate_cases(read_json(args.cases))
    except DocumentInvalid as error:
        lines = "\n".join(f"  {item}" for item in error.errors)
        raise UsageError(f"{args.cases}: the cases file is invalid\n{lines}") from None
    results = [run_case(policy, case) for case in cases.cases]
    failed = sum(not result.passed for result in results)
    if args.json:
        _dump(
            {
                "passed": len(results) - failed,
                "failed": failed,
                "cases": [result.as_json() for result in results],
            },
            sys.stdout,
        )
    else:
        for index, result in enumerate(results):
            if result.passed:
                print(f"PASS cases[{index}] {result.case.name}")
                continue
            print(f"FAIL cases[{index}] {result.case.name}: {'; '.join(result.differences())}")
            print(f"     {result.detail}")
            _print_errors(result.errors, sys.stdout, indent="     ")
        print(f"{len(results) - failed} passed, {failed} failed")
    return OK if failed == 0 else REFUSED


# --- plangate token -----------------------------------------------------------------------


def read_token(name: str) -> str:
    return (sys.stdin.read() if name == "-" else name).strip()


def default_issuer(jwks: str) -> str | None:
    """The issuer to require when none is given: $PLANGATE_ISSUER, else the control
    plane's URL the key set is served under (the issuer defaults to that URL)."""
    configured = os.environ.get("PLANGATE_ISSUER")
    if configured:
        return configured
    if jwks.startswith(("http://", "https://")) and jwks.rstrip("/").endswith(JWKS_PATH):
        return jwks.rstrip("/").removesuffix(JWKS_PATH)
    return None


def fetch_jwks(source: str) -> Any:
    """The key set at URL ``source`` (GET, no redirects), or in file ``source``."""
    if not source.startswith(("http://", "https://")):
        return read_json(source)
    import httpx  # only here: the other commands need no HTTP client

    try:
        response = httpx.get(source, timeout=JWKS_TIMEOUT_SECONDS, follow_redirects=False)
    except httpx.HTTPError as error:
        raise UsageError(f"cannot fetch the key set at {source}: {error}") from None
    if response.status_code != 200:
        raise UsageError(f"cannot fetch the key set at {source}: HTTP {response.status_code}")
    return parse_json(response.text, f"the key set at {source}")


def cmd_token_verify(args: argparse.Namespace) -> int:
    from guard.jwk import KeySet
    from guard.tokens import verify_token

    token = read_token(args.token)
    issuer = args.issuer or default_issuer(args.jwks)
    if issuer is None:
        raise UsageError("pass --issuer (or set PLANGATE_ISSUER): the issuer the token must name")
    keys = KeySet(fetch_jwks(args.jwks))
    if not len(keys):
        raise UsageError(f"the key set at {args.jwks} holds no Ed25519 signature key")
    try:
        claims = verify_token(token, keys, issuer=issuer, leeway=args.leeway)
    except TokenInvalid as error:
        code = TOKEN_INVALID
        try:
            # Everything but the expiry holds: the token is good, but too old.
            verify_token(token, keys, issuer=issuer, leeway=args.leeway, require_unexpired=False)
            code = TOKEN_EXPIRED
        except TokenInvalid:
            pass
        if args.json:
            _dump({"verified": False, "code": code, "detail": error.reason}, sys.stdout)
        hint = ""
        if isinstance(error, WrongIssuer) and error.presented is not None:
            hint = f" (if that is your control plane: --issuer {error.presented})"
        print(f"{code}: {error.reason}{hint}", file=sys.stderr)
        return REFUSED
    _dump({"verified": True, "claims": claims} if args.json else claims, sys.stdout)
    return OK


def cmd_token_decode(args: argparse.Namespace) -> int:
    from guard.tokens import unverified_claims, unverified_header

    token = read_token(args.token)
    print(UNVERIFIED_WARNING, file=sys.stderr)
    try:
        header = unverified_header(token)
        claims = unverified_claims(token)
    except TokenInvalid as error:
        print(f"{TOKEN_INVALID}: {error.reason}", file=sys.stderr)
        return REFUSED
    _dump({"verified": False, "header": header, "claims": claims}, sys.stdout)
    return OK


# --- the parser ---------------------------------------------------------------------------


def _seconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more seconds")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plangate",
        description="Plangate's guard: validate plans and policies, check a call, test a "
        "policy, verify an intent token (all offline); diff, preview and push a folder of "
        "policies against a control plane.",
        epilog="Exit status: 0 valid/allowed/passed, 1 invalid/blocked/failed, 2 usage or "
        "unreadable input.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    validate = commands.add_parser(
        "validate",
        help="validate a plan or a policy (JSON); every error with its path",
        description="Validate a plan or a policy as the control plane does: every error, "
        "at the path the API gives it (a plan's under plan.).",
    )
    validate.add_argument("file", metavar="FILE", help="a JSON file, or - for standard input")
    validate.add_argument(
        "--kind", choices=(PLAN, POLICY), help="what FILE holds (default: told from its members)"
    )
    validate.add_argument("--json", action="store_true", help="machine-readable output")
    validate.set_defaults(run=cmd_validate)

    check = commands.add_parser(
        "check",
        help="the guard's decision on one call under a plan and a policy",
        description="The decision the guard would make on TOOL with ARGS_JSON as the first "
        "call under a fresh token for PLAN, signed under POLICY for a member with this "
        "role and groups: its code, step and rule. Exit 0 only when allowed.",
    )
    check.add_argument("--plan", required=True, metavar="PLAN", help="the plan (JSON file)")
    check.add_argument("--policy", required=True, metavar="POLICY", help="the policy (JSON file)")
    check.add_argument("--role", help="the member's role (default: none)")
    check.add_argument(
        "--group",
        action="append",
        default=[],
        metavar="G",
        help="one of the member's groups (repeatable)",
    )
    check.add_argument("--user", metavar="EMAIL", help="the member (replaces the plan's user)")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.add_argument("tool", metavar="TOOL")
    check.add_argument(
        "args", metavar="ARGS_JSON", nargs="?", default="{}", help="the call's arguments"
    )
    check.set_defaults(run=cmd_check)

    test = commands.add_parser(
        "test",
        help="run a file of policy test cases",
        description="Run every case of CASES (plans issuance must issue or refuse, calls "
        "the guard must decide) under POLICY; one PASS/FAIL line per case. Exit 0 only "
        "when every case passes.",
    )
    test.add_argument("policy", metavar="POLICY", nargs="?", help="the policy (JSON file)")
    test.add_argument("cases", metavar="CASES", nargs="?", help="the cases (JSON file)")
    test.add_argument("--json", action="store_true", help="machine-readable output")
    test.add_argument(
        "--schema", action="store_true", help="print the JSON Schema of a cases file and exit"
    )
    test.set_defaults(run=cmd_test)

    token = commands.add_parser("token", help="verify or read an intent token")
    token_commands = token.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    verify = token_commands.add_parser(
        "verify",
        help="verify a token and print its claims",
        description="Verify TOKEN as the guard does (EdDSA, the key set's keys, the issuer, "
        "the expiry) and print its claims. Exit 1 with token_invalid or token_expired.",
    )
    verify.add_argument("token", metavar="TOKEN", help="the token, or - for standard input")
    verify.add_argument(
        "--jwks", required=True, metavar="URL", help="the control plane's key set (or a file)"
    )
    verify.add_argument(
        "--issuer",
        metavar="ISS",
        help=f"the issuer to require (default: $PLANGATE_ISSUER, else the URL before {JWKS_PATH})",
    )
    verify.add_argument(
        "--leeway",
        type=_seconds,
        default=GUARD_CLOCK_SKEW_SECONDS,
        help="clock skew allowed, in seconds (default %(default)s, as the guard)",
    )
    verify.add_argument("--json", action="store_true", help="wrap the answer in an object")
    verify.set_defaults(run=cmd_token_verify)
    decode = token_commands.add_parser(
        "decode",
        help="print a token's header and claims, UNVERIFIED",
        description="Print TOKEN's header and claims without verifying anything.",
    )
    decode.add_argument("token", metavar="TOKEN", help="the token, or - for standard input")
    decode.set_defaults(run=cmd_token_decode)
    _policy_parsers(commands)
    return parser


# --- plangate policy (against a control plane's admin API) ---------------------------------


def cmd_policy(args: argparse.Namespace) -> int:
    from guard.policy_repo import Refused, RepoError, run

    try:
        return run(
            args.policy_command,
            folder=args.folder,
            url=args.url,
            token=args.token,
            fail_on_impact=getattr(args, "fail_on_impact", False),
            comment=getattr(args, "comment", None),
            as_json=args.json,
        )
    except RepoError as error:
        raise UsageError(str(error)) from None
    except Refused as error:
        print(f"plangate: {error}", file=sys.stderr)
        return REFUSED


def _policy_parsers(commands: Any) -> None:
    policy = commands.add_parser(
        "policy",
        help="diff, preview or push a folder of policy files against a control plane",
        description="Work on a folder of policy files (<slug>.json) against a control "
        "plane's admin API: the URL in --url or $PLANGATE_URL, an admin token in --token or "
        "$PLANGATE_ADMIN_TOKEN (read-only for diff and preview, read-write for push).",
    )
    actions = policy.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    helps = {
        "diff": "show how each policy file differs from its active version",
        "preview": "print the impact preview of each changed policy (exit 1 with "
        "--fail-on-impact when a live plan would be refused)",
        "push": "publish each changed policy, refusing a version published meanwhile "
        "(with --fail-on-impact, nothing when a live plan would be refused)",
    }
    for name, text in helps.items():
        action = actions.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        action.add_argument("folder", metavar="FOLDER", help="the folder of policy files")
        action.add_argument("--url", help="the control plane's URL (default: $PLANGATE_URL)")
        action.add_argument("--token", help="an admin token (default: $PLANGATE_ADMIN_TOKEN)")
        action.add_argument("--json", action="store_true", help="machine-readable output")
        if name != "diff":
            action.add_argument(
                "--fail-on-impact",
                action="store_true",
                help="exit 1 when a live plan would be refused at its next refresh",
            )
        if name == "push":
            action.add_argument("--comment", help="the versions' comment (default: the commit)")
        action.set_defaults(run=cmd_policy)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except UsageError as error:
        print(f"plangate: {error}", file=sys.stderr)
        return USAGE
    except BrokenPipeError:
        # The reader left (`plangate test --schema | head`): no traceback, and no second
        # error when Python flushes standard output on exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return REFUSED


if __name__ == "__main__":
    sys.exit(main())
