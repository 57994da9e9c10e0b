from django.apps import AppConfig


class NotifyConfig(AppConfig):
    name = "notify"
    verbose_name = "Approvals"

    def ready(self) -> None:
        # Approvers are told when a plan starts to wait (plans.approvals sends the signal
        # once the plan's transaction commits).
        from plans.approvals import approval_requested
        from plans.keys import signing_key_rotation_failed

        from .receivers import (
            alert_on_rotation_failure,
            approvers_notify_on_request,
            slack_approval_on_request,
        )

        approval_requested.connect(
            approvers_notify_on_request, dispatch_uid="notify.approvers_notify_on_request"
        )
        approval_requested.connect(
            slack_approval_on_request, dispatch_uid="notify.slack_approval_on_request"
        )
        # Alerts: the one fact not in the audit trail (notify.alerts).
        signing_key_rotation_failed.connect(
            alert_on_rotation_failure, dispatch_uid="notify.alert_on_rotation_failure"
        )
