from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0011_mcp'),
    ]

    operations = [
        migrations.AddField(
            model_name='profile',
            name='stream',
            field=models.BooleanField(default=True, help_text='Stream answers: watchers see the text as it is written (what is stored is the same either way).'),
        ),
    ]
