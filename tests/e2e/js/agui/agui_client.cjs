#!/usr/bin/env node
// Drives a Copilot runtime with the REAL CopilotKit v2 frontend core (@copilotkit/core with
// @ag-ui/client), exactly as the React provider does: runtime info auto-detection (GET /info,
// falling back to the single-route envelope), then runs, connects and stops on the agent proxy.
//
// Usage: node agui_client.cjs < command.json > result.json
//        node agui_client.cjs --serve   (one command per line; see ../serve.cjs)
//
// Command: {
//   runtimeUrl, agentId = "default", threadId?, headers?, properties?, timeoutMs?,
//   runtimeTransport?: "auto" | "rest" | "single",
//   proxyAgentId?: an agent id /info does not list, run through a hand-made proxy agent,
//   tools?: [{name, description, properties: {<arg>: "string"|"number"}, result}],
//   context?: [{description, value}],
//   steps: [
//     {op: "run", message?: {id, content}, before?: [messages], resume?, forwardedProps?},
//     {op: "connect"},                                // connectAgent (replay, then live)
//     {op: "stop", message: {id, content}, afterContentEvents: N},  // run, then stopAgent
//     {op: "stop", message, afterRunStartedMs: M},  // stopAgent M ms after RUN_STARTED
//     {op: "threads"},   // GET <runtimeUrl>/threads?agentId=.. through the core's runtime fetch
//                        // (which, on the single route, becomes a resource/request envelope)
//   ]
// }
// Result: {connection, runtimeVersion, transport, capabilities, threadEndpoints,
//          steps: [{events, error?, response?, endedAt?}], messages, state, toolCalls, errors,
//          http: [{method, url, status, answeredAt, requestBody, responseText}],
//          schemaErrors: [{url, event, issues}]: every event of every SSE answer parsed with
//          the EventSchemas of @ag-ui/core 0.0.59 (the client's own), and what failed,
//          warnings: what the libraries printed with console.warn}
// `answeredAt` (an exchange's answer arrived) and a stop step's `endedAt` (its run ended, as
// the client saw it) are numbers of one counter, so their order is the order the client saw.
//
// Everything the libraries print goes to stderr, so stdout stays one JSON document.
"use strict";

const path = require("node:path");
const served = require("../serve.cjs");

// The running command's console.warn lines (result.warnings): the client warns about events it
// cannot apply, which the tests treat as failures.
let activeWarnings = null;
for (const level of ["log", "info", "warn", "debug"]) {
  console[level] = (...args) => {
    if (level === "warn" && activeWarnings && !served.isStale()) {
      activeWarnings.push(args.map((arg) => (typeof arg === "string" ? arg : String(arg))).join(" "));
    }
    console.error(`[${level}]`, ...args);
  };
}

const modules = path.join(__dirname, "node_modules");
const load = (name) => require(require.resolve(name, { paths: [modules] }));

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

// The core only connects to its runtime in a browser; this is the part of `window` it reads.
// One object for the process, in place before the libraries load (phoenix keeps a reference
// to `window` from its load); each command points its location at its own runtime's origin.
globalThis.window = { location: { origin: "http://localhost", href: "http://localhost/chat" } };

function pointWindowAt(runtimeUrl) {
  const origin = new URL(runtimeUrl).origin;
  globalThis.window.location = { origin, href: `${origin}/chat` };
}

