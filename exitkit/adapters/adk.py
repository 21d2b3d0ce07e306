"""Google ADK as an exitkit adapter, written as its docs write it.

An `LlmAgent` over `LiteLlm("openai/<model>")` pointed at the mock (ADK's way to an
OpenAI-compatible server), each kit tool a `FunctionTool` from its Python signature (gated ones
with `require_confirmation=True`), `RunConfig(max_llm_calls=...)` as the turn cap, the session in
a `SqliteSessionService` file so a new process answers the `adk_request_confirmation` call with a
`ToolConfirmation`, and `run_async(abort_signal=...)` for Stop. ADK has no spending limit.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # else LiteLLM fetches it at import

from google.adk.agents import LlmAgent, RunConfig  # noqa: E402
from google.adk.models.lite_llm import LiteLlm  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions.sqlite_session_service import SqliteSessionService  # noqa: E402
from google.adk.tools import FunctionTool  # noqa: E402
from google.genai import types  # noqa: E402

from exitkit import Approve, Decision, Job, Outcome, Reject  # noqa: E402

APP, USER, SESSION, CONFIRM = "exitkit", "user", "exitkit", "adk_request_confirmation"


class ADK:
    name = "Google ADK"
    limits = frozenset({"max_turns", "approval", "cancel", "resume"})

    async def _go(self, job: Job, message: types.Content | None, fresh: bool = False) -> Outcome:
        tools = [FunctionTool(t.function(), require_confirmation=t.name in job.limits.needs_approval)
                 for t in job.tools]
        model = LiteLlm(model=f"openai/{job.model}", api_base=job.base_url, api_key=job.api_key)
        agent = LlmAgent(name="files", instruction=job.system, tools=tools, model=model)
        sessions = SqliteSessionService(str(job.state_dir / "adk.db"))
        if fresh:
            await sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = Runner(app_name=APP, agent=agent, session_service=sessions)
        config = RunConfig(max_llm_calls=job.limits.max_turns or 500)
        answer, events = "", 0
        async for event in runner.run_async(user_id=USER, session_id=SESSION, new_message=message,
                                            run_config=config, abort_signal=job.cancel):
            events += 1
            answer = "".join(p.text or "" for p in (event.content.parts if event.content else [])) or answer
            if any(call.name == CONFIRM for call in event.get_function_calls()):
                return Outcome(status=CONFIRM, answer=answer)
        return Outcome(status="aborted" if job.cancel.is_set() else "done", answer=answer)

    async def run(self, job: Job) -> Outcome:
        return await self._go(job, types.Content(role="user", parts=[types.Part(text=job.task)]), fresh=True)

    async def resume(self, job: Job, decision: Decision | None) -> Outcome:
        if decision is None:
            return await self._go(job, None)
        session = await SqliteSessionService(str(job.state_dir / "adk.db")).get_session(
            app_name=APP, user_id=USER, session_id=SESSION)
        asked = [c for e in session.events for c in e.get_function_calls() if c.name == CONFIRM]
        reply = {"confirmed": isinstance(decision, Approve)}
        if isinstance(decision, Reject):
            reply["payload"] = decision.reason
        parts = [types.Part(function_response=types.FunctionResponse(id=asked[-1].id, name=CONFIRM,
                                                                     response=reply))]
        return await self._go(job, types.Content(role="user", parts=parts))
