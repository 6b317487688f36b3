#!/usr/bin/env node
// Drives the demo chat page in headless Debian Chromium through playwright-core (no browser is
// ever downloaded: the system's /usr/bin/chromium is launched with an empty profile).
//
// Usage: node demo_page.cjs < command.json > result.json
//
// Command: {url, message, stopAfterChars?: N, timeoutMs?, screenshot?: path}
//   Opens `url`, waits for the page to be ready, sends `message`, and watches the last
//   assistant bubble while it streams. With stopAfterChars, clicks Stop once the reply has
//   that many characters.
// Result: {threadId, adminHref, offlineNotice, snapshots: [reply lengths seen while streaming],
//          reply, messages: [{role, text}], errors: [...], consoleErrors: [...]}
"use strict";

const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

for (const level of ["log", "info", "warn", "debug"]) {
  console[level] = (...args) => console.error(`[${level}]`, ...args);
}

const CHROMIUM = "/usr/bin/chromium";
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

async function main() {
  const command = await readStdin();
  const timeoutMs = command.timeoutMs ?? 20000;
  const { chromium } = require(
    require.resolve("playwright-core", { paths: [path.join(__dirname, "node_modules")] }),
  );
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "demo-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
  });
  const result = { snapshots: [], consoleErrors: [] };
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(timeoutMs);
    page.on("console", (message) => {
      if (message.type() === "error") result.consoleErrors.push(message.text());
    });
    page.on("pageerror", (error) => result.consoleErrors.push(String(error)));

    await page.goto(command.url);
    await page.waitForSelector("body[data-ready='true']");
    result.threadId = await page.textContent("#thread-id");
    result.adminHref = await page.getAttribute("#admin-link", "href");
    result.offlineNotice = (await page.$("#offline-notice")) !== null;
    result.restored = await page.$$eval(".message", (nodes) =>
      nodes.map((node) => ({ role: node.dataset.role, text: node.textContent })),
    );

    if (command.message) {
      const before = await page.$$eval(".message.assistant", (nodes) => nodes.length);
      await page.fill("#prompt", command.message);
      await page.press("#prompt", "Enter");
      await page.waitForFunction(
        (count) => document.querySelectorAll(".message.assistant").length > count,
        before,
      );
      const deadline = Date.now() + timeoutMs;
      let stopped = false;
      for (;;) {
        const state = await page.evaluate(() => {
          const replies = document.querySelectorAll(".message.assistant");
          const last = replies[replies.length - 1];
          return {
            length: last ? last.textContent.length : 0,
            streaming: last ? last.classList.contains("streaming") : false,
            sendDisabled: document.getElementById("send").disabled,
          };
        });
        if (result.snapshots[result.snapshots.length - 1] !== state.length) {
          result.snapshots.push(state.length);
        }
        if (!stopped && command.stopAfterChars && state.length >= command.stopAfterChars) {
          await page.click("#stop");
          stopped = true;
          result.stoppedAtChars = state.length;
        }
        if (!state.sendDisabled) break;
        if (Date.now() > deadline) throw new Error("the reply did not finish in time");
        await page.waitForTimeout(15);
      }
    }
    result.messages = await page.$$eval(".message", (nodes) =>
      nodes.map((node) => ({ role: node.dataset.role, text: node.textContent })),
    );
    const replies = result.messages.filter((m) => m.role === "assistant");
    result.reply = replies.length ? replies[replies.length - 1].text : null;
    result.errors = await page.$$eval(".error", (nodes) => nodes.map((node) => node.textContent));
    if (command.screenshot) {
      fs.mkdirSync(path.dirname(command.screenshot), { recursive: true });
      await page.screenshot({ path: command.screenshot, fullPage: true });
    }
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
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
