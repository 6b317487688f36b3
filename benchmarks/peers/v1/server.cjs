// The TypeScript runtime 1.10.6 (GraphQL) as the benchmark's peer: the OpenAI adapter pointed at
// the fake upstream, served at /api/copilotkit on Node's http server, GET /healthz for readiness.
//   node server.cjs <port> <fake upstream base URL, e.g. http://127.0.0.1:8500/v1>
"use strict";
process.env.COPILOTKIT_TELEMETRY_DISABLED = "true";
const http = require("node:http");
const OpenAI = require("openai");
const {
  CopilotRuntime,
  OpenAIAdapter,
  copilotRuntimeNodeHttpEndpoint,
} = require("@copilotkit/runtime");

const [port, baseURL] = process.argv.slice(2);
const openai = new OpenAI({ apiKey: "bench", baseURL, maxRetries: 0 });
const handler = copilotRuntimeNodeHttpEndpoint({
  endpoint: "/api/copilotkit",
  runtime: new CopilotRuntime(),
  serviceAdapter: new OpenAIAdapter({ openai, model: "gpt-4o-mini" }),
});

http
  .createServer((req, res) => {
    if (req.url === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
      return;
    }
    handler(req, res);
  })
  .listen(Number(port), "127.0.0.1");
