// A Vercel AI SDK agent: a `ToolLoopAgent` on `@ai-sdk/openai`'s Chat Completions model, its tools from
// the kit's MCP server through the AI SDK's own MCP client (`@ai-sdk/mcp`, HTTP transport).
//
// Only the SDK's own limits, as its docs write them: `stopWhen: stepCountIs(n)` for the turn cap, a
// custom stop condition summing each step's usage for the budget ("Loop Control"), `needsApproval`
// on the tools that need it with the `tool-approval-request` / `tool-approval-response` round trip
// ("Tool Execution Approval"), `abortSignal` for Stop. Resume is the SDK's own way too: the
// conversation is a list of messages, saved after every step (`onStepFinish`) and handed back.
import { createMCPClient } from "@ai-sdk/mcp";
import { createOpenAI } from "@ai-sdk/openai";
import { stepCountIs, ToolLoopAgent } from "ai";

import { finish, installedVersion, load, outcomeOf, previous, prices, save, start, stopOnSigint }
  from "./job.mjs";

const STATE = "vercel-ai.json";

const job = start({ name: `Vercel AI SDK ${installedVersion("ai")}`,
                    limits: ["max_turns", "max_budget_usd", "approval", "cancel", "resume"] });
const stop = stopOnSigint();

/**
 * @typedef {import("ai").ModelMessage} ModelMessage
 * @typedef {{messages: ModelMessage[], outcome: import("./job.mjs").Outcome|null}} State
 */

/** The approval requests of the last assistant message that no tool message answered yet. */
function unanswered(/** @type {ModelMessage[]} */ messages) {
  const answered = new Set(messages.flatMap((m) => m.role === "tool" ? m.content : [])
    .filter((p) => p.type === "tool-approval-response").map((p) => p.approvalId));
  const last = messages.findLast((m) => m.role === "assistant");
  const parts = last && Array.isArray(last.content) ? last.content : [];
  return parts.filter((p) => p.type === "tool-approval-request" && !answered.has(p.approvalId));
}

/** The person's decision as the SDK's `tool-approval-response` for each request it settles. */
function decide(/** @type {ModelMessage[]} */ messages, decision) {
  const asked = unanswered(messages);
  if (!asked.length || !decision) return;
  const approved = "approve" in decision;
  messages.push({ role: "tool", content: asked.map((p) => ({
    type: "tool-approval-response", approvalId: p.approvalId, approved,
    ...(approved ? {} : { reason: decision.reject }) })) });
}

/** The MCP tools, with `needsApproval` on those the job gates. */
async function toolsOf(mcp) {
  const tools = await mcp.tools();
  const gated = new Set(job.limits.needs_approval);
  return Object.fromEntries(Object.entries(tools).map(([name, tool]) =>
    [name, gated.has(name) ? { ...tool, needsApproval: true } : tool]));
}

/** Stop conditions: the turn cap, and the docs' budget condition priced at the job's prices. */
function stopWhen() {
  const { input_usd_per_m: inUsd, output_usd_per_m: outUsd } = prices(job);
  const conditions = [];
  if (job.limits.max_turns != null) conditions.push(stepCountIs(job.limits.max_turns));
  if (job.limits.max_budget_usd != null) {
    const budget = job.limits.max_budget_usd;
    const cost = (usage) => ((usage?.inputTokens ?? 0) * inUsd + (usage?.outputTokens ?? 0) * outUsd) / 1e6;
    conditions.push(({ steps }) => steps.reduce((usd, step) => usd + cost(step.usage), 0) >= budget);
  }
  return conditions.length ? conditions : undefined;  // undefined: the agent's default, stepCountIs(20)
}

/** @param {State} state @param {any} mcp */
async function run(state, mcp) {
  const model = createOpenAI({ baseURL: job.base_url, apiKey: job.api_key }).chat(job.model);
  const before = state.messages;
  let result;
  try {
    const tools = await toolsOf(mcp);
    const agent = new ToolLoopAgent({ model, instructions: job.system, tools, stopWhen: stopWhen() });
    result = await agent.generate({
      messages: before, abortSignal: stop.signal,
      onStepFinish: (step) =>
        save(job.state_dir, STATE, { ...state, messages: [...before, ...step.response.messages] }),
    });
  } catch (error) {
    if (stop.signal.aborted) {
      return { status: "aborted", error: String(error?.message ?? error), transcript_messages: null };
    }
    throw error;
  }
  state.messages = [...before, ...result.response.messages];
  const asked = result.content.filter((p) => p.type === "tool-approval-request");
  const status = asked.length ? "tool-approval-request" : result.finishReason;
  return { status, answer: result.text, error: "", transcript_messages: state.messages.length };
}

async function main() {
  const saved = previous(job, STATE, ["messages"]);
  /** @type {State} */
  const state = saved ?? { messages: [{ role: "user", content: job.task }], outcome: null };
  if (state.outcome?.status === "stop") return finish(state.outcome);  // answered: nothing to resume
  const decision = job.action === "resume" ? job.decision : null;
  if (unanswered(state.messages).length && !decision) return finish(state.outcome);  // still waiting
  decide(state.messages, decision);
  save(job.state_dir, STATE, state);
  const mcp = await createMCPClient({ transport: { type: "http", url: job.mcp_url } });
  let outcome;
  try {
    outcome = await run(state, mcp);
  } finally {
    await mcp.close();
  }
  const latest = load(job.state_dir, STATE);  // what the last finished step saved, after a Stop
  const messages = outcome.status === "aborted" ? latest.messages : state.messages;
  save(job.state_dir, STATE, { messages, outcome });
  return finish(outcome);
}

outcomeOf(main);
