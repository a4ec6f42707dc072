"""Discord: a discord.py client per binding that translates gateway messages and button clicks for the core.

Only translation lives here. A ``DMChannel`` is one-to-one (not ``message.guild is None``, which is also true
for a guild the client has not cached); a group DM or a guild channel is a group; anything else is unknown.
Yes/No are message components (``memory:<yes|no>:<proposal id>``). discord.py keeps its REST and gateway
addresses in two process-wide class attributes; ``configure_addresses`` sets them from
``DISCORD_API_BASE_URL`` and ``DISCORD_GATEWAY_URL``. discord.py itself retries rate limits and 5xx.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import discord
import yarl
from django.conf import settings

from bridges import core, pending, services
from bridges.runtime import REVOKED_REASON, InFlight, Revoked, run_blocking, run_sync, typing

log = logging.getLogger(__name__)

CUSTOM_ID_RE = re.compile(r"^memory:(yes|no):(\d{1,18})\Z")
#: Discord refuses a message whose content is longer than this.
MESSAGE_LIMIT = 2000
#: Discord shows "typing…" for 10 seconds (or until the bot's next message): sent again every 8.
TYPING_SECONDS = 8.0


def configure_addresses() -> tuple[str, yarl.URL]:
    """Point discord.py at the configured REST and gateway addresses; returns the previous ones."""
    import discord.gateway
    import discord.http

    previous = (discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY)
    discord.http.Route.BASE = settings.DISCORD_API_BASE_URL.rstrip("/")
    gateway = settings.DISCORD_GATEWAY_URL
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway if gateway.endswith("/") else gateway + "/")
    return previous


def restore_addresses(previous: tuple[str, yarl.URL]) -> None:
    import discord.gateway
    import discord.http

    discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = previous


def revoked_from(exc: BaseException) -> Revoked | None:
    """Revoked for a refused token (401 on REST, close 4004 on the gateway) or missing privileged intents."""
    if isinstance(exc, discord.LoginFailure):
        return Revoked(REVOKED_REASON.format(platform="Discord"))
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return Revoked("Discord requires the Message Content intent for this bot: turn it on in the Developer "
                       "Portal (Bot, Privileged Gateway Intents), then turn the binding on again.",
                       code="privileged_intents")
    if isinstance(exc, discord.ConnectionClosed) and exc.code == 4004:
        return Revoked(REVOKED_REASON.format(platform="Discord"))
    if isinstance(exc, discord.HTTPException) and exc.status == 401:
        return Revoked(REVOKED_REASON.format(platform="Discord"))
    return None


def _kind(channel: Any) -> core.Kind:
    if isinstance(channel, discord.DMChannel):
        return "one_to_one"
    if isinstance(channel, discord.GroupChannel | discord.abc.GuildChannel | discord.Thread):
        return "group"
    return "unknown"


def _title(channel: Any) -> str:
    if isinstance(channel, discord.DMChannel):
        return f"DM with {channel.recipient}" if channel.recipient else "Direct message"
    return str(getattr(channel, "name", "") or "")


def shown(outbound: core.Outbound) -> str:
    """The content to send for ``outbound``: the bot's own words (a note's text in them) with Discord's markdown
    escaped, so a note reading ``*bold*``, ``_x_``, ``~~gone~~`` or a backtick shows as written; the model's
    answer as it is, formatting and all. Mentions in either ping nobody: every message goes with
    ``AllowedMentions.none()`` (``BridgeClient``)."""
    return outbound.text if outbound.formatted else discord.utils.escape_markdown(outbound.text)


def _shown_length(text: str) -> int:
    return len(discord.utils.escape_markdown(text))


def view(outbound: core.Outbound) -> discord.ui.View | None:
    """Yes/No buttons under a question (needs a running event loop)."""
    if not outbound.buttons:
        return None
    buttons = discord.ui.View(timeout=None)
    for button in outbound.buttons:
        style = discord.ButtonStyle.success if button.answer == "yes" else discord.ButtonStyle.secondary
        buttons.add_item(discord.ui.Button(label=button.label, style=style,
                                           custom_id=f"memory:{button.answer}:{button.proposal_id}"))
    return buttons


class BridgeClient(discord.Client):
    """The bot of one binding."""

    def __init__(self, binding_id: int, **options: Any) -> None:
        intents = discord.Intents.default()
        intents.message_content = True  # privileged: also a toggle in the Developer Portal
        options.setdefault("guild_ready_timeout", 0.5)
        # What the bot says (the model's words, a note's text) never pings: no @everyone, role or user
        # mention in it notifies anyone. Every message, interaction response and follow-up uses this.
        super().__init__(intents=intents, allowed_mentions=discord.AllowedMentions.none(), **options)
        self.binding_id = binding_id
        self.turns = InFlight()

    async def on_ready(self) -> None:
        """Reports the binding as connected."""
        await run_sync(services.binding_report_connected, binding_id=self.binding_id,
                       bot_identity=str(self.user or ""))

    async def on_message(self, message: discord.Message) -> None:
        """Passes a person's message (an attachment's text is the message's) to the core and sends its replies
        in the same channel."""
        if message.author.bot or (self.user is not None and message.author.id == self.user.id):
            return
        text = message.content or ""
        mentioned = self.user is not None and any(user.id == self.user.id for user in message.mentions)
        replied = bool(message.reference and isinstance(message.reference.resolved, discord.Message)
                       and self.user is not None and message.reference.resolved.author.id == self.user.id)
        if self.user is not None:
            text = re.sub(rf"<@!?{self.user.id}>", "", text).strip()
        kind = _kind(message.channel)
        inbound = core.InboundMessage(
            binding_id=self.binding_id, conversation_id=str(message.channel.id), kind=kind,
            sender_id=str(message.author.id), sender_display=message.author.display_name, text=text,
            delivery_key=f"message:{message.id}", conversation_title=_title(message.channel),
            addressed=kind == "one_to_one" or mentioned or replied,
            unreadable=not text and bool(message.attachments or message.stickers),
            reply_to=str(message.reference.message_id) if replied and message.reference else "")
        with self.turns.turn():
            # written down as it arrives, before it waits for a free turn thread (``bridges.pending``)
            [kept] = await pending.keep_soon([inbound])
            try:
                # "typing…" while the turn runs (the model can take a minute), for a message the bot answers.
                async with typing(message.channel.typing, every=TYPING_SECONDS,
                                  what=f"discord binding {self.binding_id}", show=inbound.addressed):
                    reply, pending_id = await run_sync(pending.answer, inbound, pending_id=kept)
                for outbound in reply.messages:
                    try:
                        await self._send(message.channel, outbound)
                    except discord.HTTPException:  # logged; the messages after it still go
                        log.warning("discord binding %s: a message could not be sent", self.binding_id,
                                    exc_info=True)
                if pending_id is not None:
                    await run_sync(pending.sent, pending_id)
            finally:
                pending.release(kept)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """Answers a Yes/No click: confirms or drops the proposal and removes the buttons."""
        if interaction.type != discord.InteractionType.component:
            return
        data: dict[str, Any] = dict(interaction.data or {})
        custom_id = str(data.get("custom_id", ""))
        match = CUSTOM_ID_RE.match(custom_id)
        if match is None or interaction.channel is None:
            return
        with self.turns.turn():
            await self._answer_click(interaction, match)

    async def _answer_click(self, interaction: discord.Interaction, match: re.Match[str]) -> None:
        assert interaction.channel is not None
        user = interaction.user
        inbound = core.InboundMessage(
            binding_id=self.binding_id, conversation_id=str(interaction.channel.id), kind=_kind(interaction.channel),
            sender_id=str(user.id), sender_display=user.display_name, delivery_key=f"interaction:{interaction.id}",
            answer=match.group(1), proposal_id=int(match.group(2)))  # type: ignore[arg-type]
        reply = await run_sync(core.handle, inbound)
        if reply.duplicate:
            return
        text = "\n".join(shown(outbound) for outbound in reply.messages) or shown(core.Outbound(reply.answered or ""))
        if not text:  # nothing to say (a blocked sender's click): acknowledged without a word
            await interaction.response.defer()
            return
        if reply.private:  # for the clicker alone: an ephemeral response only they see, never a post
            first, *rest = core.split_text(text, MESSAGE_LIMIT)
            await interaction.response.send_message(first, ephemeral=True)
            for part in rest:
                await interaction.followup.send(part, ephemeral=True)
            return
        if reply.settled and interaction.message is not None:
            # Decided: the question shows the answer and loses its buttons (one reply, as Telegram's
            # keyboard goes away), so nobody taps a question that is already answered.
            question = interaction.message.content or ""  # as sent: escaped already
            first, *rest = core.split_text(f"{question}\n\n{text}", MESSAGE_LIMIT)
            await interaction.response.edit_message(content=first, view=None)
        else:
            first, *rest = core.split_text(text, MESSAGE_LIMIT)
            await interaction.response.send_message(first)
        for part in rest:  # what did not fit follows as messages of their own
            await interaction.followup.send(part)

    async def _send(self, channel: Any, outbound: core.Outbound) -> None:
        """Send one message; a text over Discord's limit goes as several (the buttons under the last). A part
        that fails does not keep back the parts after it; the first failure is raised once all were tried. A
        question's message id is recorded, so a reply to it answers that question."""
        failure: discord.HTTPException | None = None
        for part in outbound.parts(MESSAGE_LIMIT, len if outbound.formatted else _shown_length):
            buttons = view(part)
            try:
                if buttons is not None:
                    sent = await channel.send(shown(part), view=buttons)
                    buttons.stop()  # nothing listens on the view itself; on_interaction answers the click
                    if getattr(sent, "id", None) is not None:
                        await run_sync(core.question_sent, binding_id=self.binding_id,
                                       conversation_id=str(channel.id), proposal_id=part.buttons[0].proposal_id,
                                       message_ref=str(sent.id))
                else:
                    await channel.send(shown(part))
            except discord.HTTPException as exc:
                revoked = revoked_from(exc)
                if revoked is not None:
                    await run_sync(services.binding_report_revoked, binding_id=self.binding_id,
                                   code=revoked.code, reason=revoked.reason)
                    raise
                failure = failure or exc
        if failure is not None:
            raise failure

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        """Logs a failed event handler (the client keeps running)."""
        log.exception("discord binding %s: %s failed", self.binding_id, event_method)


