"""The Celery app: `celery -A controlplane worker -B`. Configuration comes from settings.

The beat schedule (key rotation, plan expiry) is ``CELERY_BEAT_SCHEDULE`` in settings.
"""

import os
from pathlib import Path

from celery import Celery
from celery.signals import beat_init, worker_init

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


@worker_init.connect
@beat_init.connect
def make_the_filesystem_broker_folders(**kwargs) -> None:
    """The embedded broker's folders must exist before kombu lists or writes them.

    The settings name every one of them (under ``var/`` by default), so none is created
    relative to the directory the process happened to start in.
    """
    from django.conf import settings

    if not settings.CELERY_BROKER_URL.startswith("filesystem://"):
        return
    for name, value in settings.CELERY_BROKER_TRANSPORT_OPTIONS.items():
        if "_folder" in name:  # data_folder_in, data_folder_out, processed_folder, ...
            Path(value).mkdir(parents=True, exist_ok=True)
