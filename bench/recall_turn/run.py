"""Recall latency at scale: build one turn's memory block with 10,000 users × 40 notes in PostgreSQL.

    .venv/bin/python bench/recall_turn/run.py                 # seed once (kept), then measure
    .venv/bin/python bench/recall_turn/run.py --reseed        # drop the bench data and seed again
    .venv/bin/python bench/recall_turn/run.py --users 2000    # a smaller run

It uses its own embedded PostgreSQL + pgvector under ``.localai/bench-recall`` (``LOCALAI_MEMORY_DATA_DIR``)
and refuses to run against a ``DATABASE_URL`` unless ``--use-database-url`` is given: seeding replaces
every note of the bench users.

Seeding (bounded, COPY): every user gets 40 index lines, about 10 of them with a topic file (their
``Memory/index.md`` and ``Memory/<topic>.md`` in the notes store, and one recall row with its vector per
line and per topic file). The vectors are real
on-device embeddings, made once for the 400 + 100 distinct texts of a catalogue and reused, so thousands of
users hold identical vectors (the case where a global approximate index filtered per user afterwards comes
back short or empty).

Measured per turn, in this process, exactly as a chat turn builds it: read the user's index and build the
fenced memory block (``chats.context.memory_block``), then ``recall.service.recall_contribution`` (fetch
the user's rows of the allowed scope through the B-tree, rank exactly, build the fenced recall section):

1. **excluding the embedding** — for every user, with the query's vector computed beforehand; each
   result is checked against the same ranking of that user's 40 notes in memory: it must be identical, so
   no user gets an empty or short result while matching notes exist;
2. **including the embedding** — for a random sample of users, a realistic message embedded by the
   on-device model (all-MiniLM-L6-v2 int8) inside the timed region, checked the same way;
3. **the alternative** — pgvector computing the cosine distance in SQL over the same filtered rows, against
   fetching the vectors and ranking in numpy (what recall does).
"""

from __future__ import annotations

import argparse
import io
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LOCALAI_MEMORY_DATA_DIR", str(ROOT / ".localai" / "bench-recall"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "localai_memory.settings")

NOTES = 40
USER_PREFIX = "rbench-"
THEMES = {
    "home": ["lives in Rome", "lives in Oslo", "rents a flat in Lyon", "owns a house in Porto", "lives in Kyoto",
             "moved to Austin", "lives on a boat in Amsterdam", "shares a flat in Berlin", "lives in Nairobi",
             "lives near Lima"],
    "pet": ["has a beagle named Rex", "has two cats", "keeps a parrot", "has a goldfish", "walks a husky",
            "fosters kittens", "has a rabbit called Bun", "owns a horse", "keeps bees", "has a tortoise"],
    "diet": ["is vegetarian", "is vegan", "eats no gluten", "avoids dairy", "loves spicy food", "fasts on Mondays",
             "eats fish but no meat", "is allergic to peanuts", "drinks no coffee", "follows keto"],
    "sport": ["runs marathons", "plays tennis on Sundays", "swims every morning", "climbs at the gym",
              "cycles to work", "does yoga", "plays chess competitively", "skis every winter", "boxes twice a week",
              "surfs in summer"],
    "music": ["plays the piano", "sings in a choir", "loves jazz", "plays bass in a band", "collects vinyl",
              "learns the violin", "listens to opera", "plays drums", "writes songs", "likes techno"],
    "work": ["is a nurse", "teaches maths", "is a software engineer", "runs a bakery", "is a lawyer",
             "drives a taxi", "is a pilot", "works as an architect", "is a chef", "is a farmer"],
    "car": ["drives an electric car", "has no car", "rides a motorbike", "drives a van", "owns a vintage Fiat",
            "car-shares", "leases a hybrid", "is learning to drive", "drives a pickup", "has a camper"],
    "garden": ["grows tomatoes", "keeps roses", "has an allotment", "grows herbs on the balcony", "has no garden",
               "plants tulips", "grows chillies", "composts everything", "has fruit trees", "grows cacti"],
    "travel": ["visits Japan yearly", "hates flying", "travels by train", "backpacks in Asia", "goes to Greece",
               "camps in Scotland", "cruises in winter", "visits family in India", "road-trips in the US",
               "hikes in Nepal"],
    "book": ["reads crime novels", "loves poetry", "reads history", "prefers audiobooks", "reads sci-fi",
             "is in a book club", "reads in French", "collects comics", "reads biographies", "writes a novel"],
}
SUFFIXES = ("", " since 2020", " for years", " lately")
MESSAGES = [  # what a user types; {s} is one of their notes, {t} its theme
    "Remind me, what do you know about my {t}?",
    "Any tips given that I {s}?",
    "Can you plan my weekend? I {s}.",
    "What should I keep in mind about my {t} this week?",
    "{s} — does that change what you'd suggest?",
]


