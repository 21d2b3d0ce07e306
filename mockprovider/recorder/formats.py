"""Each wire format's part in the recording proxy: what a request asks (its conversation and
turn, read with the mock's own translators), its error shape, and the reader of its reply.

The OpenAI formats (Chat Completions, Responses) and Anthropic's Messages go under the
upstream's base URL; Gemini's, Ollama's, Bedrock's and Azure OpenAI's paths (Azure's chat and
responses formats) are the client's own, under its root.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from mockprovider.apis import anthropic as anthropic_api
from mockprovider.apis import bedrock, gemini, ollama
from mockprovider.apis.bedrock_request import converse_request
from mockprovider.apis.gemini_request import generate_request
from mockprovider.apis.responses import responses_request
from mockprovider.errors import APIError
from mockprovider.reading.transcript import conversation
from mockprovider.recorder.bedrock import ConverseStream, converse_reply
from mockprovider.recorder.gemini_ollama import GeminiStream, OllamaStream, gemini_reply, ollama_reply
from mockprovider.recorder.replies import Format, Stream, reply_of
from mockprovider.scripts.conditions import first_user

PATHS: dict[Format, str] = {"chat": "chat/completions", "responses": "responses", "messages": "messages"}
GEMINI_METHODS = ("generateContent", "streamGenerateContent")
"""The Gemini methods that answer as a model; any other (countTokens) is forwarded, unrecorded."""

@dataclass(frozen=True, kw_only=True)
class Asked:
    """What a request asks, in the recording's terms."""

    user: str
    turn: int
    model: str


def asked_of(fmt: Format, raw: bytes, path: Mapping[str, Any], *, betas: str = "") -> Asked | str:
    """The request's conversation and turn, or why it cannot be recorded; `path` holds its route's
    parameters (Gemini names the model and the method there, Azure its deployment), `betas` its
    `anthropic-beta` header (a beta can allow what Messages refuses without it)."""
    try:
        body = json.loads(raw)
        if "deployment" in path and isinstance(body, dict):  # Azure's: the deployment names the model
            body = {**body, "model": path["deployment"]}
        paired = False
        if fmt == "chat":
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                return "the request has no messages array"
            messages = [m for m in body["messages"] if isinstance(m, Mapping)]
            model = body.get("model")
        else:
            if fmt == "gemini":
                stream = path.get("method") == "streamGenerateContent"
                shaped = generate_request(body, model=path.get("model", ""), stream=stream)
            elif fmt == "ollama":
                shaped = ollama.chat_request(body)
            elif fmt == "converse":
                # The scenario name the model id stands for, which its replay answers to.
                model_id = bedrock.scenario_of(str(path.get("model_id", "")), {})
                shaped = converse_request(body, model=model_id, stream=False)
            elif fmt == "messages":
                shaped = anthropic_api.messages_request(body, betas=betas)
            else:
                shaped = responses_request(body).chat
            messages, model, paired = shaped.messages, shaped.model, shaped.paired
        c = conversation(messages, paired=paired)
        return Asked(user=first_user(c), turn=c.turn, model=str(model))
    except (ValueError, RecursionError):
        return "the request is not JSON"
    except APIError as e:
        return f"the mock could not replay this request ({e.message})"
    except (TypeError, AttributeError) as e:
        return f"the request's messages have an unexpected shape ({e})"


def error_in(fmt: Format, e: APIError) -> Response:
    if fmt == "gemini":
        return gemini.error_response(e)
    if fmt == "ollama":
        return ollama.error_response(e)
    if fmt == "converse":
        return bedrock.error_response(e)
    return anthropic_api.error_response(e) if fmt == "messages" else e.response()


def whole_reply(fmt: Format, raw: bytes) -> dict[str, Any]:
    if fmt == "gemini":
        return gemini_reply(raw)
    if fmt == "converse":
        return converse_reply(raw)
    return ollama_reply(raw) if fmt == "ollama" else reply_of(fmt, raw)


def stream_of(fmt: Format) -> Stream:
    if fmt == "gemini":
        return GeminiStream()
    if fmt == "converse":
        return ConverseStream()
    return OllamaStream() if fmt == "ollama" else Stream(fmt)
