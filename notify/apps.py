from django.apps import AppConfig


class NotifyConfig(AppConfig):
    name = "notify"
    verbose_name = "Approvals"

    def ready(self) -> None:
        # Approvers are told when a plan starts to wait (plans.approvals sends the signal
        # once the plan's transaction commits).
        from plans.approvals import approval_requested

        from .receivers import approvers_notify_on_request

        approval_requested.connect(
            approvers_notify_on_request, dispatch_uid="notify.approvers_notify_on_request"
        )
