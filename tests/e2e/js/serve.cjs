// The persistent ("--serve") mode shared by the Node drivers (gql_client.cjs,
// agui/agui_client.cjs), driven by tests/e2e/node_driver.py.
//
// Why: a one-shot driver run spends about half of its CPU loading the CopilotKit client
// libraries, and the suite makes hundreds of runs on a 2-core machine. In serve mode a driver
// loads its libraries once, then answers newline-delimited JSON on stdin, one command at a time:
//
//   in:  {"id": N, "command": <the one-shot command>}
//   out: {"id": N, "ok": true, "result": <the one-shot result>, "stderr": "<its output>"}
//    or  {"id": N, "ok": false, "error": "<stack>", "stderr": "...", "fatal": <bool>}
//
// A served command must answer exactly as a fresh process would, so each one runs isolated:
//   - its console/stderr output (and any stray stdout write) is captured into its own reply,
//     and also written to the real stderr, so a caller that gives up on a hung command still
//     has what it printed;
//   - its fetches go through an HTTP agent of its own, closed when it ends (finish()): no
//     keep-alive socket outlives the command (a later command never reuses a socket to a
//     server a test has since stopped, and servers see the hang-up a process exit gives them);
//   - what its leftovers do later (timers, streams, late rejections of the libraries' objects)
//     is told apart by its AsyncLocalStorage context and dropped: a one-shot process would have
//     exited before any of it ran;
//   - an uncaught exception or unhandled rejection of the running command ends the process, as
//     it ends a one-shot process, after a "fatal" reply.
// Closing stdin ends the process at once, whatever timers are pending.
"use strict";

const { AsyncLocalStorage } = require("node:async_hooks");
const readline = require("node:readline");

// How long a finished command's requests still receiving get to complete (see finish()).
const CLOSE_GRACE_MS = 100;

// The command a piece of asynchronous work was started by.
const commandContext = new AsyncLocalStorage();
// The command being answered; null between commands.
let running = null;

// The protocol's own writes bypass the capture installed on process.stdout.
const writeStdout = process.stdout.write.bind(process.stdout);
const writeStderr = process.stderr.write.bind(process.stderr);

// True in work left over from a command that has already been answered (its objects' timers,
// streams, late promise settlements); false in the running command and outside serve mode.
function isStale() {
  const owner = commandContext.getStore();
  return owner !== undefined && !owner.active;
}

// The running command the current work belongs to, or null. Work whose context was lost on
// the way (no store) while a command runs is counted as that command's.
function owningCommand() {
  const owner = commandContext.getStore() ?? running;
  return owner && owner.active ? owner : null;
}

function chunkText(chunk, encoding) {
  if (typeof chunk === "string") return chunk;
  return Buffer.from(chunk).toString(typeof encoding === "string" ? encoding : "utf8");
}

// Routes every write to stderr or stdout: the running command's into its reply and the real
// stderr; a finished command's nowhere (see the header).
function captureOutput() {
  const capture = (chunk, encoding, callback) => {
    const done = typeof encoding === "function" ? encoding : callback;
    if (isStale()) {
      if (typeof done === "function") process.nextTick(done);
      return true;
    }
    const owner = owningCommand();
    if (owner) owner.output.push(chunkText(chunk, encoding));
    return writeStderr(chunk, encoding, callback);
  };
  process.stderr.write = capture;
  // Stdout carries the replies only; a library writing there would break the protocol.
  process.stdout.write = capture;
}

// The undici Agent class behind Node's global fetch (Node bundles undici without exposing it).
// The global dispatcher is created by the first fetch; a data: URL makes one without a socket.
async function fetchAgentClass() {
  await (await fetch("data:,")).text();
  const dispatcher = globalThis[Symbol.for("undici.globalDispatcher.1")];
  if (!dispatcher || typeof dispatcher.constructor !== "function") {
    throw new Error("cannot find Node's fetch dispatcher: run with E2E_NODE_ONE_SHOT=1");
  }
  return dispatcher.constructor;
}

