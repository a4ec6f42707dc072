"""The load driver: a second process that plays many users against the running app for a bounded time.

    .venv/bin/python bench/load/driver.py PLAN.json RESULTS.json

The plan (written by bench/load/run.py or bench/faults/run.py) names the app, the model server, the users
(number, chat ids) and the phases. The driver runs:

1. **the mix** for ``seconds`` with ``concurrency`` threads: chat turns (plain, reading a topic, proposing a
   note), the inbox (read it, confirm or reject one), Undo of a note saved at once, settings reads and
   writes, note edits (read, then write with the version read), the audit and the token route, each for a
   random user;
2. **the overhead pairs** (optional): the same turn sent to the app's ``/v1/chat/completions`` with memory
   on and straight to the model server, side by side, in random order within each pair.

Every request is recorded (wall-clock start, milliseconds, route, status, outcome) and every write the app
acknowledged or refused is put in a ledger, so the orchestrator can prove from the database that nothing
acknowledged was lost and nothing was saved twice. Each write carries a unique token in its text for that.
The driver never retries, except a confirm whose connection dropped (a killed worker): it asks again, as
a person would click again, and the ledger keeps both answers.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

TRANSPORT_ERRORS = (httpx.TransportError,)


def proposed_summary(token: str) -> str:
    """The line a proposing turn asks the model to save. It replaces a seeded line of at most five words and
    says more than it (seven words of its own), so under "Save it and tell me" it is an update saved at once,
    not a line cut down, which waits like a forget (``chats.tools._shortens_line``)."""
    return f"Note {token} about the garden, the kitchen and the weekend"


class Recorder:
    """Thread-safe lists of request records, ledger entries and overhead pairs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[list[Any]] = []  # [start (epoch s), ms, route, status, outcome]
        self.ledger: dict[str, list[Any]] = {"edits": [], "confirms": [], "rejects": [], "proposed": [],
                                              "saved": [], "undos": []}
        self.pairs: list[list[Any]] = []  # [kind, on_ms, direct_ms, on_first, memory_read]
        self.samples: dict[str, list[str]] = {}  # route|status -> a few bodies of unexpected answers

    def request(self, start: float, ms: float, route: str, status: int | str, outcome: str = "") -> None:
        with self.lock:
            self.requests.append([round(start, 4), round(ms, 2), route, status, outcome])

    def note(self, kind: str, entry: list[Any]) -> None:
        with self.lock:
            self.ledger[kind].append(entry)

    def sample(self, route: str, status: int | str, body: str) -> None:
        key = f"{route}|{status}"
        with self.lock:
            bucket = self.samples.setdefault(key, [])
            if len(bucket) < 3:
                bucket.append(body[:300])


def classify(response: httpx.Response) -> str:
    """``ok``, ``4xx``, ``503ok`` (JSON error + Retry-After), ``503bad``, ``5xx`` (anything else)."""
    status = response.status_code
    if status < 400:
        return "ok"
    if status < 500:
        return "4xx"
    if status == 503:
        try:
            body = response.json()
            good = body["error"]["code"] == "service_unavailable" and response.headers.get("Retry-After")
        except (ValueError, KeyError, TypeError):
            good = False
        return "503ok" if good else "503bad"
    return "5xx"


class User:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.number: int = spec["number"]
        self.username: str = spec["username"]
        self.token: str = spec["token"]
        self.chat: int = spec["chat"]
        self.overhead_chat: int = spec["overhead_chat"]
        self.private_chat: int = spec["private_chat"]  # the chat's Memory switch off: the app without memory
        self.auto: bool = spec["auto"]
        self.headers = {"Authorization": f"Token {self.token}"}


