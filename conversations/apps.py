"""AppConfig: registers the system checks, discovers tools of installed apps, wires signals."""

from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "LLM conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the checks)
        from .conf import apply_limits
        from .services.attachments import connect_signals
        from .tools import autodiscover

        # After every app is loaded, so each app's llm_tools may import its models.
        autodiscover()
        apply_limits()
        # A deleted attachment's stored object goes once the delete commits.
        connect_signals()
