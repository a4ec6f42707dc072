"""Seed the bench database: users with API tokens, memory settings, chats and 40 notes each.

The notes are rows exactly as the notes store writes them (one import change set per user, holding the index
and the topic files before/after, version 1 of each file), bulk-loaded with COPY for speed; the invariant
checker holds on a freshly seeded database. Each user's ``Memory/index.md`` has 40 lines (the cap) and
about 1.7 KB (under the 2 KiB cap): the largest index a turn can carry, so the overhead figure is its worst
case. Proposals replace a line, so the index never needs to grow.

Tokens are derived from the user's number (``token_for``), so the driver needs no file of secrets; these
users exist only in the bench's own database.
"""

from __future__ import annotations

import hashlib
import io
import random
from dataclasses import dataclass
from datetime import timedelta

NOTES_PER_USER = 40
AUTO_EVERY = 10  # users whose number % AUTO_EVERY < AUTO_SHARE save notes at once (with Undo)
AUTO_SHARE = 3
PASSWORD = "bench-password-not-secret"

FACTS = [
    "Lives in Rome", "Vegetarian", "Allergic to nuts", "Runs on Sundays", "Likes green tea",
    "Works night shifts", "Has two cats", "Speaks Dutch", "Learning piano", "Drives an old Fiat",
    "Prefers short answers", "Reads sci-fi", "Cooks on weekends", "Uses Linux", "Hates cilantro",
    "Bikes to work", "Plays chess", "Early riser", "Grows tomatoes", "Collects stamps",
]


def username(number: int) -> str:
    return f"bench{number:05d}"


def token_for(number: int) -> str:
    """The API key of bench user ``number`` (deterministic; only its SHA-256 is stored)."""
    return "lm_bench_" + hashlib.sha256(f"localai-memory-bench-{number}".encode()).hexdigest()[:32]


def saves_at_once(number: int) -> bool:
    return number % AUTO_EVERY < AUTO_SHARE


def topic(j: int) -> str:
    return f"t{j:02d}"


def summary_for(number: int, j: int) -> str:
    return f"{FACTS[(number + j) % len(FACTS)]} {j:02d}"


def details_for(number: int, j: int) -> str:
    # The same fact at the same position has the same text for every user, so the recall rows of 1,000
    # users need only 800 distinct passages embedded (see seed_recall).
    rng = random.Random(((number + j) % len(FACTS)) * 1000 + j)
    words = " ".join(rng.choice(["morning", "city", "family", "weekend", "work", "friends", "garden",
                                 "kitchen", "music", "travel", "books", "coffee"]) for _ in range(18))
    return f"{summary_for(number, j)}. Noted from a chat: {words}.\n"


def index_for(number: int) -> str:
    return "".join(f"- {topic(j)}: {summary_for(number, j)} -> {topic(j)}.md\n" for j in range(NOTES_PER_USER))


@dataclass(frozen=True)
class Seeded:
    users: int
    notes: int
    files: int
    seconds: float


def _copy(table: str, columns: list[str], rows: list[tuple]) -> None:
    """COPY rows into a table through Django's connection (text format, NULL as \\N)."""
    from django.db import connection

    connection.ensure_connection()
    buffer = io.StringIO()
    for row in rows:
        buffer.write("\t".join(_cell(value) for value in row) + "\n")
    with connection.connection.cursor() as cursor, cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        copy.write(buffer.getvalue())


