#!/usr/bin/env node
// Runs ONE GraphQL operation over a websocket with a REAL npm client, for end-to-end tests:
//   protocol "graphql-transport-ws" -> graphql-ws (createClient)
//   protocol "graphql-ws"           -> subscriptions-transport-ws (SubscriptionClient)
//
// Usage: node ws_client.cjs < command.json > result.json
//
// Command (JSON on stdin):
//   protocol          "graphql-transport-ws" | "graphql-ws"
//   url               ws://host:port/api/copilotkit
//   operation         {query, variables?, operationName?}
//   connectionParams  connection_init payload (optional)
//   headers           extra handshake headers, e.g. {"Origin": "http://evil.example"} (optional)
//   completeAfter     N: after N results, unsubscribe (the client sends complete / stop)
//   dropAfter         N: after N results, destroy the TCP connection (no complete, no close frame)
//   timeoutMs         give up after this long (default 30000)
//
// Result (JSON on stdout): {results: [{data, errors?}...], completed, error, closed:
// {code, reason}, connectionError, acknowledged, stoppedBy: "complete"|"drop"|"timeout"|null,
// elapsedMs}. Progress lines go to stderr ("result <n>"), so a test can follow a running client.
"use strict";

const here = __dirname;
const load = (name) => require(require.resolve(name, { paths: [here] }));
const WebSocket = load("ws");

const LINGER_MS = 300; // after an explicit complete, let the message reach the server

function readStdin() {
  return new Promise((resolve, reject) => {
    let text = "";
    process.stdin.setEncoding("utf8");
    process.stdin.on("data", (chunk) => (text += chunk));
    process.stdin.on("end", () => resolve(text));
    process.stdin.on("error", reject);
  });
}

function plain(value) {
  if (value === undefined) return null;
  if (value instanceof Error) return { name: value.name, message: value.message };
  // A ws CloseEvent / ErrorEvent: keep what a test can check.
  if (value && typeof value === "object" && "code" in value && "reason" in value) {
    return { code: value.code, reason: String(value.reason || "") };
  }
  if (value && typeof value === "object" && value.error instanceof Error) {
    return { name: value.error.name, message: value.error.message };
  }
  try {
    return JSON.parse(JSON.stringify(value));
  } catch (error) {
    return { message: String(value) };
  }
}

// A ws WebSocket that sends the command's extra handshake headers.
function socketClassWithHeaders(headers, onCreate) {
  return class HeaderedWebSocket extends WebSocket {
    constructor(url, protocols) {
      super(url, protocols, { headers: headers || {} });
      onCreate(this);
    }
  };
}

function newOutcome() {
  return {
    results: [],
    completed: false,
    error: null,
    closed: null,
    connectionError: null,
    acknowledged: false,
    stoppedBy: null,
    elapsedMs: 0,
  };
}

function runGraphqlTransportWs(command, outcome, finish) {
  const { createClient } = load("graphql-ws");
  let socket = null;
  const client = createClient({
    url: command.url,
    webSocketImpl: socketClassWithHeaders(command.headers, (created) => (socket = created)),
    connectionParams: command.connectionParams || undefined,
    lazy: true,
    retryAttempts: 0,
    on: {
      connected: () => (outcome.acknowledged = true),
      closed: (event) => {
        outcome.closed = plain(event);
      },
      error: (error) => {
        outcome.connectionError = plain(error);
      },
    },
  });
  const unsubscribe = client.subscribe(command.operation, {
    next: (result) => {
      outcome.results.push(plain(result));
      process.stderr.write(`result ${outcome.results.length}\n`);
      const count = outcome.results.length;
      if (command.completeAfter && count === command.completeAfter) {
        outcome.stoppedBy = "complete";
        unsubscribe();
        setTimeout(() => finish(() => client.dispose()), LINGER_MS);
      } else if (command.dropAfter && count === command.dropAfter) {
        outcome.stoppedBy = "drop";
        socket.terminate();
        finish(() => {});
      }
    },
    error: (error) => {
      outcome.error = plain(error);
      finish(() => client.dispose());
    },
    complete: () => {
      if (outcome.stoppedBy) return; // our own unsubscribe also calls complete
      outcome.completed = true;
      finish(() => client.dispose());
    },
  });
  return () => client.dispose();
}

function runLegacyGraphqlWs(command, outcome, finish) {
  const { SubscriptionClient } = load("subscriptions-transport-ws");
  const client = new SubscriptionClient(
    command.url,
    {
      reconnect: false,
      lazy: false,
      connectionParams: command.connectionParams || {},
      connectionCallback: (error) => {
        if (error) {
          outcome.connectionError = plain(error);
          finish(() => client.close());
        } else {
          outcome.acknowledged = true;
        }
      },
      wsOptionArguments: [{ headers: command.headers || {} }],
    },
    WebSocket,
  );
  client.onError((event) => {
    if (!outcome.connectionError) outcome.connectionError = plain(event);
  });
  client.onDisconnected(() => {
    if (!outcome.closed) outcome.closed = { code: null, reason: "disconnected" };
    if (!outcome.stoppedBy) finish(() => {});
  });
  const subscription = client.request(command.operation).subscribe({
    next: (result) => {
      outcome.results.push(plain(result));
      process.stderr.write(`result ${outcome.results.length}\n`);
      const count = outcome.results.length;
      if (command.completeAfter && count === command.completeAfter) {
        outcome.stoppedBy = "complete";
        subscription.unsubscribe();
        setTimeout(() => finish(() => client.close()), LINGER_MS);
      } else if (command.dropAfter && count === command.dropAfter) {
        outcome.stoppedBy = "drop";
        client.client.terminate();
        finish(() => {});
      }
    },
    error: (error) => {
      outcome.error = plain(error);
      finish(() => client.close());
    },
    complete: () => {
      outcome.completed = true;
      finish(() => client.close());
    },
  });
  return () => client.close();
}

async function main() {
  const command = JSON.parse(await readStdin());
  const started = Date.now();
  const outcome = newOutcome();
  let finished = false;
  let resolveDone;
  const done = new Promise((resolve) => (resolveDone = resolve));
  const finish = (cleanup) => {
    if (finished) return;
    finished = true;
    try {
      cleanup();
    } catch (error) {
      process.stderr.write(`cleanup failed: ${error}\n`);
    }
    resolveDone();
  };
  const runners = {
    "graphql-transport-ws": runGraphqlTransportWs,
    "graphql-ws": runLegacyGraphqlWs,
  };
  const runner = runners[command.protocol];
  if (!runner) throw new Error(`unknown protocol ${command.protocol}`);
  const dispose = runner(command, outcome, finish);
  const timer = setTimeout(() => {
    outcome.stoppedBy = outcome.stoppedBy || "timeout";
    finish(dispose);
  }, command.timeoutMs || 30000);
  await done;
  clearTimeout(timer);
  // Let close events arrive (the close code of a refused connection, for instance).
  await new Promise((resolve) => setTimeout(resolve, 200));
  outcome.elapsedMs = Date.now() - started;
  process.stdout.write(JSON.stringify(outcome));
  process.exit(0);
}

main().catch((error) => {
  process.stderr.write(`${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
