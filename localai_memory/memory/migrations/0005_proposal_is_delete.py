"""``Proposal.delete`` becomes ``Proposal.is_delete`` in Python only: the column keeps its name, so nothing in
the database changes (the field hid ``Model.delete()``)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0004_proposal_makes_room_for")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RenameField(model_name="proposal", old_name="delete", new_name="is_delete"),
                migrations.AlterField(model_name="proposal", name="is_delete",
                                      field=models.BooleanField(default=False, db_column="delete")),
            ],
            database_operations=[],
        ),
    ]
