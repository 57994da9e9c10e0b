"""A reference MCP server for the conformance suite (npm ``@modelcontextprotocol/conformance``),
written with the official Python SDK's low-level server: the tools, resources, prompts and
completions the suite's server scenarios ask for, as its scenario definitions describe them
(``test_simple_text``, ``test_sampling``, ``test://static-text``, ``test_simple_prompt``...).

    python conformance_server.py --http PORT   # streamable HTTP at http://127.0.0.1:PORT/mcp
    python conformance_server.py               # stdio

Over HTTP it keeps its events in memory, so a client that lost a stream resumes it with
``Last-Event-ID`` (``test_reconnection`` closes its own stream mid-call to prove it)."""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import json
import struct
import warnings
from typing import Any

import anyio
import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore

# A 1x1 red PNG and a tiny silent WAV: the suite only checks that data and a MIME type come.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0g"
    "AAAABJRU5ErkJggg=="
)
# RIFF header, a PCM format chunk (mono, 8 kHz, 16 bits), one silent sample.
WAV = base64.b64encode(
    b"RIFF"
    + struct.pack("<I", 38)
    + b"WAVEfmt "
    + struct.pack("<IHHIIHH", 16, 1, 1, 8000, 16000, 2, 16)
    + b"data"
    + struct.pack("<I", 2)
    + b"\x00\x00"
).decode()

NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}
LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def _tool(name: str, description: str, schema: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=schema or NO_ARGUMENTS)


def _string_arguments(*names: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string"} for name in names},
        "required": list(names),
    }


TOOLS = [
    _tool("test_simple_text", "Returns simple text"),
    _tool("test_image_content", "Returns a PNG image"),
    _tool("test_audio_content", "Returns a WAV sound"),
    _tool("test_embedded_resource", "Returns an embedded resource"),
    _tool("test_multiple_content_types", "Returns text, an image and a resource"),
    _tool("test_tool_with_logging", "Logs three messages while it runs"),
    _tool("test_tool_with_progress", "Reports progress while it runs"),
    _tool("test_error_handling", "Always fails"),
    _tool("test_reconnection", "Closes its SSE stream mid-call, then answers"),
    _tool("test_sampling", "Asks the client's model", _string_arguments("prompt")),
    _tool("test_elicitation", "Asks the client's user", _string_arguments("message")),
    _tool("test_elicitation_sep1034_defaults", "Asks with defaults for every primitive"),
    _tool("test_elicitation_sep1330_enums", "Asks with every enum variant"),
    _tool(
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                }
            },
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
    ),
]

SEP1034_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "default": True},
    },
}
SEP1330_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}
USER_SCHEMA = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def _image() -> types.ImageContent:
    return types.ImageContent(type="image", data=PNG, mime_type="image/png")


def _embedded(uri: str, mime_type: str, text: str) -> types.EmbeddedResource:
    contents = types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    return types.EmbeddedResource(type="resource", resource=contents)


class Levels:
    """The logging level each session set (``logging/setLevel``): lower ones are not sent."""

    def __init__(self) -> None:
        self._levels: dict[int, str] = {}

    def set(self, session: object, level: str) -> None:
        self._levels[id(session)] = level

    def allows(self, session: object, level: str) -> bool:
        least = self._levels.get(id(session), "debug")
        return LEVELS.index(level) >= LEVELS.index(least)


LOG_LEVELS = Levels()


async def _log(ctx: ServerRequestContext[Any], message: str) -> None:
    if LOG_LEVELS.allows(ctx.session, "info"):
        await ctx.session.send_log_message(
            "info", message, logger="conformance", related_request_id=ctx.request_id
        )


async def _progress(ctx: ServerRequestContext[Any]) -> list[types.ContentBlock]:
    meta: dict[str, Any] = dict(ctx.meta or {})
    token = meta.get("progress_token", meta.get("progressToken"))
    for step in (0, 50, 100):
        if token is not None:
            await ctx.session.send_progress_notification(
                token, step, 100, related_request_id=str(ctx.request_id)
            )
        if step < 100:
            await anyio.sleep(0.05)
    return [_text("Progress reported: 0, 50, 100 of 100")]


