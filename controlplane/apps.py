from django.apps import AppConfig


class ControlplaneConfig(AppConfig):
    name = "controlplane"
    verbose_name = "Plangate"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