// Every exchange the core makes, with the raw bytes of each answer, recorded into the running
// command's recorder. One wrapper for the process, installed before the libraries load; a
// finished command's leftover fetches (serve mode) are not recorded.
let activeRecorder = null;
let moment = 0;
const nextMoment = () => ++moment;
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init = {}) => {
  const recorder = served.isStale() ? null : activeRecorder;
  if (!recorder) return realFetch(input, init);
  const url = typeof input === "string" ? input : input.url;
  const entry = {
    method: (init.method || "GET").toUpperCase(),
    url,
    requestHeaders: Object.fromEntries(new Headers(init.headers || {}).entries()),
    requestBody: typeof init.body === "string" ? safeJson(init.body) : null,
  };
  recorder.exchanges.push(entry);
  try {
    const response = await realFetch(input, init);
    entry.answeredAt = nextMoment();
    entry.status = response.status;
    entry.contentType = response.headers.get("content-type");
    recorder.pending.push(
      response
        .clone()
        .text()
        .then((text) => {
          entry.responseText = text;
        })
        .catch((error) => {
          entry.responseError = String(error);
        }),
    );
    return response;
  } catch (error) {
    entry.fetchError = String(error);
    throw error;
  }
};

function startRecording() {
  moment = 0;  // each command counts from its start: served and one-shot answers are alike
  const recorder = { exchanges: [], pending: [] };
  recorder.settle = () => Promise.allSettled(recorder.pending);
  activeRecorder = recorder;
  return recorder;
}

function stopRecording(recorder) {
  if (activeRecorder === recorder) activeRecorder = null;
}

function loadLibraries() {
  const { CopilotKitCore, ProxiedCopilotRuntimeAgent } = load("@copilotkit/core");
  const { z } = load("zod");
  const { EventSchemas } = load("@ag-ui/core");
  return { CopilotKitCore, ProxiedCopilotRuntimeAgent, z, EventSchemas };
}

// Every event the server sent on an SSE answer, checked against the 0.0.59 schemas: the
// client parses with them too, but reports a failure only as a failed run.
function schemaErrors(EventSchemas, exchanges) {
  const failures = [];
  for (const exchange of exchanges) {
    if (!(exchange.contentType || "").startsWith("text/event-stream")) continue;
    for (const frame of (exchange.responseText || "").split("\n\n")) {
      if (!frame.startsWith("data: ")) continue;
      const event = safeJson(frame.slice("data: ".length));
      const parsed = EventSchemas.safeParse(event);
      if (!parsed.success) {
        failures.push({ url: exchange.url, event, issues: plain(parsed.error.issues) });
      }
    }
  }
  return failures;
}

function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function plain(value) {
  return JSON.parse(JSON.stringify(value ?? null));
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function buildTools(specs, z, toolCalls) {
  return (specs || []).map((spec) => {
    const shape = {};
    for (const [name, type] of Object.entries(spec.properties || {})) {
      shape[name] = type === "number" ? z.number() : z.string();
    }
    return {
      name: spec.name,
      description: spec.description || "",
      parameters: z.object(shape),
      handler: async (args) => {
        toolCalls.push({ name: spec.name, args: plain(args) });
        return spec.result ?? "done";
      },
    };
  });
}

async function waitForAgent(core, agentId, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const agent = core.getAgent(agentId);
    if (agent && core.runtimeConnectionStatus === "connected") return agent;
    if (core.runtimeConnectionStatus === "error") return null;
    await sleep(20);
  }
  return null;
}

async function runStep(core, agent, step, events, outcome) {
  if (step.op === "threads") {
    const url = `${core.runtimeUrl}/threads?agentId=${encodeURIComponent(agent.agentId)}`;
    const response = await core.ɵruntimeFetch(url, { method: "GET" });
    outcome.response = { status: response.status, body: safeJson(await response.text()) };
    return;
  }
  if (step.op === "connect") {
    await core.connectAgent({ agent });
    return;
  }
  for (const earlier of step.before || []) agent.addMessage(earlier);  // e.g. a system message
  if (step.message) {
    agent.addMessage({ id: step.message.id, role: "user", content: step.message.content });
  }
  if (step.op === "run") {
    // resume: an AG-UI interrupt answer ([{interruptId?, payload}]); forwardedProps as sent.
    const options = { agent };
    if (step.resume) options.resume = step.resume;
    if (step.forwardedProps) options.forwardedProps = step.forwardedProps;
    await core.runAgent(options);
    return;
  }
  if (step.op === "stop") {
    const afterStarted = step.afterRunStartedMs;
    const threshold = step.afterContentEvents ?? 1;
    const wanted = afterStarted === undefined ? "TEXT_MESSAGE_CONTENT" : "RUN_STARTED";
    const count = afterStarted === undefined ? threshold : 1;
    const running = core.runAgent({ agent });
    const deadline = Date.now() + 20000;
    while (events.filter((e) => e.type === wanted).length < count) {
      if (Date.now() > deadline) throw new Error(`no ${wanted} arrived before the stop`);
      await sleep(5);
    }
    if (afterStarted !== undefined) await sleep(afterStarted);  // the user's pause
    core.stopAgent({ agent });
    await running;
    outcome.endedAt = nextMoment();
    return;
  }
  throw new Error(`unknown op ${step.op}`);
}