// Every fetch uses the agent of the command it belongs to (a finished command's agent is
// closed, so its leftovers' fetches fail instead of reaching a later command's servers).
function routeFetchThroughCommandAgents() {
  const innerFetch = globalThis.fetch;
  globalThis.fetch = (input, init) => {
    const owner = commandContext.getStore() ?? running;
    if (!owner || (init && init.dispatcher)) return innerFetch(input, init);
    return innerFetch(input, { ...init, dispatcher: owner.dispatcher });
  };
}

function errorText(error) {
  return String(error && error.stack ? error.stack : error);
}

function reply(command, fields) {
  let line;
  try {
    line = JSON.stringify({ id: command.id, stderr: command.output.join(""), ...fields });
  } catch (error) {
    // A result JSON cannot hold (a cycle, a BigInt): a one-shot run fails on it too.
    line = JSON.stringify({ id: command.id, ok: false, error: errorText(error),
      stderr: command.output.join("") });
  }
  return new Promise((resolve) => writeStdout(`${line}\n`, resolve));
}

// The running command's own uncaught error: a one-shot process dies of it (exit 1), and so
// does this one, after telling the caller. Leftovers of earlier commands are ignored.
function handleUncaught(error, kind) {
  if (isStale()) return;
  const owner = owningCommand();
  const text = `${kind}: ${errorText(error)}\n`;
  process.stderr.write(text);
  if (!owner) return;
  owner.active = false;
  owner.answered = true;
  reply(owner, { ok: false, fatal: true, error: text }).then(() => process.exit(1));
}

function within(ms, promise) {
  return Promise.race([promise.catch(() => undefined), new Promise((r) => setTimeout(r, ms))]);
}

// Ends the command's HTTP agent. A response can still be arriving when the client has read
// all it wanted (a chunked body's last empty chunk after the final multipart part): close()
// lets it complete, so the socket ends with a FIN. Closed abruptly, the late bytes would meet
// a closed socket and the server would see a reset. What close() would wait on for longer is a
// stream the command left running: destroy() ends it, as a one-shot process's exit would.
async function finish(command) {
  command.active = false;
  if (running === command) running = null;
  await within(CLOSE_GRACE_MS, command.dispatcher.close());
  await within(1000, command.dispatcher.destroy());
}

async function answer(line, Agent, run) {
  let request;
  try {
    request = JSON.parse(line);
  } catch (error) {
    const text = `serve mode: a line that is not JSON: ${errorText(error)}\n`;
    writeStderr(text);
    await reply({ id: null, output: [] }, { ok: false, fatal: true, error: text });
    process.exit(2);
  }
  const command = {
    id: request.id ?? null,
    active: true,
    answered: false,
    output: [],
    dispatcher: new Agent(),
  };
  running = command;
  let outcome;
  try {
    const result = await commandContext.run(command, () => run(request.command));
    outcome = { ok: true, result };
  } catch (error) {
    const text = errorText(error);
    process.stderr.write(`${text}\n`);
    outcome = { ok: false, fatal: false, error: text };
  }
  if (command.answered) return; // handleUncaught has replied and is ending the process
  command.answered = true;
  await finish(command);
  await reply(command, outcome);
}

// Loads the driver's libraries once (load()), then answers commands with run(libraries,
// command) until stdin closes. The fetch routing is installed before load() so that a library
// keeping a reference to fetch still goes through it.
async function serve({ load, run }) {
  captureOutput();
  const Agent = await fetchAgentClass();
  routeFetchThroughCommandAgents();
  process.on("uncaughtException", (error) => handleUncaught(error, "uncaught exception"));
  process.on("unhandledRejection", (reason) => handleUncaught(reason, "unhandled rejection"));
  const libraries = await load();
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  // The caller closing stdin (its exit, or its atexit hook) ends this process, pending timers
  // and leftover sockets included.
  lines.on("close", () => process.exit(0));
  let queue = Promise.resolve();
  lines.on("line", (line) => {
    if (!line.trim()) return;
    queue = queue
      .then(() => answer(line, Agent, (command) => run(libraries, command)))
      .catch((error) => {
        // The protocol itself broke (a reply could not be written): the caller sees the exit.
        writeStderr(`serve mode failed: ${errorText(error)}\n`);
        process.exit(2);
      });
  });
}

function isServeMode(argv = process.argv.slice(2)) {
  return argv.includes("--serve");
}

module.exports = { isServeMode, isStale, serve };
