"""Publishing policies. A version, once written, is never changed."""

from __future__ import annotations

from django.db import transaction

from guard.errors import DocumentInvalid, FieldError
from guard.policy import policy_hash, validate_policy
from kernel.problems import Code, DomainError
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
    """
    normalized = policy_document_validate(document)
    digest = policy_hash(normalized)
    with transaction.atomic():
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
            return current
        return PolicyVersion.objects.create(
            policy=policy,
            number=(current.number if current is not None else 0) + 1,
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
    expected_base: int | _AnyBase | None = ANY_BASE,
) -> PolicyVersion:
    """Create the policy with ``document`` as version 1, or publish its next version. A
    refusal writes nothing, the new policy row included."""
    with transaction.atomic():
        policy, _ = Policy.objects.get_or_create(team=team, slug=slug)
        if description is not None and policy.description != description:
            policy.description = description
            policy.save(update_fields=["description"])
        return policy_version_publish(
            policy=policy,
            document=document,
            comment=comment,
            created_by=created_by,
            expected_base=expected_base,
        )
