"""AppConfig of the demo tools extension."""

from django.apps import AppConfig


class DemoToolsConfig(AppConfig):
    name = "project.demo_tools"
    label = "demo_tools"
    verbose_name = "Demo tools"
