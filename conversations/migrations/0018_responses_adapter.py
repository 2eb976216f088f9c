"""The Responses API adapter among the choices of ``Provider.adapter``."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0017_rules_from_one_place'),
    ]

    operations = [
        migrations.AlterField(
            model_name='provider',
            name='adapter',
            field=models.CharField(choices=[('openai', 'OpenAI'), ('azure_openai', 'Azure OpenAI'), ('mistral', 'Mistral'), ('groq', 'Groq'), ('openrouter', 'OpenRouter'), ('together', 'Together AI'), ('fireworks', 'Fireworks AI'), ('openai_compatible', 'OpenAI-compatible'), ('openai_responses', 'OpenAI Responses API'), ('anthropic', 'Anthropic'), ('gemini', 'Google Gemini'), ('ollama', 'Ollama'), ('demo', 'Demo (offline)')], max_length=32),
        ),
    ]
