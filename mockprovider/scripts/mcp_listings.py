"""A scenario file's MCP resources and prompts: fixed listings, read and rendered as written.

    "resources": [{"uri": "file:///notes.txt", "name": "notes", "mime_type": "text/plain",
                   "text": "Remember to rotate your logs."}],
    "prompts": [{"name": "triage", "arguments": [{"name": "file", "required": true}],
                 "messages": [{"role": "user", "text": "Find the errors in {file}."}]}]

A prompt's `{name}` is replaced by that argument's value (plain replacement: no format
language, so braces in an argument's value stay as they are).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mockprovider.scripts import values
from mockprovider.scripts.values import At

RESOURCE_KEYS = ("uri", "name", "title", "description", "mime_type", "text", "blob")
PROMPT_KEYS = ("name", "title", "description", "arguments", "messages")
ARGUMENT_KEYS = ("name", "description", "required")
MESSAGE_KEYS = ("role", "text")
URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S*")
"""An absolute URI (RFC 3986's scheme, then anything without spaces)."""


@dataclass(frozen=True, kw_only=True)
class ResourceScript:
    uri: str
    definition: dict[str, Any]
    """The resource as `resources/list` lists it."""
    contents: dict[str, Any]
    """What `resources/read` answers for it: the uri, the mime type, and `text` or `blob`."""


@dataclass(frozen=True, kw_only=True)
class PromptScript:
    name: str
    definition: dict[str, Any]
    """The prompt as `prompts/list` lists it."""
    required: tuple[str, ...]
    messages: tuple[tuple[str, str], ...]
    """(role, text) pairs, the text holding `{argument}` placeholders."""

    def render(self, arguments: Mapping[str, str]) -> list[dict[str, Any]]:
        """The messages with every `{name}` replaced; `ValueError` names a missing required argument."""
        missing = [name for name in self.required if name not in arguments]
        if missing:
            raise ValueError(f"the prompt {self.name!r} needs the argument(s): {', '.join(missing)}")
        out = []
        for role, text in self.messages:
            for name, value in arguments.items():
                text = text.replace("{" + name + "}", value)
            out.append({"role": role, "content": {"type": "text", "text": text}})
        return out


def resources(value: Any, at: At) -> tuple[ResourceScript, ...]:
    listed = values.array(value, at, "resources")
    found = tuple(_resource(item, at / i) for i, item in enumerate(listed))
    _unique([r.uri for r in found], at, "uri", "resource")
    return found


def prompts(value: Any, at: At) -> tuple[PromptScript, ...]:
    listed = values.array(value, at, "prompts")
    found = tuple(_prompt(item, at / i) for i, item in enumerate(listed))
    _unique([p.name for p in found], at, "name", "prompt")
    return found


def _unique(names: list[str], at: At, key: str, what: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise (at / i / key).error(f"the {what} {name!r} is scripted twice in this file")
        seen.add(name)


def _resource(value: Any, at: At) -> ResourceScript:
    item = values.obj(value, at, RESOURCE_KEYS, required=("uri", "name"))
    uri = values.string(item["uri"], at / "uri", nonempty=True)
    if not URI.fullmatch(uri):
        raise (at / "uri").error(f"expected an absolute URI such as file:///notes.txt, got {uri!r}")
    if ("text" in item) == ("blob" in item):
        raise at.error("expected exactly one of 'text' and 'blob' (base64)")
    name = values.string(item["name"], at / "name", nonempty=True)
    definition: dict[str, Any] = {"uri": uri, "name": name}
    for key in ("title", "description"):
        if key in item:
            definition[key] = values.string(item[key], at / key)
    contents: dict[str, Any] = {"uri": uri}
    if "mime_type" in item:
        mime = values.string(item["mime_type"], at / "mime_type")
        definition["mimeType"] = contents["mimeType"] = mime
    if "text" in item:
        contents["text"] = values.string(item["text"], at / "text")
    else:
        blob = values.string(item["blob"], at / "blob")
        try:
            base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError):
            raise (at / "blob").error("expected base64 (the resource's bytes)") from None
        contents["blob"] = blob
    return ResourceScript(uri=uri, definition=definition, contents=contents)


def _prompt(value: Any, at: At) -> PromptScript:
    item = values.obj(value, at, PROMPT_KEYS, required=("name", "messages"))
    name = values.string(item["name"], at / "name", nonempty=True)
    definition: dict[str, Any] = {"name": name}
    for key in ("title", "description"):
        if key in item:
            definition[key] = values.string(item[key], at / key)
    arguments, required = [], []
    listed = []
    if "arguments" in item:
        listed = values.array(item["arguments"], at / "arguments", "arguments")
    for i, argument in enumerate(listed):
        where = at / "arguments" / i
        arg = values.obj(argument, where, ARGUMENT_KEYS, required=("name",))
        entry = {"name": values.string(arg["name"], where / "name", nonempty=True)}
        if "description" in arg:
            entry["description"] = values.string(arg["description"], where / "description")
        if values.flag(arg, "required", where):
            entry["required"] = True
            required.append(entry["name"])
        arguments.append(entry)
    if arguments:
        definition["arguments"] = arguments
    messages = tuple(_message(m, at / "messages" / i)
                     for i, m in enumerate(values.array(item["messages"], at / "messages", "messages")))
    return PromptScript(name=name, definition=definition, required=tuple(required), messages=messages)


def _message(value: Any, at: At) -> tuple[str, str]:
    message = values.obj(value, at, MESSAGE_KEYS, required=("role", "text"))
    if message["role"] not in ("user", "assistant"):
        raise (at / "role").error(f"expected \"user\" or \"assistant\", got {message['role']!r}")
    return message["role"], values.string(message["text"], at / "text")
