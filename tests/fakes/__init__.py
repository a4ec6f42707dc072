"""Loopback servers that stand in for the outside parties in tests.

Each fake speaks the real wire protocol of one party (an OpenAI-compatible model server, the Telegram Bot
API, the Slack Web API, Discord's REST API and gateway) on 127.0.0.1, so the project's own HTTP clients and
the real bot libraries run unchanged against them. They record what they received and can be told to fail.
They never contact any other address and never patch the project's code.
"""
