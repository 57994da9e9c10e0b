"""What the lifecycle services changed, for the doors that report it (admin, commands, task)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..models import SigningKey

State = SigningKey.State


@dataclass(frozen=True)
class KeyChange:
    """One key that a service created (``before`` is None) or moved to another state."""

    kid: str
    before: str | None
    after: str


@dataclass(frozen=True)
class RotationResult:
    """What a call to ``signing_key_rotate`` did.

    ``outcome`` is one of the ``RotationResult.*`` constants; ``rotated`` is True when a new
    key signs now. ``changes`` lists every key created or moved to another state, in order;
    ``removed`` the retired keys deleted.
    """

    ROTATED = "rotated"
    BOOTSTRAPPED = "bootstrapped"
    NEXT_KEY_CREATED = "next_key_created"
    RECENTLY_ROTATED = "recently_rotated"
    NEXT_KEY_TOO_YOUNG = "next_key_too_young"
    NOTHING_TO_DO = "nothing_to_do"

    outcome: str
    retired: str | None = None
    activated: str | None = None
    created: str | None = None
    removed: tuple[str, ...] = field(default_factory=tuple)
    detail: str = ""
    changes: tuple[KeyChange, ...] = field(default_factory=tuple)

    @property
    def rotated(self) -> bool:
        return self.activated is not None

    def describe(self) -> str:
        parts = [self.detail] if self.detail else []
        if self.retired:
            parts.append(f"retired {self.retired}")
        if self.activated:
            parts.append(f"activated {self.activated}")
        if self.created:
            parts.append(f"published next key {self.created}")
        if self.removed:
            parts.append(f"removed {len(self.removed)} expired key(s): {', '.join(self.removed)}")
        return f"{self.outcome}: " + ("; ".join(parts) if parts else "no change")


@dataclass(frozen=True)
class RevocationResult:
    """What a call to ``signing_key_revoke`` did.

    ``previous_state`` is the key's state before the call (``revoked`` when it already was,
    and then nothing changed). ``signing`` is the kid that signs afterwards, None when no
    replacement could be put in place (``replacement_error`` says why).
    """

    kid: str
    previous_state: str
    revoked_at: datetime
    signing: str | None
    activated: str | None = None
    created: str | None = None
    changes: tuple[KeyChange, ...] = field(default_factory=tuple)
    replacement_error: str = ""

    @property
    def already_revoked(self) -> bool:
        return self.previous_state == State.REVOKED
