"""Publishing policies. A version, once written, is never changed."""

from __future__ import annotations

from django.db import transaction

from controlplane.problems import DomainError
from guard.errors import DocumentInvalid
from guard.policy import policy_hash, validate_policy
from members.models import Team

from .models import Policy, PolicyVersion
from .selectors import policy_active_version


def policy_document_validate(document: object) -> dict:
    """The normalized document, or DomainError ``invalid_policy`` naming each bad path."""
    try:
        return validate_policy(document)
    except DocumentInvalid as exc:
        raise DomainError(
            "invalid_policy", "The policy document is invalid.", errors=exc.errors
        ) from exc


def policy_version_publish(
    *, policy: Policy, document: object, comment: str = "", created_by: str = ""
) -> PolicyVersion:
    """Publish ``document`` as the policy's next version and return it.

    Saving the same document as the current version publishes nothing and returns the
    current version: a version number should mean a change.
    """
    normalized = policy_document_validate(document)
    digest = policy_hash(normalized)
    with transaction.atomic():
        # Lock the policy row so two concurrent edits get n+1 and n+2, not a collision.
        Policy.objects.select_for_update().filter(pk=policy.pk).get()
        current = policy_active_version(policy=policy)
        if current is not None and current.hash == digest:
            return current
        number = (current.number if current is not None else 0) + 1
        return PolicyVersion.objects.create(
            policy=policy,
            number=number,
            document=normalized,
            hash=digest,
            comment=comment,
            created_by=created_by,
        )


def policy_set(
    *,
    team: Team,
    slug: str,
    document: object,
    comment: str = "",
    created_by: str = "",
    description: str | None = None,
) -> PolicyVersion:
    """Create the policy with ``document`` as version 1, or publish its next version."""
    normalized = policy_document_validate(document)
    with transaction.atomic():
        policy, _ = Policy.objects.get_or_create(team=team, slug=slug)
        if description is not None and policy.description != description:
            policy.description = description
            policy.save(update_fields=["description"])
        return policy_version_publish(
            policy=policy, document=normalized, comment=comment, created_by=created_by
        )
