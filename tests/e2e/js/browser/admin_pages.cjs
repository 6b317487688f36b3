#!/usr/bin/env node
// Drives Debian's Chromium (never a downloaded browser) through Playwright's library to check
// that the admin's pages fit a 1280 px wide window: the run list, the thread list and a thread's
// inspector, measured from the rendered layout (bounding boxes, not pixels).
//
// Reads one JSON command on stdin:
//   {"baseUrl", "username", "password", "screenshotDir", "width", "height",
//    "pages": [{"name", "path"}]}
// and prints one JSON result on stdout: {"pages": [{"name", "status", "viewport", ...}]}.
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

// What the page shows, measured in the rendered layout.
function measure() {
  const box = (el) => {
    if (!el) return null;
    const r = el.getBoundingClientRect();
    return { left: r.left, right: r.right, top: r.top, height: r.height, width: r.width };
  };
  const lineHeight = (el) => {
    const style = getComputedStyle(el);
    const line = parseFloat(style.lineHeight);
    return Number.isNaN(line) ? parseFloat(style.fontSize) * 1.2 : line;
  };
  // Every row's cells (the widest content decides where a column ends).
  const cells = [...document.querySelectorAll("#result_list tbody tr")].flatMap((row, index) =>
    [...row.querySelectorAll("td, th")].map((cell) => ({
        row: index,
        // Django names each column's cell "field-<name>".
        field: ([...cell.classList].find((c) => c.startsWith("field-")) || cell.className).replace(
          "field-",
          "",
        ),
        text: cell.innerText.trim(),
        box: box(cell),
        lineHeight: lineHeight(cell),
      })),
  );
  const search = document.querySelector('#transcript-search input[type="search"]');
  let placeholder = null;
  if (search) {
    // How wide the placeholder is in the input's own font, against the room inside the input.
    const style = getComputedStyle(search);
    const context = document.createElement("canvas").getContext("2d");
    context.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const room =
      search.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    placeholder = {
      text: search.placeholder,
      textWidth: context.measureText(search.placeholder).width,
      room,
    };
  }
  const text = (selector) => {
    const el = document.querySelector(selector);
    return el ? el.innerText.trim() : null;
  };
  // The changelist's table scrolls inside its own box: what lies past that box's right edge
  // is off-screen even within the window.
  const results = document.querySelector("#changelist .results");
  return {
    viewport: document.documentElement.clientWidth,
    pageWidth: document.documentElement.scrollWidth,
    resultsBox: box(results),
    resultsScroll: results ? { scrollWidth: results.scrollWidth, clientWidth: results.clientWidth } : null,
    cells,
    rows: document.querySelectorAll("#result_list tbody tr").length,
    filters: [...document.querySelectorAll("#changelist-filter details")].map(
      (el) => el.dataset.filterTitle,
    ),
    placeholder,
    traceProtocol: text("#trace-protocol"),
    traceExecutor: text("#trace-executor"),
    runProtocols: [...document.querySelectorAll("#runs td.run-protocol")].map((el) => el.innerText),
    runExecutors: [...document.querySelectorAll("#runs td.run-executor")].map((el) => el.innerText),
  };
}

async function main() {
  const command = JSON.parse(await readStdin());
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "admin-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport: { width: command.width, height: command.height },
  });
  try {
    const page = await context.newPage();
    await page.goto(`${command.baseUrl}/admin/login/?next=/admin/`);
    await page.fill("#id_username", command.username);
    await page.fill("#id_password", command.password);
    await Promise.all([page.waitForURL(/\/admin\/$/), page.click('input[type="submit"]')]);
    const pages = [];
    fs.mkdirSync(command.screenshotDir, { recursive: true });
    for (const spec of command.pages) {
      const response = await page.goto(`${command.baseUrl}${spec.path}`);
      await page.waitForLoadState("load");
      const shot = path.join(command.screenshotDir, `admin-${spec.name}-1280.png`);
      await page.screenshot({ path: shot });
      pages.push({
        name: spec.name,
        status: response.status(),
        navSidebar: (await page.locator("#nav-sidebar").count()) > 0,
        screenshot: shot,
        ...(await page.evaluate(measure)),
      });
    }
    process.stdout.write(JSON.stringify({ pages }));
  } finally {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  process.stderr.write(`${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
