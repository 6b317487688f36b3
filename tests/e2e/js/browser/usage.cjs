#!/usr/bin/env node
// Drives Debian's Chromium (never a downloaded browser) through Playwright's library, 1280 px
// wide, over the admin's usage page and a model call's content in the inspector: log in, follow
// the index's link to the usage page, read its charts and tables from the rendered DOM, open a
// run's model call and read the prompt and attributes shown; take screenshots.
//
// Reads one JSON command on stdin:
//   {"baseUrl", "username", "password", "screenshotDir", "usagePeriods": ["30", ...],
//    "inspectPath"}
// and prints one JSON result on stdout: {"indexLink", "usage": [{...}], "call": {...}}.
"use strict";

const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { chromium } = require("playwright-core");

const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"];
const WIDTH = 1280;

function readStdin() {
  return new Promise((resolve, reject) => {
    let text = "";
    process.stdin.setEncoding("utf8");
    process.stdin.on("data", (chunk) => (text += chunk));
    process.stdin.on("end", () => resolve(text));
    process.stdin.on("error", reject);
  });
}

// What the usage page shows: each chart's title, bars (where they sit in their chart), value
// and time labels, and the tables' rows, as laid out at this width.
async function readUsage(page) {
  return page.evaluate(() => {
    const charts = [...document.querySelectorAll("figure.ins-chart")].map((figure) => {
      const svg = figure.querySelector("svg").getBoundingClientRect();
      const bars = [...figure.querySelectorAll("rect.chart-bar")].map((bar) => {
        const box = bar.getBoundingClientRect();
        return {
          left: box.left - svg.left,
          right: box.right - svg.left,
          width: box.width,
          height: box.height,
          title: bar.querySelector("title") ? bar.querySelector("title").textContent : "",
        };
      });
      return {
        title: figure.querySelector("figcaption").innerText,
        width: svg.width,
        bars,
        values: [...figure.querySelectorAll(".chart-value")].map((t) => t.textContent),
        ticks: [...figure.querySelectorAll(".chart-tick")].map((t) => t.textContent),
        empty: figure.querySelector(".chart-empty") ? figure.innerText : null,
      };
    });
    const tables = {};
    for (const section of document.querySelectorAll("section[id^='usage-']")) {
      tables[section.id] = [...section.querySelectorAll("tbody tr")].map((row) =>
        [...row.querySelectorAll("td")].map((cell) => cell.innerText),
      );
    }
    const total = {};
    for (const cell of document.querySelectorAll("#usage-total td")) total[cell.id] = cell.innerText;
    return {
      title: document.title,
      scrollWidth: document.documentElement.scrollWidth,
      period: (document.querySelector("#usage-periods strong") || {}).innerText,
      empty: (document.querySelector("#usage-empty") || {}).innerText || null,
      charts,
      tables,
      total,
    };
  });
}

async function usagePage(page, command, period) {
  const response = await page.goto(
    `${command.baseUrl}/admin/conversations/usagereport/?days=${period}`,
  );
  const result = { period, status: response.status(), ...(await readUsage(page)) };
  const shot = path.join(command.screenshotDir, `usage-${period}.png`);
  await page.screenshot({ path: shot, fullPage: true });
  result.screenshot = shot;
  return result;
}

// The second model call of the inspected run: its details opened, its prompt and attributes.
async function modelCall(page, command) {
  await page.goto(`${command.baseUrl}${command.inspectPath}`);
  const calls = page.locator('#waterfall details.wf-row[data-kind="generation"]');
  const call = calls.nth((await calls.count()) - 1);
  await call.locator(":scope > summary").click();
  const details = call.locator(".wf-details");
  const read = await details.evaluate((el) => ({
    prompt: [...el.querySelectorAll(".wf-prompt li")].map((li) => ({
      source: li.className.replace("wf-prompt-", ""),
      role: li.querySelector(".ins-badge").innerText,
      text: li.querySelector("pre").innerText,
    })),
    attributes: [...el.querySelectorAll(".wf-attributes tr")].map((tr) => [
      tr.querySelector("th").innerText,
      tr.querySelector("td").innerText,
    ]),
    output: [...el.querySelectorAll("pre.ins-json")].map((pre) => pre.innerText).pop(),
    width: el.getBoundingClientRect().width,
  }));
  const shot = path.join(command.screenshotDir, "model-call.png");
  await details.screenshot({ path: shot });
  const scrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  return { ...read, screenshot: shot, scrollWidth };
}

async function main() {
  const command = JSON.parse(await readStdin());
  fs.mkdirSync(command.screenshotDir, { recursive: true });
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "usage-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport: { width: WIDTH, height: 900 },
  });
  try {
    const page = await context.newPage();
    await page.goto(`${command.baseUrl}/admin/login/?next=/admin/`);
    await page.fill("#id_username", command.username);
    await page.fill("#id_password", command.password);
    await Promise.all([page.waitForURL(/\/admin\/$/), page.click('input[type="submit"]')]);
    // The index lists the page; following its link lands on it.
    const link = page.getByRole("link", { name: "Usage and cost" }).first();
    const indexLink = await link.getAttribute("href");
    await Promise.all([page.waitForURL(/usagereport/), link.click()]);
    const landed = page.url();
    const usage = [];
    for (const period of command.usagePeriods) usage.push(await usagePage(page, command, period));
    const call = command.inspectPath ? await modelCall(page, command) : null;
    process.stdout.write(JSON.stringify({ indexLink, landed, usage, call }));
  } finally {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  process.stderr.write(`${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
