"""Attachments: files stored once per owner by content, referenced by messages in order.

Creates ``Attachment`` and ``MessageAttachment``, adds
``LanguageModel.input_modalities`` (what a model reads beside text; empty,
text only, for the models already configured) and installs every rule
from ``conversations.models.rules`` (docs/adr/0018), which now include the
attachments' three: a link only to an attachment of the conversation's
owner, links that never change, and an attachment whose owner and content
never change. Going back drops those three (their tables go too).
"""

import conversations.models
import conversations.models.attachments
import conversations.models.config
import django.db.models.lookups
import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models


RULES_DIGEST = "6a6d908b17ee3e6606e61fce30c9a9daf52630709e0d0bea6727eb52ca9c773d"

NEW_RULES = (
    "conversations_messageattachment_same_owner",
    "conversations_messageattachment_immutable",
    "conversations_attachment_immutable",
)


def _install(apps, schema_editor):
    from conversations.models.rules import install_rules
    from conversations.selectors.search import search_config

    connection = schema_editor.connection
    config = search_config() if connection.vendor == "postgresql" else ""
    install_rules(connection, search_config=config)


def _drop_new(apps, schema_editor):
    from conversations.models.rules import drop_rules

    drop_rules(schema_editor.connection, names=NEW_RULES)


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0025_context_window'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Attachment',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('sha256', models.CharField(help_text='sha256 of the bytes (hex).', max_length=64)),
                ('media_type', models.CharField(help_text="Sniffed from the bytes, not the client's.", max_length=100)),
                ('size', models.PositiveBigIntegerField(help_text='In bytes.')),
                ('name', models.CharField(blank=True, help_text='The sanitised original file name.', max_length=255)),
                ('file', models.FileField(max_length=255, storage=conversations.models.attachments.attachment_storage, upload_to='')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='llm_attachments', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        migrations.CreateModel(
            name='MessageAttachment',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.PositiveSmallIntegerField()),
                ('attachment', models.ForeignKey(on_delete=django.db.models.deletion.RESTRICT, related_name='links', to='conversations.attachment')),
                ('message', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='attachment_links', to='conversations.message')),
            ],
            options={
                'verbose_name': 'message attachment',
                'ordering': ['message', 'position'],
            },
        ),
        migrations.AddIndex(
            model_name='attachment',
            index=models.Index(fields=['owner', '-created_at'], name='conversations_attach_owner_idx'),
        ),
        migrations.AddConstraint(
            model_name='attachment',
            constraint=models.UniqueConstraint(fields=('owner', 'sha256', 'media_type'), name='conversations_attachment_content_unique'),
        ),
        migrations.AddConstraint(
            model_name='attachment',
            constraint=models.CheckConstraint(condition=models.Q(('sha256__regex', '^[0-9a-f]{64}$')), name='conversations_attachment_sha256_hex'),
        ),
        migrations.AddConstraint(
            model_name='attachment',
            constraint=models.CheckConstraint(condition=models.Q(('media_type__contains', '/')), name='conversations_attachment_media_type_valid'),
        ),
        migrations.AddConstraint(
            model_name='messageattachment',
            constraint=models.UniqueConstraint(fields=('message', 'position'), name='conversations_messageattachment_position_unique'),
        ),
        migrations.AddConstraint(
            model_name='messageattachment',
            constraint=models.UniqueConstraint(fields=('message', 'attachment'), name='conversations_messageattachment_once'),
        ),
        migrations.AddField(
            model_name='languagemodel',
            name='input_modalities',
            field=models.JSONField(blank=True, default=list, help_text='What the model reads beside text: a list of "image" and "pdf" (e.g. ["image", "pdf"]); empty = text only. A file it cannot read is sent as text (a PDF\'s extracted text, a note for an image); see docs/attachments.md.', validators=[conversations.models.config.validate_input_modalities]),
        ),
        migrations.AddConstraint(
            model_name='languagemodel',
            constraint=models.CheckConstraint(condition=django.db.models.lookups.Exact(conversations.models.JSONTypeOf('input_modalities'), 'array'), name='conversations_languagemodel_input_modalities_array'),
        ),
        migrations.RunPython(_install, _drop_new, elidable=False),
    ]
