"""The Celery app: `celery -A controlplane worker -B`. Configuration comes from settings.

The beat schedule (key rotation, plan expiry) is ``CELERY_BEAT_SCHEDULE`` in settings.
"""

import os

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("plangate")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def refuse_to_start_without_a_usable_encryption_key(**kwargs) -> None:
    """A worker that cannot decrypt the signing keys would fail every rotation: stop now.

    Celery logs and swallows exceptions raised by signal handlers, so the refusal is a
    SystemExit carrying the ImproperlyConfigured message; the worker exits with status 1.
    """
    from django.core.exceptions import ImproperlyConfigured

    from plans.keys import require_usable_encryption_key

    try:
        require_usable_encryption_key()
    except ImproperlyConfigured as exc:
        raise SystemExit(f"Refusing to start the Celery worker: {exc}") from exc
