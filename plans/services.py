"""Issuing, refreshing and revoking plans.

Every check runs before the first write, and the writes of one request share a transaction,
so a refused request leaves the database as it was. Tokens are signed and verified by
``plans.intent_tokens``; the audit records of each outcome are ``plans.records``'.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from audit.actors import current_actor
from guard.errors import DocumentInvalid, FieldError
from guard.plan import plan_hash, validate_plan
from guard.policy_evaluation import StepWarning, evaluate_plan, plan_argument_warnings
from guard.policy_review import plan_reviews
from kernel.problems import Code, DomainError
from kernel.sql import row_insert, row_read, statement
from members.models import Agent, Member, email_case_lookalike
from members.services import agent_require_active
from policies.models import PolicyVersion
from teams.models import Team

from .approvals import ApprovalRequested, approval_still_covers, plan_approval_request
from .intent_tokens import (
    Signature,
    intent_token_sign,
    refresh_token_kid,
    refresh_token_verify,
)
from .lineage import ancestors_require_live, descendants_for_update
from .models import Plan, PlanToken, ShadowDifference
from .records import (
    RefusalContext,
    denial_rule,
    given_user,
    plan_issued_record,
    plan_revoked_record,
    refresh_context,
    refusals_described,
    token_refreshed_record,
)
from .selectors import SigningContext, plan_for_signing, signing_context_read
from .shadow import shadow_difference_record, shadow_plan_outcome
from .status_list import status_idx_allocate, status_idx_assign


@dataclass(frozen=True)
class IssuedToken:
    plan: Plan
    token: str
    issued_at: datetime
    expires_at: datetime
    policy_version: PolicyVersion
    #: step arguments for which the policy may refuse some calls (plan_argument_warnings)
    warnings: tuple[StepWarning, ...] = ()


def plan_document_validate(document: object) -> dict:
    """The normalized plan, or DomainError ``invalid_plan`` with each bad path under ``plan``."""
    try:
        return validate_plan(document)
    except DocumentInvalid as exc:
        raise DomainError(
            Code.INVALID_PLAN,
            "The plan is invalid.",
            errors=[error.prefixed("plan") for error in exc.errors],
        ) from exc


def token_ttl_bounds() -> tuple[int, int]:
    """The lifetimes a caller may ask for, in seconds: the settings, read at each call. The
    API's ttl field validates and documents them (plans.serializers.TtlField)."""
    return settings.PLANGATE_TOKEN_MIN_TTL, settings.PLANGATE_TOKEN_MAX_TTL


def token_ttl_resolve(ttl: int | None) -> int:
    """The requested lifetime, defaulted and held within the configured bounds (the API's
    body has checked them already; other callers are held to them here)."""
    if ttl is None:
        return settings.PLANGATE_TOKEN_TTL
    low, high = token_ttl_bounds()
    if not low <= ttl <= high:
        raise DomainError(
            Code.INVALID_REQUEST,
            f"ttl must be between {low} and {high} seconds.",
            errors=[FieldError("ttl", f"must be between {low} and {high}")],
        )
    return ttl


def member_require_known(member: Member | None, email: str) -> Member:
    """The member of the agent's team with this e-mail (matched case-insensitively by
    plans.selectors.signing_context_read), or ``unknown_user``; also ``unknown_user`` when
    the e-mail matched only through a character that lowercases into another one (U+212A
    KELVIN SIGN for ``k``): the plan would be signed for a look-alike of the member's
    address (docs/decisions/0059)."""
    if member is None:
        raise DomainError(Code.UNKNOWN_USER, f"{email} is not a member of this agent's team.")
    lookalike = email_case_lookalike(email)
    if lookalike is not None:
        named = f"U+{ord(lookalike):04X} {unicodedata.name(lookalike, 'character')}"
        raise DomainError(
            Code.UNKNOWN_USER,
            f"The plan's user is no member's address: {named} only looks like a letter of "
            "one. Write the member's address as it is stored.",
            errors=[FieldError("plan.user", f"{named} only looks like a letter of an address")],
        )
    return member


def member_require_active(member: Member) -> Member:
    if not member.is_active:
        raise DomainError(Code.USER_DISABLED, f"{member.email} is disabled.")
    return member


