// A plain agent loop on the official `openai` package (Chat Completions), its tools from the kit's
// MCP server through the official MCP client (`@modelcontextprotocol/sdk`, Streamable HTTP).
//
// It has every limit itself: a turn cap and a budget (priced from each reply's usage), approval
// (it stops before a gated call and saves the conversation; `resume` applies the decision),
// Stop (SIGINT aborts the request or tool call in flight; the MCP client then sends
// notifications/cancelled) and resume. A call is recorded as started in the state folder before
// the tool runs, so after a crash the call is not run again: a read-only tool is simply re-run,
// any other is surfaced as in doubt.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import OpenAI from "openai";

import { finish, outcomeOf, previous, prices, save, start, stopOnSigint } from "./job.mjs";

const STATE = "openai-loop.json";

/**
 * @typedef {import("./job.mjs").Job} Job
 * @typedef {import("./job.mjs").Outcome} Outcome
 * @typedef {{id: string, name: string, arguments: string}} Call
 * @typedef {{messages: any[], pending: Call[], marks: Record<string, string>, failed: string[],
 *            outcome: Outcome|null}} State
 *   `marks`: what became of a pending call: "awaiting_approval", "approved", "started" (the tool was
 *   called and no result was saved), "cancelled" (Stop aborted it), "in_doubt" (surfaced once).
 *   `failed`: the calls (name and arguments) whose tool answered with an error.
 */

const job = start({ name: "plain Node openai loop",
                    limits: ["max_turns", "max_budget_usd", "approval", "cancel", "resume"] });
const stop = stopOnSigint();

/** @returns {State} */
function fresh() {
  return { messages: [{ role: "system", content: job.system }, { role: "user", content: job.task }],
           pending: [], marks: {}, failed: [], outcome: null };
}

/** The MCP client, with every message it sends tracked, so a cancellation is delivered before exit. */
async function connect() {
  const transport = new StreamableHTTPClientTransport(new URL(job.mcp_url));
  const sending = new Set();
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    const sent = send(message, options);
    sending.add(sent);
    sent.finally(() => sending.delete(sent)).catch(() => {});
    return sent;
  };
  const client = new Client({ name: "exitkit-openai-loop", version: "1.0.0" });
  await client.connect(transport);
  // Closing aborts the transport's requests, notifications/cancelled among them: let them land first.
  const close = async () => {
    await Promise.allSettled([...sending]);
    await client.close();
  };
  return { client, close };
}

/** The tools as Chat Completions wants them, and which of them only read. */
async function toolsOf(client) {
  const { tools } = await client.listTools();
  const schemas = tools.map((t) => ({ type: "function",
                                      function: { name: t.name, description: t.description ?? "",
                                                  parameters: t.inputSchema } }));
  const readOnly = new Set(tools.filter((t) => t.annotations?.readOnlyHint === true).map((t) => t.name));
  return { schemas, readOnly };
}

/** @param {Call} call */
const shown = (call) => `${call.name}(${call.arguments})`;

/**
 * Answers the first pending call; `failed` (its name and arguments) when its tool answered an error.
 * @param {State} state @param {Call} call @param {string} content @param {string} [failed]
 */
function answer(state, call, content, failed) {
  state.messages.push({ role: "tool", tool_call_id: call.id, content, ...(failed ? { failed } : {}) });
  if (failed) state.failed.push(failed);
  state.pending.shift();
  delete state.marks[call.id];
  save(job.state_dir, STATE, state);
}

/** @param {State} state @param {string} status @param {Partial<Outcome>} [more] @returns {Outcome} */
function ended(state, status, more = {}) {
  return { status, answer: "", error: "", transcript_messages: state.messages.length, ...more };
}

/**
 * Runs (or settles) the calls the model asked for, in order; an Outcome when the run must stop.
 * @param {State} state @param {{client: Client}} mcp @param {Set<string>} readOnly
 * @param {{decision: import("./job.mjs").Decision}} asked  the decision, consumed by the call it settles
 * @returns {Promise<Outcome|null>}
 */
