#!/usr/bin/env node
// Drives a Copilot runtime with the REAL CopilotKit GraphQL client (@copilotkit/runtime-client-gql)
// so end-to-end tests exercise exactly what a browser would do.
//
// Usage: node gql_client.cjs --version 1.10.6 < command.json > result.json
//        node gql_client.cjs --version 1.10.6 --serve   (one command per line; see serve.cjs)
//
// One JSON command on stdin, one JSON result on stdout. Everything the client library prints
// (console.log / console.warn) is redirected to stderr so stdout stays parseable.
//
// Packages are loaded from ./gql-<version>/node_modules through require(): the CommonJS builds.
// The ES-module builds must not be used under Node (tool-call arguments come back as `{}`).
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { performance } = require("node:perf_hooks");
const served = require("./serve.cjs");

// Keep stdout for the single JSON result: library chatter goes to stderr.
for (const level of ["log", "info", "warn", "debug"]) {
  console[level] = (...args) => console.error(`[${level}]`, ...args);
}

// ---------------------------------------------------------------------------------------------
// Loading the pinned client version
// ---------------------------------------------------------------------------------------------

function parseVersionArgument(argv) {
  const index = argv.indexOf("--version");
  if (index === -1 || !argv[index + 1]) {
    throw new Error("usage: node gql_client.cjs --version <runtime-client-gql version>");
  }
  return argv[index + 1];
}

function loadClientPackage(version) {
  const folder = path.join(__dirname, `gql-${version}`);
  if (!fs.existsSync(path.join(folder, "package.json"))) {
    throw new Error(`no pinned folder for runtime-client-gql ${version}: ${folder}`);
  }
  const resolveFrom = (name) => require.resolve(name, { paths: [folder] });
  const entry = resolveFrom("@copilotkit/runtime-client-gql");
  if (!entry.endsWith(".js") && !entry.endsWith(".cjs")) {
    throw new Error(`expected the CommonJS build of runtime-client-gql, got ${entry}`);
  }
  // package.json is not in every version's "exports" map, so read it from disk.
  const manifestPath = path.join(folder, "node_modules", "@copilotkit", "runtime-client-gql",
    "package.json");
  const installedVersion = JSON.parse(fs.readFileSync(manifestPath, "utf8")).version;
  if (installedVersion !== version) {
    throw new Error(`gql-${version} has runtime-client-gql ${installedVersion} installed`);
  }
  return { gql: require(entry), installedVersion };
}

// ---------------------------------------------------------------------------------------------
// Plain-JSON helpers
// ---------------------------------------------------------------------------------------------

// JSON round trip that survives cycles and turns nested Errors into {name, message}.
// With dropStacks, "stack" keys are left out: for errors the client builds itself, where they
// only point into node_modules. Server-sent data keeps them (tests check nothing leaks).
function toPlain(value, { dropStacks = false } = {}) {
  if (value === undefined) return undefined;
  const seen = new WeakSet();
  const text = JSON.stringify(value, (key, item) => {
    if (dropStacks && key === "stack") return undefined;
    if (item instanceof Error) {
      return { name: item.name, message: item.message, ...ownFields(item) };
    }
    if (typeof item === "bigint") return item.toString();
    if (item && typeof item === "object") {
      if (seen.has(item)) return "[Circular]";
      seen.add(item);
    }
    return item;
  });
  return text === undefined ? undefined : JSON.parse(text);
}

function ownFields(error) {
  const fields = {};
  for (const key of Object.keys(error)) {
    // Response objects and stacks are noise in test output.
    if (key === "response" || key === "stack" || key === "originalError") continue;
    fields[key] = error[key];
  }
  return fields;
}

// Turns anything the client may report (urql CombinedError, CopilotKitError, the synthetic
// object asStream builds, a plain string) into {name, message, extensions, status, ...}.
// Nested errors (networkError, cause) are made on the client side, so their stacks are dropped.
function describeError(error, depth = 0) {
  if (error === null || error === undefined) return null;
  if (typeof error !== "object") return { message: String(error) };
  const described = { name: error.name, message: error.message };
  if (error.extensions !== undefined) {
    described.extensions = toPlain(error.extensions, { dropStacks: depth > 0 });
  }
  if (Array.isArray(error.graphQLErrors) && error.graphQLErrors.length > 0) {
    described.graphQLErrors = error.graphQLErrors.map((gqlError) => ({
      message: gqlError.message,
      extensions: toPlain(gqlError.extensions),
      path: gqlError.path ?? undefined,
    }));
  }
  // HTTP status when the error object knows it; CopilotKit's own statusCode is a separate,
  // code-derived number (a 401 response becomes statusCode 500 / code UNKNOWN in the client).
  const status = error.response?.status ?? error.status;
  if (status !== undefined) described.status = status;
  const statusCode = error.statusCode ?? error.extensions?.statusCode;
  if (statusCode !== undefined) described.statusCode = statusCode;
  if (error.code !== undefined) described.code = error.code;
  if (depth < 3) {
    if (error.networkError) described.networkError = describeError(error.networkError, depth + 1);
    if (error.cause) described.cause = describeError(error.cause, depth + 1);
  }
  return described;
}

