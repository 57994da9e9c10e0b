from django.apps import AppConfig


class KernelConfig(AppConfig):
    """What every Plangate app shares: problem+json, parsers, middleware, the admin base,
    rate limits. A leaf: it imports no Plangate app (`make lint` checks it: lint-imports)."""

    name = "kernel"
    verbose_name = "Plangate kernel"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .tracing import tracing_configure

        # OpenTelemetry, when the OTEL_* environment asks for it (kernel.tracing).
        tracing_configure()