async def _sampling(ctx: ServerRequestContext[Any], prompt: str) -> list[types.ContentBlock]:
    message = types.SamplingMessage(role="user", content=_text(prompt))
    answer = await ctx.session.create_message(
        [message], max_tokens=100, related_request_id=ctx.request_id
    )
    content = answer.content
    text = content.text if isinstance(content, types.TextContent) else str(content)
    return [_text(f"LLM response: {text}")]


async def _elicit(
    ctx: ServerRequestContext[Any], message: str, schema: dict[str, Any], prefix: str
) -> list[types.ContentBlock]:
    answer = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    content = json.dumps(answer.content)
    return [_text(f"{prefix}: action={answer.action}, content={content}")]


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    arguments = params.arguments or {}
    match params.name:
        case "test_simple_text":
            content: list[types.ContentBlock] = [
                _text("This is a simple text response for testing.")
            ]
        case "test_image_content":
            content = [_image()]
        case "test_audio_content":
            content = [types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")]
        case "test_embedded_resource":
            content = [
                _embedded(
                    "test://embedded-resource",
                    "text/plain",
                    "This is an embedded resource content.",
                )
            ]
        case "test_multiple_content_types":
            data = json.dumps({"test": "data", "value": 123})
            content = [
                _text("Multiple content types test:"),
                _image(),
                _embedded("test://mixed-content-resource", "application/json", data),
            ]
        case "test_tool_with_logging":
            await _log(ctx, "Tool execution started")
            await anyio.sleep(0.05)
            await _log(ctx, "Tool processing data")
            await anyio.sleep(0.05)
            await _log(ctx, "Tool execution completed")
            content = [_text("Tool with logging executed successfully")]
        case "test_tool_with_progress":
            content = await _progress(ctx)
        case "test_error_handling":
            return types.CallToolResult(
                content=[_text("This tool intentionally returns an error for testing")],
                is_error=True,
            )
        case "test_reconnection":
            if ctx.close_sse_stream is not None:
                await ctx.close_sse_stream()
            await anyio.sleep(0.2)
            content = [_text("Reconnection test completed")]
        case "test_sampling":
            content = await _sampling(ctx, str(arguments.get("prompt", "")))
        case "test_elicitation":
            message = str(arguments.get("message", ""))
            content = await _elicit(ctx, message, USER_SCHEMA, "User response")
        case "test_elicitation_sep1034_defaults":
            message = "Please review and update the form fields with defaults"
            content = await _elicit(ctx, message, SEP1034_SCHEMA, "Elicitation completed")
        case "test_elicitation_sep1330_enums":
            message = "Please select options from the enum fields"
            content = await _elicit(ctx, message, SEP1330_SCHEMA, "Elicitation completed")
        case "json_schema_2020_12_tool":
            content = [_text(f"Received: {json.dumps(arguments, sort_keys=True)}")]
        case _:
            return types.CallToolResult(
                content=[_text(f"Unknown tool: {params.name}")], is_error=True
            )
    return types.CallToolResult(content=content)


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


STATIC_TEXT = "This is the content of the static text resource."
RESOURCES = [
    types.Resource(
        uri="test://static-text",
        name="static-text",
        description="A static text resource",
        mime_type="text/plain",
    ),
    types.Resource(
        uri="test://static-binary",
        name="static-binary",
        description="A static binary resource (a PNG image)",
        mime_type="image/png",
    ),
    types.Resource(
        uri="test://watched-resource",
        name="watched-resource",
        description="A resource to subscribe to",
        mime_type="text/plain",
    ),
]
TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"


async def list_resources(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=RESOURCES)


async def list_resource_templates(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    template = types.ResourceTemplate(
        uri_template=f"{TEMPLATE_PREFIX}{{id}}{TEMPLATE_SUFFIX}",
        name="template",
        description="Data for an id",
        mime_type="application/json",
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


async def read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    contents: types.TextResourceContents | types.BlobResourceContents
    if uri == "test://static-text":
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=STATIC_TEXT)
    elif uri == "test://static-binary":
        contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)
    elif uri == "test://watched-resource":
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text="Watched.")
    elif uri.startswith(TEMPLATE_PREFIX) and uri.endswith(TEMPLATE_SUFFIX):
        ident = uri.removeprefix(TEMPLATE_PREFIX).removesuffix(TEMPLATE_SUFFIX)
        data = {"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"}
        contents = types.TextResourceContents(
            uri=uri, mime_type="application/json", text=json.dumps(data)
        )
    else:
        raise ValueError(f"Unknown resource: {uri}")
    return types.ReadResourceResult(contents=[contents])


