"""``manage.py chat --profile SLUG "question"``: one tool loop, transcript on stdout."""

import json
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.domain.timing import duration_ms
from conversations.exceptions import ConversationsError
from conversations.models import TITLE_MAX_LENGTH, Profile, Run
from conversations.services import create_conversation, run_tool_loop


class Command(BaseCommand):
    help = "Ask one question through a profile's tool loop and print the transcript."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("question", help="What to ask.")
        parser.add_argument("--profile", help="Profile slug (default: the default profile).")
        parser.add_argument(
            "--user",
            default="chat-cli",
            help="Username owning the conversation (created, without a password, if missing).",
        )

    def handle(
        self,
        *args: Any,
        question: str,
        profile: str | None = None,
        user: str = "chat-cli",
        **options: Any,
    ) -> None:
        chosen = None
        if profile:
            chosen = Profile.objects.filter(slug=profile, is_active=True).first()
            if chosen is None:
                raise CommandError(f'no active profile "{profile}"')
        owner, created = get_user_model().objects.get_or_create(username=user)
        if created:
            owner.set_unusable_password()
            owner.save(update_fields=["password"])
        conversation = create_conversation(
            owner=owner, title=question[:TITLE_MAX_LENGTH], profile=chosen
        )
        try:
            run = run_tool_loop(conversation=conversation, content=question, profile=chosen)
        except ConversationsError as exc:
            raise CommandError(f"{exc.code}: {exc.detail}") from None
        for call in run.conversation.tool_calls.filter(message__run=run).order_by(
            "message__position", "index"
        ):
            ms = duration_ms(call.started_at, call.finished_at)
            duration = "" if ms is None else f" in {ms} ms"
            arguments = call.raw_arguments or json.dumps(call.arguments, ensure_ascii=False)
            self.stdout.write(f"-> {call.name}({arguments}) {call.status}{duration}")
        if run.status in (Run.Status.COMPLETED, Run.Status.MAX_ITERATIONS):
            self.stdout.write(run.final_content)
            self.stdout.write(
                self.style.SUCCESS(
                    f"[{run.status}: {run.iterations} round(s), {run.total_tokens} tokens]"
                )
            )
            return
        raise CommandError(f"run {run.status}: {run.error_code} {run.error_message}".strip())
