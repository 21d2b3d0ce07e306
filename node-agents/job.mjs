// The command contract of `python -m exitkit run --command` (docs/exitkit.md), as an agent reads it:
// the action and the job from the environment, Stop as SIGINT, state saved in the job's folder,
// and the outcome as one JSON line on stdout.
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { setMaxListeners } from "node:events";
import { join } from "node:path";

/**
 * @typedef {{max_turns: number|null, max_budget_usd: number|null, needs_approval: string[]}} Limits
 * @typedef {{approve: true} | {reject: string} | null} Decision
 * @typedef {{input_usd_per_m: number, output_usd_per_m: number}} Prices
 * @typedef {{action: "run"|"resume", decision: Decision, base_url: string, api_key: string,
 *            model: string, task: string, system: string, mcp_url: string, limits: Limits,
 *            state_dir: string, prices?: Prices}} Job
 * @typedef {{status: string, answer?: string, error?: string, transcript_messages?: number|null}} Outcome
 */

/** Prices the docs state for the budget case, for a job file that carries none. */
const DEFAULT_PRICES = { input_usd_per_m: 2.0, output_usd_per_m: 12.0 };

/**
 * Answers `describe` (and exits) when that is the action; otherwise the job to run.
 * @param {{name: string, limits: string[]}} declared
 * @returns {Job}
 */
export function start(declared) {
  if (process.env.EXITKIT_ACTION === "describe") {
    process.stdout.write(JSON.stringify(declared) + "\n");
    process.exit(0);
  }
  const path = process.env.EXITKIT_JOB;
  if (!path) throw new Error("EXITKIT_JOB is not set: run me under `python -m exitkit run --command`");
  /** @type {Job} */
  const job = JSON.parse(readFileSync(path, "utf8"));
  for (const field of ["action", "base_url", "api_key", "model", "task", "system", "mcp_url", "limits",
                       "state_dir"]) {
    if (job[field] === undefined) throw new Error(`the job file has no ${field}`);
  }
  job.limits.needs_approval ??= [];
  return job;
}

/**
 * The version of `pkg` as installed beside these agents (its package.json, which not every package exports).
 * @param {string} pkg
 */
export function installedVersion(pkg) {
  const manifest = new URL(`./node_modules/${pkg}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(manifest, "utf8")).version;
}

/** @param {Job} job @returns {Prices} */
export function prices(job) {
  return job.prices ?? DEFAULT_PRICES;
}

/**
 * An AbortController that the first SIGINT (the kit's Stop) aborts; a second SIGINT ends the process.
 * @returns {AbortController}
 */
export function stopOnSigint() {
  const controller = new AbortController();
  // Every request and tool call of the run listens on this one signal, more than the default ten.
  setMaxListeners(0, controller.signal);
  process.on("SIGINT", () => {
    if (controller.signal.aborted) process.exit(130);
    controller.abort(new Error("Stop was pressed"));
  });
  return controller;
}

/**
 * Reads `name` from the state folder; null when nothing was saved.
 * @param {string} dir @param {string} name
 */
export function load(dir, name) {
  let text;
  try {
    text = readFileSync(join(dir, name), "utf8");
  } catch (error) {
    if (/** @type {NodeJS.ErrnoException} */ (error).code === "ENOENT") return null;
    throw error;
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`the saved state ${join(dir, name)} is not JSON (${error.message}): `
      + "not written by this agent");
  }
}

/**
 * What the run before saved as `name`: null for a `run`; a `resume` with nothing saved ends here,
 * and so does one whose state is not an object holding each of `fields`, saying which file.
 * @param {Job} job @param {string} name @param {string[]} fields
 */
export function previous(job, name, fields) {
  if (job.action !== "resume") return null;
  let found;
  try {
    found = load(job.state_dir, name);
  } catch (error) {
    finish({ status: "error", error: String(error?.message ?? error) }, 1);
  }
  if (found === null) finish({ status: "error", error: "nothing saved to resume" }, 1);
  const object = typeof found === "object" && !Array.isArray(found);
  const missing = fields.filter((field) => !object || !(field in found));
  if (missing.length) {
    const path = join(job.state_dir, name);
    const error = `the saved state ${path} has no ${missing.join(", ")}: not written by this agent`;
    finish({ status: "error", error }, 1);
  }
  return found;
}

/**
 * Saves `value` as `name` in the state folder: written beside it, flushed to disk, then renamed
 * over it, so a SIGKILL at any moment leaves either the old state or the new one, never half.
 * @param {string} dir @param {string} name @param {unknown} value
 */
export function save(dir, name, value) {
  const path = join(dir, name);
  const fd = openSync(`${path}.tmp`, "w");
  try {
    writeFileSync(fd, JSON.stringify(value));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(`${path}.tmp`, path);
}

/**
 * Prints the outcome line and ends the process with `code`.
 * @param {Outcome} outcome @param {number} [code]
 * @returns {never}
 */
export function finish(outcome, code = 0) {
  // Synchronous on Linux for files and pipes alike, so the line is out before the exit.
  process.stdout.write(JSON.stringify(outcome) + "\n");
  process.exit(code);
}

/**
 * Runs the agent's `main`; whatever escapes it is the outcome, as an error.
 * @param {() => Promise<unknown>} main
 */
export function outcomeOf(main) {
  main().catch((error) => finish({ status: "error", error: String(error?.stack ?? error) }, 1));
}
