#!/usr/bin/env node
// Opens a page holding the real CopilotKit React UI in Debian's Chromium (through Playwright's
// library), types a message into the chat and waits for the reply text, as a person would.
//
// Reads one JSON command on stdin:
//   {"url", "message", "expect", "timeoutMs"}
// and prints one JSON result on stdout:
//   {"replied": bool, "bodyText", "consoleErrors": [...],
//    "requests": [{method, url, status?, failure?}]}
"use strict";

const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { chromium } = require("playwright-core");

const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"];

async function readStdin() {
  let text = "";
  for await (const chunk of process.stdin) text += chunk;
  return JSON.parse(text);
}

async function main() {
  const command = await readStdin();
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "chat-ui-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
  });
  const result = { replied: false, consoleErrors: [], requests: [] };
  try {
    const page = await context.newPage();
    page.on("console", (message) => {
      if (message.type() === "error") result.consoleErrors.push(message.text());
    });
    // One entry per request: its status once answered, its failure if it failed (a request
    // can have both: answered 200, then cancelled by the page before its body ended).
    const pageOrigin = command.url.split("/index.html")[0];
    const entries = new Map();
    const entryOf = (request) => {
      if (!entries.has(request)) {
        entries.set(request, { method: request.method(), url: request.url() });
        result.requests.push(entries.get(request));
      }
      return entries.get(request);
    };
    page.on("response", (response) => {
      const request = response.request();
      if (!request.url().startsWith(pageOrigin)) entryOf(request).status = response.status();
    });
    // The page's requests still under way (a reply's stream ends after its last token shows).
    const inFlight = new Set();
    page.on("request", (request) => inFlight.add(request));
    page.on("requestfinished", (request) => inFlight.delete(request));
    page.on("requestfailed", (request) => {
      inFlight.delete(request);
      entryOf(request).failure = request.failure()?.errorText;
    });
    await page.goto(command.url);
    const input = page.locator("textarea").first();
    await input.waitFor({ timeout: 20000 });
    await input.fill(command.message);
    await input.press("Enter");
    try {
      await page.waitForFunction(
        (expected) => document.body.innerText.includes(expected),
        command.expect,
        { timeout: command.timeoutMs || 20000 },
      );
      result.replied = true;
    } catch {
      result.replied = false;
    }
    // The reply shows while its response may still be streaming (the run's end follows the
    // last token): let the page's requests finish, as a person reading the reply would,
    // rather than close the page under them (the browser reports those as aborted). Counted
    // here: the page's "networkidle" state is reached once, at load, and not waited for again.
    const settleBy = Date.now() + 5000;
    while (inFlight.size > 0 && Date.now() < settleBy) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    result.bodyText = await page.evaluate(() => document.body.innerText);
  } finally {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(result));
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error?.stack ?? String(error));
    process.exit(1);
  },
);
