"""The Discord front end: slash commands over the service, plus the bot's own scheduler.

The bot is built around an `App` opened outside it (`cluster-manager bot`), so tests and the
command listing can build it with another app, or with none at all.

    bot.py             the bot: the cogs over the app's service, and a scheduler of its own
    cogs/              the slash commands, one cog per group
    live.py            following a submission: one status message edited, then the report
    resume.py          after a restart, the submissions an earlier process had not reported
    announcer.py       new leaders posted to the announcement channel
    render.py          embeds and attachments for what the service returns; no I/O
    replies.py         answering interactions: acknowledge at once, answer later, privately
    widgets.py         a choice menu, a confirmation and a paginator
    autocomplete.py    suggestions from the service and the registry
    attachments.py     uploaded files, refused by size and name before a byte is downloaded
    profile_files.py   Nsight Compute's reports attached to a profile submission's report
    roles.py           who may do what: Discord roles by name
    error_handlers.py  what users read when something fails
"""
