"""Discord adapter (discord.py): translates gateway messages and button clicks to the core."""
