"""Interactive pieces: a choice menu, a confirmation and a paginator.

Only the member who ran the command may use them. The command awaits the view and carries on
with the result, so the service is called from the command, and its errors reach the same
error handler as everything else.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from typing import Any

import discord

from cluster_manager.discord.error_handlers import report_error
from cluster_manager.discord.replies import answer

MAX_SELECT_OPTIONS = 25  # Discord's limit for one select menu


class OwnedView(discord.ui.View):
    def __init__(self, owner: discord.abc.User, *, timeout: float | None) -> None:
        super().__init__(timeout=timeout)
        self.owner_id = owner.id

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        if interaction.user.id == self.owner_id:
            return True
        await interaction.response.send_message(
            "This belongs to someone else's command: run the command yourself.", ephemeral=True
        )
        return False

    async def on_error(
        self, interaction: discord.Interaction, error: Exception, item: discord.ui.Item[Any]
    ) -> None:
        await report_error(interaction, error)


class ChoiceView(OwnedView):
    def __init__(
        self,
        owner: discord.abc.User,
        options: Sequence[str],
        *,
        placeholder: str,
        multiple: bool,
        timeout: float,
    ) -> None:
        super().__init__(owner, timeout=timeout)
        self.chosen: list[str] = []
        options = list(options)[:MAX_SELECT_OPTIONS]
        self.menu: discord.ui.Select[ChoiceView] = discord.ui.Select(
            placeholder=placeholder,
            min_values=1,
            max_values=len(options) if multiple else 1,
            options=[discord.SelectOption(label=o, value=o) for o in options],
        )
        self.menu.callback = self.on_choice  # type: ignore[method-assign]
        self.add_item(self.menu)

    async def on_choice(self, interaction: discord.Interaction) -> None:
        self.chosen = list(self.menu.values)
        await interaction.response.edit_message(
            content=f"Chosen: {', '.join(f'**{c}**' for c in self.chosen)}", view=None
        )
        self.stop()


async def choose(
    interaction: discord.Interaction,
    prompt: str,
    options: Sequence[str],
    *,
    placeholder: str,
    multiple: bool,
    timeout: float,
) -> list[str]:
    """Asks with a select menu; an empty list when no choice came in time."""
    view = ChoiceView(
        interaction.user, options, placeholder=placeholder, multiple=multiple, timeout=timeout
    )
    message = await answer(interaction, content=prompt, view=view, ephemeral=True)
    if await view.wait():
        with contextlib.suppress(discord.HTTPException):
            await message.edit(
                content=f"{prompt}\n⌛ No choice in time: nothing was done.", view=None
            )
        return []
    return view.chosen


class ConfirmView(OwnedView):
    def __init__(self, owner: discord.abc.User, *, timeout: float) -> None:
        super().__init__(owner, timeout=timeout)
        self.confirmed: bool | None = None

    @discord.ui.button(label="Confirm", style=discord.ButtonStyle.danger)
    async def confirm(
        self, interaction: discord.Interaction, button: discord.ui.Button[ConfirmView]
    ) -> None:
        self.confirmed = True
        await interaction.response.edit_message(content="Confirmed: working on it…", view=None)
        self.stop()

    @discord.ui.button(label="Cancel", style=discord.ButtonStyle.secondary)
    async def cancel(
        self, interaction: discord.Interaction, button: discord.ui.Button[ConfirmView]
    ) -> None:
        self.confirmed = False
        await interaction.response.edit_message(content="Cancelled: nothing was done.", view=None)
        self.stop()


async def confirm(interaction: discord.Interaction, prompt: str, *, timeout: float) -> bool:
    view = ConfirmView(interaction.user, timeout=timeout)
    message = await answer(interaction, content=prompt, view=view, ephemeral=True)
    if await view.wait():
        with contextlib.suppress(discord.HTTPException):
            await message.edit(
                content=f"{prompt}\n⌛ No answer in time: nothing was done.", view=None
            )
        return False
    return bool(view.confirmed)


# A file a page shows (a chart on the first page), as (name, bytes): sent anew with its page.
PageFile = tuple[str, bytes]


class PagesView(OwnedView):
    """Pages of one answer. Its owner turns them; anyone else who presses a button gets the
    page they asked for privately, and the owner's message stays as it is."""

    def __init__(
        self,
        owner: discord.abc.User,
        pages: Sequence[discord.Embed],
        *,
        timeout: float,
        first_page_files: Sequence[PageFile] = (),
    ) -> None:
        super().__init__(owner, timeout=timeout)
        self.pages = list(pages)
        self.first_page_files = list(first_page_files)
        self.index = 0
        self.message: discord.WebhookMessage | None = None
        self._update_buttons()

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return True  # who may turn the owner's message is `_show`'s to say

    def _update_buttons(self) -> None:
        self.previous.disabled = self.index == 0
        self.next.disabled = self.index == len(self.pages) - 1

    def files_for(self, index: int) -> list[discord.File]:
        """A page's own files: the first page's chart is not left on the others."""
        chosen = self.first_page_files if index == 0 else []
        return [discord.File(io.BytesIO(data), filename=name) for name, data in chosen]

    async def _show(self, interaction: discord.Interaction, index: int) -> None:
        index = max(0, min(index, len(self.pages) - 1))
        if interaction.user.id != self.owner_id:
            await interaction.response.send_message(
                embed=self.pages[index], files=self.files_for(index), ephemeral=True
            )
            return
        self.index = index
        self._update_buttons()
        await interaction.response.edit_message(
            embed=self.pages[index], view=self, attachments=self.files_for(index)
        )

    @discord.ui.button(label="Previous", style=discord.ButtonStyle.secondary)
    async def previous(
        self, interaction: discord.Interaction, button: discord.ui.Button[PagesView]
    ) -> None:
        await self._show(interaction, self.index - 1)

    @discord.ui.button(label="Next", style=discord.ButtonStyle.secondary)
    async def next(
        self, interaction: discord.Interaction, button: discord.ui.Button[PagesView]
    ) -> None:
        await self._show(interaction, self.index + 1)

    async def on_timeout(self) -> None:
        if self.message is not None:
            with contextlib.suppress(discord.HTTPException):
                await self.message.edit(view=None)


async def show_pages(
    interaction: discord.Interaction,
    pages: Sequence[discord.Embed],
    *,
    ephemeral: bool,
    timeout: float,
    files: Sequence[PageFile] = (),
) -> None:
    """The first page with its files (an image the page shows), and buttons for the rest."""
    view = PagesView(interaction.user, pages, timeout=timeout, first_page_files=files)
    extra = {"files": view.files_for(0)} if files else {}
    if len(pages) == 1:
        await answer(interaction, embed=pages[0], ephemeral=ephemeral, **extra)
        return
    view.message = await answer(
        interaction, embed=pages[0], view=view, ephemeral=ephemeral, **extra
    )
