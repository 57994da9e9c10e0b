"""Publishing policies. A version, once written, is never changed."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from audit.changes import change_append
from guard.errors import DocumentInvalid, FieldError
from guard.policy import policy_hash, validate_policy
from kernel.problems import Code, DomainError
from teams.models import Team

from .models import Policy, PolicyVersion
from .selectors import (
    policy_active_version,
    policy_next_version_number,
    policy_shadow_version,
)


def policy_document_validate(document: object) -> dict:
    """The normalized document, or DomainError ``invalid_policy`` naming each bad path."""
    try:
        return validate_policy(document)
    except DocumentInvalid as exc:
        raise DomainError(
            Code.INVALID_POLICY, "The policy document is invalid.", errors=exc.errors
        ) from exc


class _AnyBase:
    """No "published meanwhile" check: the caller publishes over whatever is current."""


ANY_BASE = _AnyBase()


def policy_version_publish(
    *,
    policy: Policy,
    document: object,
    comment: str = "",
    created_by: str = "",
    expected_base: int | _AnyBase | None = ANY_BASE,
) -> PolicyVersion:
    """Validate ``document`` and publish it as the policy's next version; return it.

    Saving the same document as the current version publishes nothing and returns the
    current version: a version number should mean a change. ``expected_base`` is the version
    number the editor started from (None: nothing was published then); a version published
    since is not silently overwritten (DomainError ``published_meanwhile``, 409, at
    ``expected_base``).
    A publication is recorded in the team's activity log.
    """
    with transaction.atomic():
        version, published = _publish(
            policy=policy,
            document=document,
            comment=comment,
            created_by=created_by,
            expected_base=expected_base,
        )
        if published:
            _policy_change_record(policy, version, "published", _version_change(version))
    return version


def _version_change(version: PolicyVersion) -> dict[str, list[Any]]:
    """A published version as a change: from the version before it (None for the first)."""
    return {"version": [version.number - 1 or None, version.number]}


def _publish(
    *,
    policy: Policy,
    document: object,
    comment: str,
    created_by: str,
    expected_base: int | _AnyBase | None,
) -> tuple[PolicyVersion, bool]:
    """``policy_version_publish`` without its record: the active version afterwards, and
    whether this call published it."""
    normalized = policy_document_validate(document)
    digest = policy_hash(normalized)
    # Lock the policy row so two concurrent edits get n+1 and n+2, not a collision.
    Policy.objects.select_for_update().filter(pk=policy.pk).get()
    current = policy_active_version(policy=policy)
    if (
        not isinstance(expected_base, _AnyBase)
        and current is not None
        and expected_base != current.number
    ):
        by = f" by {current.created_by}" if current.created_by else ""
        raise DomainError(
            Code.PUBLISHED_MEANWHILE,
            "Another version was published meanwhile.",
            errors=[
                FieldError(
                    "expected_base",
                    f"Version {current.number} was published{by} while you were editing. "
                    "Compare it with your text (see the version history), then save again "
                    "to publish yours after it.",
                )
            ],
        )
    if current is not None and current.hash == digest:
        return current, False
    return _version_create(policy, normalized, digest, comment, created_by), True


def _version_create(
    policy: Policy,
    document: dict,
    digest: str,
    comment: str,
    created_by: str,
    *,
    shadow: bool = False,
) -> PolicyVersion:
    """The policy's next version, active or in shadow (hold the policy's row lock)."""
    return PolicyVersion.objects.create(
        policy=policy,
        number=policy_next_version_number(policy=policy),
        document=document,
        hash=digest,
        comment=comment,
        created_by=created_by,
        shadow=shadow,
    )


def _policy_change_record(
    policy: Policy,
    version: PolicyVersion,
    action: str,
    changes: dict[str, list[Any]],
    extra: dict[str, Any] | None = None,
) -> None:
    """One record of a policy's change; a publication (in shadow too) names the version's
    author, comment and hash, which the version keeps too."""
    extra = dict(extra or {})
    if "version" in changes or changes.get("shadow_version", [None, None])[1] == version.number:
        extra |= {"author": version.created_by, "comment": version.comment, "hash": version.hash}
    change_append(
        team=policy.team_id,
        object_type="policy",
        object_id=policy.pk,
        name=policy.slug,
        action=action,
        changes=changes,
        extra=extra,
        policy=policy.slug,
        policy_version=version.number,
    )


def policy_set(
    *,
    team: Team,
    slug: str,
    document: object,
    comment: str = "",
    created_by: str = "",
    description: str | None = None,
    expected_base: int | _AnyBase | None = ANY_BASE,
    shadow: bool = False,
) -> PolicyVersion:
    """Create the policy with ``document`` as version 1, or publish its next version. A
    refusal writes nothing, the new policy row included. One record in the team's activity
    log says what changed (the policy created, its description, the version published).

    With ``shadow`` the document is published in shadow instead (``policy_shadow_publish``,
    ``expected_base`` unused): the active version stays; a new policy is refused (there is
    nothing to try it beside)."""
    with transaction.atomic():
        policy, created = Policy.objects.get_or_create(team=team, slug=slug)
        changes: dict[str, list[Any]] = {}
        if description is not None and policy.description != description:
            changes["description"] = [None if created else policy.description, description]
            policy.description = description
            policy.save(update_fields=["description"])
        if shadow:
            version, published = _shadow_publish(
                policy=policy, document=document, comment=comment, created_by=created_by
            )
            if published:
                changes.update(published)
            if changes:
                action = SHADOW_PUBLISHED if published else "updated"
                _policy_change_record(policy, version, action, changes)
            return version
        version, was_published = _publish(
            policy=policy,
            document=document,
            comment=comment,
            created_by=created_by,
            expected_base=expected_base,
        )
        if was_published:
            changes.update(_version_change(version))
        if changes:
            action = "created" if created else "published" if "version" in changes else "updated"
            _policy_change_record(policy, version, action, changes)
        return version


def republish_comment(version: PolicyVersion, text: str = "") -> str:
    """The comment of a version published again: says which, then the admin's words."""
    text = " ".join(text.split())
    return f"Republished version {version.number}" + (f": {text}" if text else "")


