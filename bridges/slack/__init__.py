"""Slack adapter (slack-bolt): translates events and button clicks to the core and posts its replies."""
