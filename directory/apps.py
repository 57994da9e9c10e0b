from django.apps import AppConfig


class DirectoryConfig(AppConfig):
    name = "directory"
    verbose_name = "Directory (SCIM)"
    default_auto_field = "django.db.models.BigAutoField"