def admitted_policy_version(
    agent: Agent,
    plan: dict,
    context: SigningContext,
    refusal: RefusalContext,
) -> PolicyVersion:
    """The agent's active policy version (read with the rest of ``context``), if it admits
    every step of ``plan``; the version (and the rule) that refused are noted in
    ``refusal``."""
    version, role, groups = context.version, context.role, context.groups
    if version is None:
        refusal.policy = agent.policy.slug
        raise DomainError(Code.POLICY_DENIED, "The agent's policy has no published version.")
    refusal.policy_from(version)
    refusal.active_version = version
    denials = evaluate_plan(version.document, plan, role=role, groups=groups)
    # The version tried in shadow answers too; only where it differs is it written down.
    refusal.shadow = shadow_plan_outcome(
        shadow=context.shadow, plan=plan, role=role, groups=groups, active_denials=denials
    )
    if denials:
        refusal.rule = denial_rule(version.document, denials)
        raise DomainError(
            Code.POLICY_DENIED,
            f"Policy {version.policy.slug} v{version.number} denies "
            f"{len(denials)} step(s) of the plan.",
            errors=[denial.error() for denial in denials],
        )
    return version


def argument_warnings(
    version: PolicyVersion, plan: dict, role: str | None, groups: list[str]
) -> tuple[StepWarning, ...]:
    """The admitted plan's step arguments for which the policy may still refuse calls: left
    free by the step, or pinned to values the admitting rules admit only in part, or of
    which that cannot be decided, or pinned so that a deny rule with ``args`` refuses some of
    its calls (guard.policy_evaluation.plan_argument_warnings, on guard.relation): told at
    signing time so the developer need not learn it from blocked calls. Never a refusal; a
    step no admitting rule lets any call of through, or every call of which a deny rule
    refuses, is refused by ``admitted_policy_version``."""
    # denials=(): admitted_policy_version has refused any plan with a denial.
    return tuple(
        plan_argument_warnings(version.document, plan, role=role, groups=groups, denials=())
    )


def token_record(
    *,
    plan: Plan,
    kind: str,
    signature: Signature,
    role: str | None,
    groups: list[str],
    version: PolicyVersion,
    warnings: tuple[StepWarning, ...] = (),
) -> IssuedToken:
    """Save the token's row (in the caller's transaction); the answer that hands it out."""
    row_insert(
        PlanToken(
            plan=plan,
            kind=kind,
            kid=signature.kid,
            issued_at=signature.issued_at,
            expires_at=signature.expires_at,
            policy_version=version,
            role=role,
            groups=groups,
        )
    )
    return IssuedToken(
        plan=plan,
        token=signature.token,
        issued_at=signature.issued_at,
        expires_at=signature.expires_at,
        policy_version=version,
        warnings=warnings,
    )


def plan_issue(
    *, agent: Agent, document: object, ttl: int | None = None, jkt: str = ""
) -> IssuedToken | ApprovalRequested:
    """Check the plan against the team and the agent's active policy, then sign it; or,
    when a review rule of the policy concerns a step, save it as waiting for a person's
    approval (plans.approvals) and sign nothing: the answer is then ApprovalRequested.

    A refusal is a PlanRefused saying what was refused (plans.records); a success appends
    ``plan_issued`` with the plan and its token. The answer's ``warnings`` name the step
    arguments for which the policy may refuse some calls. A `jkt` (the thumbprint of the
    key of the declaration's DPoP proof, plans.dpop) binds the plan's tokens to that key.
    """
    with refusals_described(RefusalContext(user=given_user(document))) as refusal:
        return _plan_issue(agent, document, ttl, refusal, jkt)


