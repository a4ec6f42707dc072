"""The chats API and the OpenAI-compatible ``POST /v1/chat/completions``: thin views over chats.services.

A view checks the shape of the input, finds the chat with ``access_chat`` (another user's chat is a 404),
calls one service and renders the answer. The turn itself, and everything memory does on it, is
``services.turn_run``.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from localai_memory.core.api import (
    ApiView,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    validated,
)
from localai_memory.core.errors import InvalidInput, NotFound
from localai_memory.core.numbers import whole_number

from . import llm, selectors, services
from .models import Chat, Message, Origin, Role


def chat_json(chat: Chat) -> dict[str, Any]:
    return {
        "id": chat.pk,
        "title": chat.title,
        "agent": chat.agent_id,
        "agent_name": chat.agent.name if chat.agent_id and chat.agent else None,
        "origin": chat.origin,
        "private": chat.private,
        "binding_id": chat.binding_id,
        "conversation_key": chat.conversation_key or None,
        "one_to_one": chat.one_to_one,
        "created_at": chat.created_at.isoformat(),
        "updated_at": chat.updated_at.isoformat(),
    }


def message_json(message: Message) -> dict[str, Any]:
    return {
        "id": message.pk,
        "role": message.role,
        "content": message.content,
        "typed_by_user": message.typed_by_user,
        "sender_id": message.sender_id,
        "memory": message.memory or None,
        "created_at": message.created_at.isoformat(),
    }


class ChatCreateInput(serializers.Serializer):
    agent = StrictIntegerField(required=False, allow_null=True, min_value=1)
    title = StrictCharField(required=False, allow_blank=True, max_length=200)


class MessageInput(serializers.Serializer):
    content = StrictCharField(max_length=services.MESSAGE_MAX_CHARS, trim_whitespace=False)


class BuiltinsInput(serializers.Serializer):
    memory = StrictBooleanField(help_text="false makes the chat private: it neither reads nor saves memory.")


class ChatsApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """Your chats, most recent first."""
        return Response({"chats": [chat_json(c) for c in selectors.chat_list(owner_id=request.user.pk)[:200]]})

    @extend_schema(request=ChatCreateInput, responses={201: OpenApiTypes.OBJECT})
    def post(self, request):
        """Start a chat, with one of your agents or without."""
        data = validated(ChatCreateInput, request.data)
        chat = services.chat_create(owner_id=request.user.pk, agent_id=data.get("agent"), origin=Origin.WEB,
                                    title=data.get("title") or "")
        return Response(chat_json(chat), status=201)


class ChatApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, chat_id: int):
        """One chat with its messages (each assistant message says what memory did)."""
        chat = selectors.access_chat(request.user, chat_id)
        messages = selectors.chat_messages(chat=chat)
        return Response({**chat_json(chat), "messages": [message_json(m) for m in messages]})

    @extend_schema(responses={204: None})
    def delete(self, request, chat_id: int):
        """Delete the chat with its messages; the suggestions still waiting that came from it are dropped.
        Notes saved from it stay (they are yours, with their Undo). A bot's conversation starts a new chat
        with its next message."""
        services.chat_delete(owner_id=request.user.pk, chat_id=chat_id)
        return Response(status=204)


class ChatMessagesApi(ApiView):
    @extend_schema(request=MessageInput, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, chat_id: int):
        """One turn: your message in, the reply and what memory did out (read, saved, proposed, refused).
        A ``saved`` item's ``before`` is the note it replaced (``{summary, details}``, as a proposal's
        ``current``), null when it made a new note.

        When the model server fails the answer is 502 (504 on a timeout) and your message is kept. A chat
        deleted while the model answered is a 410 ``chat_deleted``: neither the message nor the reply is kept."""
        chat = selectors.access_chat(request.user, chat_id)
        services.check_answerable_here(chat)
        data = validated(MessageInput, request.data)
        result = services.turn_run(chat=chat, content=data["content"])
        return Response({
            "chat_id": chat.pk,
            "reply": result.reply,
            "user_message_id": result.user_message_id,
            "message_id": result.assistant_message_id,
            "memory": result.memory,
        }, headers={"Server-Timing": services.server_timing(result.timings)})


class ChatBuiltinsApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, chat_id: int):
        """The chat's built-in switches: memory (false: a private chat)."""
        chat = selectors.access_chat(request.user, chat_id)
        return Response({"memory": not chat.private, "private": chat.private})

    @extend_schema(request=BuiltinsInput, responses={200: OpenApiTypes.OBJECT})
    def put(self, request, chat_id: int):
        """Turn the chat's memory on or off (off: a private chat). Other chats are not affected."""
        chat = selectors.access_chat(request.user, chat_id)
        data = validated(BuiltinsInput, request.data)
        chat = services.chat_set_private(owner_id=request.user.pk, chat_id=chat.pk, private=not data["memory"])
        return Response({"memory": not chat.private, "private": chat.private,
                         **selectors.memory_status(chat=chat)})


class ChatToolsApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, chat_id: int):
        """What the model is offered in this chat: ``memory: {on, code, blocked_by, fix}`` naming the
        narrowest level that is off, the memory tools and the scopes it may read and save to."""
        chat = selectors.access_chat(request.user, chat_id)
        return Response(selectors.memory_status(chat=chat))


# --------------------------------------------------------------------------------------------------------
# OpenAI-compatible chat completions
# --------------------------------------------------------------------------------------------------------


def _text_of(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in ("text", "input_text"):
                raise InvalidInput(f"{where}: only text content parts are supported", code="unsupported_content")
            text = part.get("text")
            if not isinstance(text, str):
                raise InvalidInput(f"{where}: a text part needs text", code="invalid_messages")
            parts.append(text)
        return "".join(parts)
    if content is None:
        return ""
    raise InvalidInput(f"{where}: content must be text", code="invalid_messages")


def _origin(message: dict[str, Any], number: int) -> str:
    """The ``origin`` mark a client may put on a message the user did not type: ``tool`` (a fetched page, a
    search result), ``client`` (its own prompt, e.g. the summary request when it compacts a chat), or any other
    word. Recall leaves such messages out of its query; no mark (or ``user``) is the user's own words."""
    origin = message.get("origin")
    if origin is None or origin == "":
        return "user"
    if not isinstance(origin, str) or len(origin) > 40:
        raise InvalidInput(f"messages[{number}]: origin must be a short text, like tool or client",
                           code="invalid_messages")
    return origin.strip().lower() or "user"


@dataclass(frozen=True)
class _Conversation:
    """What an OpenAI client sent: the messages before its last user message, that message, and what follows
    it when the client comes back with the results of its own tools (the assistant's calls, the results)."""

    earlier: list[dict[str, Any]]
    content: str
    typed: bool
    pending: list[dict[str, Any]]


#: How many tools a client may bring, and how many calls one assistant message may hold (OpenAI's limit).
CLIENT_TOOLS_MAX = 128


def _tool_calls_of(raw: Any, where: str) -> list[dict[str, Any]]:
    """An assistant message's ``tool_calls``, checked and in OpenAI's shape."""
    if not isinstance(raw, list) or not raw or len(raw) > CLIENT_TOOLS_MAX:
        raise InvalidInput(f"{where}: tool_calls must be a list of 1 to {CLIENT_TOOLS_MAX} calls",
                           code="invalid_messages")
    calls: list[dict[str, Any]] = []
    for number, call in enumerate(raw):
        function = call.get("function") if isinstance(call, dict) else None
        call_id = call.get("id") if isinstance(call, dict) else None
        if (not isinstance(function, dict) or not isinstance(function.get("name"), str)
                or not isinstance(call_id, str) or not 0 < len(call_id) <= 200
                or call.get("type", "function") != "function"):
            raise InvalidInput(f"{where}: tool_calls[{number}] needs an id, type function and a function name",
                               code="invalid_messages")
        if call_id in {known["id"] for known in calls}:
            raise InvalidInput(f"{where}: two tool calls have the id {call_id}", code="invalid_messages")
        arguments = function.get("arguments")
        if arguments is None:
            arguments = "{}"
        elif isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        if not isinstance(arguments, str):
            raise InvalidInput(f"{where}: tool_calls[{number}] arguments must be JSON text",
                               code="invalid_messages")
        calls.append({"id": call_id, "type": "function",
                      "function": {"name": function["name"], "arguments": arguments}})
    return calls


def _parse_messages(raw: Any, *, with_tools: bool) -> _Conversation:
    """The conversation a client sent. The last message is the user's, or (``with_tools``, or when it is one)
    the results of the tools the assistant called after it. With tools, the calls and their results are kept
    for the model, and checked: each call of an assistant message is answered once, by the tool messages
    right after it. Without, tool messages are left out and an assistant message is its text, as a model
    without tools needs. A message the client marked with another ``origin`` than ``user`` keeps the mark."""
    if not isinstance(raw, list) or not raw:
        raise InvalidInput("messages must be a non-empty list", code="invalid_messages")
    if len(raw) > 500:
        raise InvalidInput("at most 500 messages", code="invalid_messages")
    with_tools = with_tools or (isinstance(raw[-1], dict) and raw[-1].get("role") == "tool")
    parsed: list[dict[str, Any]] = []
    unanswered: set[str] = set()  # the calls of the last assistant message that no result answered yet
    for number, message in enumerate(raw):
        where = f"messages[{number}]"
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise InvalidInput(f"{where} must be an object with a role", code="invalid_messages")
        role = message["role"]
        if role == "developer":
            role = "system"
        if role not in ("system", "user", "assistant", "tool"):
            raise InvalidInput(f"{where}: unknown role {role!r}", code="invalid_messages")
        if role == "tool" and not with_tools:
            continue  # the results of tools the model is not offered now
        if role != "tool" and unanswered:
            raise InvalidInput(f"{where}: the tool calls {', '.join(sorted(unanswered))} before it have no "
                               "result", code="invalid_messages")
        entry: dict[str, Any] = {"role": role, "content": _text_of(message.get("content"), where)}
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in unanswered:
                raise InvalidInput(f"{where}: a tool result needs the tool_call_id of a call in the assistant "
                                   "message before it, answered once", code="invalid_messages")
            unanswered.discard(call_id)
            entry["tool_call_id"] = call_id
        else:
            if role == "assistant" and with_tools and message.get("tool_calls"):
                entry["tool_calls"] = _tool_calls_of(message["tool_calls"], where)
                unanswered = {call["id"] for call in entry["tool_calls"]}
            origin = _origin(message, number)
            if origin != "user":
                entry["origin"] = origin
        parsed.append(entry)
    if unanswered:
        raise InvalidInput(f"the tool calls {', '.join(sorted(unanswered))} have no result",
                           code="invalid_messages")
    users = [number for number, entry in enumerate(parsed) if entry["role"] == "user"]
    after = parsed[users[-1] + 1:] if users else parsed
    if not users or (after and after[-1]["role"] != "tool"):
        raise InvalidInput("the last message must be the user's, or the results of the tools the assistant "
                           "called after it", code="invalid_messages")
    if any(m["role"] == "system" for m in after):
        raise InvalidInput("after the last user message come only the assistant's tool calls and their "
                           "results", code="invalid_messages")
    last = parsed[users[-1]]
    return _Conversation(earlier=parsed[:users[-1]], content=last["content"], typed="origin" not in last,
                         pending=after)


def _client_tools(body: dict[str, Any]) -> services.ClientTools | None:
    """The client's own ``tools``, ``tool_choice`` and ``parallel_tool_calls``, checked; None without tools."""
    from localai_memory.memory.providers import RESERVED_TOOLS

    if body.get("functions") or isinstance(body.get("function_call"), dict):
        raise InvalidInput("the legacy functions field is not supported; send your functions as tools",
                           code="functions_not_supported")
    raw = body.get("tools")
    if not raw:  # none: also [], {} or "", which clients send for "no tools"
        if body.get("tool_choice") not in (None, "none", "auto"):
            raise InvalidInput("tool_choice needs tools", code="invalid_tool_choice")
        return None
    if not isinstance(raw, list) or len(raw) > CLIENT_TOOLS_MAX:
        raise InvalidInput(f"tools must be a list of at most {CLIENT_TOOLS_MAX} tools", code="invalid_tools")
    definitions: list[dict[str, Any]] = []
    for number, tool in enumerate(raw):
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if (not isinstance(function, dict) or tool.get("type", "function") != "function"
                or not isinstance(name, str) or not TOOL_NAME.fullmatch(name)):
            raise InvalidInput(f"tools[{number}] must be a function with a name of letters, digits, _ and - "
                               "(at most 64)", code="invalid_tools")
        if name in RESERVED_TOOLS:
            raise InvalidInput(f"the tool name {name} is memory's own; give your tool another name",
                               code="tool_name_taken")
        if any(known["function"]["name"] == name for known in definitions):
            raise InvalidInput(f"two tools are named {name}", code="invalid_tools")
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, dict) or not isinstance(function.get("description") or "", str):
            raise InvalidInput(f"tools[{number}]: parameters must be a JSON schema object and description "
                               "a text", code="invalid_tools")
        shown = {"name": name, "parameters": parameters}
        if function.get("description"):
            shown["description"] = function["description"]
        if isinstance(function.get("strict"), bool):
            shown["strict"] = function["strict"]
        definitions.append({"type": "function", "function": shown})
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        named = choice.get("function") if choice.get("type") == "function" else None
        if not isinstance(named, dict) or not isinstance(named.get("name"), str) or named["name"] not in {
                d["function"]["name"] for d in definitions}:
            raise InvalidInput("tool_choice names none of the tools", code="invalid_tool_choice")
        choice = {"type": "function", "function": {"name": named["name"]}}
    elif choice not in (None, "auto", "none", "required"):
        raise InvalidInput("tool_choice must be auto, none, required or one of the tools",
                           code="invalid_tool_choice")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise InvalidInput("parallel_tool_calls must be true or false", code="invalid_parallel_tool_calls")
    return services.ClientTools(definitions=tuple(definitions), choice=None if choice == "auto" else choice,
                                parallel=parallel)


