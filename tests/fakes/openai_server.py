"""A loopback OpenAI-compatible model server with scripted replies, for tests of the chat turn.

`POST /v1/chat/completions` answers from a script queue (`reply`, `tool_calls`, a callable, a raw
response dict, or a `Response` of raw bytes) and records every request body, so a test can assert exactly what the model was shown.
`POST /v1/embeddings` returns deterministic bag-of-words hash vectors (texts that share words are close),
or whatever an `embed` function returns. `GET /v1/models` lists `models`. Faults: `fail_next(500)`,
`fail_next("garbage")`, `fail_next("hang")`, a fixed `latency_ms`, and `think_until` for a slow answer.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import math
import re
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes._loopback import Fault, LoopbackHTTPServer, Request, Response, json_response

DEFAULT_MODEL = "fake-model"
DEFAULT_EMBEDDING_DIM = 384


@dataclass(frozen=True)
class ScriptedReply:
    """One assistant message the fake will answer with (built by `reply` or `tool_calls`)."""

    content: str | None = None
    calls: tuple[tuple[str, dict[str, Any] | str, str | None], ...] = ()
    finish_reason: str = "stop"
    usage: dict[str, int] | None = field(default=None)


def reply(text: str, *, finish_reason: str = "stop") -> ScriptedReply:
    """An assistant message with plain text."""
    return ScriptedReply(content=text, finish_reason=finish_reason)


def tool_calls(
    *calls: tuple[str, dict[str, Any] | str] | tuple[str, dict[str, Any] | str, str], text: str | None = None
) -> ScriptedReply:
    """An assistant message calling tools: `tool_calls(("context_read", {"topic": "diet"}), ...)`.

    Arguments given as a `str` are sent verbatim (use it to send the model's malformed JSON); a third item
    fixes the call id, otherwise the server numbers them `call_1`, `call_2`, ...
    """
    normalised = tuple((c[0], c[1], c[2] if len(c) > 2 else None) for c in calls)  # type: ignore[misc]
    return ScriptedReply(content=text, calls=normalised, finish_reason="tool_calls")


ScriptItem = (
    ScriptedReply | dict[str, Any] | str | Response
    | Callable[[dict[str, Any]], "ScriptedReply | dict[str, Any] | str"]
)


def hash_embedding(text: str, dim: int = DEFAULT_EMBEDDING_DIM) -> list[float]:
    """A deterministic unit vector: each lower-cased word adds ±1 at a hashed position.

    Texts that share words have a high cosine; texts that share none are near orthogonal.
    """
    vector = [0.0] * dim
    words = re.findall(r"\w+", text.lower()) or [""]
    for word in words:
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dim
        vector[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class OpenAIServer(LoopbackHTTPServer):
    """An OpenAI-compatible server on 127.0.0.1. `url` is the base URL to configure (`.../v1`)."""

    def __init__(
        self,
        *,
        default_reply: str = "OK",
        embed: Callable[[list[str]], list[list[float]]] | None = None,
        embedding_dim: int = DEFAULT_EMBEDDING_DIM,
        api_key: str | None = None,
        models: list[str] | None = None,
        latency_ms: int = 0,
    ) -> None:
        super().__init__(latency_ms=latency_ms)
        self.default_reply = default_reply
        self.embed = embed
        self.embedding_dim = embedding_dim
        self.api_key = api_key  # when set, other bearer tokens get a 401
        self.models = models or [DEFAULT_MODEL]
        self.requests: list[dict[str, Any]] = []  # chat completion bodies, in order
        self.embedding_requests: list[dict[str, Any]] = []
        self._script: deque[ScriptItem] = deque()
        self._ids = itertools.count(1)

    @property
    def url(self) -> str:
        return f"{self.origin}/v1"

    # -- script ---------------------------------------------------------------------------------------

    def script(self, *items: ScriptItem) -> None:
        """Queue replies for the next chat completions, in order (one item per request)."""
        with self._cond:
            self._script.extend(items)

    @property
    def unused_script(self) -> int:
        """How many scripted replies have not been asked for yet."""
        with self._cond:
            return len(self._script)

    @property
    def last_request(self) -> dict[str, Any]:
        assert self.requests, "the model was never called"
        return self.requests[-1]

    @property
    def last_messages(self) -> list[dict[str, Any]]:
        return list(self.last_request.get("messages", []))

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> None:
        self.wait_for(lambda: len(self.requests) >= count, timeout, f"expected {count} chat requests")

    def think_until(self, done: threading.Event, timeout: float = 20.0) -> None:
        """For a scripted callable: a slow model, answering once ``done`` is set (or ``timeout`` passed).
        Handlers run under the server's lock; this waits without it, so other requests are answered."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not done.is_set() and time.monotonic() < deadline:
                self._cond.wait(0.05)

    # -- HTTP -----------------------------------------------------------------------------------------

    def error_response(self, fault: Fault, request: Request) -> Response:
        status = int(fault.kind)
        headers = {}
        if status == 429:
            headers["Retry-After"] = str(fault.options.get("retry_after", 1))
        kinds = {401: "invalid_api_key", 429: "rate_limit_exceeded", 400: "invalid_request_error"}
        return json_response(
            {
                "error": {
                    "message": fault.options.get("message", f"injected {status}"),
                    "type": kinds.get(status, "server_error"),
                    "param": None,
                    "code": kinds.get(status),
                }
            },
            status=status,
            headers=headers,
        )

    def handle(self, request: Request) -> Response:
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return json_response(
                {
                    "error": {
                        "message": "Incorrect API key provided.",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": "invalid_api_key",
                    }
                },
                status=401,
            )
        path = request.path.rstrip("/")
        if request.method == "GET" and path == "/v1/models":
            return json_response(
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "loopback"}
                        for m in self.models
                    ],
                }
            )
        if request.method == "POST" and path == "/v1/chat/completions":
            return self._chat(request)
        if request.method == "POST" and path == "/v1/embeddings":
            return self._embeddings(request)
        return json_response(
            {
                "error": {
                    "message": f"no route {request.method} {request.path}",
                    "type": "invalid_request_error",
                    "code": None,
                }
            },
            status=404,
        )

    def _chat(self, request: Request) -> Response:
        body = request.json
        if not isinstance(body, dict) or "messages" not in body:
            return json_response(
                {
                    "error": {
                        "message": "'messages' is required",
                        "type": "invalid_request_error",
                        "code": None,
                    }
                },
                status=400,
            )
        self.requests.append(body)
        item: ScriptItem = self._script.popleft() if self._script else self.default_reply
        if callable(item) and not isinstance(item, ScriptedReply):
            item = item(body)
        model = str(body.get("model") or self.models[0])
        if isinstance(item, dict):
            return json_response(item)
        if isinstance(item, Response):  # the bytes as given: what json.dumps cannot write
            return item
        scripted = reply(item) if isinstance(item, str) else item
        completion_id = f"chatcmpl-{next(self._ids)}"
        message: dict[str, Any] = {"role": "assistant", "content": scripted.content}
        calls = [
            {
                "id": call_id or f"call_{next(self._ids)}",
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for name, args, call_id in scripted.calls
        ]
        if calls:
            message["tool_calls"] = calls
        prompt_tokens = sum(len(json.dumps(m)) // 4 for m in body["messages"])
        completion_tokens = len(json.dumps(message)) // 4
        usage = scripted.usage or {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if body.get("stream"):
            return self._stream(completion_id, model, message, scripted.finish_reason, usage, body)
        return json_response(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": scripted.finish_reason,
                        "logprobs": None,
                    }
                ],
                "usage": usage,
            }
        )

    def _stream(
        self,
        completion_id: str,
        model: str,
        message: dict[str, Any],
        finish_reason: str,
        usage: dict[str, int],
        body: dict[str, Any],
    ) -> Response:
        """Server-sent events, the way OpenAI streams: role, content pieces, tool call pieces, [DONE]."""
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        chunks = [chunk({"role": "assistant", "content": ""})]
        for piece in re.findall(r"\S+\s*|\s+", message.get("content") or ""):
            chunks.append(chunk({"content": piece}))
        for index, call in enumerate(message.get("tool_calls", [])):
            chunks.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["function"]["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            arguments = call["function"]["arguments"]
            for start in range(0, len(arguments), 16):
                chunks.append(
                    chunk(
                        {
                            "tool_calls": [
                                {"index": index, "function": {"arguments": arguments[start : start + 16]}}
                            ]
                        }
                    )
                )
        chunks.append(chunk({}, finish_reason))
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append(
                {
                    "id": completion_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
            )
        text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return Response(
            status=200,
            body=text.encode("utf-8"),
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
        )

    def _embeddings(self, request: Request) -> Response:
        body = request.json
        if not isinstance(body, dict) or "input" not in body:
            return json_response(
                {"error": {"message": "'input' is required", "type": "invalid_request_error", "code": None}},
                status=400,
            )
        self.embedding_requests.append(body)
        raw = body["input"]
        inputs = (
            [raw]
            if isinstance(raw, str) or (isinstance(raw, list) and raw and isinstance(raw[0], int))
            else list(raw)
        )
        texts = [item if isinstance(item, str) else " ".join(map(str, item)) for item in inputs]
        dim = int(body.get("dimensions") or self.embedding_dim)
        vectors = self.embed(texts) if self.embed else [hash_embedding(t, dim) for t in texts]
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() if as_base64 else v,
            }
            for i, v in enumerate(vectors)
        ]
        tokens = sum(len(t.split()) for t in texts)
        return json_response(
            {
                "object": "list",
                "data": data,
                "model": str(body.get("model") or self.models[0]),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )
