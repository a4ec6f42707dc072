"""The names of agents deleted before their names were kept: an agent's notes deleted with it went to the Trash
under the label "Notes of the deleted agent <name>", its folder Memory/agents/<id>/. (An agent deleted with its
notes kept left its name nowhere: its folder keeps saying "Deleted agent <id>".)"""

from django.db import migrations

LABEL = "Notes of the deleted agent "


def names_from_trash(apps, schema_editor):
    TrashEntry = apps.get_model("notes", "TrashEntry")
    DeletedAgent = apps.get_model("agents", "DeletedAgent")
    Agent = apps.get_model("agents", "Agent")
    live = set(Agent.objects.values_list("pk", flat=True))
    for entry in TrashEntry.objects.filter(kind="agent", label__startswith=LABEL).prefetch_related("files"):
        parts = next((f.path.split("/") for f in entry.files.all() if f.path.startswith("Memory/agents/")), None)
        if not parts or len(parts) < 4 or not parts[2].isdigit() or int(parts[2]) in live:
            continue
        DeletedAgent.objects.get_or_create(owner_id=entry.owner_id, agent_id=int(parts[2]),
                                           defaults={"name": entry.label[len(LABEL):][:100]})


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0003_deleted_agent_names"),
        ("notes", "0007_version_floor"),
    ]

    operations = [migrations.RunPython(names_from_trash, migrations.RunPython.noop)]
