from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0008_memorysettings_forgot_at'),
    ]

    operations = [
        migrations.AddField(
            model_name='memorysettings',
            name='addons_used',
            field=models.JSONField(blank=True, default=list, help_text='The memory add-ons the user picked at some time (names), which may still hold their notes: Export and Forget everything go to each, whether it serves now or not.'),
        ),
    ]
