#!/usr/bin/env node
// Drives Debian's Chromium (never a downloaded browser) through Playwright's library to check
// the admin's session inspector like a person would: log in, open threads, read the transcript
// and the span waterfall, take screenshots.
//
// Reads one JSON command on stdin:
//   {"baseUrl", "username", "password", "screenshotDir",
//    "pages": [{"name", "path", "expectScript": bool}]}
// and prints one JSON result on stdout: {"login": {...}, "pages": [{...}], "dialogs": [...]}.
"use strict";

const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { chromium } = require("playwright-core");

const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

function readStdin() {
  return new Promise((resolve, reject) => {
    let text = "";
    process.stdin.setEncoding("utf8");
    process.stdin.on("data", (chunk) => (text += chunk));
    process.stdin.on("end", () => resolve(text));
    process.stdin.on("error", reject);
  });
}

async function logIn(page, command) {
  await page.goto(`${command.baseUrl}/admin/login/?next=/admin/`);
  await page.fill("#id_username", command.username);
  await page.fill("#id_password", command.password);
  await Promise.all([page.waitForURL(/\/admin\/$/), page.click('input[type="submit"]')]);
  return { url: page.url(), title: await page.title() };
}

// What the page shows, read from the rendered DOM (not from the HTML source).
async function readInspector(page) {
  return page.evaluate(() => {
    const text = (el) => (el ? el.innerText : null);
    const rows = [...document.querySelectorAll("#waterfall details.wf-row")];
    const run = rows[0];
    const runTrack = run ? run.querySelector(".wf-track").getBoundingClientRect() : null;
    return {
      title: document.title,
      transcriptEntries: [...document.querySelectorAll("#transcript .ins-entry")].map((el) => ({
        classes: el.className,
        text: el.innerText,
      })),
      runMarkers: [...document.querySelectorAll("#transcript .ins-run-marker")].map(text),
      toolResults: [...document.querySelectorAll("#transcript .ins-tool-result")].map(text),
      stateChanges: [...document.querySelectorAll("#transcript .ins-state li")].map(text),
      // Any <script> element whose code came from a message would be an injection.
      injectedScripts: [...document.querySelectorAll("script")].filter((s) =>
        (s.textContent || "").includes("xss"),
      ).length,
      injectedBold: [...document.querySelectorAll("#transcript b")].length,
      waterfallTitle: text(document.querySelector("#waterfall h2")),
      waterfall: rows.map((row) => {
        const bar = row.querySelector(".wf-bar").getBoundingClientRect();
        return {
          kind: row.dataset.kind,
          name: row.querySelector(".wf-name").innerText,
          isError: row.classList.contains("wf-error"),
          isIncomplete: row.classList.contains("wf-incomplete"),
          barColor: getComputedStyle(row.querySelector(".wf-bar")).backgroundColor,
          // Where the bar sits on the run's track, in fractions of the track's width.
          left: runTrack ? (bar.left - runTrack.left) / runTrack.width : null,
          width: runTrack ? bar.width / runTrack.width : null,
          duration: row.querySelector(".wf-duration").innerText,
        };
      }),
    };
  });
}

async function inspect(context, command, spec, dialogs) {
  const page = await context.newPage();
  page.on("dialog", async (dialog) => {
    dialogs.push({ page: spec.name, type: dialog.type(), message: dialog.message() });
    await dialog.dismiss();
  });
  const response = await page.goto(`${command.baseUrl}${spec.path}`);
  await page.waitForSelector("#transcript");
  const result = { name: spec.name, status: response.status(), ...(await readInspector(page)) };
  fs.mkdirSync(command.screenshotDir, { recursive: true });
  const threadShot = path.join(command.screenshotDir, `${spec.name}-thread.png`);
  await page.screenshot({ path: threadShot, fullPage: true });
  result.screenshots = [threadShot];
  const waterfall = page.locator("#waterfall");
  if ((await page.locator("#waterfall details.wf-row").count()) > 0) {
    // Open the tool span's details, as someone reading the trace would.
    const tool = page.locator('#waterfall details.wf-row[data-kind="tool"] summary').first();
    if ((await tool.count()) > 0) {
      await tool.click();
      result.openedDetails = await page
        .locator('#waterfall details.wf-row[data-kind="tool"] .wf-details')
        .first()
        .innerText();
    }
    const waterfallShot = path.join(command.screenshotDir, `${spec.name}-waterfall.png`);
    await waterfall.screenshot({ path: waterfallShot });
    result.screenshots.push(waterfallShot);
  }
  await page.close();
  return result;
}

async function main() {
  const command = JSON.parse(await readStdin());
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "inspector-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport: { width: 1400, height: 1000 },
  });
  const dialogs = [];
  try {
    const page = await context.newPage();
    const login = await logIn(page, command);
    await page.close();
    const pages = [];
    for (const spec of command.pages) {
      pages.push(await inspect(context, command, spec, dialogs));
    }
    process.stdout.write(JSON.stringify({ login, pages, dialogs }));
  } finally {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  process.stderr.write(`${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