async function runCommand(libraries, command) {
  pointWindowAt(command.runtimeUrl);
  const recorder = startRecording();
  const warnings = [];
  activeWarnings = warnings;
  try {
    return { ...(await runRecorded(libraries, command, recorder)), warnings };
  } finally {
    stopRecording(recorder);
    if (activeWarnings === warnings) activeWarnings = null;
  }
}

async function runRecorded(libraries, command, recorder) {
  const { CopilotKitCore, ProxiedCopilotRuntimeAgent, z, EventSchemas } = libraries;
  const timeoutMs = command.timeoutMs ?? 15000;

  const toolCalls = [];
  const errors = [];
  const core = new CopilotKitCore({
    runtimeUrl: command.runtimeUrl,
    runtimeTransport: command.runtimeTransport || "auto",
    headers: command.headers || {},
    properties: command.properties || {},
    tools: buildTools(command.tools, z, toolCalls),
  });
  core.subscribe({
    onError: ({ error, code, context }) => {
      errors.push({ code, message: error?.message ?? String(error), context: plain(context) });
    },
  });
  for (const entry of command.context || []) core.addContext(entry);

  const result = { steps: [], toolCalls, errors };
  let agent = await waitForAgent(core, command.agentId || "default", timeoutMs);
  if (agent && command.proxyAgentId) {
    agent = new ProxiedCopilotRuntimeAgent({
      runtimeUrl: command.runtimeUrl,
      agentId: command.proxyAgentId,
      transport: core.runtimeTransport,
      runtimeMode: "sse",
    });
  }
  result.connection = core.runtimeConnectionStatus;
  result.runtimeVersion = core.runtimeVersion ?? null;
  result.agents = Object.keys(core.agents || {});
  result.threadEndpoints = plain(core.threadEndpoints);
  if (agent) {
    if (command.threadId) agent.threadId = command.threadId;
    result.transport = agent.transport ?? null;
    result.capabilities = plain(agent.capabilities);
    for (const step of command.steps || []) {
      const events = [];
      const subscription = agent.subscribe({
        onEvent: ({ event }) => {
          events.push(plain(event));
        },
      });
      const outcome = { op: step.op, events };
      try {
        await runStep(core, agent, step, events, outcome);
      } catch (error) {
        outcome.error = String(error?.message ?? error);
      } finally {
        subscription.unsubscribe();
      }
      result.steps.push(outcome);
    }
    result.threadId = agent.threadId;
    result.messages = plain(agent.messages);
    result.state = plain(agent.state);
  }
  await sleep(50);
  await recorder.settle();
  result.http = recorder.exchanges;
  result.schemaErrors = schemaErrors(EventSchemas, recorder.exchanges);
  return result;
}

async function main() {
  if (served.isServeMode()) {
    await served.serve({ load: loadLibraries, run: runCommand });
    return;
  }
  const command = await readStdin();
  const result = await runCommand(loadLibraries(), command);
  await new Promise((resolve) => process.stdout.write(JSON.stringify(result), resolve));
  process.exit(0);
}

main().catch((error) => {
  console.error(error?.stack ?? String(error));
  process.exit(1);
});