// Collects errors once per object, remembering every route it arrived by
// ("handleGQLErrors", "stream", "result", "thrown"), so tests can tell a UI-visible error
// (handleGQLErrors) from one that only ended the stream.
function createErrorLog() {
  const entries = [];
  const byObject = new Map();
  return {
    record(error, via) {
      const known = error && typeof error === "object" ? byObject.get(error) : undefined;
      if (known) {
        if (!known.via.includes(via)) known.via.push(via);
        return;
      }
      const entry = { ...describeError(error), via: [via] };
      entries.push(entry);
      if (error && typeof error === "object") byObject.set(error, entry);
    },
    entries,
  };
}

function messagesToPlain(messages) {
  return messages.map((message) => toPlain(message));
}

// ---------------------------------------------------------------------------------------------
// HTTP exchange log
// ---------------------------------------------------------------------------------------------

// The client turns HTTP failures into CopilotKit errors that lose the real status (401 ->
// "UNKNOWN"/500), so the driver wraps the global fetch the client calls and records every
// response's status and headers. Behaviour is unchanged: the same Response is passed through.
// In serve mode the log is emptied before each command, and a finished command's leftover
// fetches are not recorded (they would land in a later command's slice).
const httpLog = [];
const originalFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  if (served.isStale()) return originalFetch(input, init);
  const entry = { method: init?.method ?? "GET", url: String(input), status: null, headers: {} };
  httpLog.push(entry);
  try {
    const response = await originalFetch(input, init);
    entry.status = response.status;
    entry.headers = Object.fromEntries(response.headers.entries());
    return response;
  } catch (error) {
    entry.error = describeError(error);
    throw error;
  }
};

// Returns the exchanges recorded since `mark` (a previous httpLog length).
function httpSince(mark) {
  return httpLog.slice(mark);
}

// ---------------------------------------------------------------------------------------------
// Client construction
// ---------------------------------------------------------------------------------------------

function createClient(gql, command, errorLog, warnings) {
  return new gql.CopilotRuntimeClient({
    url: command.url,
    headers: command.headers ?? {},
    ...(command.publicApiKey ? { publicApiKey: command.publicApiKey } : {}),
    ...(command.credentials ? { credentials: command.credentials } : {}),
    handleGQLErrors: (error) => errorLog.record(error, "handleGQLErrors"),
    handleGQLWarning: (warning) => warnings.push(String(warning)),
  });
}

// Chrome's message for a plain abort(); the client only suppresses aborts whose message contains
// it (or "BodyStreamBuffer was aborted"). Node's default ("This operation was aborted") would
// surface as an error instead, which no browser user ever sees.
function browserLikeAbortReason() {
  return new DOMException("signal is aborted without reason", "AbortError");
}

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

async function runGenerate(gql, command) {
  const httpMark = httpLog.length;
  const errorLog = createErrorLog();
  const warnings = [];
  const client = createClient(gql, command, errorLog, warnings);
  const abortController = new AbortController();
  let aborted = false;
  const abort = () => {
    if (aborted) return;
    aborted = true;
    abortController.abort(browserLikeAbortReason());
  };
  const abortTimer =
    typeof command.abortAfterMs === "number" ? setTimeout(abort, command.abortAfterMs) : null;

  const startedAt = performance.now();
  const elapsed = () => Math.round((performance.now() - startedAt) * 10) / 10;
  let final = null;
  let snapshots = 0;
  let firstMessageMs = null;
  let firstContentMs = null;
  const snapshotValues = [];
  const snapshotMs = [];

  try {
    const source = client.generateCopilotResponse({
      data: command.data,
      properties: command.properties,
      signal: abortController.signal,
    });
    const reader = client.asStream(source).getReader();
    for (;;) {
      let step;
      try {
        step = await reader.read();
      } catch (error) {
        errorLog.record(error, "stream");
        break;
      }
      if (step.done) break;
      snapshots += 1;
      snapshotMs.push(elapsed());
      const response = step.value?.generateCopilotResponse;
      if (response === undefined) continue;
      final = response;
      if (command.keepSnapshots) snapshotValues.push(toPlain(response));
      if (firstMessageMs === null && Array.isArray(response?.messages) &&
          response.messages.length > 0) {
        firstMessageMs = elapsed();
        if (command.abortAfterFirstMessage) abort();
      }
      if (firstContentMs === null && hasStreamedContent(response)) firstContentMs = elapsed();
    }
  } catch (error) {
    errorLog.record(error, "thrown");
  } finally {
    if (abortTimer) clearTimeout(abortTimer);
  }

  const result = {
    op: "generate",
    final: toPlain(final),
    snapshots,
    snapshotMs,
    firstMessageMs,
    firstContentMs,
    totalMs: elapsed(),
    errors: errorLog.entries,
    warnings,
    aborted,
    http: httpSince(httpMark),
  };
  if (command.keepSnapshots) result.snapshotValues = snapshotValues;
  Object.assign(result, convertOutputMessages(gql, final));
  return { result, final };
}

