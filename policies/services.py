"""Publishing policies. A version, once written, is never changed."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from audit.changes import change_append
from guard.errors import DocumentInvalid, FieldError
from guard.policy import policy_hash, validate_policy
from kernel.problems import Code, DomainError
from teams.models import Team

from .models import Policy, PolicyVersion
from .selectors import policy_active_version, policy_next_version_number


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
    since is not silently overwritten (DomainError ``invalid_request`` at ``expected_base``).
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
            Code.INVALID_REQUEST,
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
    version = PolicyVersion.objects.create(
        policy=policy,
        number=policy_next_version_number(policy=policy),
        document=normalized,
        hash=digest,
        comment=comment,
        created_by=created_by,
    )
    return version, True


def _policy_change_record(
    policy: Policy, version: PolicyVersion, action: str, changes: dict[str, list[Any]]
) -> None:
    """One record of a policy's change; a publication names the version's author, comment
    and hash, which the version keeps too."""
    extra: dict[str, Any] = {}
    if "version" in changes:
        extra = {"author": version.created_by, "comment": version.comment, "hash": version.hash}
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
) -> PolicyVersion:
    """Create the policy with ``document`` as version 1, or publish its next version. A
    refusal writes nothing, the new policy row included. One record in the team's activity
    log says what changed (the policy created, its description, the version published)."""
    with transaction.atomic():
        policy, created = Policy.objects.get_or_create(team=team, slug=slug)
        changes: dict[str, list[Any]] = {}
        if description is not None and policy.description != description:
            changes["description"] = [None if created else policy.description, description]
            policy.description = description
            policy.save(update_fields=["description"])
        version, published = _publish(
            policy=policy,
            document=document,
            comment=comment,
            created_by=created_by,
            expected_base=expected_base,
        )
        if published:
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
