// The OpenAI Agents SDK for JavaScript (`@openai/agents`): an `Agent` on `OpenAIChatCompletionsModel`,
// its tools from the kit's MCP server through the SDK's `MCPServerStreamableHttp`.
//
// Only the SDK's own limits: `maxTurns`, `needsApproval` on the gated tools with the run's
// interruptions and `RunState.toString()` saved for a resume in another process, `signal` for
// Stop. The SDK's local MCP servers take no approval policy, so the MCP tools are fetched as its
// own function tools (`getAllMcpTools`) and the gated ones get `needsApproval`. No spending limit
// exists in the SDK. Tracing is switched off: it would export spans to OpenAI's servers.
import { Agent, getAllMcpTools, MaxTurnsExceededError, MCPServerStreamableHttp, OpenAIChatCompletionsModel,
         run, RunState, setTracingDisabled } from "@openai/agents";
import OpenAI from "openai";

import { finish, installedVersion, outcomeOf, previous, save, start, stopOnSigint } from "./job.mjs";

const STATE = "openai-agents.json";

const job = start({ name: `OpenAI Agents SDK (JS) ${installedVersion("@openai/agents")}`,
                    limits: ["max_turns", "approval", "cancel", "resume"] });
const stop = stopOnSigint();
setTracingDisabled(true);

/**
 * What a new process needs: the run's items so far, and the RunState at an approval.
 * @typedef {{items: any[]|string, state: string|null, outcome: import("./job.mjs").Outcome|null}} State
 */

/** @param {MCPServerStreamableHttp} server */
async function agentOn(server) {
  const gated = new Set(job.limits.needs_approval);
  const tools = (await getAllMcpTools([server])).map((tool) =>
    gated.has(tool.name) ? { ...tool, needsApproval: async () => true } : tool);
  const client = new OpenAI({ baseURL: job.base_url, apiKey: job.api_key });
  return new Agent({ name: "files", instructions: job.system, tools,
                     model: new OpenAIChatCompletionsModel(client, job.model) });
}

/** The input of this run: the task, the items saved, or the saved RunState with the decision applied. */
async function inputOf(agent, /** @type {State|null} */ saved) {
  if (!saved) return job.task;
  const decision = job.decision;
  if (!saved.state) return saved.items;
  const state = await RunState.fromString(agent, saved.state);
  for (const item of state.getInterruptions()) {
    if ("approve" in decision) state.approve(item);
    else state.reject(item, { message: decision.reject });
  }
  return state;
}

/** @returns {Promise<{outcome: import("./job.mjs").Outcome, saved: State}>} */
async function runOnce(agent, input, /** @type {State|null} */ before) {
  const maxTurns = job.limits.max_turns ?? undefined;  // undefined: the SDK's default (10)
  try {
    const result = await run(agent, input, { maxTurns, signal: stop.signal });
    const items = result.history;
    if (result.interruptions?.length) {
      const call = result.interruptions[0].rawItem;
      return { outcome: { status: "interruptions", answer: `${call.name}(${call.arguments})`,
                          transcript_messages: items.length },
               saved: { items, state: result.state.toString(), outcome: null } };
    }
    const answer = String(result.finalOutput ?? "");
    return { outcome: { status: "completed", answer, transcript_messages: items.length },
             saved: { items, state: null, outcome: null } };
  } catch (error) {
    if (error instanceof MaxTurnsExceededError) {  // the SDK's answer at the cap: the run so far, on it
      const items = error.state?.history ?? before?.items ?? job.task;
      return { outcome: { status: "MaxTurnsExceededError", error: error.message,
                          transcript_messages: error.state ? items.length : null },
               saved: { items, state: null, outcome: null } };
    }
    if (stop.signal.aborted) {  // nothing handed back: the next run goes on from what was saved
      const why = String(error?.message ?? error);
      return { outcome: { status: "aborted", error: why, transcript_messages: null },
               saved: { items: before?.items ?? job.task, state: before?.state ?? null, outcome: null } };
    }
    throw error;
  }
}

async function main() {
  /** @type {State|null} */
  const saved = previous(job, STATE, ["items", "state"]);
  if (saved?.outcome?.status === "completed") return finish(saved.outcome);  // finished: nothing to resume
  if (saved?.state && !job.decision) return finish(saved.outcome);  // still waiting for a decision
  const server = new MCPServerStreamableHttp({ url: job.mcp_url, name: "kit" });
  await server.connect();
  let done;
  try {
    const agent = await agentOn(server);
    done = await runOnce(agent, await inputOf(agent, saved), saved);
  } finally {
    await server.close();
  }
  save(job.state_dir, STATE, { ...done.saved, outcome: done.outcome });
  return finish(done.outcome);
}

outcomeOf(main);
