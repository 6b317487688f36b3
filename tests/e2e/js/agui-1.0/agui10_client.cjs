#!/usr/bin/env node
// Drives a Copilot runtime's v2 routes with the REAL AG-UI 1.0 client (@ag-ui/client 1.0.4's
// HttpAgent), which declares protocolVersion "1.0" and enforces the 1.0 event schemas: what it
// does not recognise it strips with an "[ag-ui]" warning, and a broken sequence is an error.
//
// Usage: node agui10_client.cjs < command.json > result.json
//        node agui10_client.cjs --serve   (one command per line; see ../serve.cjs)
//
// Command: {
//   runtimeUrl, agentId = "default", threadId, state?,
//   tools?: [{name, description, parameters}],       // frontend tools, sent with every run
//   steps: [
//     {op: "run", message?: {id, content}, toolResults?: [{id, toolCallId, text}],
//      resolve?: <payload>},  // resolve: answers every pending interrupt with this payload
//     {op: "connect"},                                   // POST .../connect (a fresh agent)
//     {op: "stop", message: {id, content}, afterContentEvents: N,  // run, then POST stop
//      connectFirst?: true},  // before the stop: a fresh agent connects to the running run
//   ]
// }
// Result: {steps: [{op, events, raw, responses, error?, ...}], messages, state, warnings}
//   events: what the client's subscribers saw; raw: every event the server sent, as sent;
//   responses: [{url, events}] per SSE answer; a stop with connectFirst adds connectEvents
//   and connectMessages (what the connecting agent saw and holds).
//   warnings: everything the client printed with console.warn or console.error.
"use strict";

const path = require("node:path");
const served = require("../serve.cjs");

// The running command's warnings; the client's own console is captured here and on stderr.
let warnings = null;
for (const level of ["log", "info", "warn", "error", "debug"]) {
  console[level] = (...args) => {
    if ((level === "warn" || level === "error") && warnings && !served.isStale()) {
      warnings.push(args.map((arg) => (typeof arg === "string" ? arg : String(arg))).join(" "));
    }
    process.stderr.write(`[${level}] ${args.join(" ")}\n`);
  };
}

const modules = path.join(__dirname, "node_modules");
const load = (name) => require(require.resolve(name, { paths: [modules] }));

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function loadLibraries() {
  const client = load("@ag-ui/client");
  return { client };
}

function plain(value) {
  return JSON.parse(JSON.stringify(value ?? null));
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function sseEvents(text) {
  return text
    .split("\n\n")
    .filter((frame) => frame.startsWith("data: "))
    .map((frame) => JSON.parse(frame.slice("data: ".length)));
}

// A fetch that keeps each answer's bytes for the step being run (its `raw` events).
function recordingFetch(recorder) {
  return async (input, init) => {
    const response = await fetch(input, init);
    if ((response.headers.get("content-type") || "").startsWith("text/event-stream")) {
      recorder.pending.push(
        response
          .clone()
          .text()
          .then((text) => recorder.responses.push({ url: response.url, events: sseEvents(text) }))
          .catch((error) => recorder.responses.push({ url: response.url, readError: String(error) })),
      );
    }
    return response;
  };
}

function makeAgent(client, command, recorder, route) {
  const base = `${command.runtimeUrl}/agent/${command.agentId || "default"}`
  // HttpAgent has no `connect` of its own: the same request, to the connect route.
  class ConnectingAgent extends client.HttpAgent {
    connect(input) {
      const agent = new client.HttpAgent({ url: `${base}/connect`, fetch: this.fetch });
      return agent.run(input);
    }
  }
  return new ConnectingAgent({
    url: `${base}/${route}`,
    threadId: command.threadId,
    initialState: command.state,
    fetch: recordingFetch(recorder),
  });
}

async function runStep(client, command, agent, step, events, outcome) {
  const tools = command.tools || [];
  if (step.op === "connect") {
    const fresh = makeAgent(client, command, agent.recorder, "run");
    fresh.subscribe({ onEvent: ({ event }) => events.push(plain(event)) });
    await fresh.connectAgent({ tools });
    outcome.messages = plain(fresh.messages);
    outcome.state = plain(fresh.state);
    outcome.pendingInterrupts = plain(fresh.pendingInterrupts);
    return;
  }
  for (const answer of step.toolResults || []) {
    agent.addMessage({
      id: answer.id,
      role: "tool",
      toolCallId: answer.toolCallId,
      content: [{ type: "text", text: answer.text }],
    });
  }
  if (step.message) {
    agent.addMessage({ id: step.message.id, role: "user", content: step.message.content });
  }
  const options = { tools };
  if (step.resolve !== undefined) {
    options.resume = agent.pendingInterrupts.map((interrupt) => ({
      interruptId: interrupt.id,
      status: "resolved",
      payload: step.resolve,
    }));
    outcome.resume = plain(options.resume);
  }
  if (step.op === "run") {
    await agent.runAgent(options);
    return;
  }
  if (step.op === "stop") {
    const running = agent.runAgent(options);
    const contentIn = async (seen, count) => {
      const deadline = Date.now() + 20000;
      while (seen.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").length < count) {
        if (Date.now() > deadline) throw new Error("no content arrived before the stop");
        await sleep(5);
      }
    };
    await contentIn(events, step.afterContentEvents);
    let connecting = null;
    let connected = null;
    if (step.connectFirst) {
      connected = makeAgent(client, command, agent.recorder, "run");
      outcome.connectEvents = [];
      connected.subscribe({ onEvent: ({ event }) => outcome.connectEvents.push(plain(event)) });
      connecting = connected.connectAgent({ tools });
      await contentIn(outcome.connectEvents, 1);
    }
    const url = `${command.runtimeUrl}/agent/${command.agentId || "default"}/stop/${command.threadId}`;
    const response = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    outcome.stopResponse = { status: response.status, body: await response.json() };
    await running;
    if (connecting) {
      await connecting;
      outcome.connectMessages = plain(connected.messages);
    }
    return;
  }
  throw new Error(`unknown op ${step.op}`);
}

async function runCommand(libraries, command) {
  const { client } = libraries;
  const mine = [];
  warnings = mine;
  const result = { steps: [], warnings: mine };
  const recorder = { responses: [], pending: [] };
  const agent = makeAgent(client, command, recorder, "run");
  agent.recorder = recorder;
  for (const step of command.steps || []) {
    const events = [];
    recorder.responses = [];
    recorder.pending = [];
    const subscription = agent.subscribe({ onEvent: ({ event }) => events.push(plain(event)) });
    const outcome = { op: step.op, events };
    try {
      await runStep(client, command, agent, step, events, outcome);
    } catch (error) {
      outcome.error = String(error?.message ?? error);
    } finally {
      subscription.unsubscribe();
    }
    await Promise.allSettled(recorder.pending);
    outcome.responses = recorder.responses;
    outcome.raw = recorder.responses.flatMap((answer) => answer.events || [answer]);
    result.steps.push(outcome);
  }
  result.messages = plain(agent.messages);
  result.state = plain(agent.state);
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
