"""The model client: OpenAI chat completions to ``settings.LLM_BASE_URL`` over kept connections (``core.keepalive``).

Any OpenAI-compatible server works (LocalAI, Ollama, llama.cpp, vLLM, OpenAI). This module only speaks the
protocol: it sends messages and tool definitions and returns the assistant message. It never decides what the
model may see or do (that is ``memory.policy`` and ``chats.context``). Every failure of the server becomes one
of two clear errors: ``model_unavailable`` (down, 5xx, refused, timed out) or ``model_bad_response``
(an answer that is not a chat completion).
"""

from __future__ import annotations

import http.client
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from localai_memory.core import keepalive
from localai_memory.core.errors import UpstreamError
from localai_memory.core.parsers import json_loads

log = logging.getLogger(__name__)


class ModelUnavailable(UpstreamError):
    """The model server could not be reached, refused, failed (5xx) or did not answer in time."""

    status = 502
    code = "model_unavailable"


class ModelRefused(UpstreamError):
    """The model server refused the request itself (400, 413, 422: a conversation too long for its context,
    an option it does not take): sending it again would not help, so it is no 5xx a client retries."""

    status = 400
    code = "model_refused"


class ModelBusy(UpstreamError):
    """The model server is rate limiting (429): a client may try again after ``retry_after`` seconds."""

    status = 429
    code = "model_busy"


