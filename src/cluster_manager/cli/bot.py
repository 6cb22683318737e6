"""`cluster-manager bot`: the Discord bot, with its own scheduler, over the app's database."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from pathlib import Path

import click
from dotenv import dotenv_values

from cluster_manager.app import App
from cluster_manager.cli.common import cli, fail, with_app
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.settings import Settings


def discord_environment(dotenv_path: Path = Path(".env")) -> dict[str, str]:
    """DISCORD_* variables: the environment wins over `.env`."""
    values: dict[str, str] = {}
    if dotenv_path.is_file():
        values.update((k, v) for k, v in dotenv_values(dotenv_path).items() if v is not None)
    values.update(os.environ)
    return {k: v for k, v in values.items() if k.startswith("DISCORD_") and v.strip()}


def _discord_id(raw: str | None, name: str) -> int | None:
    if not raw:  # unset, or left empty in an environment file
        return None
    try:
        return int(raw)
    except ValueError:
        fail(f"{name} must be a Discord id (a number), got {raw!r}")


async def _command_payload() -> list[dict[str, object]]:
    from cluster_manager.discord.bot import ClusterBot

    bot = ClusterBot(None)
    await bot.load_cogs()
    return bot.command_payload()


@cli.command("bot")
@click.option("--debug", is_flag=True, help="Use DISCORD_DEBUG_TOKEN (a staging bot), log more.")
@click.option(
    "--print-commands",
    is_flag=True,
    help="Print the slash commands as the JSON synced to Discord, then exit.",
)
@click.option(
    "--sync", is_flag=True, help="Sync the slash commands (to DISCORD_GUILD_ID if set) on start."
)
@click.option(
    "--no-scheduler",
    is_flag=True,
    help="Do not run jobs here: leave them to `cluster-manager worker` processes.",
)
@click.pass_obj
def bot_command(
    settings: Settings, debug: bool, print_commands: bool, sync: bool, no_scheduler: bool
) -> None:
    """Run the Discord bot (DISCORD_TOKEN, DISCORD_GUILD_ID) until interrupted. It opens its
    database (DATABASE_URL, or the embedded one) whatever CLUSTER_MANAGER_API_URL says: the
    bot only tells users that URL."""
    if print_commands:
        # No token, no network and no database: the tree is built from the code alone.
        click.echo(json.dumps(asyncio.run(_command_payload()), indent=2, ensure_ascii=False))
        return
    env = discord_environment()
    token_name = "DISCORD_DEBUG_TOKEN" if debug else "DISCORD_TOKEN"
    token = env.get(token_name)
    if not token:
        fail(f"{token_name} is not set (environment or .env)")
    guild_id = _discord_id(env.get("DISCORD_GUILD_ID"), "DISCORD_GUILD_ID")
    channel = "DISCORD_ANNOUNCE_CHANNEL_ID"
    announce_channel = _discord_id(env.get(channel), channel)

    import discord

    from cluster_manager.cli.logs import configure_logging
    from cluster_manager.discord.bot import BotConfig, ClusterBot

    configure_logging(settings, secrets=[token], level=logging.DEBUG if debug else None)
    config = BotConfig(
        guild_id=guild_id,
        sync_commands=sync,
        run_scheduler=not no_scheduler,
        announce_channel_id=announce_channel,
    )

    async def body(app: App) -> None:
        # Discord sends each interaction to one connection: a second process on the token
        # would leave commands unanswered or answered twice.
        async with app.alone("Discord bot", token), ClusterBot(app, config) as bot:
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, lambda: asyncio.ensure_future(bot.close()))
            try:
                await bot.start(token)
            except discord.LoginFailure:
                raise ClusterManagerError(f"Discord refused the token in {token_name}") from None
            except discord.PrivilegedIntentsRequired:
                raise ClusterManagerError("the bot asks for intents it was not granted") from None

    try:
        with_app(settings, body)
    except KeyboardInterrupt:
        click.echo("bot stopped", err=True)
