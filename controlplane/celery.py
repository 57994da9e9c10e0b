"""The Celery app: `celery -A controlplane worker -B`. Configuration comes from settings."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("plangate")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
