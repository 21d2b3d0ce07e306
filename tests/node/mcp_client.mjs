// The official Node MCP client (@modelcontextprotocol/sdk), unchanged, driven by a plan.
//
//   node mcp_client.mjs http URL PLAN_JSON
//   node mcp_client.mjs stdio COMMAND_JSON PLAN_JSON     (COMMAND_JSON: ["python", "-m", ...])
//
// PLAN_JSON is a list of steps: {"op": "tools"} lists every tool, page by page;
// {"op": "call", "name", "arguments", "abortAfterMs"} calls a tool (aborting it after that many
// ms, which sends notifications/cancelled); {"op": "resources"}, {"op": "read", "uri"},
// {"op": "prompt", "name", "arguments"}, {"op": "ping"}. Each step prints one JSON line:
// {"op", "ok": true, "value"} or {"op", "ok": false, "error", "code"}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, target, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);

function transport() {
  if (mode === "http") return new StreamableHTTPClientTransport(new URL(target));
  const [command, ...args] = JSON.parse(target);
  return new StdioClientTransport({ command, args, stderr: "inherit", env: process.env });
}

async function allTools(client) {
  const pages = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    pages.push(page.tools.map((tool) => tool.name));
    cursor = page.nextCursor;
  } while (cursor);
  return pages;
}

async function call(client, step) {
  const progress = [];
  const controller = new AbortController();
  if (step.abortAfterMs !== undefined) setTimeout(() => controller.abort("user pressed Stop"), step.abortAfterMs);
  const result = await client.callTool(
    { name: step.name, arguments: step.arguments ?? {} },
    undefined,
    { signal: controller.signal, onprogress: (p) => progress.push(p) },
  );
  return { result, progress };
}

async function run(client, step) {
  switch (step.op) {
    case "tools": return allTools(client);
    case "call": return call(client, step);
    case "resources": return (await client.listResources()).resources;
    case "read": return (await client.readResource({ uri: step.uri })).contents;
    case "prompt": return (await client.getPrompt({ name: step.name, arguments: step.arguments ?? {} })).messages;
    case "ping": return client.ping();
    default: throw new Error(`unknown op ${step.op}`);
  }
}

const client = new Client({ name: "node-test-client", version: "1.0.0" });
await client.connect(transport());
console.log(JSON.stringify({ op: "connected", ok: true, value: client.getServerVersion() }));
for (const step of plan) {
  try {
    console.log(JSON.stringify({ op: step.op, ok: true, value: await run(client, step) }));
  } catch (error) {
    console.log(JSON.stringify({ op: step.op, ok: false, error: String(error?.message ?? error), code: error?.code ?? null }));
  }
}
await client.close();