// True once any message carries text, tool-call arguments or a result: "time to first token"
// as a user would see it (firstMessageMs already fires for a message with empty content).
function hasStreamedContent(response) {
  return (response?.messages ?? []).some((message) =>
    (Array.isArray(message.content) && message.content.length > 0) ||
    (Array.isArray(message.arguments) && message.arguments.length > 0) ||
    message.__typename === "ResultMessageOutput");
}

// What the real chat (react-core use-chat) does with each response:
// convertGqlOutputToMessages(filterAdjacentAgentStateMessages(messages)).
function convertOutputMessages(gql, final) {
  if (typeof gql.convertGqlOutputToMessages !== "function") return {};
  if (!final || !Array.isArray(final.messages)) return { messages: [], messageObjects: [] };
  try {
    const raw = typeof gql.filterAdjacentAgentStateMessages === "function"
      ? gql.filterAdjacentAgentStateMessages(final.messages)
      : final.messages;
    const messageObjects = gql.convertGqlOutputToMessages(raw);
    return { messages: messagesToPlain(messageObjects), messageObjects };
  } catch (error) {
    return { messages: null, messagesError: describeError(error), messageObjects: [] };
  }
}

async function runQuery(gql, command, startQuery) {
  const httpMark = httpLog.length;
  const errorLog = createErrorLog();
  const warnings = [];
  const client = createClient(gql, command, errorLog, warnings);
  let outcome = { data: undefined };
  try {
    outcome = await startQuery(client).toPromise();
    if (outcome.error) errorLog.record(outcome.error, "result");
  } catch (error) {
    errorLog.record(error, "thrown");
  }
  // loadAgentState reports errors through its own promise; let it settle before answering.
  await new Promise((resolve) => setImmediate(resolve));
  return {
    data: toPlain(outcome.data ?? null),
    errors: errorLog.entries,
    warnings,
    http: httpSince(httpMark),
  };
}

async function runAvailableAgents(gql, command) {
  const answer = await runQuery(gql, command, (client) => client.availableAgents());
  return { op: "availableAgents", ...answer };
}

// Mirrors react-core's copilot-messages.tsx: the `messages` JSON string is parsed and handed to
// loadMessagesFromJsonRepresentation, whose result replaces the chat history.
async function runLoadAgentState(gql, command) {
  const answer = await runQuery(gql, command, (client) =>
    client.loadAgentState({ threadId: command.threadId, agentName: command.agentName }));
  const result = { op: "loadAgentState", ...answer };
  const payload = answer.data?.loadAgentState;
  if (payload) {
    try {
      result.state = payload.state ? JSON.parse(payload.state) : null;
    } catch (error) {
      result.stateError = describeError(error);
    }
    if (typeof gql.loadMessagesFromJsonRepresentation === "function") {
      try {
        const parsed = JSON.parse(payload.messages || "[]");
        result.messages = messagesToPlain(gql.loadMessagesFromJsonRepresentation(parsed));
      } catch (error) {
        result.messages = null;
        result.messagesError = describeError(error);
      }
    }
  }
  return result;
}

async function runRaw(command) {
  const headers = { "content-type": "application/json", ...(command.headers ?? {}) };
  if (command.accept) headers.accept = command.accept;
  const method = command.method ?? (command.body === undefined ? "GET" : "POST");
  const body = command.body === undefined || typeof command.body === "string"
    ? command.body
    : JSON.stringify(command.body);
  try {
    const response = await fetch(command.url, { method, headers, body });
    const text = await response.text();
    return {
      op: "raw",
      status: response.status,
      headers: Object.fromEntries(response.headers.entries()),
      text,
      errors: [],
    };
  } catch (error) {
    return { op: "raw", status: null, headers: {}, text: null, errors: [describeError(error)] };
  }
}

