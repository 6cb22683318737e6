"""`/leaderboard ...`: submit to, create, delete, list and read leaderboards."""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cluster_manager.core.models import DEFAULT_SUBMIT_MODE, Mode
from cluster_manager.core.profiling import (
    DEFAULT_LAUNCH_COUNT,
    MAX_LAUNCH_COUNT,
    InvalidProfileOptions,
    ProfileOptions,
    chosen_options,
)
from cluster_manager.core.records import Leaderboard, RankingEntry, check_leaderboard_name
from cluster_manager.core.submission import EXTENSIONS, parse_headers
from cluster_manager.core.task import load_task_zip_bytes
from cluster_manager.core.task_sources import DEFAULT_LIMITS
from cluster_manager.discord import profile_files, render
from cluster_manager.discord.attachments import read_attachment
from cluster_manager.discord.autocomplete import leaderboard_gpus, leaderboard_names
from cluster_manager.discord.error_handlers import UsageError
from cluster_manager.discord.live import follow_submission, report_files
from cluster_manager.discord.replies import answer, defer, text_file, truncate
from cluster_manager.discord.roles import creators_only, is_admin, submitter
from cluster_manager.discord.widgets import PageFile, choose, confirm, show_pages
from cluster_manager.rendering.charts import ChartCache
from cluster_manager.service import NotFoundError, Service, check_may_delete, parse_deadline

if TYPE_CHECKING:
    from cluster_manager.discord.bot import ClusterBot

SUBMISSION_SUFFIXES = tuple(sorted({s for group in EXTENSIONS.values() for s in group}))
MAX_TASK_ZIP_BYTES = DEFAULT_LIMITS.total_bytes
MAX_FILES_PER_MESSAGE = 10  # Discord's limit
CHART_FILE = "ranking.png"
MODES = [
    app_commands.Choice(name="test", value=Mode.TEST.value),
    app_commands.Choice(name="benchmark", value=Mode.BENCHMARK.value),
    app_commands.Choice(name="ranked", value=Mode.LEADERBOARD.value),
    app_commands.Choice(name="profile", value=Mode.PROFILE.value),
]
DESCRIPTION_CUT = "\n… (the whole description is in task.yml)"
# Template languages and the file each is handed out as.
LANGUAGES = {"Python": ".py", "Triton": ".py", "CUDA": ".cu", "HIP": ".cpp"}


def _ncu_filter(kernel_name: str | None, launch_count: int | None) -> ProfileOptions | None:
    """The Nsight Compute filter the options chose; a bad one names its option."""
    try:
        return chosen_options(kernel_name=kernel_name, launch_count=launch_count)
    except InvalidProfileOptions as exc:
        raise UsageError(f"`ncu_{exc.option}`: {exc}") from None


def _with_header(code: str, leaderboard: str, suffix: str) -> str:
    """Templates name their leaderboard, so submitting one needs no option."""
    if "leaderboard" in parse_headers(code):
        return code
    comment = "#" if suffix == ".py" else "//"
    return f"{comment}!POPCORN leaderboard {leaderboard}\n{code}"


