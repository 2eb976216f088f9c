"""Settings of the Celery workers started by the tests: the project's, plus the test tool."""

from project.settings import *  # noqa: F403
from project.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.worker_app"]
