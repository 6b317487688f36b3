// The TypeScript runtime 1.75.0 (AG-UI) as the benchmark's peer: one BuiltInAgent named "default"
// whose model is OpenAI's chat API at the fake upstream, served at /api/copilotkit (multi-route:
// POST /api/copilotkit/agent/default/run) and in single-route mode at /single/api/copilotkit,
// GET /healthz for readiness.
//   node server.mjs <port> <fake upstream base URL, e.g. http://127.0.0.1:8500/v1>
process.env.COPILOTKIT_TELEMETRY_DISABLED = "true";
process.env.DO_NOT_TRACK = "1";
import { createServer } from "node:http";
import { createOpenAI } from "@ai-sdk/openai";
import { BuiltInAgent, CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";

const [port, baseURL] = process.argv.slice(2);
const model = createOpenAI({ baseURL, apiKey: "bench" }).chat("gpt-4o-mini");
const runtime = new CopilotRuntime({ agents: { default: new BuiltInAgent({ model }) } });
const listener = createCopilotNodeListener({ runtime, basePath: "/api/copilotkit" });
// The same runtime in single-route mode (one POST taking { method, params, body }), for the
// parity tests (tests/e2e/test_ts_parity.py); the benchmark uses the multi-route one.
const singleRoute = createCopilotNodeListener({
  runtime,
  basePath: "/single/api/copilotkit",
  mode: "single-route",
});

createServer((req, res) => {
  if (req.url === "/healthz") {
    res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    return;
  }
  (req.url.startsWith("/single/") ? singleRoute : listener)(req, res);
}).listen(Number(port), "127.0.0.1");