def _plan_issue(
    agent: Agent, document: object, ttl: int | None, refusal: RefusalContext, jkt: str = ""
) -> IssuedToken | ApprovalRequested:
    ttl = token_ttl_resolve(ttl)
    plan_document = plan_document_validate(document)
    refusal.plan_hash = plan_hash(plan_document)
    agent_require_active(agent=agent)
    # One read for the member, their role and groups, the policy version and the key.
    context = signing_context_read(agent=agent, member_email=plan_document["user"])
    member = member_require_active(member_require_known(context.member, plan_document["user"]))
    role, groups = context.role, context.groups
    version = admitted_policy_version(agent, plan_document, context, refusal)
    warnings = argument_warnings(version, plan_document, role, groups)
    now = timezone.now()
    plan = Plan(
        # The team itself, not only its id: the answer reads its log_call_arguments.
        team=agent.team,
        agent=agent,
        member=member,
        goal=plan_document["goal"],
        document=plan_document,
        hash=refusal.plan_hash,
        policy_version=version,
        role=role,
        groups=groups,
        created_at=now,
        expires_at=now + timedelta(seconds=settings.PLANGATE_PLAN_MAX_AGE),
        jkt=jkt,
    )
    # denials=(): admitted_policy_version has refused any plan with a denial.
    reviews = plan_reviews(version.document, plan_document, role=role, groups=groups, denials=())
    if reviews:
        return plan_approval_request(plan=plan, reviews=reviews, now=now)
    # Its place in the team's status list, taken once every check has passed.
    plan.status_idx = status_idx_allocate(team=agent.team)
    signature = intent_token_sign(
        plan=plan,
        member=member,
        role=role,
        groups=groups,
        version=version,
        ttl=ttl,
        now=now,
        active_key=context.active_key,
        shadow=context.shadow,
    )
    with transaction.atomic():
        row_insert(plan)
        if refusal.shadow is not None:
            shadow_difference_record(
                refusal.shadow,
                team_id=plan.team_id,
                request=ShadowDifference.Request.DECLARATION,
                active=version,
                plan_id=plan.id,
                agent_id=agent.pk,
                at=now,
            )
        plan_issued_record(
            plan=plan,
            kid=signature.kid,
            issued_at=signature.issued_at,
            expires_at=signature.expires_at,
            ttl=ttl,
        )
        return token_record(
            plan=plan,
            kind=PlanToken.Kind.ISSUE,
            signature=signature,
            role=role,
            groups=groups,
            version=version,
            warnings=warnings,
        )


def plan_refresh(*, agent: Agent, plan_id: str, token: str, ttl: int | None = None) -> IssuedToken:
    """Re-sign the same plan with the agent's current policy, role and groups.

    The plan and its hash never change: a refresh can narrow what the token allows (a
    policy now denies a step: refused) but never widen it. A refusal is a PlanRefused
    saying what was refused (plans.records); a success appends ``token_refreshed``.
    """
    with refusals_described(refresh_context(plan_id)) as refusal:
        return _plan_refresh(agent, plan_id, token, ttl, refusal)


def _plan_refresh(
    agent: Agent, plan_id: str, token: str, ttl: int | None, refusal: RefusalContext
) -> IssuedToken:
    ttl = token_ttl_resolve(ttl)
    plan = _plan_require_found(
        plan_for_signing(agent=agent, plan_id=plan_id) if _PLAN_ID.fullmatch(plan_id) else None,
        plan_id,
    )
    refusal.plan_from(plan)
    # One read for the key the token names and for what signing again needs (the plan's
    # member by id): the checks below still refuse in their order.
    context = signing_context_read(
        agent=agent, member_id=plan.member_id, verifying_kid=refresh_token_kid(token)
    )
    claims = refresh_token_verify(
        token,
        unrevoked_key=lambda kid: context.verifying_key if kid == context.verifying_kid else None,
    )
    if claims.jti != plan.id:
        raise DomainError(Code.PLAN_MISMATCH, "The token belongs to another plan.")
    if claims.agent != agent.id:
        raise DomainError(Code.PLAN_MISMATCH, "The token was issued to another agent.")
    if claims.ph != plan.hash:
        raise DomainError(Code.PLAN_MISMATCH, "The token carries another plan hash.")
    agent_require_active(agent=agent)
    now = timezone.now()
    if plan.status == Plan.Status.REVOKED:
        raise DomainError(Code.PLAN_REVOKED, "The plan was revoked; declare a new plan.")
    if plan.status == Plan.Status.EXPIRED or plan.is_expired(now):
        raise DomainError(Code.PLAN_EXPIRED, "The plan is past its lifetime; declare a new plan.")
    if plan.parent_id is not None:
        # A child plan is never signed past its parent: its own expires_at was capped at the
        # parent's when it was delegated, and a revoked or ended ancestor revoked or ended
        # it too; read again here all the same (intent_token_sign caps exp at expires_at).
        plan.expires_at = ancestors_require_live(plan, now)
    return plan_token_sign_current(
        plan=plan,
        agent=agent,
        ttl=ttl,
        now=now,
        refusal=refusal,
        kind=PlanToken.Kind.REFRESH,
        context=context,
    )


