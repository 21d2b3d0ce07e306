"""A stateless scripted LLM provider in five wire formats (Chat Completions, Responses, Anthropic
Messages, Gemini, Ollama), its replies scripted functions of the conversation."""

from mockprovider.app import create_app
from mockprovider.scripts.options import Fault, Options
from mockprovider.scripts.scenarios import SCENARIOS, Conversation, Reply, ToolCall
from mockprovider.server import serve_in_thread
from o200k import count, message_tokens, prompt_tokens, tools_tokens

__all__ = [
    "SCENARIOS",
    "Conversation",
    "Fault",
    "Options",
    "Reply",
    "ToolCall",
    "count",
    "create_app",
    "message_tokens",
    "prompt_tokens",
    "serve_in_thread",
    "tools_tokens",
]
