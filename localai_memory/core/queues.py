"""How the one Celery queue orders its work: what must stay on time first, bulk work behind it.

Every task goes to one queue (``CELERY_QUEUE``), so any worker started on it runs all of them. Within it,
the Redis transport keeps one list per priority and a worker takes from the most urgent first (0 is the
most urgent there). The proposal sweep, the bridges' tidy-up, a run a trigger started and a pass somebody
asked for now go at the default, 0; the work that comes in bulk and may run minutes late — consolidation
passes after turns and on the schedule, the recall catch-up — goes at ``BACKGROUND``. With the worker
reserving one task per pool process ahead (``CELERY_WORKER_PREFETCH_MULTIPLIER = 1``), a sweep sent while
hundreds of passes wait starts as soon as a pool process is free, instead of after all of them.

No task is held back with an ETA/countdown: a worker fetches such a task at once and runs it when it is due,
in front of whatever was queued meanwhile, whatever its priority. Work that must wait (a pass a minute after
a turn) waits in Redis until a beat task queues it (``growth.consolidation``).
"""

from __future__ import annotations

#: Bulk background work: queued behind everything at the default priority.
BACKGROUND = 9
