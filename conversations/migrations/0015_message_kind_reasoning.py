"""Messages of kind ``reasoning`` (a block of the model's reasoning, stored before what it led
to), set aside like agent states: the partial index message_set_aside takes them in."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0014_message_kind_document"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="message", name="message_set_aside"),
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
                    ("reasoning", "Reasoning"),
                ],
                max_length=24,
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(superseded=True)
                | models.Q(kind__in=["agent_state", "reasoning"]),
                fields=["thread"],
                name="message_set_aside",
            ),
        ),
    ]
