"""Telegram adapter (python-telegram-bot): translates updates to the core and sends its replies."""
