"""Celery tasks of the bridges: announcing an expired proposal in its chat, telling the replies a web process
left on their way when it ended (``bridges.pending.tell_cut_off``, every minute), and tidying old rows.

Correctness never waits for these (DESIGN §3): a proposal's 24 hours and an Undo's 30 minutes are checked
when somebody acts. ``announce_proposal_expired`` is registered in ``memory.proposals.expiry_listeners`` (see
``apps.py``) and runs inside the memory sweep; raising makes the sweep try again next time.
"""

from __future__ import annotations

import logging

from celery import shared_task

from localai_memory.memory.models import Proposal

from . import core, services
from .crypto import CredentialsUnreadable, decrypt
from .runtime import Revoked

log = logging.getLogger(__name__)

TIDY_TASK = "bridges.tasks.tidy"
TELL_CUT_OFF_TASK = "bridges.tasks.tell_cut_off"
BEAT_SCHEDULE = {
    "bridges-tidy": {"task": TIDY_TASK, "schedule": 3600.0},
    "bridges-tell-cut-off": {"task": TELL_CUT_OFF_TASK, "schedule": 60.0},
}


def announce_proposal_expired(proposal: Proposal) -> None:
    """Post "that note was not saved" in each chat that asked about ``proposal`` (an expiry listener)."""
    from .runner import adapter

    for notice, announcement in core.expiry_announcements(proposal):
        binding = notice.conversation.binding
        if not binding.enabled or not binding.owner.is_active:
            core.notice_close(notice)  # nobody to tell there (the bot is off); the owner sees it in the inbox
            continue
        try:
            credentials = decrypt(binding.credentials)
            adapter(binding.platform).send_message(
                binding_id=binding.pk, credentials=credentials, conversation_id=announcement.conversation_id,
                outbound=announcement.outbound)
        except (Revoked, CredentialsUnreadable) as exc:
            # Revoked says why in ``reason``; CredentialsUnreadable is an ApplicationError with a ``message``.
            code, reason = (exc.code, exc.reason) if isinstance(exc, Revoked) else (exc.code, exc.message)
            services.binding_report_revoked(binding_id=binding.pk, code=code, reason=reason)
        core.notice_close(notice)


@shared_task(name=TIDY_TASK, ignore_result=True)
def tidy() -> dict[str, int]:
    """Forget old delivery claims, mark pairing codes past their hour and drop replies on their way that are
    too old ever to be told (``pending.TELL_FOR``), left by a bot that never started again."""
    from . import pending

    return {"deliveries": services.deliveries_prune(), "pairings": services.pairings_expire_due(),
            "replies": services.replies_pending_prune(older_than=pending.TELL_FOR)}


@shared_task(name=TELL_CUT_OFF_TASK, ignore_result=True)
def tell_cut_off() -> int:
    """Tell the senders whose messages a web process that ended (a deploy, a crash) was answering: the answer
    late, or "please send it again" (``bridges.pending``). Here, not at the next webhook request, so that a
    bot nobody writes to tells too, and not in runbridges, which a webhook-only setup need not run."""
    from . import pending

    return pending.tell_cut_off()