@app_commands.guild_only()
class LeaderboardCog(
    commands.GroupCog,
    group_name="leaderboard",
    group_description="Submit kernels to leaderboards and see where they stand",
):
    def __init__(self, bot: ClusterBot) -> None:
        self.bot = bot
        self.charts = ChartCache()
        super().__init__()

    @property
    def service(self) -> Service:
        return self.bot.app.service

    # --- submitting --------------------------------------------------------------------------

    @app_commands.command(name="submit", description="Submit a kernel and follow its run live")
    @app_commands.describe(
        script="Your submission file (.py or .cu)",
        leaderboard="Leaderboard to submit to (default: the file's #!POPCORN leaderboard line)",
        mode="What to run (default: test; a ranked run only when you choose ranked)",
        gpu="GPU to run on (default: the leaderboard's only GPU, or a menu)",
        ncu_kernel_name="Profile mode: Nsight Compute captures only kernels matching this regex",
        ncu_launch_count=f"Profile mode: launches captured (default: {DEFAULT_LAUNCH_COUNT})",
    )
    @app_commands.choices(mode=MODES)
    @app_commands.autocomplete(leaderboard=leaderboard_names, gpu=leaderboard_gpus)
    async def submit(
        self,
        interaction: discord.Interaction,
        script: discord.Attachment,
        leaderboard: str | None = None,
        mode: app_commands.Choice[str] | None = None,
        gpu: str | None = None,
        ncu_kernel_name: str | None = None,
        ncu_launch_count: app_commands.Range[int, 1, MAX_LAUNCH_COUNT] | None = None,
    ) -> None:
        await defer(interaction, ephemeral=True)
        profile = _ncu_filter(ncu_kernel_name, ncu_launch_count)
        data = await read_attachment(
            script,
            max_bytes=self.service.submissions.max_bytes,
            suffixes=SUBMISSION_SUFFIXES,
            what="a submission",
        )
        chosen = await self._board_and_gpus(interaction, script.filename, data, leaderboard, gpu)
        if chosen is None:
            return
        board, gpus = chosen
        receipt = await self.service.submissions.submit(
            board.name,
            submitter(interaction.user),
            script.filename,
            data,
            gpus=gpus,
            mode=Mode(mode.value) if mode else DEFAULT_SUBMIT_MODE,
            profile=profile,
        )
        accepted = f"📨 Submission #{receipt.submission_id} accepted: follow it below."
        if receipt.after_deadline:
            accepted += f"\n{render.AFTER_DEADLINE_NOTE}"
        await interaction.edit_original_response(content=accepted, view=None)
        await follow_submission(
            interaction,
            self.service,
            receipt,
            edit_interval=self.bot.config.edit_interval,
        )

    async def _visible(self, interaction: discord.Interaction, name: str) -> Leaderboard:
        """The board if the member may see it; an invite-only one they have not joined is
        missing, in the same words, so that nobody learns that it exists."""
        user = interaction.user
        return await self.service.leaderboards.visible(
            name, submitter(user), include_closed=is_admin(user)
        )

    async def _board_and_gpus(
        self,
        interaction: discord.Interaction,
        file_name: str,
        data: bytes,
        leaderboard: str | None,
        gpu: str | None,
    ) -> tuple[Leaderboard, list[str] | None] | None:
        """The board (the option, else the file's header) and the GPUs (the option, else the
        header's or the board's only one, else a menu); None when the menu went unanswered."""
        headers = parse_headers(data.decode("utf-8", errors="replace"))
        name = leaderboard or headers.get("leaderboard")
        if not name:
            raise UsageError(
                "name the leaderboard with the `leaderboard` option "
                "or a `#!POPCORN leaderboard NAME` line in the file"
            )
        board = await self._visible(interaction, name)
        gpus = [gpu] if gpu else None
        if gpus is None and "gpu" not in headers and len(board.gpus) > 1:
            gpus = await choose(
                interaction,
                f"**{board.name}** runs on several GPUs: where should `{file_name}` run?",
                board.gpus,
                placeholder="Choose one or more GPUs",
                multiple=True,
                timeout=self.bot.config.view_timeout,
            )
            if not gpus:
                return None
        return board, gpus

    # --- managing ----------------------------------------------------------------------------

    @app_commands.command(name="create", description="Create a leaderboard from a task zip")
    @app_commands.describe(
        name="Name: lower-case letters, digits, '_' and '-'",
        deadline="Closing time, ISO 8601, e.g. 2026-12-31T23:59:00+00:00 (UTC if no zone)",
        task="The task as a .zip holding task.yml and its files",
    )
    @creators_only
    async def create(
        self,
        interaction: discord.Interaction,
        name: str,
        deadline: str,
        task: discord.Attachment,
    ) -> None:
        await defer(interaction, ephemeral=True)
        check_leaderboard_name(name)
        when = parse_deadline(deadline)
        data = await read_attachment(
            task, max_bytes=MAX_TASK_ZIP_BYTES, suffixes=(".zip",), what="a task"
        )
        loaded = await asyncio.to_thread(load_task_zip_bytes, data, task.filename)
        gpus = await choose(
            interaction,
            f"Which GPUs should **{name}** run on?",
            self.bot.app.registry.names,
            placeholder="Choose the GPU types",
            multiple=True,
            timeout=self.bot.config.view_timeout,
        )
        if not gpus:
            return
        board = await self.service.leaderboards.create(
            name, loaded, when, gpus, creator=submitter(interaction.user)
        )
        await interaction.edit_original_response(
            content=(
                f"🎉 Created **{board.name}** on {', '.join(board.gpus)}; it ends "
                f"{discord.utils.format_dt(board.deadline, 'f')}."
            ),
            view=None,
        )

    @app_commands.command(name="delete", description="Delete a leaderboard and its submissions")
    @app_commands.describe(name="The leaderboard to delete")
    @app_commands.autocomplete(name=leaderboard_names)
    async def delete(self, interaction: discord.Interaction, name: str) -> None:
        await defer(interaction, ephemeral=True)
        actor, admin = submitter(interaction.user), is_admin(interaction.user)
        board = await self.service.leaderboards.get(name)
        check_may_delete(board, actor, admin=admin)  # ask only those who may
        prompt = f"Delete **{board.name}** with all its submissions and results? This is final."
        if not await confirm(interaction, prompt, timeout=self.bot.config.view_timeout):
            return
        await self.service.leaderboards.delete(board.name, actor=actor, admin=admin)
        await interaction.edit_original_response(content=f"🗑️ Deleted **{board.name}**.")

    # --- reading -----------------------------------------------------------------------------

    @app_commands.command(name="list", description="All leaderboards with GPUs and deadlines")
    async def list_(self, interaction: discord.Interaction) -> None:
        await defer(interaction, ephemeral=False)
        boards = await self.service.leaderboards.all()  # a public answer: invite-only ones stay out
        pages = render.leaderboard_pages(boards, self.service.clock())
        await show_pages(interaction, pages, ephemeral=False, timeout=self.bot.config.view_timeout)

    @app_commands.command(name="show", description="The ranking of a leaderboard, per GPU")
    @app_commands.describe(
        name="The leaderboard",
        gpu="Only this GPU (default: all)",
        after_deadline="Show the ranking of runs after the deadline",
    )
    @app_commands.autocomplete(name=leaderboard_names, gpu=leaderboard_gpus)
    async def show(
        self,
        interaction: discord.Interaction,
        name: str,
        gpu: str | None = None,
        after_deadline: bool = False,
    ) -> None:
        # An invite-only board's ranking goes to the member who asked, not to the channel.
        board = await self._visible(interaction, name)
        await defer(interaction, ephemeral=board.closed)
        rankings = await self.service.leaderboards.ranking(name, gpu, after_deadline=after_deadline)
        pages = render.ranking_pages(name, rankings, after_deadline=after_deadline)
        files: list[PageFile] = []
        # The chart draws the competition's history, which runs after the deadline never enter.
        if rankings and not after_deadline:
            files = await self._chart(name, rankings, pages[0])
        await show_pages(
            interaction,
            pages,
            ephemeral=board.closed,
            timeout=self.bot.config.view_timeout,
            files=files,
        )

    async def _chart(
        self, name: str, rankings: dict[str, list[RankingEntry]], page: discord.Embed
    ) -> list[PageFile]:
        """The chart of the GPU of the first page, shown on it, where someone is ranked there
        (else it has no lines)."""
        shown = next(iter(rankings))
        if not rankings[shown]:
            return []
        key = await self.service.leaderboards.history_key(name, shown)
        load = functools.partial(self.service.leaderboards.score_history, name, shown)
        png = await self.charts.chart(key, "png", load)
        page.set_image(url=f"attachment://{CHART_FILE}")
        return [(CHART_FILE, png)]

    @app_commands.command(name="show-personal", description="Your own runs on a leaderboard")
    @app_commands.describe(name="The leaderboard")
    @app_commands.autocomplete(name=leaderboard_names)
    async def show_personal(self, interaction: discord.Interaction, name: str) -> None:
        await defer(interaction, ephemeral=True)
        await self._visible(interaction, name)
        runs = await self.service.leaderboards.personal_runs(name, submitter(interaction.user))
        pages = render.personal_pages(name, runs)
        await show_pages(interaction, pages, ephemeral=True, timeout=self.bot.config.view_timeout)

    @app_commands.command(
        name="get-submission", description="A submission's report, log and code (yours)"
    )
    @app_commands.describe(submission_id="The submission's number (#N in its status)")
    async def get_submission(self, interaction: discord.Interaction, submission_id: int) -> None:
        """Fetches a report again, privately: after a restart, once a status went quiet, or for
        an admin, any submission's."""
        await defer(interaction, ephemeral=True)
        user = interaction.user
        report = await self.service.history.own_report(
            submission_id, submitter(user), admin=is_admin(user)
        )
        placements = []
        if report.done and report.submission.mode is Mode.LEADERBOARD:
            placements = await self.service.submissions.placements(submission_id)
        code = text_file(report.submission.file_name, report.submission.code)
        await answer(
            interaction,
            embed=render.report_embed(report, placements, profile_files.left_out(report)),
            files=[*report_files(report), code],
            ephemeral=True,
        )

    @app_commands.command(name="task", description="The task's files: reference, harness, inputs")
    @app_commands.describe(name="The leaderboard")
    @app_commands.autocomplete(name=leaderboard_names)
    async def task(self, interaction: discord.Interaction, name: str) -> None:
        await defer(interaction, ephemeral=True)
        board = await self._visible(interaction, name)
        files = await self.service.leaderboards.task_files(name)
        items = sorted(files.items())
        for i in range(0, len(items), MAX_FILES_PER_MESSAGE):
            batch = items[i : i + MAX_FILES_PER_MESSAGE]
            content = f"📁 Task files of **{name}**" if i == 0 else None
            if i == 0 and board.task.description:
                shown = truncate(board.task.description.strip(), 1500, marker=DESCRIPTION_CUT)
                content = f"{content}\n>>> {shown}"
            await answer(
                interaction,
                content=content,
                files=[text_file(n, c) for n, c in batch],
                ephemeral=True,
            )

    @app_commands.command(name="template", description="A starter file for a leaderboard")
    @app_commands.describe(name="The leaderboard", language="Language of the starter file")
    @app_commands.choices(
        language=[app_commands.Choice(name=lang, value=lang) for lang in LANGUAGES]
    )
    @app_commands.autocomplete(name=leaderboard_names)
    async def template(
        self,
        interaction: discord.Interaction,
        name: str,
        language: app_commands.Choice[str] | None = None,
    ) -> None:
        await defer(interaction, ephemeral=True)
        await self._visible(interaction, name)
        templates = await self.service.leaderboards.templates(name)
        if not templates:
            raise NotFoundError(f"{name!r} has no starter files")
        lang = language.value if language else next(iter(templates))
        if lang not in templates:
            raise NotFoundError(f"{name!r} has no {lang} template (it has: {', '.join(templates)})")
        suffix = LANGUAGES.get(lang, ".txt")
        code = _with_header(templates[lang], name, suffix)
        await answer(
            interaction,
            content=f"📝 {lang} starter for **{name}**: submit it with `/leaderboard submit`.",
            file=text_file(f"{name}_template{suffix}", code),
            ephemeral=True,
        )
