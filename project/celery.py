"""The host project's Celery app: ``celery -A project worker`` executes queued runs.

Configured from Django's settings (the ``CELERY_*`` names, which read the
environment: ``CELERY_BROKER_URL`` defaults to Redis on localhost). Tasks are
found in each installed app's ``tasks`` module, ``conversations.tasks``
included.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