def _int_or_none(value: Any, name: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InvalidInput(f"{name} must be a whole number", code=f"invalid_{name}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and (number := whole_number(value.strip())) is not None:
        return number
    raise InvalidInput(f"{name} must be a whole number", code=f"invalid_{name}")


#: A tool's name, as OpenAI allows it.
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

#: How GET /v1/models names each of the user's agents, so a client that only knows "model" can pick one.
AGENT_MODEL = re.compile(r"agent-(\d{1,18})")


class ModelsApi(ApiView):
    """``GET /v1/models`` for OpenAI clients that list models before they chat (many check the connection so):
    the server's model, and each of the user's agents as ``agent-<id>`` (picking one runs that agent)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """The models a client may name in ``POST /v1/chat/completions``."""
        return Response({"object": "list", "data": _models(request.user)})


class ModelApi(ApiView):
    """``GET /v1/models/{id}``: one of the models ``GET /v1/models`` lists (clients check the one they use)."""

    @extend_schema(parameters=[OpenApiParameter("model_id", OpenApiTypes.STR, OpenApiParameter.PATH,
                                                pattern=r"^\S{1,200}$")],
                   responses={200: OpenApiTypes.OBJECT})
    def get(self, request, model_id: str):
        """One model, or a 404."""
        for model in _models(request.user):
            if model["id"] == model_id:
                return Response(model)
        raise NotFound(f"There is no model {model_id!r} here; GET /v1/models lists them.", code="model_not_found")


def _models(user: Any) -> list[dict[str, Any]]:
    """The server's model, and each of the user's agents as ``agent-<id>``."""
    from localai_memory.agents.selectors import agent_list

    created = int(user.date_joined.timestamp())
    data = [{"id": settings.LLM_MODEL, "object": "model", "created": created, "owned_by": "localai-memory",
             "name": settings.LLM_MODEL}]
    return data + [{"id": f"agent-{agent.pk}", "object": "model", "created": int(agent.created_at.timestamp()),
                    "owned_by": "localai-memory", "name": agent.name} for agent in agent_list(owner_id=user.pk)]


class ChatCompletionsApi(ApiView):
    """``POST /v1/chat/completions`` for any OpenAI client: ``Authorization: Bearer <token>`` picks the user,
    ``agent`` (body) or ``X-Agent-Id`` picks the agent, ``X-Chat-Id`` continues a chat. The reply is in
    OpenAI's format; what memory did is in the ``X-Memory`` header (and ``memory`` in the body)."""

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        parameters=[OpenApiParameter("X-Agent-Id", OpenApiTypes.INT, OpenApiParameter.HEADER),
                    OpenApiParameter("X-Chat-Id", OpenApiTypes.INT, OpenApiParameter.HEADER)],
        responses={200: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request) -> Response | StreamingHttpResponse:
        """One turn over the request's messages, with memory applied."""
        body = request.data
        if not isinstance(body, dict):
            raise InvalidInput("the body must be a JSON object", code="invalid_body")
        owner_id = request.user.pk
        assert owner_id is not None  # a token or a session: ApiView lets no anonymous request in
        client_tools = _client_tools(body)
        sent = _parse_messages(body.get("messages"), with_tools=client_tools is not None)
        services.check_content(sent.content)  # before a chat is made for it
        if body.get("n") is not None and (type(body["n"]) is not int or body["n"] != 1):  # True is no 1
            raise InvalidInput("n must be 1", code="invalid_n")
        stream = body.get("stream")
        options = body.get("stream_options")
        if stream is not None and not isinstance(stream, bool) or options is not None and not isinstance(options, dict):
            raise InvalidInput("stream must be true or false, and stream_options an object", code="invalid_stream")
        agent_id = _int_or_none(body.get("agent", request.headers.get("X-Agent-Id")), "agent")
        if agent_id is None and isinstance(body.get("model"), str):
            picked = AGENT_MODEL.fullmatch(body["model"])  # an agent picked from GET /v1/models
            agent_id = int(picked.group(1)) if picked else None
        chat_id = _int_or_none(body.get("chat_id", request.headers.get("X-Chat-Id")), "chat")
        sampling = _sampling(body)
        if sent.typed:
            services.turn_arriving(owner_id=owner_id, chat_id=chat_id, content=sent.content)
        chat, result = services.completion_turn(
            user=request.user, agent_id=agent_id, chat_id=chat_id, earlier=sent.earlier, content=sent.content,
            typed_by_user=sent.typed, pending=sent.pending, client_tools=client_tools, options=sampling)
        # The model that answered, as its server names it (an agent picked as "agent-N" answers through it).
        model = result.model or str(settings.LLM_MODEL)
        created = int(time.time())
        completion_id = f"chatcmpl-{chat.pk}-{secrets.token_hex(8)}"
        headers = {"X-Memory": services.memory_header(result.memory), "X-Chat-Id": str(chat.pk),
                   "Server-Timing": services.server_timing(result.timings)}
        calls = [call.as_message_part() for call in result.tool_calls]
        usage = {key: (result.usage or {}).get(key, 0) for key in ("prompt_tokens", "completion_tokens", "total_tokens")}
        if stream is True:
            with_usage = isinstance(options, dict) and options.get("include_usage") is True
            return _stream(completion_id, created, model, result.reply, calls, headers, result.finish_reason,
                           usage=usage if with_usage else None)
        message: dict[str, Any] = {"role": Role.ASSISTANT.value, "content": result.reply}
        if calls:
            message.update(content=result.reply or None, tool_calls=calls)
        payload = {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": result.finish_reason,
                         "logprobs": None}],
            "usage": usage,
            "memory": result.memory,
        }
        return Response(payload, headers=headers)