def plan_token_sign_current(
    *,
    plan: Plan,
    agent: Agent,
    ttl: int,
    now: datetime,
    refusal: RefusalContext,
    kind: PlanToken.Kind,
    context: SigningContext | None = None,
) -> IssuedToken:
    """Sign ``plan`` for its member as they are now, under the agent's current policy: a
    refresh (``kind`` REFRESH) and an approved plan's token (ISSUE) alike. The plan was
    checked by the caller (its agent, status and lifetime); the member must still be
    active and the policy must still admit every step; an approval stands while the policy
    asks review of the same steps or fewer. Appends ``token_refreshed``, or ``plan_issued``
    for a plan's first token."""
    # The plan's member by id, read with the plan: the person the plan was declared for,
    # even if their e-mail was edited since. Their role and groups, the policy version and
    # the key that signs are read now, in one statement.
    member = member_require_active(plan.member)
    if context is None:  # the caller has not read it in this request
        context = signing_context_read(agent=agent, member_id=member.pk)
    role, groups = context.role, context.groups
    version = admitted_policy_version(agent, plan.document, context, refusal)
    approval = approval_still_covers(
        plan=plan,
        reviews=plan_reviews(version.document, plan.document, role=role, groups=groups, denials=()),
    )
    # The policy may have changed since issuance: the same warnings, against the new one.
    warnings = argument_warnings(version, plan.document, role, groups)
    status_idx_assign(plan)  # an approved plan's first token; a plan older than lists
    signature = intent_token_sign(
        plan=plan,
        member=member,
        role=role,
        groups=groups,
        version=version,
        ttl=ttl,
        now=now,
        approval=approval,
        active_key=context.active_key,
        shadow=context.shadow,
    )
    with transaction.atomic():
        # Re-read the status under lock: a revocation that lands meanwhile must win, and
        # the token signed above is then never handed out.
        locked = row_read(statement("plans.plan_status_locked", _plan_status_locked), [plan.pk])
        if locked is None:
            raise Plan.DoesNotExist("the plan was deleted while it was signed")
        if locked[0] == Plan.Status.REVOKED:
            raise DomainError(Code.PLAN_REVOKED, "The plan was revoked; declare a new plan.")
        if refusal.shadow is not None:
            shadow_difference_record(
                refusal.shadow,
                team_id=plan.team_id,
                request=(
                    ShadowDifference.Request.REFRESH
                    if kind == PlanToken.Kind.REFRESH
                    else ShadowDifference.Request.DECLARATION
                ),
                active=version,
                plan_id=plan.id,
                agent_id=agent.pk,
                at=now,
            )
        if kind == PlanToken.Kind.ISSUE and not plan.tokens.exists():
            plan_issued_record(
                plan=plan,
                kid=signature.kid,
                issued_at=signature.issued_at,
                expires_at=signature.expires_at,
                ttl=ttl,
            )
        else:
            token_refreshed_record(
                plan=plan,
                agent=agent,
                user=member.email,
                version=version,
                kid=signature.kid,
                issued_at=signature.issued_at,
                expires_at=signature.expires_at,
            )
        return token_record(
            plan=plan,
            kind=kind,
            signature=signature,
            role=role,
            groups=groups,
            version=version,
            warnings=warnings,
        )


def _plan_status_locked() -> str:
    """The plan's status under a row lock (none on SQLite, whose writer holds the whole
    database), by hand: what ``Plan.objects.select_for_update().filter(pk=...)
    .values_list("status")`` reads, for less than half its CPU (decision 0061; tests/plans/
    test_plan_queries.py holds the two to one answer). Parameter: the plan's id."""
    quote = connection.ops.quote_name
    lock = " FOR UPDATE" if connection.vendor == "postgresql" else ""
    # Only the model's own table and column names are formatted in.
    return f"SELECT {quote('status')} FROM {quote(Plan._meta.db_table)} WHERE id = %s{lock}"  # noqa: S608


