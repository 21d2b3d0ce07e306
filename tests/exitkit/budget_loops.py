"""Loops with a spending limit, enforced on time or some turns late: the budget case's boundaries."""

import httpx

from exitkit import Outcome


class BudgetLoop:
    """Before each request: stop once the spend (at the kit's prices, from each reply's usage) as
    it stood `late` replies ago has reached the budget. `late = 0` is a budget enforced on time."""

    name = "budget on time"
    limits = frozenset({"max_turns", "max_budget_usd"})
    late = 0

    async def run(self, job):
        messages = [{"role": "system", "content": job.system}, {"role": "user", "content": job.task}]
        spent = [0.0]
        async with httpx.AsyncClient(base_url=job.base_url, timeout=30) as http:
            for _ in range(job.limits.max_turns or 50):
                if spent[max(len(spent) - 1 - self.late, 0)] >= job.limits.max_budget_usd:
                    return Outcome(status="budget exceeded")
                body = {"model": job.model, "messages": messages}
                reply = (await http.post("/chat/completions", json=body)).json()
                usage = reply["usage"]
                spent.append(spent[-1] + (usage["prompt_tokens"] * 2 + usage["completion_tokens"] * 12) / 1e6)
                messages.append(message := reply["choices"][0]["message"])
                for call in message.get("tool_calls") or []:
                    result = await job.tool(call["function"]["name"]).call()
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        return Outcome(status="max_turns")


class OneTurnLate(BudgetLoop):
    name = "budget one turn late"
    late = 1


class TwoTurnsLate(BudgetLoop):
    name = "budget two turns late"
    late = 2