def _cell(value: object) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def seed(*, users: int, log=print) -> Seeded:
    """Seed ``users`` users into the (empty, migrated) database Django is configured for."""
    import time

    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.db import transaction
    from django.utils import timezone

    from localai_memory.accounts.models import ApiToken, hash_key
    from localai_memory.chats.models import Chat
    from localai_memory.memory.models import MemorySettings
    from localai_memory.notes.models import ChangeSet, FileChange, FileVersion, NoteFile

    started = time.monotonic()
    now = timezone.now() - timedelta(days=3)
    User = get_user_model()
    password = make_password(PASSWORD)
    with transaction.atomic():
        created = User.objects.bulk_create(
            [User(username=username(n), password=password, date_joined=now) for n in range(users)], batch_size=2000)
        ids = {int(u.username.removeprefix("bench")): u.pk for u in created}
        ApiToken.objects.bulk_create([ApiToken(user_id=ids[n], name="bench", prefix=token_for(n)[:8],
                                               key_hash=hash_key(token_for(n))) for n in range(users)],
                                     batch_size=2000)
        MemorySettings.objects.bulk_create([MemorySettings(user_id=ids[n], save_mode="auto", save_mode_set=True)
                                            for n in range(users) if saves_at_once(n)], batch_size=2000)
        Chat.objects.bulk_create([Chat(owner_id=ids[n], title=title, private=title == "bench private")
                                  for n in range(users)
                                  for title in ("bench mix", "bench overhead", "bench private")], batch_size=6000)
        changes = ChangeSet.objects.bulk_create(
            [ChangeSet(owner_id=ids[n], created_at=now, source=ChangeSet.Source.IMPORT, actor="bench seed",
                       summary=f"Imported {NOTES_PER_USER} notes") for n in range(users)], batch_size=2000)
        change_of = {c.owner_id: c.pk for c in changes}
    files: list[tuple] = []
    versions: list[tuple] = []
    file_changes: list[tuple] = []
    for n in range(users):
        owner = ids[n]
        texts = {"Memory/index.md": index_for(n)}
        texts.update({f"Memory/{topic(j)}.md": details_for(n, j) for j in range(NOTES_PER_USER)})
        for path, text in texts.items():
            files.append((owner, path, text, 1, now, now))
            versions.append((owner, path, 1, text, False, change_of[owner], now))
            file_changes.append((change_of[owner], path, None, text, None, 1))
    _copy(NoteFile._meta.db_table, ["owner_id", "path", "content", "version", "created_at", "updated_at"], files)
    _copy(FileVersion._meta.db_table,
          ["owner_id", "path", "version", "content", "deleted", "change_set_id", "created_at"], versions)
    _copy(FileChange._meta.db_table, ["change_set_id", "path", "before", "after", "before_version",
                                      "after_version"], file_changes)
    recall = seed_recall(owner_ids=[ids[n] for n in range(users)], at=now, log=log)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    elapsed = time.monotonic() - started
    log(f"  seeded {users} users × {NOTES_PER_USER} notes ({len(files)} files, {recall} recall rows) in "
        f"{elapsed:.1f} s")
    return Seeded(users=users, notes=users * NOTES_PER_USER, files=len(files), seconds=elapsed)


def seed_recall(*, owner_ids: list[int], at, log=print) -> int:
    """The recall rows of the seeded notes, as ``recall.index`` keeps them (one per index line and topic
    file part, embedded by the configured embedder, the on-device model by default). Distinct passages are
    embedded once and copied to every row that has that text, server-side. Returns the number of rows."""
    from django.db import connection

    try:
        from localai_memory.recall.index import current_embedder, passage, scope_passages
        from localai_memory.recall.models import SOURCE_IMPORT, NoteVector
    except ImportError:
        log("  (no recall app: no recall rows seeded)")
        return 0
    from localai_memory.notes.paths import Scope

    rows: list[tuple] = []
    texts: dict[str, None] = {}
    for owner in owner_ids:
        for item in scope_passages(owner, Scope.user()).values():
            text = passage(item.topic, item.kind, item.text)
            texts[text] = None
            rows.append((owner, "user", "", item.topic, item.kind, item.part, item.path, item.text, SOURCE_IMPORT,
                         at, text))
    embedder = current_embedder()
    table = NoteVector._meta.db_table
    columns = ["owner_id", "scope_kind", "scope_key", "topic", "kind", "part", "path", "text", "source",
               "updated_at"]
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE seed_passages (owner_id bigint, scope_kind text, scope_key text, topic "
                       "text, kind text, part smallint, path text, text text, source text, updated_at timestamptz, "
                       "passage text)")
        cursor.execute("CREATE TEMP TABLE seed_vectors (passage text PRIMARY KEY, embedding vector)")
    _copy("seed_passages", [*columns, "passage"], rows)
    if embedder is None:
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {table} ({', '.join(columns)}, model_id) "
                           f"SELECT {', '.join(columns)}, '' FROM seed_passages")
        log(f"  no embedder configured: {len(rows)} recall rows without vectors (recall is lexical)")
        return len(rows)
    distinct = list(texts)
    vectors = []
    for start in range(0, len(distinct), 256):
        vectors.extend(embedder.embed(distinct[start:start + 256]))
    _copy("seed_vectors", ["passage", "embedding"],
          [(text, "[" + ",".join(f"{x:.7g}" for x in vector) + "]") for text, vector in zip(distinct, vectors,
                                                                                            strict=True)])
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({', '.join(columns)}, embedding, model_id, dim) "
                       f"SELECT {', '.join('p.' + c for c in columns)}, v.embedding, %s, %s "
                       "FROM seed_passages p JOIN seed_vectors v USING (passage)",
                       [embedder.model_id, len(vectors[0])])
        cursor.execute("DROP TABLE seed_passages, seed_vectors")
    log(f"  embedded {len(distinct)} distinct passages with {embedder.model_id} for {len(rows)} recall rows")
    return len(rows)


