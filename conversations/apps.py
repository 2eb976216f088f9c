"""AppConfig: registers the system checks and discovers tools of installed apps."""

from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "LLM conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the checks)
        from .conf import apply_limits
        from .tools import autodiscover

        # After every app is loaded, so each app's llm_tools may import its models.
        autodiscover()
        apply_limits()
