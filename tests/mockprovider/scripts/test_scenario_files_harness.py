"""A scenario file driving this lab's harness with a user-supplied tool, both branches of its condition."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness import ModelClient, OpenAIChat, ToolContext, new_run, run

UMBRELLA = {
    "name": "umbrella",
    "description": "Asks for the weather in Paris, then answers from what the tool said.",
    "turns": [
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        [
            {"if": {"tool_result_contains": "rain"}, "content": "Take an umbrella."},
            {"content": "No umbrella needed."},
        ],
    ],
}


@dataclass(frozen=True)
class GetWeather:
    """A tool this package has never heard of, answering from a fixed forecast."""

    forecast: str
    name: str = "get_weather"
    description: str = "Today's weather in a city."
    parameters: dict[str, Any] = field(default_factory=lambda: {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    read_only: bool = True
    needs_approval: bool = False
    cities: list[str] = field(default_factory=list)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        self.cities.append(args["city"])
        return self.forecast


@pytest.mark.parametrize(("forecast", "answer"), [
    ("Light rain all day.", "Take an umbrella."),
    ("Sunny and dry.", "No umbrella needed."),
])
def test_the_harness_runs_a_file_scenario_with_its_own_tool(serve_mock, tmp_path: Path, forecast, answer):
    tool = GetWeather(forecast)

    async def go(url: str):
        async with ModelClient(url) as client:
            return await run(new_run("Do I need an umbrella in Paris?"), tools=[tool],
                             model=OpenAIChat("umbrella", client=client))

    with serve_mock(scenario_files=[UMBRELLA]) as url:
        state = asyncio.run(go(url))
    assert (state.status, state.turns, state.answer) == ("completed", 2, answer)
    assert tool.cities == ["Paris"]
