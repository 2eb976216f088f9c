"""``manage.py check_providers [--ping]``: is every active profile usable?"""

from django.core.management.base import BaseCommand, CommandError

from conversations.domain import ChatMessage
from conversations.exceptions import ConversationsError
from conversations.models import Profile
from conversations.services.providers import build_provider, completion_options


class Command(BaseCommand):
    help = (
        "Validate every active profile (provider active, key reference resolves, model set); "
        "with --ping, send one tiny request to each."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--ping", action="store_true", help="Send one tiny request per profile."
        )

    def handle(self, *args, ping=False, **options):
        profiles = Profile.objects.filter(is_active=True).select_related("language_model__provider")
        failures = 0
        for profile in profiles.order_by("slug"):
            try:
                provider = build_provider(profile)
                if ping:
                    options_ = completion_options(profile, tools_offered=False)
                    provider.complete([ChatMessage.user("ping")], options=options_)
            except ConversationsError as exc:
                failures += 1
                self.stdout.write(self.style.ERROR(f"{profile.slug}: {exc.code}: {exc.detail}"))
                continue
            self.stdout.write(self.style.SUCCESS(f"{profile.slug}: ok"))
        if failures:
            raise CommandError(f"{failures} profile(s) failed")
