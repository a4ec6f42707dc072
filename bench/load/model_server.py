"""The bench's model server: the loopback OpenAI-protocol fake of the tests, with a fixed latency and replies
decided by the request alone (no shared script queue), so any number of clients can use it at once, and
TCP_NODELAY on every connection (see ``_track``).

What the model "does" is written in the user's message by the load driver:

* ``[[propose:<topic>:<summary>]]`` → a ``propose_change`` tool call for that note;
* ``[[read:<topic>]]`` → a ``context_read`` tool call;
* anything else → a short text reply.

After a tool result (the last message has the role ``tool``) it answers with text. It keeps no history of
requests (a long run would otherwise hold every body in memory). It listens on 127.0.0.1 only.

    .venv/bin/python bench/load/model_server.py --latency-ms 50     # standalone; prints its base URL
"""

from __future__ import annotations

import argparse
import re
import socket
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakes._loopback import Request, Response
from tests.fakes.openai_server import OpenAIServer, ScriptedReply, reply, tool_calls

PROPOSE = re.compile(r"\[\[propose:([a-z0-9-]{1,40}):([^\]]{1,200})\]\]")
READ = re.compile(r"\[\[read:([a-z0-9-]{1,40})\]\]")


def decide(body: dict[str, Any]) -> ScriptedReply:
    """The reply to one chat completion request, from its messages only."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return reply("Done. Anything else?")
    text = last.get("content") if isinstance(last.get("content"), str) else ""
    match = PROPOSE.search(text)
    if match:
        return tool_calls(("propose_change", {"kind": "memory", "topic": match.group(1),
                                              "summary": match.group(2)}))
    match = READ.search(text)
    if match:
        return tool_calls(("context_read", {"topic": match.group(1)}))
    return reply("Sure: here is a short answer to your question.")


class BenchModelServer(OpenAIServer):
    """OpenAIServer with a fixed latency, request-driven replies and no request log."""

    def __init__(self, *, latency_ms: int = 50) -> None:
        super().__init__(default_reply=decide, latency_ms=latency_ms)  # type: ignore[arg-type]
        self.served = 0
        #: Requests answering a tool call (their last message a tool result), and those among them whose call
        #: had been answered before: the app asked again because a note's write answered otherwise than the
        #: result it first sent (``chats.tools.ToolContext.speculate``), its first answer dropped unread.
        self.after_tools = 0
        self.asked_again = 0
        self._answered: set[str] = set()
        self._count_lock = threading.Lock()

    def start(self) -> BenchModelServer:
        super().start()
        assert self._httpd is not None
        # A client that went away (a killed web worker) is part of the fault run, not an error to print.
        self._httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        return self

    def _track(self, sock: socket.socket) -> None:
        # The fake writes the head and the body of a response in two sends; without TCP_NODELAY, Nagle's
        # algorithm and the client's delayed ACK hold the body ~40 ms on a kept-alive connection, which
        # would add a fake 40 ms to the direct calls' tail (and to the app's, once it keeps connections).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super()._track(sock)

    def _respond(self, request: Request) -> Response:
        response = super()._respond(request)
        with self._cond:  # forget what was asked: a ten-minute run must not keep every body
            self.log.clear()
            self.requests.clear()
        body = request.json if request.path.rstrip("/").endswith("/chat/completions") else None
        messages = body.get("messages") if isinstance(body, dict) else None
        last = messages[-1] if isinstance(messages, list) and messages and isinstance(messages[-1], dict) else {}
        with self._count_lock:
            self.served += 1
            if last.get("role") == "tool":
                self.after_tools += 1
                call = str(last.get("tool_call_id"))
                if call in self._answered:
                    self.asked_again += 1
                self._answered.add(call)
        return response


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the bench's model server until interrupted.")
    parser.add_argument("--latency-ms", type=int, default=50)
    args = parser.parse_args()
    server = BenchModelServer(latency_ms=args.latency_ms).start()
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