async function settle(state, mcp, readOnly, asked) {
  while (state.pending.length) {
    const call = state.pending[0];
    const mark = state.marks[call.id];
    if ((mark === "started" || mark === "cancelled") && !readOnly.has(call.name)) {
      state.marks[call.id] = "in_doubt";
      save(job.state_dir, STATE, state);
      const how = mark === "cancelled" ? "was stopped while it ran"
        : "was started by a process that ended before its result was saved";
      return ended(state, "in_doubt", { error: `${shown(call)} ${how}: it may have taken effect; `
        + "it was not run again" });
    }
    if (mark === "in_doubt") {  // surfaced already: the model learns what is known, never a re-run
      const reject = asked.decision && "reject" in asked.decision ? asked.decision.reject : null;
      asked.decision = null;
      answer(state, call, reject ? `Rejected by the user: ${reject}`
        : "Outcome unknown: this call was started before a crash and was not run again. "
          + "Check before retrying.");
      continue;
    }
    if (job.limits.needs_approval.includes(call.name) && mark !== "approved") {
      const decision = asked.decision;
      asked.decision = null;
      if (decision && "reject" in decision) {
        answer(state, call, `Rejected by the user: ${decision.reject}`);
        continue;
      }
      state.marks[call.id] = decision?.approve ? "approved" : "awaiting_approval";
      save(job.state_dir, STATE, state);
      if (!decision?.approve) {
        return ended(state, "awaiting_approval", { answer: `${shown(call)} needs approval` });
      }
    }
    const key = `${call.name} ${call.arguments}`;
    if (state.failed.includes(key)) {  // the identical call failed already: running it again cannot help
      return ended(state, "failed", { error: `${shown(call)} was asked for again after it failed: `
        + state.messages.findLast((m) => m.role === "tool" && m.failed === key)?.content });
    }
    const stopped = await run(state, mcp, call, key);
    if (stopped) return stopped;
  }
  return null;
}

/** Calls one tool over MCP and answers the call; an Outcome when Stop aborted it. */
async function run(state, mcp, call, key) {
  let args;
  try {
    args = JSON.parse(call.arguments || "{}");
  } catch {
    answer(state, call, `Error: the arguments are not valid JSON: ${call.arguments}`);
    return null;
  }
  state.marks[call.id] = "started";  // saved before the call: a crash from here on leaves it in doubt
  save(job.state_dir, STATE, state);
  let result;
  try {
    result = await mcp.client.callTool({ name: call.name, arguments: args }, undefined,
                                       { signal: stop.signal });
  } catch (error) {
    if (stop.signal.aborted) {
      state.marks[call.id] = "cancelled";
      save(job.state_dir, STATE, state);
      return ended(state, "interrupted", { error: `Stop pressed during ${shown(call)}` });
    }
    result = { isError: true, content: [{ type: "text", text: String(error?.message ?? error) }] };
  }
  const text = (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
  if (result.isError) answer(state, call, `Error: ${text}`, key);
  else answer(state, call, text);
  return null;
}

/** The conversation as the API takes it (without the loop's own bookkeeping on tool messages). */
const wire = (messages) => messages.map(({ failed, ...message }) => message);

/**
 * @param {State} state
 * @returns {Promise<Outcome>}
 */
async function loop(state, mcp, tools) {
  const openai = new OpenAI({ baseURL: job.base_url, apiKey: job.api_key });
  const { input_usd_per_m: inUsd, output_usd_per_m: outUsd } = prices(job);
  const asked = { decision: job.action === "resume" ? job.decision : null };
  let turns = 0, spent = 0;
  for (;;) {
    const stopped = await settle(state, mcp, tools.readOnly, asked);
    if (stopped) return stopped;
    if (stop.signal.aborted) return ended(state, "interrupted");
    if (job.limits.max_turns != null && turns >= job.limits.max_turns) return ended(state, "max_turns");
    if (job.limits.max_budget_usd != null && spent >= job.limits.max_budget_usd) {
      const error = `spent $${spent.toFixed(6)} of $${job.limits.max_budget_usd}`;
      return ended(state, "max_budget_usd", { error });
    }
    let reply;
    try {
      reply = await openai.chat.completions.create(
        { model: job.model, messages: wire(state.messages), tools: tools.schemas }, { signal: stop.signal });
    } catch (error) {
      if (stop.signal.aborted) {
        return ended(state, "interrupted", { error: "Stop pressed during a model request" });
      }
      throw error;
    }
    turns += 1;
    const usage = reply.usage;
    spent += ((usage?.prompt_tokens ?? 0) * inUsd + (usage?.completion_tokens ?? 0) * outUsd) / 1e6;
    const message = reply.choices[0].message;
    const calls = message.tool_calls ?? [];
    state.messages.push({ role: "assistant", content: message.content ?? null,
                          ...(calls.length ? { tool_calls: calls } : {}) });
    if (!calls.length) return ended(state, "completed", { answer: message.content ?? "" });
    state.pending = calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments }));
    save(job.state_dir, STATE, state);
  }
}

const FINAL = new Set(["completed", "failed"]);

async function main() {
  const saved = previous(job, STATE, ["messages", "pending", "marks", "failed"]);
  /** @type {State} */
  const state = saved ?? fresh();
  if (FINAL.has(state.outcome?.status ?? "")) return finish(state.outcome);  // finished: nothing to resume
  const mcp = await connect();
  let outcome;
  try {
    outcome = await loop(state, mcp, await toolsOf(mcp.client));
  } finally {
    await mcp.close();
  }
  state.outcome = outcome;
  save(job.state_dir, STATE, state);
  return finish(outcome);
}

outcomeOf(main);