def seed_proposals(*, per_user: int, expired: int = 0, first: int = 1000, log=print) -> dict[str, int]:
    """Pending proposals for every bench user (fresh: made now, they live 24 hours), and optionally
    ``expired`` ones past their life, for the sweep to mark (numbered from ``first``, so a second call makes
    other ones). Returns how many of each were made."""
    import time

    from django.utils import timezone

    from localai_memory.chats.models import Chat
    from localai_memory.memory import policy
    from localai_memory.memory.models import Proposal
    from localai_memory.memory.proposals import proposal_fingerprint
    from localai_memory.notes.paths import Scope

    started = time.monotonic()
    now = timezone.now()
    from django.contrib.auth import get_user_model

    chats = dict(Chat.objects.filter(title="bench mix").values_list("owner_id", "pk"))
    owners = sorted(chats)
    numbers = {pk: int(name.removeprefix("bench"))
               for pk, name in get_user_model().objects.filter(pk__in=owners).values_list("pk", "username")}
    rows: list[Proposal] = []

    def make(owner: int, k: int, *, created, expires) -> Proposal:
        j = (k * 7 + owner) % NOTES_PER_USER
        text = f"Seeded {k} for {owner}"[:26]
        # Made over the seeded note, as proposal_create snapshots it (a confirm checks it did not change).
        return Proposal(owner_id=owner, status=Proposal.Status.PENDING, source=Proposal.Source.MODEL,
                        scope_kind="user", scope_key="", topic=topic(j), summary=text, details="",
                        old_summary=summary_for(numbers[owner], j), old_details=details_for(numbers[owner], j),
                        reason="ask_first", origin="web", chat_id=chats[owner],
                        fingerprint=proposal_fingerprint(owner_id=owner, scope=Scope.user(), topic=topic(j),
                                                         summary=text, details="", delete=False),
                        created_at=created, expires_at=expires)

    for owner in owners:
        for k in range(per_user):
            rows.append(make(owner, k, created=now, expires=now + policy.PROPOSAL_TTL))
    old = now - policy.PROPOSAL_TTL - timedelta(hours=1)
    for i in range(expired):
        owner = owners[i % len(owners)]
        rows.append(make(owner, first + i, created=old, expires=old + policy.PROPOSAL_TTL))
    Proposal.objects.bulk_create(rows, batch_size=5000)
    log(f"  made {per_user * len(owners)} pending and {expired} expired proposals in "
        f"{time.monotonic() - started:.1f} s")
    return {"pending": per_user * len(owners), "expired": expired}


def main() -> None:
    """``python bench/load/seed.py --users N``: seed the database named by DATABASE_URL (the template)."""
    import argparse
    import os
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, required=True)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "localai_memory.settings")
    import django

    django.setup()
    seed(users=args.users)


if __name__ == "__main__":
    main()