async def run(binding_id: int, credentials: dict[str, str], mode: str, stop: asyncio.Event) -> None:
    """Run one Discord binding over the gateway until ``stop``, then let the turns in flight finish. Raises
    Revoked when Discord refuses the token or the privileged intent is off; other errors propagate to the
    runner, which backs off."""
    client = BridgeClient(binding_id)
    task = asyncio.ensure_future(client.start(credentials["token"]))
    stopped = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            exc = task.exception()
            if exc is not None:
                revoked = revoked_from(exc)
                raise revoked or exc
            return
        # Stopped: the turns in flight finish and send their answers first (the runner bounds the wait).
        await client.turns.idle()
    finally:
        stopped.cancel()
        if not client.is_closed():
            await client.close()
        if not task.done():
            try:
                await asyncio.wait_for(task, 5)
            except (TimeoutError, Exception):  # noqa: BLE001 - closing anyway
                task.cancel()


def send_message(*, binding_id: int, credentials: dict[str, str], conversation_id: str,
                 outbound: core.Outbound) -> None:
    """Post one message over REST from blocking code (the expiry announcement in the Celery worker)."""
    async def post() -> None:
        client = discord.Client(intents=discord.Intents.none(), allowed_mentions=discord.AllowedMentions.none())
        try:
            await client.login(credentials["token"])
            channel = client.get_partial_messageable(int(conversation_id))
            for part in outbound.parts(MESSAGE_LIMIT, len if outbound.formatted else _shown_length):
                await channel.send(shown(part))
        finally:
            await client.close()

    previous = configure_addresses()
    try:
        run_blocking(post)
    except (discord.LoginFailure, discord.HTTPException) as exc:
        revoked = revoked_from(exc)
        if revoked is not None:
            raise revoked from exc
        raise
    finally:
        restore_addresses(previous)