class ModelBadResponse(UpstreamError):
    """The model server answered, but not with a chat completion we can use."""

    status = 502
    code = "model_bad_response"


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the raw JSON text the model sent; parsed (and checked) by the tool

    def as_message_part(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class ModelReply:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    model: str = ""

    def as_message(self) -> dict[str, Any]:
        """The assistant message to send back in the next request of a tool loop."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.as_message_part() for call in self.tool_calls]
        return message


def model_client_warm() -> None:
    """Build what the first model call would otherwise build (the TLS context: ~20 ms), as a worker starts."""
    keepalive.tls_context()


#: What an OpenAI client may set of the model's sampling on ``/v1/chat/completions``: passed to the model
#: server as sent (it checks the values), in every call of the turn.
SAMPLING_OPTIONS = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed", "presence_penalty",
    "frequency_penalty", "logit_bias", "response_format", "reasoning_effort", "user",
})


def chat_completion(
    *,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    model: str | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    parallel_tool_calls: bool | None = None,
    options: Mapping[str, Any] | None = None,
) -> ModelReply:
    """One ``POST {LLM_BASE_URL}/chat/completions``; ``tool_choice`` (``auto`` when not given) and
    ``parallel_tool_calls`` go with the tools, and ``options`` (a client's sampling, ``SAMPLING_OPTIONS``)
    as they are. Raises ModelUnavailable or ModelBadResponse."""
    asked = chat_completion_begin(messages=messages, tools=tools, model=model, tool_choice=tool_choice,
                                  parallel_tool_calls=parallel_tool_calls, options=options)
    assert asked is not None  # only kept_only answers None
    return asked.reply()


class Asked:
    """A chat completion sent whose answer is still to read (``chat_completion_begin``)."""

    def __init__(self, posted: keepalive.Posted, base_url: str, timeout: float) -> None:
        self._posted, self._base_url, self._timeout = posted, base_url, timeout

    def reply(self) -> ModelReply:
        """The model's answer; raises ModelUnavailable, ModelRefused, ModelBusy or ModelBadResponse."""
        base_url, timeout = self._base_url, self._timeout
        try:
            response = self._posted.finish()
        except TimeoutError:
            raise ModelUnavailable(f"The model server did not answer within {timeout:g} seconds. Your message is "
                                   "kept; try again.", status=504) from None
        except (OSError, http.client.HTTPException) as exc:
            log.warning("model server %s unreachable: %s", base_url, exc)
            raise ModelUnavailable("The model server is not reachable. Your message is kept; try again once it "
                                   "runs.") from None
        if response.status >= 400:
            detail = _error_text(response.content)
            log.warning("model server answered %s: %s", response.status, detail)
            said = f"The model server answered {response.status}{': ' + detail if detail else ''}. Your message is kept"
            if response.status in (400, 413, 422):
                raise ModelRefused(said + "; the same request would be refused again.")
            if response.status == 429:
                wait = response.headers.get("retry-after", "")
                busy = ModelBusy(said + "; try again in a moment.")
                busy.retry_after = wait if wait.isdigit() else "5"
                raise busy
            raise ModelUnavailable(said + "; try again.")
        return parse_completion(response.content)

    def abandon(self) -> None:
        """The answer will not be read (the turn failed meanwhile)."""
        self._posted.abandon()


def chat_completion_begin(
    *,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    model: str | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    parallel_tool_calls: bool | None = None,
    options: Mapping[str, Any] | None = None,
    kept_only: bool = False,
) -> Asked | None:
    """``chat_completion`` in two halves: the request is sent now and its answer read by ``Asked.reply``, so the
    turn can finish its own work (commit the notes a tool call wrote) while the model thinks. A failure to
    reach the server is raised by ``reply``, not here. ``kept_only``: sent only over a connection to the server
    kept open now, else nothing is sent and the answer is None (``keepalive.post_begin``)."""
    base_url = str(settings.LLM_BASE_URL).rstrip("/")
    body: dict[str, Any] = {**(options or {}), "model": model or settings.LLM_MODEL, "messages": messages,
                            "stream": False}
    if tools:
        body["tools"] = tools
        body["tool_choice"] = tool_choice or "auto"
        if parallel_tool_calls is not None:
            body["parallel_tool_calls"] = parallel_tool_calls
    headers = {"Accept": "application/json"}
    if settings.LLM_API_KEY:
        headers["Authorization"] = f"Bearer {settings.LLM_API_KEY}"
    timeout = float(settings.LLM_TIMEOUT)
    posted = keepalive.post_begin(f"{base_url}/chat/completions", _json_bytes(body), headers,
                                  timeout=timeout, connect=min(timeout, 10.0), kept_only=kept_only)
    return Asked(posted, base_url, timeout) if posted is not None else None


def _json_bytes(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _error_text(content: bytes) -> str:
    try:
        payload = json_loads(content)
    except ValueError:
        return ""
    error = payload.get("error") if isinstance(payload, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return str(message)[:200] if message else ""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def model_text(text: str, *, nul: str = "") -> str:
    """Text from the model server made storable: a lone UTF-16 surrogate (valid JSON, not valid Unicode)
    becomes U+FFFD and a NUL (which PostgreSQL text cannot hold) becomes ``nul``."""
    return _LONE_SURROGATE.sub("\ufffd", text).replace("\x00", nul)


def parse_completion(raw: bytes) -> ModelReply:
    """The first choice of a chat completion body, or ModelBadResponse."""
    bad = ModelBadResponse("The model server's answer was not a chat completion. Your message is kept; "
                           "try again.")
    try:
        payload = json_loads(raw)
    except ValueError:
        raise bad from None
    if not isinstance(payload, dict):
        raise bad
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise bad
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise bad
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        if isinstance(content, list):  # content parts: keep the text ones
            texts = [part.get("text", "") for part in content if isinstance(part, dict)]
            if not all(isinstance(text, str) for text in texts):
                raise bad
            content = "".join(texts)
        else:
            raise bad
    calls: list[ToolCall] = []
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise bad
    for number, call in enumerate(raw_calls, start=1):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        elif arguments is None:
            arguments = "{}"
        elif not isinstance(arguments, str):
            raise bad
        call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else f"call_{number}"
        calls.append(ToolCall(id=model_text(call_id), name=model_text(function["name"]), arguments=arguments))
    raw_usage = payload.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    if content is not None:
        content = model_text(content)
    return ModelReply(content=content, tool_calls=tuple(calls), finish_reason=choices[0].get("finish_reason"),
                      usage=usage, model=str(payload.get("model") or ""))
