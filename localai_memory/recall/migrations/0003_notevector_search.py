"""The full-text vector of every recall passage, for lexical recall in PostgreSQL.

A stored generated column: PostgreSQL fills it for the existing rows while adding it (one table rewrite) and
keeps it on every insert and update, so neither ``recall.index`` nor a bulk COPY (whose column list leaves
it out) writes it.
"""

import django.contrib.postgres.search
import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('recall', '0002_rows_for_existing_notes'),
    ]

    operations = [
        migrations.AddField(
            model_name='notevector',
            name='search',
            field=models.GeneratedField(db_persist=True, expression=django.contrib.postgres.search.SearchVector(django.db.models.functions.text.Concat('topic', models.Value(': '), 'text', output_field=models.TextField()), config='english'), help_text="The passage's full-text vector (topic and text), kept by PostgreSQL; lexical recall reads it.", output_field=django.contrib.postgres.search.SearchVectorField()),
        ),
    ]
