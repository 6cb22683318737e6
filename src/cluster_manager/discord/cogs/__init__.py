"""The bot's cogs: thin command layers over the service."""