# A plan id is a ULID (Crockford base32). Anything else names no plan, and must not reach
# the database: PostgreSQL refuses text holding NUL, and would answer with a 500.
_PLAN_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def plan_get_for_agent(*, agent: Agent, plan_id: str) -> Plan:
    """The agent's own plan; any other plan, of this team or another, is not found."""
    if not _PLAN_ID.fullmatch(plan_id):
        return _plan_require_found(None, plan_id)
    plan = (
        Plan.objects.select_related(
            "team", "member", "member__role", "policy_version", "policy_version__policy"
        )
        .filter(pk=plan_id, agent=agent)
        .first()
    )
    return _plan_require_found(plan, plan_id)


def plan_get_for_team(*, team: Team | int, plan_id: str) -> Plan:
    """A plan of ``team``, for its admins (the admin API); another team's is not found."""
    if not _PLAN_ID.fullmatch(plan_id):
        return _plan_require_found(None, plan_id, whose="this team")
    plan = (
        Plan.objects.select_related(
            "team", "member", "member__role", "policy_version", "policy_version__policy"
        )
        .filter(pk=plan_id, team=team)
        .first()
    )
    return _plan_require_found(plan, plan_id, whose="this team")


def _plan_require_found(plan: Plan | None, plan_id: str, *, whose: str = "this agent") -> Plan:
    """``plan``, or ``plan_not_found``: the one answer for a plan that is not the agent's
    (or the team's), of this team or another, or for text that is no plan id."""
    if plan is None:
        shown = plan_id if _PLAN_ID.fullmatch(plan_id) else repr(plan_id)
        raise DomainError(Code.PLAN_NOT_FOUND, f"No plan {shown} for {whose}.")
    return plan


def plan_revoke(
    *, plan: Plan, by: str | None = None, reason: str = "", now: datetime | None = None
) -> bool:
    """Revoke the plan; its next refresh answers ``plan_revoked``. True when it changed.
    Every plan delegated from it, directly or not, is revoked in the same transaction,
    each with its own record, the reason naming this plan (plans.lineage).

    ``by`` is who revoked (an admin's username, ``manage.py revoke_plan``): the door's
    actor (audit.actors.acting_as) when not given. Who, when and the optional ``reason``
    are kept on the plan, and a ``plan_revoked`` record is appended with the change.
    """
    by = current_actor() if by is None else by
    reason = reason.strip()
    now = now or timezone.now()
    with transaction.atomic():
        changed = (
            Plan.objects.filter(pk=plan.pk)
            .exclude(status=Plan.Status.REVOKED)
            .update(status=Plan.Status.REVOKED, revoked_at=now, revoked_by=by, revoke_reason=reason)
        )
        if changed:
            plan_revoked_record(plan=plan, by=by, reason=reason, at=now)
        _descendants_revoke(plan, by=by, reason=reason, now=now)
    plan.refresh_from_db(fields=["status", "revoked_at", "revoked_by", "revoke_reason"])
    return bool(changed)


def _descendants_revoke(plan: Plan, *, by: str, reason: str, now: datetime) -> None:
    """Revoke every descendant of ``plan`` not revoked yet (the caller's transaction)."""
    because = f"parent plan {plan.pk} was revoked" + (f": {reason}" if reason else "")
    for descendant in descendants_for_update(plan):
        if descendant.status == Plan.Status.REVOKED:
            continue
        Plan.objects.filter(pk=descendant.pk).update(
            status=Plan.Status.REVOKED, revoked_at=now, revoked_by=by, revoke_reason=because
        )
        plan_revoked_record(plan=descendant, by=by, reason=because, at=now)


def plans_expire(*, now: datetime | None = None) -> int:
    """Mark every active plan past its absolute lifetime as expired; returns how many."""
    return Plan.objects.filter(
        status=Plan.Status.ACTIVE, expires_at__lte=now or timezone.now()
    ).update(status=Plan.Status.EXPIRED)