def _number(value: Any, low: float, high: float) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high


def _whole(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


#: What each sampling option must be (OpenAI's ranges), so a bad one is a 400 here rather than the model
#: server's refusal answered as a 502 after a chat was made for it.
_SAMPLING_CHECKS: dict[str, tuple[Any, str]] = {
    "temperature": (lambda v: _number(v, 0, 2), "a number from 0 to 2"),
    "top_p": (lambda v: _number(v, 0, 1), "a number from 0 to 1"),
    "presence_penalty": (lambda v: _number(v, -2, 2), "a number from -2 to 2"),
    "frequency_penalty": (lambda v: _number(v, -2, 2), "a number from -2 to 2"),
    "max_tokens": (lambda v: _whole(v, 1), "a whole number of at least 1"),
    "max_completion_tokens": (lambda v: _whole(v, 1), "a whole number of at least 1"),
    "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
    "stop": (lambda v: isinstance(v, str) or isinstance(v, list) and len(v) <= 4
             and all(isinstance(item, str) for item in v), "a text or a list of at most 4 texts"),
    "logit_bias": (lambda v: isinstance(v, dict), "an object"),
    "response_format": (lambda v: isinstance(v, dict) and isinstance(v.get("type"), str),
                        "an object with a type"),
    "reasoning_effort": (lambda v: isinstance(v, str), "a text"),
    "user": (lambda v: isinstance(v, str) and len(v) <= 256, "a text of at most 256 characters"),
}


def _sampling(body: dict[str, Any]) -> dict[str, Any]:
    """The client's sampling options (``llm.SAMPLING_OPTIONS``) as sent, each checked: 400 ``invalid_sampling``
    naming the first that is not what OpenAI takes."""
    sampling = {key: value for key, value in body.items() if key in llm.SAMPLING_OPTIONS and value is not None}
    for key, value in sampling.items():
        check, wanted = _SAMPLING_CHECKS[key]
        if not check(value):
            raise InvalidInput(f"{key} must be {wanted}", code="invalid_sampling")
    return sampling


def _stream(completion_id: str, created: int, model: str, text: str, calls: list[dict[str, Any]],
            headers: dict[str, str], finish_reason: str, usage: dict[str, int] | None = None
            ) -> StreamingHttpResponse:
    """The finished reply (its text, and its calls of the client's tools) as server-sent events, for clients
    that ask to stream; with ``usage`` (``stream_options.include_usage``) a last chunk carries it, as
    OpenAI's does (no choices)."""

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        body = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra}
        return f"data: {json.dumps(body)}\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    if text or not calls:
        events.append(chunk({"content": text}))
    if calls:
        events.append(chunk({"tool_calls": [{"index": number, **call} for number, call in enumerate(calls)]}))
    events.append(chunk({}, finish_reason))
    if usage is not None:
        events.append(chunk(None, usage=usage))
    events.append("data: [DONE]\n\n")
    response = StreamingHttpResponse(iter(events), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    for key, value in headers.items():
        response[key] = value
    return response
