"""``manage.py setup_demo``: the demo user and the offline demo profile (safe to rerun)."""

import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from conversations.models import LanguageModel, Profile, Provider

DEMO_USERNAME = "demo"
# A local-demo credential, printed on purpose; override with DEMO_PASSWORD.
DEMO_PASSWORD = os.environ.get("DEMO_PASSWORD", "demo-password")

SYSTEM_PROMPT = (
    "You are a helpful assistant. Use the tools for the weather, the time and arithmetic."
)


class Command(BaseCommand):
    help = "Create the demo user and the demo profile on the offline DemoProvider (idempotent)."

    def handle(self, *args, **options):
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        provider, _ = Provider.objects.get_or_create(
            slug="demo",
            defaults={"name": "Offline demo (no real model)", "adapter": Provider.Adapter.DEMO},
        )
        model, _ = LanguageModel.objects.get_or_create(
            provider=provider, model_id="demo", defaults={"name": "Offline demo model"}
        )
        has_default = Profile.objects.filter(is_default=True).exclude(slug="demo").exists()
        Profile.objects.get_or_create(
            slug="demo",
            defaults={
                "name": "Offline demo",
                "language_model": model,
                "system_prompt": SYSTEM_PROMPT,
                "is_default": not has_default,
                "max_iterations": 5,
            },
        )
        self.stdout.write(self.style.SUCCESS("Demo ready: the offline demo profile is 'demo'."))
        if created:
            self.stdout.write(f"Demo login: username '{DEMO_USERNAME}', password '{DEMO_PASSWORD}'")
        else:
            self.stdout.write(
                f"Demo login: username '{DEMO_USERNAME}' (password unchanged since it was created;"
                f" it was '{DEMO_PASSWORD}' unless you changed it)"
            )
        self.stdout.write("Open http://127.0.0.1:8000/chat/, /admin/ or /api/docs/")
