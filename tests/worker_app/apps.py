"""The test worker app: contributes the slow, counting tool the worker tests drive."""

from django.apps import AppConfig


class WorkerAppConfig(AppConfig):
    name = "tests.worker_app"
    label = "tests_worker_app"