class Driver:
    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.base = plan["base_url"]
        self.model = plan["model_url"]
        self.bare: str | None = (plan.get("overhead") or {}).get("bare_url")  # the bare HTTP hop, if running
        self.users = [User(spec) for spec in plan["users"]]
        self.password = plan["password"]
        self.notes_per_user = plan["notes_per_user"]
        self.rec = Recorder()
        self.stop_file = Path(plan["stop_file"]) if plan.get("stop_file") else None
        self.confirm_share = float(plan.get("confirm_share", 0.75))
        weights: dict[str, float] = plan["mix"]
        self.actions: list[Callable[[httpx.Client, random.Random, User], None]] = []
        self.weights: list[float] = []
        for name, weight in weights.items():
            if weight > 0:
                self.actions.append(getattr(self, f"do_{name}"))
                self.weights.append(weight)

    # -- plumbing --------------------------------------------------------------------------------------

    def stopped(self) -> bool:
        return self.stop_file is not None and self.stop_file.exists()

    def call(self, client: httpx.Client, method: str, url: str, route: str, user: User | None,
             **kwargs: Any) -> httpx.Response | None:
        """One request, recorded. None when the connection failed (recorded as ``conn``)."""
        headers = dict(user.headers) if user else {}
        headers.update(kwargs.pop("headers", {}))
        start = time.time()
        began = time.perf_counter()
        try:
            response = client.request(method, url, headers=headers, **kwargs)
        except TRANSPORT_ERRORS as exc:
            self.rec.request(start, (time.perf_counter() - began) * 1000, route, "conn", type(exc).__name__)
            return None
        ms = (time.perf_counter() - began) * 1000
        outcome = classify(response)
        self.rec.request(start, ms, route, response.status_code, outcome)
        if outcome in ("5xx", "503bad"):
            self.rec.sample(route, response.status_code, response.text)
        return response

    @staticmethod
    def token() -> str:
        return uuid.uuid4().hex[:10]

    def pick_topic(self, rng: random.Random) -> str:
        return f"t{rng.randrange(self.notes_per_user):02d}"

    # -- the mix ---------------------------------------------------------------------------------------

    def turn(self, client: httpx.Client, user: User, content: str, route: str) -> dict[str, Any] | None:
        response = self.call(client, "POST", f"{self.base}/api/chats/{user.chat}/messages", route, user,
                             json={"content": content})
        if response is None or response.status_code != 200:
            return None
        return response.json()

    def do_turn_plain(self, client: httpx.Client, rng: random.Random, user: User) -> None:
        self.turn(client, user, "What should I cook tonight? Keep it short.", "POST /api/chats/{id}/messages")

    def do_turn_read(self, client: httpx.Client, rng: random.Random, user: User) -> None:
        self.turn(client, user, f"What do you remember about that? [[read:{self.pick_topic(rng)}]]",
                  "POST /api/chats/{id}/messages")

    def do_turn_propose(self, client: httpx.Client, rng: random.Random, user: User) -> None:
        token = self.token()
        topic = self.pick_topic(rng)
        body = self.turn(client, user, f"Please remember this. [[propose:{topic}:{proposed_summary(token)}]]",
                         "POST /api/chats/{id}/messages")
        if body is None:
            return
        memory = body.get("memory") or {}
        for item in memory.get("proposed", []):
            self.rec.note("proposed", [user.number, item["proposal_id"], token])
        for item in memory.get("saved", []):
            if item.get("change_id"):
                self.rec.note("saved", [user.number, item["change_id"], token])
                if rng.random() < 0.5:
                    self.undo(client, user, item["change_id"])

    def undo(self, client: httpx.Client, user: User, change_id: int) -> None:
        response = self.call(client, "POST", f"{self.base}/api/chats/changes/{change_id}/undo",
                             "POST /api/chats/changes/{id}/undo", user)
        status = response.status_code if response is not None else "conn"
        undo_id = response.json()["change"]["id"] if response is not None and response.status_code == 200 else None
        self.rec.note("undos", [user.number, change_id, status, undo_id])

    def do_inbox(self, client: httpx.Client, rng: random.Random, user: User) -> None:
        response = self.call(client, "GET", f"{self.base}/api/chats/memory/proposals",
                             "GET /api/chats/memory/proposals", user)
        if response is None or response.status_code != 200:
            return
        waiting = [p["id"] for p in response.json()["proposals"]]
        if not waiting:
            return
        proposal_id = rng.choice(waiting)
        if rng.random() < self.confirm_share:
            self.confirm(client, user, proposal_id)
        else:
            self.reject(client, user, proposal_id)

    def confirm(self, client: httpx.Client, user: User, proposal_id: int, attempts: int = 3) -> None:
        url = f"{self.base}/api/chats/memory/proposals/{proposal_id}/confirm"
        for attempt in range(attempts):
            response = self.call(client, "POST", url, "POST /api/chats/memory/proposals/{id}/confirm", user)
            if response is None:
                self.rec.note("confirms", [user.number, proposal_id, "conn", None, attempt])
                time.sleep(0.3)  # a person clicks again after a moment
                continue
            change = None
            if response.status_code == 200:
                change = (response.json().get("change") or {}).get("id")
            self.rec.note("confirms", [user.number, proposal_id, response.status_code, change, attempt])
            if response.status_code == 409 and _error_code(response) == "changed_since":
                continue  # the note changed since (another client's edit): seen now, confirmed again
            return

    def reject(self, client: httpx.Client, user: User, proposal_id: int) -> None:
        response = self.call(client, "POST", f"{self.base}/api/chats/memory/proposals/{proposal_id}/reject",
                             "POST /api/chats/memory/proposals/{id}/reject", user)
        self.rec.note("rejects", [user.number, proposal_id, response.status_code if response is not None else "conn"])

    def do_settings_get(self, client: httpx.Client, rng: random.Random, user: User) -> None:
        self.call(client, "GET", f"{self.base}/api/chats/memory", "GET /api/chats/memory", user)

    def do_settings_put(self, client: httpx.Client, rng: random.Random, user: User) -> None:
        self.call(client, "PUT", f"{self.base}/api/chats/memory", "PUT /api/chats/memory", user,
                  json={"messaging_save": rng.choice(["ask", "paired_private"])})

    def do_edit(self, client: httpx.Client, rng: random.Random, user: User) -> None:
        path = f"Memory/{self.pick_topic(rng)}.md"
        response = self.call(client, "GET", f"{self.base}/api/files/content", "GET /api/files/content", user,
                             params={"path": path})
        if response is None or response.status_code != 200:
            return
        version = response.json()["version"]
        token = self.token()
        content = f"Edited by hand, edit {token}.\n"
        response = self.call(client, "PUT", f"{self.base}/api/files/content", "PUT /api/files/content", user,
                             params={"path": path}, json={"content": content, "version": version})
        status = response.status_code if response is not None else "conn"
        saved_version = response.json()["version"] if status == 200 else None
        self.rec.note("edits", [user.number, path, version, token, status, saved_version])

    def do_audit(self, client: httpx.Client, rng: random.Random, user: User) -> None:
        self.call(client, "GET", f"{self.base}/api/chats/changes/audit", "GET /api/chats/changes/audit", user,
                  params={"limit": "20"})

    def do_notes(self, client: httpx.Client, rng: random.Random, user: User) -> None:
        self.call(client, "GET", f"{self.base}/api/chats/memory/notes", "GET /api/chats/memory/notes", user)

    def do_token(self, client: httpx.Client, rng: random.Random, user: User) -> None:
        self.call(client, "POST", f"{self.base}/api/auth/token", "POST /api/auth/token", None,
                  json={"username": user.username, "password": self.password})

    def mix_thread(self, number: int, deadline: float) -> None:
        rng = random.Random(self.plan.get("seed", 1) * 1000 + number)
        with httpx.Client(timeout=60) as client:
            while time.monotonic() < deadline and not self.stopped():
                action = rng.choices(self.actions, self.weights)[0]
                user = rng.choice(self.users)
                try:
                    action(client, rng, user)
                except Exception as exc:  # noqa: BLE001 - the driver must keep going and say what broke
                    self.rec.request(time.time(), 0.0, f"driver:{action.__name__}", "driver", repr(exc)[:200])

    # -- overhead pairs --------------------------------------------------------------------------------

    def on_turn(self, client: httpx.Client, user: User, body: dict[str, Any],
                chat: int | None = None) -> tuple[float, int, dict[str, float]]:
        began = time.perf_counter()
        response = client.post(f"{self.base}/v1/chat/completions", json=body,
                               headers={**user.headers, "X-Chat-Id": str(chat or user.overhead_chat)})
        ms = (time.perf_counter() - began) * 1000
        self.rec.request(time.time() - ms / 1000, ms, "POST /v1/chat/completions", response.status_code,
                         classify(response))
        response.raise_for_status()
        memory = json.loads(response.headers.get("X-Memory", "{}"))
        return ms, int(memory.get("read", 0)), server_timing(response.headers.get("Server-Timing", ""))

    def direct_turn(self, client: httpx.Client, body: dict[str, Any], base: str | None = None) -> float:
        """The client calling the model server itself (``base``: through another server, the bare hop)."""
        began = time.perf_counter()
        response = client.post(f"{base or self.model}/chat/completions", json=body)
        response.raise_for_status()
        message = response.json()["choices"][0]["message"]
        if message.get("tool_calls"):  # the same second call the app makes after running the tool
            call = message["tool_calls"][0]
            follow = {**body, "messages": [*body["messages"], message,
                                           {"role": "tool", "tool_call_id": call["id"], "name":
                                            call["function"]["name"], "content": json.dumps({"status": "proposed"})}]}
            client.post(f"{base or self.model}/chat/completions", json=follow).raise_for_status()
        return (time.perf_counter() - began) * 1000

    def pair_thread(self, number: int, pairs: int, kinds: dict[str, float], deadline: float) -> None:
        rng = random.Random(self.plan.get("seed", 1) * 7919 + number)
        names, weights = list(kinds), list(kinds.values())
        with httpx.Client(timeout=60) as app, httpx.Client(timeout=60) as model, httpx.Client(timeout=60) as bare:
            for _ in range(pairs):
                if self.stopped() or time.monotonic() > deadline:
                    return
                user = rng.choice(self.users)
                kind = rng.choices(names, weights)[0]
                if kind == "propose":
                    text = (f"Please remember this. "
                            f"[[propose:{self.pick_topic(rng)}:{proposed_summary(self.token())}]]")
                else:
                    # a new text every turn, as people write: no turn reuses an earlier query's embedding
                    text = f"What should I cook tonight? Keep it short. (ref {self.token()})"
                body = {"model": "bench-model", "messages": [{"role": "user", "content": text}]}
                # A plain turn is also sent to the user's private chat (its Memory switch off), and through the
                # bare HTTP hop, in random places among the calls: what the app costs as a proxy without memory,
                # and what one more HTTP server costs by itself.
                extra = (["off"] + (["bare"] if self.bare else [])) if kind == "plain" else []
                calls = ["on", "direct", *extra]
                rng.shuffle(calls)
                on_first = calls.index("on") < calls.index("direct")
                measured: dict[str, Any] = {}
                try:
                    for call in calls:
                        if call == "on":
                            measured["on"] = self.on_turn(app, user, body)
                        elif call == "direct":
                            measured["direct"] = self.direct_turn(model, body)
                        elif call == "bare":
                            measured["bare"] = self.direct_turn(bare, body, base=self.bare)
                        else:
                            measured["off"] = self.on_turn(app, user, body, chat=user.private_chat)[0]
                except (httpx.HTTPError, ValueError) as exc:
                    self.rec.request(time.time(), 0.0, "overhead pair", "driver", repr(exc)[:200])
                    continue
                on_ms, read, timing = measured["on"]
                off_ms = round(measured["off"], 3) if "off" in measured else None
                with self.rec.lock:
                    self.rec.pairs.append([kind, round(on_ms, 3), round(measured["direct"], 3), on_first, read,
                                           timing, off_ms,
                                           round(measured["bare"], 3) if "bare" in measured else None])

    # -- run -------------------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        started = time.time()
        phases: dict[str, list[float]] = {}
        seconds = float(self.plan["seconds"])
        background = int(self.plan.get("overhead", {}).get("background", 0))
        if seconds > 0:
            t0 = time.time()
            deadline = time.monotonic() + seconds
            threads = [threading.Thread(target=self.mix_thread, args=(i, deadline), daemon=True)
                       for i in range(int(self.plan["concurrency"]))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(seconds + 120)
            phases["mix"] = [t0, time.time()]
        overhead = self.plan.get("overhead") or {}
        if overhead.get("pairs"):
            t0 = time.time()
            concurrency = int(overhead.get("concurrency", 4))
            per_thread = max(1, int(overhead["pairs"]) // concurrency)
            deadline = time.monotonic() + float(overhead.get("max_seconds", 240))
            bg = [threading.Thread(target=self.mix_thread, args=(100 + i, deadline), daemon=True)
                  for i in range(background)]
            threads = [threading.Thread(target=self.pair_thread, args=(i, per_thread, overhead["kinds"], deadline),
                                        daemon=True) for i in range(concurrency)]
            for thread in [*bg, *threads]:
                thread.start()
            for thread in threads:
                thread.join(float(overhead.get("max_seconds", 240)) + 60)
            if bg and self.stop_file is not None:
                self.stop_file.touch()  # the pairs are done: end the background mix too
                for thread in bg:
                    thread.join(60)
            phases["overhead"] = [t0, time.time()]
        return {"started": started, "finished": time.time(), "phases": phases, "requests": self.rec.requests,
                "ledger": self.rec.ledger, "pairs": self.rec.pairs, "samples": self.rec.samples}


def server_timing(header: str) -> dict[str, float]:
    """``{"model": 50.2, "recall": 4.1, "app": 61.0}`` from a ``Server-Timing`` header (milliseconds)."""
    timing = {}
    for item in header.split(","):
        name, _, value = item.strip().partition(";dur=")
        try:
            timing[name] = float(value)
        except ValueError:
            continue
    return timing



def _error_code(response: httpx.Response) -> str | None:
    try:
        return response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def main(argv: list[str]) -> int:
    plan = json.loads(Path(argv[1]).read_text())
    result = Driver(plan).run()
    Path(argv[2]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