def policy_version_republish(
    *,
    version: PolicyVersion,
    comment: str = "",
    created_by: str = "",
    expected_base: int | _AnyBase | None = ANY_BASE,
) -> PolicyVersion:
    """Publish an old version's document again as the policy's next version (a rollback):
    the same publication as any other, validated, numbered, recorded; its comment says
    "Republished version N" and then ``comment``. When that document is already the active
    one nothing is published and the active version is returned."""
    return policy_version_publish(
        policy=version.policy,
        document=version.document,
        comment=republish_comment(version, comment)[:500],
        created_by=created_by,
        expected_base=expected_base,
    )


#: the activity records' actions of a policy's shadow
SHADOW_PUBLISHED = "published in shadow"
SHADOW_WITHDRAWN = "shadow withdrawn"
SHADOW_PROMOTED = "shadow promoted"


def promote_comment(shadow: PolicyVersion) -> str:
    """The comment of the active version a promotion publishes: which shadow it was."""
    return f"promoted from shadow v{shadow.number}"


_PROMOTED = re.compile(r"promoted from shadow v(\d+)")


def promoted_from(version: PolicyVersion) -> int | None:
    """The number of the shadow version ``version`` was promoted from (by its comment, as
    ``promote_comment`` writes it), or None."""
    match = None if version.shadow else _PROMOTED.fullmatch(version.comment)
    return int(match.group(1)) if match else None


def _no_shadow(policy: Policy, path: str) -> DomainError:
    return DomainError(
        Code.INVALID_REQUEST,
        "No version of this policy is tried in shadow.",
        errors=[FieldError(path, f"{policy.slug} has no shadow version now.")],
    )


def _locked(policy: Policy) -> Policy:
    """The policy's row, locked: versions are numbered and the shadow replaced one at a
    time, and ``shadow_version`` is read as it is now, not as the caller loaded it."""
    locked = Policy.objects.select_for_update().get(pk=policy.pk)
    policy.shadow_version_id = locked.shadow_version_id
    return locked


