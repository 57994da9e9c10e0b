from django.apps import AppConfig


class TeamsConfig(AppConfig):
    """The team, its roles and its groups: the bottom app every other app may import."""

    name = "teams"
