from django.apps import AppConfig


class PlansConfig(AppConfig):
    name = "plans"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
