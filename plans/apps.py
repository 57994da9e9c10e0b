from django.apps import AppConfig


class PlansConfig(AppConfig):
    name = "plans"

    def ready(self) -> None:
        from audit.verification import TABLE_CHECKS

        from . import checks  # noqa: F401  (registers the system checks)
        from .trail_coverage import plan_tables_verify

        # verify_audit and the console's "Verify chain" hold these tables to the trail.
        if plan_tables_verify not in TABLE_CHECKS:
            TABLE_CHECKS.append(plan_tables_verify)
