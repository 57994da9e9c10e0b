from django.apps import AppConfig


class RehearsalConfig(AppConfig):
    """A policy tried on plans: the impact preview of publishing it, the simulator, and the
    policy admin that offers both. Above ``plans`` and ``policies``, which it judges together
    (docs/decisions/0062)."""

    name = "rehearsal"