def catalogue() -> list[tuple[str, str, str, str | None]]:
    """400 distinct notes: (theme, topic, summary, details or None); every 4th has a topic file."""
    notes = []
    for theme, summaries in THEMES.items():
        for n, summary in enumerate(summaries):
            for v, suffix in enumerate(SUFFIXES):
                k = len(notes)
                details = (f"More about it: {summary}{suffix}. Noted from a chat; it matters when planning "
                           f"anything about {theme}.") if k % 4 == 0 else None
                notes.append((theme, f"{theme}-{n}{'abcd'[v]}", summary + suffix, details))
    return notes


#: The clock of the seed and of every ranking: notes are 0-59 days older than this, exactly as the reference
#: ranking in memory sees them (a clock read at run time would differ from the seed's by the time between).
SEED_NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def picks_of(u: int) -> list[int]:
    """The 40 catalogue notes of user number ``u`` (distinct; overlapping sets across users)."""
    return [(u * 7 + j * 10) % 400 for j in range(NOTES)]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def summary_line(name: str, values: list[float]) -> str:
    return (f"{name:<52} n={len(values):>6}  p50 {pct(values, 50):6.2f} ms  p95 {pct(values, 95):6.2f} ms  "
            f"p99 {pct(values, 99):6.2f} ms  max {max(values):7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--sample", type=int, default=2_000, help="turns measured with the embedding")
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--use-database-url", action="store_true",
                        help="allow running against DATABASE_URL (seeding replaces the bench users' notes)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if os.environ.get("DATABASE_URL") and not args.use_database_url:
        sys.exit("DATABASE_URL is set: pass --use-database-url to seed and measure there")
    started = time.perf_counter()

    import django

    django.setup()
    import numpy as np
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from localai_memory.chats import context
    from localai_memory.notes import selectors as notes_selectors
    from localai_memory.notes.models import NoteFile
    from localai_memory.notes.paths import IndexEntry, Scope, render_index
    from localai_memory.recall import index, service
    from localai_memory.recall.embedders import OnDeviceEmbedder
    from localai_memory.recall.models import NoteVector
    from localai_memory.recall.ranking import Candidate, RecallQuery, importance_of, passage_text, rank_notes

    call_command("migrate", verbosity=0)
    print(f"database: {connection.settings_dict['NAME']} via {connection.settings_dict['HOST'] or 'socket'}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    embedder = OnDeviceEmbedder()
    notes = catalogue()
    t0 = time.perf_counter()
    line_vectors = embedder.embed([passage_text(topic, summary) for _, topic, summary, _ in notes])
    detail_index = {k: i for i, k in enumerate(k for k, n in enumerate(notes) if n[3])}
    detail_vectors = embedder.embed([passage_text(notes[k][1], notes[k][3]) for k in detail_index])
    print(f"embedded the catalogue ({len(notes)} lines, {len(detail_index)} topic files) once in "
          f"{time.perf_counter() - t0:.1f} s")

    users_model = get_user_model()
    have_users = users_model.objects.filter(username__startswith=USER_PREFIX).count()
    expected_rows = sum(NOTES + sum(1 for k in picks_of(u) if notes[k][3]) for u in range(args.users))
    have_rows = NoteVector.objects.filter(owner__username__startswith=USER_PREFIX).count() if have_users else 0
    if args.reseed or have_users != args.users or have_rows != expected_rows:
        t0 = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM recall_notevector WHERE owner_id IN (SELECT id FROM auth_user "
                           "WHERE username LIKE %s)", [USER_PREFIX + "%"])
            cursor.execute("DELETE FROM notes_notefile WHERE owner_id IN (SELECT id FROM auth_user "
                           "WHERE username LIKE %s)", [USER_PREFIX + "%"])
        users_model.objects.filter(username__startswith=USER_PREFIX).delete()
        users_model.objects.bulk_create([users_model(username=f"{USER_PREFIX}{n}", password="!")
                                         for n in range(args.users)], batch_size=5000)
        ids = list(users_model.objects.filter(username__startswith=USER_PREFIX)
                   .order_by("id").values_list("id", flat=True))
        vec_text = ["[" + ",".join(f"{x:.6f}" for x in row) + "]" for row in line_vectors]
        det_text = ["[" + ",".join(f"{x:.6f}" for x in row) + "]" for row in detail_vectors]
        now = SEED_NOW
        model_id = embedder.model_id

        def esc(text: str) -> str:
            return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")

        files_cols = "owner_id, path, content, version, created_at, updated_at"
        vec_cols = ("owner_id, scope_kind, scope_key, topic, kind, path, text, source, updated_at, embedding, "
                    "model_id, dim")
        with connection.cursor() as cursor:
            for start in range(0, len(ids), 500):
                files, rows = io.StringIO(), io.StringIO()
                for u in range(start, min(start + 500, len(ids))):
                    owner = ids[u]
                    mine = picks_of(u)
                    entries = [IndexEntry(notes[k][1], notes[k][2], notes[k][1] if notes[k][3] else None)
                               for k in mine]
                    stamp = now.isoformat()
                    files.write(f"{owner}\tMemory/index.md\t{esc(render_index(entries))}\t1\t{stamp}\t{stamp}\n")
                    for k in mine:
                        _, topic, summary, details = notes[k]
                        when = (now - timedelta(days=k % 60)).isoformat()
                        source = "model" if k % 3 == 0 else "user"
                        rows.write(f"{owner}\tuser\t\t{topic}\tline\tMemory/index.md\t{esc(summary)}\t{source}\t"
                                   f"{when}\t{vec_text[k]}\t{model_id}\t384\n")
                        if details:
                            files.write(f"{owner}\tMemory/{topic}.md\t{esc(details)}\\n\t1\t{stamp}\t{stamp}\n")
                            rows.write(f"{owner}\tuser\t\t{topic}\tdetails\tMemory/{topic}.md\t{esc(details)}\\n\t"
                                       f"{source}\t{when}\t{det_text[detail_index[k]]}\t{model_id}\t384\n")
                for table, cols, buffer in (("notes_notefile", files_cols, files),
                                            ("recall_notevector", vec_cols, rows)):
                    with cursor.cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
                        copy.write(buffer.getvalue())
            cursor.execute("VACUUM ANALYZE notes_notefile")
            cursor.execute("VACUUM ANALYZE recall_notevector")
        print(f"seeded {len(ids):,} users, {NoteVector.objects.count():,} recall rows and "
              f"{NoteFile.objects.count():,} note files with COPY in {time.perf_counter() - t0:.1f} s")
    else:
        print(f"reusing {have_users:,} seeded users and {have_rows:,} recall rows (--reseed to seed again)")
    ids = list(users_model.objects.filter(username__startswith=USER_PREFIX).order_by("id")
               .values_list("id", flat=True))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_size_pretty(pg_total_relation_size('recall_notevector')), "
                       "(SELECT count(*) FROM recall_notevector)")
        size, total = cursor.fetchone()
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'recall_notevector' ORDER BY 1")
        index_names = [row[0] for row in cursor.fetchall()]
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS OFF, TIMING OFF, SUMMARY OFF) SELECT scope_kind, scope_key, "
                       "topic, kind, text, source, updated_at, model_id, vector_send(embedding) FROM "
                       "recall_notevector WHERE owner_id = %s AND ((scope_kind = 'user' AND scope_key = ''))",
                       [ids[len(ids) // 2]])
        plan = [row[0] for row in cursor.fetchall()]
    print(f"recall_notevector: {total:,} rows, {size}; indexes: {', '.join(index_names)} (no HNSW/IVF)")
    print("plan of one user's fetch:\n  " + "\n  ".join(plan))

    scope = Scope.user()
    now = SEED_NOW  # the seed's clock: the reference ranking must see the ages the rows hold
    model_id = embedder.model_id

    def truth(u: int, query: RecallQuery, vectors: np.ndarray) -> list[str]:
        """The same ranking over user ``u``'s own notes, in memory (the answer recall must give)."""
        own = []
        for k in picks_of(u):
            _, topic, summary, details = notes[k]
            rows = [line_vectors[k]] + ([detail_vectors[detail_index[k]]] if details else [])
            text = f"{topic}: {summary}" + (f"\n{details.strip()}" if details else "")
            source = "model" if k % 3 == 0 else "user"
            own.append(Candidate(id=("user", "", topic), text=text, updated_at=now - timedelta(days=k % 60),
                                 source=source, importance=importance_of(source), vectors=np.stack(rows),
                                 model_id=model_id))
        return [key[2] for key in rank_notes(own, query=query, now=now, query_vectors=vectors,
                                             query_model_id=model_id).ids]

    def turn(owner: int, query: RecallQuery, vectors: np.ndarray | None) -> tuple[str, str, dict]:
        """One turn's memory block: the index block, then recall (embedding the query when no vectors)."""
        text = notes_selectors.index_text(owner_id=owner, scope=scope)
        block = context.memory_block([context.IndexShown("user", scope, text)])
        recalled, report, _ = service.recall_contribution(owner_id=owner, scopes=[scope], query=query,
                                                          embedder=embedder, query_vectors=vectors, now=now)
        return block.text, recalled, report

    rng = random.Random(args.seed)
    for u in rng.sample(range(len(ids)), min(200, len(ids))):  # warm the caches and the model
        turn(ids[u], RecallQuery(text=notes[picks_of(u)[0]][2]), None)

    # 1. Every user, the query's vector computed beforehand.
    excluding: list[float] = []
    empty = short = mismatched = 0
    for u, owner in enumerate(ids):
        k = picks_of(u)[rng.randrange(NOTES)]
        query = RecallQuery(text=f"Tell me about this: I {notes[k][2]}")
        vectors = embedder.embed(query.texts_to_embed())
        t0 = time.perf_counter()
        index_block, _, report = turn(owner, query, vectors)
        excluding.append((time.perf_counter() - t0) * 1000)
        expected = truth(u, query, vectors)
        if report["topics"] != expected:
            mismatched += 1
            short += len(report["topics"]) < len(expected)
        empty += bool(expected) and not report["topics"]
        assert index_block, owner
    print(f"\n1. every user ({len(ids):,}), query embedded beforehand: results identical to ranking the user's own "
          f"notes in memory for {len(ids) - mismatched:,}; empty {empty}, short {short}, different {mismatched}")

    # 2. A sample, the message embedded inside the timed region.
    including: list[float] = []
    embed_only: list[float] = []
    with_context: list[float] = []
    nonempty = checked = differ = 0
    sample = rng.sample(range(len(ids)), min(args.sample, len(ids)))
    for n, u in enumerate(sample):
        k = picks_of(u)[rng.randrange(NOTES)]
        theme, _, summary, _ = notes[k]
        text = MESSAGES[n % len(MESSAGES)].format(s=summary, t=theme)
        context_turns = (f"Earlier I said I {summary}.",) if n % 4 == 3 else ()
        query = RecallQuery(text=text, context=context_turns)
        index.forget_query_vectors()  # a new message: never a vector this process remembers
        if context_turns:  # a conversation: the earlier message was the newest one of the turn before
            turn(ids[u], RecallQuery(text=context_turns[0]), None)
        t0 = time.perf_counter()
        _, _, report = turn(ids[u], query, None)
        elapsed = (time.perf_counter() - t0) * 1000
        (with_context if context_turns else including).append(elapsed)
        checked += 1
        nonempty += bool(report["topics"])
        expected = truth(u, query, embedder.embed(query.texts_to_embed()))
        differ += report["topics"] != expected
        empty += bool(expected) and not report["topics"]
    embed_context: list[float] = []
    index_only: list[float] = []
    pair = RecallQuery(text="Can you plan my weekend? I grows tomatoes lately.",
                       context=("Earlier I said I grows tomatoes lately.",)).texts_to_embed()
    for n in range(300):
        t0 = time.perf_counter()
        embedder.embed(["What should I keep in mind about my garden this week?"])
        embed_only.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        embedder.embed(pair)
        embed_context.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        context.memory_block([context.IndexShown("user", scope, notes_selectors.index_text(
            owner_id=ids[sample[n % len(sample)]], scope=scope))])
        index_only.append((time.perf_counter() - t0) * 1000)
    print(f"2. {checked:,} sampled turns with the embedding inside: {nonempty:,} recalled at least one note; "
          f"different from the in-memory ranking: {differ}")

    # 3. pgvector's distance in SQL over the same filtered rows, against fetch + numpy.
    sql_ms: list[float] = []
    numpy_ms: list[float] = []
    for u in sample[:1000]:
        vectors = line_vectors[picks_of(u)[0]][None, :]
        literal = "[" + ",".join(f"{x:.6f}" for x in vectors[0]) + "]"
        t0 = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("SELECT topic, kind, 1 - (embedding <=> %s::vector) FROM recall_notevector "
                           "WHERE owner_id = %s AND scope_kind = 'user' AND scope_key = '' ORDER BY 3 DESC",
                           [literal, ids[u]])
            cursor.fetchall()
        sql_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        got = service.owner_notes(owner_id=ids[u], scopes=[scope])
        for note in got:
            for passage in note.vectors:
                float(passage.vector @ vectors[0])
        numpy_ms.append((time.perf_counter() - t0) * 1000)

    print("\nlatency of one turn's memory block (index block + recall), in this process:")
    print(summary_line("excluding the query embedding (every user)", excluding))
    print(summary_line("including the on-device embedding (new message)", including))
    if with_context:
        print(summary_line("including it, with an earlier turn as context", with_context))
    print(summary_line("  of which: the index block alone (read + fence)", index_only))
    print(summary_line("  of which: the on-device embedding, one message", embed_only))
    print(summary_line("  of which: message + earlier turn, neither remembered", embed_context))
    print(summary_line("cosine in SQL (pgvector <=>) over the user's rows", sql_ms))
    print(summary_line("fetch vectors + cosine in numpy (what recall does)", numpy_ms))
    both = including + with_context
    target = pct(both, 95)
    print(f"\np95 including the embedding: {target:.2f} ms (target ≤ 10 ms: {'met' if target <= 10 else 'NOT met'}); "
          f"empty or short results: {empty + short}; load average now {os.getloadavg()[0]:.1f}; "
          f"total {time.perf_counter() - started:.0f} s")
    if empty or short or mismatched or differ:
        sys.exit(1)


if __name__ == "__main__":
    main()