// ---------------------------------------------------------------------------------------------
// Follow-up turns inside a sequence
// ---------------------------------------------------------------------------------------------

// Builds the next request the way react-core's use-chat does after a turn: previous input
// messages, then the converted output messages with a ResultMessage right after each executed
// action, all through the package's convertMessagesToGqlInput; runId and extensions echoed.
function buildFollowUpData(gql, previous, followUp, overrides) {
  if (!previous) throw new Error("followUp needs an earlier generate in the same sequence");
  const actionResults = followUp.actionResults ?? {};
  const outputMessages = [];
  for (const message of previous.messageObjects) {
    outputMessages.push(message);
    const isAction = typeof message.isActionExecutionMessage === "function" &&
      message.isActionExecutionMessage();
    if (isAction && Object.prototype.hasOwnProperty.call(actionResults, message.name)) {
      outputMessages.push(new gql.ResultMessage({
        result: gql.ResultMessage.encodeResult(actionResults[message.name]),
        actionExecutionId: message.id,
        actionName: message.name,
      }));
    }
  }
  if (typeof followUp.userText === "string") {
    outputMessages.push(new gql.TextMessage({ role: gql.Role.User, content: followUp.userText }));
  }
  const newInput = gql.convertMessagesToGqlInput(gql.filterAgentStateMessages(outputMessages));
  const previousResponse = previous.final ?? {};
  return {
    ...previous.data,
    runId: previousResponse.runId ?? null,
    extensions: gql.CopilotRuntimeClient.removeGraphQLTypename(
      toPlain(previousResponse.extensions ?? {}) ?? {}),
    ...(overrides ?? {}),
    messages: [...(previous.data.messages ?? []), ...newInput],
  };
}

async function runSequence(gql, command) {
  const results = [];
  let previousTurn = null;
  for (const step of command.commands ?? []) {
    if (step.op === "generate") {
      let data = step.data;
      if (step.followUp) {
        data = buildFollowUpData(gql, previousTurn, step.followUp, step.data);
      }
      const turnCommand = { ...step, url: step.url ?? command.url,
        headers: step.headers ?? command.headers, data };
      const turn = await runGenerate(gql, turnCommand);
      const { messageObjects, ...plainResult } = turn.result;
      // The request that was actually sent helps debugging follow-up construction.
      results.push({ ...plainResult, sentData: toPlain(data) });
      previousTurn = { data, final: turn.final, messageObjects: messageObjects ?? [] };
    } else {
      results.push(await runCommand(gql, { url: command.url, headers: command.headers, ...step }));
    }
  }
  return { op: "sequence", results };
}

async function runCommand(gql, command) {
  switch (command.op) {
    case "generate": {
      const { result } = await runGenerate(gql, command);
      const { messageObjects, ...plainResult } = result;
      return plainResult;
    }
    case "availableAgents":
      return runAvailableAgents(gql, command);
    case "loadAgentState":
      return runLoadAgentState(gql, command);
    case "raw":
      return runRaw(command);
    case "sequence":
      return runSequence(gql, command);
    default:
      throw new Error(`unknown op: ${JSON.stringify(command.op)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Entry point
// ---------------------------------------------------------------------------------------------

function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    process.stdin.on("data", (chunk) => chunks.push(chunk));
    process.stdin.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    process.stdin.on("error", reject);
  });
}

// The result both modes answer with: the command's, with the client version in front.
async function answerCommand({ gql, installedVersion }, command) {
  const result = await runCommand(gql, command);
  return { clientVersion: installedVersion, ...result };
}

async function main() {
  const argv = process.argv.slice(2);
  const version = parseVersionArgument(argv);
  if (served.isServeMode(argv)) {
    await served.serve({
      load: () => loadClientPackage(version),
      run: (client, command) => {
        httpLog.length = 0;
        return answerCommand(client, command);
      },
    });
    return;
  }
  const client = loadClientPackage(version);
  const command = JSON.parse(await readStdin());
  const line = JSON.stringify(await answerCommand(client, command)) + "\n";
  await new Promise((resolve) => process.stdout.write(line, resolve));
  // Open sockets (keep-alive) or telemetry timers must not keep the process alive.
  process.exit(0);
}

main().catch((error) => {
  process.stderr.write(`gql_client.cjs failed: ${error && error.stack ? error.stack : error}\n`);
  process.exit(2);
});
