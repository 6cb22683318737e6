"""The Discord front end: slash commands over the service, plus the bot's own scheduler.

The bot is built around an `App` opened outside it (`cluster-manager bot`), so tests and the
command listing can build it with another app, or with none at all.
"""
