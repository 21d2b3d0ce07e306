"""15. A real local model behind the same seam: the chapter's six tasks, the harness unchanged.

`make real-model` (or `python -m experiments.real_model`) starts llama.cpp's OpenAI-compatible
server with SmolLM2-135M-Instruct on a loopback port (`server.py`), runs the six tasks
(`tasks.py`) and judges each answer by one rule against the sandbox's own files (`rules.py`).
Not in the experiments registry: it needs the `local-model` extra and takes a minute of CPU.
"""
