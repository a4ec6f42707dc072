"""Taps on the Yes/No buttons, on each platform through its real library: who is told what, and where. A
blocked sender's tap says nothing; an unpaired sender's is answered to them alone."""

from __future__ import annotations

import pytest

from bridges import core, services
from bridges.models import SenderStatus
from localai_memory.memory.models import Proposal
from tests.bridges.conftest import group_scope, notes_of, pair, sender_key
from tests.bridges.drivers import Driver, Person
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)

TEA = {"kind": "memory", "topic": "drink", "summary": "green tea"}


def asked_in_group(bot: Driver, model, person: Person) -> Proposal:
    """``person`` tells the bot in the group, and the bot asks there whether to save the tea."""
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    bot.group(person, "remember that the team drinks green tea", expect=2)
    return Proposal.objects.get()


def block(bot: Driver, person: Person) -> None:
    """``person`` asked to pair and the owner denied it: they are blocked."""
    sender = services.sender_seen(binding_id=bot.binding.pk, external_id=sender_key(bot, person),
                                  display=person.name)
    offer = services.pairing_offer(sender=sender)
    request = sender.pairing_requests.get(code=offer.code)
    assert services.pairing_deny(request=request).status == SenderStatus.BLOCKED


def test_a_blocked_senders_taps_in_a_group_are_ignored_without_a_word(bot, owner, model, alice, carol):
    pair(bot, alice, can_confirm=True)
    proposal = asked_in_group(bot, model, alice)
    block(bot, carol)

    taps = [bot.tap_seen(carol, answer, proposal.pk, in_group=True) for answer in ("yes", "no", "yes")]

    assert all(tapped.public == [] and tapped.private == [] and tapped.card == [] for tapped in taps), taps
    proposal.refresh_from_db()
    assert proposal.status == "pending" and notes_of(owner, group_scope(bot)) == ""


def test_an_unpaired_senders_tap_in_a_group_is_answered_to_them_alone(bot, owner, model, alice, carol):
    assert core.UNPAIRED_TAP_TEXT.startswith("Only people paired with this bot can answer its questions")
    pair(bot, alice, can_confirm=True)
    proposal = asked_in_group(bot, model, alice)

    taps = [bot.tap_seen(carol, "yes", proposal.pk, in_group=True) for _ in range(3)]

    for tapped in taps:
        assert tapped.public == [] and tapped.card == [], tapped  # the group sees nothing, however often
        assert tapped.private == [core.UNPAIRED_TAP_TEXT]
    proposal.refresh_from_db()
    assert proposal.status == "pending" and notes_of(owner, group_scope(bot)) == ""
