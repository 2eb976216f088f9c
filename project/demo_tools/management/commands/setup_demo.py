"""``manage.py setup_demo``: the demo user, a local admin and the offline demo profile (safe to rerun).

The admin's password is random and printed once, when the account is made; a
later run never prints, resets or changes it (``manage.py changepassword
admin`` does).
"""

import os
import secrets
from argparse import ArgumentParser
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from conversations.models import LanguageModel, Profile, Provider

DEMO_USERNAME = "demo"
# A local-demo credential, printed on purpose; override with DEMO_PASSWORD.
DEMO_PASSWORD = os.environ.get("DEMO_PASSWORD", "demo-password")

# A local superuser, so that the admin the docs point to opens; its password is random.
ADMIN_USERNAME = "admin"

# Where `make run` serves unless told otherwise (it passes its HOST and PORT).
DEFAULT_URL = "http://127.0.0.1:8000"

SYSTEM_PROMPT = (
    "You are a helpful assistant. Use the tools for the weather, the time and arithmetic."
)


class Command(BaseCommand):
    help = (
        "Create the demo user, a local 'admin' superuser (random password, printed once) and "
        "the demo profile on the offline DemoProvider (idempotent)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--url",
            default=DEFAULT_URL,
            help=f"Where the demo is served, for the links printed at the end (default {DEFAULT_URL}).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        base_url = str(options["url"]).rstrip("/")
        parts = urlsplit(base_url)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise CommandError(
                f"--url must be an http(s) URL such as {DEFAULT_URL}, not {base_url!r}"
            )
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            # An ordinary user: the chat page needs no staff rights.
            username=DEMO_USERNAME,
            defaults={"is_staff": False, "is_superuser": False},
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        admin_password = self._create_admin(user_model)
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
        self._print_admin(user_model, admin_password)
        self.stdout.write(f"Open {base_url}/chat/, {base_url}/admin/ or {base_url}/api/docs/")

    @staticmethod
    def _create_admin(user_model: Any) -> str | None:
        """Make the admin with a random password, returned; ``None`` when the name is taken."""
        if user_model.objects.filter(username=ADMIN_USERNAME).exists():
            return None
        password = secrets.token_urlsafe(12)
        user_model.objects.create_superuser(username=ADMIN_USERNAME, email="", password=password)
        return password

    def _print_admin(self, user_model: Any, password: str | None) -> None:
        if password is not None:
            self.stdout.write(
                f"Admin login: username '{ADMIN_USERNAME}', password '{password}'"
                " (shown this once: note it)"
            )
            return
        admin = user_model.objects.get(username=ADMIN_USERNAME)
        if admin.is_superuser and admin.is_staff:
            self.stdout.write(
                f"Admin login: username '{ADMIN_USERNAME}' (it already existed: its password is"
                f" neither shown again nor changed; to set a new one, run"
                f" 'manage.py changepassword {ADMIN_USERNAME}')"
            )
        else:
            self.stdout.write(
                f"Admin login: a user '{ADMIN_USERNAME}' already exists and is not a superuser;"
                f" it was left as it is (make one with 'manage.py createsuperuser')"
            )