def _shadow_publish(
    *, policy: Policy, document: object, comment: str, created_by: str
) -> tuple[PolicyVersion, dict[str, list[Any]]]:
    """``policy_shadow_publish`` without its record: the shadow version afterwards, and the
    change (empty when the document is the current shadow's, so nothing was published)."""
    normalized = policy_document_validate(document)
    digest = policy_hash(normalized)
    _locked(policy)
    if policy_active_version(policy=policy) is None:
        raise DomainError(
            Code.INVALID_REQUEST,
            "Nothing of this policy is published yet.",
            errors=[
                FieldError(
                    "shadow",
                    "A shadow version is tried beside the active one: publish a first "
                    "version, then try changes in shadow.",
                )
            ],
        )
    previous = policy_shadow_version(policy=policy)
    if previous is not None and previous.hash == digest:
        return previous, {}
    version = _version_create(policy, normalized, digest, comment, created_by, shadow=True)
    policy.shadow_version = version
    policy.save(update_fields=["shadow_version"])
    return version, {"shadow_version": [previous.number if previous else None, version.number]}


def policy_shadow_publish(
    *, policy: Policy, document: object, comment: str = "", created_by: str = ""
) -> PolicyVersion:
    """Validate ``document`` and publish it in shadow: a new version (numbered after the
    policy's others) that issuance, refresh and the guard decide under beside the active
    one, recording where it would answer otherwise, enforcing nothing. It replaces the
    shadow tried before; the active version does not change. The same document as the
    current shadow publishes nothing and returns that shadow. Refused (``invalid_request``
    at ``shadow``) while nothing is published. One record in the team's activity log."""
    with transaction.atomic():
        version, changes = _shadow_publish(
            policy=policy, document=document, comment=comment, created_by=created_by
        )
        if changes:
            _policy_change_record(policy, version, SHADOW_PUBLISHED, changes)
    return version


def policy_shadow_withdraw(*, policy: Policy, by: str) -> PolicyVersion:
    """Stop trying the policy's shadow version; return it. The version stays (differences
    recorded under it point at it) and the active version does not change. Refused
    (``invalid_request`` at ``shadow_version``) when there is no shadow. ``by`` (who
    withdrew it) is kept in the activity record beside the door's actor."""
    with transaction.atomic():
        _locked(policy)
        shadow = policy_shadow_version(policy=policy)
        if shadow is None:
            raise _no_shadow(policy, "shadow_version")
        policy.shadow_version = None
        policy.save(update_fields=["shadow_version"])
        _policy_change_record(
            policy,
            shadow,
            SHADOW_WITHDRAWN,
            {"shadow_version": [shadow.number, None]},
            extra={"by": by},
        )
    return shadow


def policy_shadow_promote(
    *,
    policy: Policy,
    created_by: str,
    expected_base: int | _AnyBase | None = ANY_BASE,
    expected_shadow: int | None = None,
) -> PolicyVersion:
    """Publish the shadow version's document as the policy's next active version, through
    the usual publication (``policy_version_publish``: validated, numbered, recorded, with
    its "published meanwhile" check against ``expected_base``), commented "promoted from
    shadow vN", and stop trying it in shadow. Return the active version (the current one
    when its document is the shadow's: then nothing new is published).

    ``expected_shadow`` is the shadow version number the caller reviewed: a shadow replaced
    since is refused (``invalid_request`` at ``expected_shadow``), as is no shadow at all."""
    with transaction.atomic():
        _locked(policy)
        shadow = policy_shadow_version(policy=policy)
        if shadow is None:
            raise _no_shadow(policy, "shadow_version")
        if expected_shadow is not None and expected_shadow != shadow.number:
            raise DomainError(
                Code.INVALID_REQUEST,
                "Another version is tried in shadow now.",
                errors=[
                    FieldError(
                        "expected_shadow",
                        f"Version {shadow.number} replaced shadow version {expected_shadow}: "
                        "review it before promoting it.",
                    )
                ],
            )
        active = policy_version_publish(
            policy=policy,
            document=shadow.document,
            comment=promote_comment(shadow),
            created_by=created_by,
            expected_base=expected_base,
        )
        policy.shadow_version = None
        policy.save(update_fields=["shadow_version"])
        _policy_change_record(
            policy, active, SHADOW_PROMOTED, {"shadow_version": [shadow.number, None]}
        )
    return active