SUBSCRIBED: set[str] = set()


async def subscribe(
    ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
) -> types.EmptyResult:
    SUBSCRIBED.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(
    ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
) -> types.EmptyResult:
    SUBSCRIBED.discard(str(params.uri))
    return types.EmptyResult()


PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A prompt without arguments"),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with two arguments",
        arguments=[
            types.PromptArgument(name="arg1", description="First test argument", required=True),
            types.PromptArgument(name="arg2", description="Second test argument", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt embedding a resource",
        arguments=[
            types.PromptArgument(
                name="resourceUri", description="URI of the resource to embed", required=True
            )
        ],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
]


async def list_prompts(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


def _user(content: Any) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


async def get_prompt(
    ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    arguments = params.arguments or {}
    match params.name:
        case "test_simple_prompt":
            messages = [_user(_text("This is a simple prompt for testing."))]
        case "test_prompt_with_arguments":
            arg1, arg2 = arguments.get("arg1", ""), arguments.get("arg2", "")
            messages = [_user(_text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]
        case "test_prompt_with_embedded_resource":
            uri = arguments.get("resourceUri", "test://example-resource")
            messages = [
                _user(_embedded(uri, "text/plain", "Embedded resource content for testing.")),
                _user(_text("Please process the embedded resource above.")),
            ]
        case "test_prompt_with_image":
            messages = [_user(_image()), _user(_text("Please analyze the image above."))]
        case _:
            raise ValueError(f"Unknown prompt: {params.name}")
    return types.GetPromptResult(messages=messages)


async def complete(
    ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
) -> types.CompleteResult:
    candidates = ["paris", "park", "party"] if params.argument.name == "arg1" else []
    values = [value for value in candidates if value.startswith(params.argument.value)]
    return types.CompleteResult(
        completion=types.Completion(values=values, total=len(values), has_more=False)
    )


async def set_level(
    ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
) -> types.EmptyResult:
    LOG_LEVELS.set(ctx.session, params.level)
    return types.EmptyResult()


class MemoryEventStore(EventStore):
    """Every event of every stream, in memory: enough for one test run."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, types.JSONRPCMessage | None]] = []
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        event_id = str(next(self._ids))
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        found = [index for index, event in enumerate(self._events) if event[0] == last_event_id]
        if not found:
            return None
        stream_id = self._events[found[0]][1]
        for event_id, stream, message in self._events[found[0] + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


def server() -> Server[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # logging/setLevel: deprecated for the next revision
        return Server(
            "plangate-conformance-reference",
            version="1.0.0",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_resource_templates,
            on_read_resource=read_resource,
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_completion=complete,
            on_set_logging_level=set_level,
        )


async def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    reference = server()
    async with stdio_server() as (read, write):
        await reference.run(read, write, reference.create_initialization_options())


def serve_http(port: int) -> None:
    import uvicorn

    app = server().streamable_http_app(
        event_store=MemoryEventStore(), retry_interval=1000, host="127.0.0.1"
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP")
    options = parser.parse_args()
    if options.http:
        serve_http(options.http)
    else:
        asyncio.run(serve_stdio())
