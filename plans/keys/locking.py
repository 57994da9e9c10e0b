"""The one lock every writer of signing-key rows takes first."""

from __future__ import annotations

from ..models import SigningKey


def lock_all_keys() -> None:
    """Lock every key row, in kid order, for the rest of the transaction.

    Every writer of key states or ciphertexts takes these locks first and in the same order,
    so writers never deadlock and run one after the other; each then re-reads the states it
    changes. On SQLite, where ``select_for_update`` is a no-op, the settings' IMMEDIATE
    transactions serialise writers the same way. The table holds a handful of rows.
    """
    list(SigningKey.objects.select_for_update().order_by("kid").values_list("kid", flat=True))
