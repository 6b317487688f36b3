"""Messages of kind ``document`` (a v2 user message's PDF or text file): choices only."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0013_thread_history_version_declared"),
    ]

    operations = [
        migrations.AlterField(
            model_name="message",
            name="kind",
            field=models.CharField(
                choices=[
                    ("text", "Text"),
                    ("action_execution", "Action execution"),
                    ("result", "Result"),
                    ("agent_state", "Agent state"),
                    ("image", "Image"),
                    ("document", "Document"),
                ],
                max_length=24,
            ),
        ),
    ]
