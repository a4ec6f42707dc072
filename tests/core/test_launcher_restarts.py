"""``manage.py up`` starts a dead worker again, but not forever."""

from __future__ import annotations

from localai_memory.core.management.commands.up import RestartBudget


def test_a_worker_that_dies_now_and_then_is_always_started_again() -> None:
    budget = RestartBudget(limit=5, window=60)
    assert all(budget.allow("worker", now=t * 30.0) for t in range(20))


def test_a_worker_that_keeps_dying_stops_being_restarted_within_the_minute() -> None:
    budget = RestartBudget(limit=5, window=60)
    assert [budget.allow("worker", now=float(t)) for t in range(7)] == [True] * 5 + [False] * 2
    assert budget.allow("beat", now=6.0) is True  # each child has its own budget
    assert budget.allow("worker", now=61.0) is True  # a minute later it may come back
