// Drives hearth serve's pages in a real headless browser (Debian's chromium, via
// puppeteer-core). Usage:
//   node browser_check.mjs chat BASE_URL API_KEY [SHOT_DIR]
//   node browser_check.mjs cluster BASE_URL API_KEY DEVICES [SHOT_DIR]
// Exits non-zero on any failure; SHOT_DIR gets desktop and phone screenshots.
import puppeteer from "puppeteer-core";

const [mode, base, key, ...rest] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const problems = [];

function fail(msg) {
  console.error(`browser check (${mode}): ${msg}`);
  process.exitCode = 1;
  throw new Error(msg);
}

async function newPage() {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  // CSP violations and script errors show up here: the pages must have none.
  // (A 401 before the key is given is the key flow itself, not a problem.)
  page.on("console", (m) => {
    if (m.type() === "error" && !/status of 401/.test(m.text())) problems.push(m.text());
  });
  page.on("pageerror", (e) => problems.push(e.message));
  return page;
}

// The key dialog opens on the first 401; enter the key there.
async function giveKey(page) {
  await page.waitForSelector("#key-dialog[open]", { timeout: 10000 });
  await page.type("#key-dialog input[type=password]", key);
  await page.click("#key-dialog button[type=submit]");
  await page.waitForFunction(() => !document.querySelector("#key-dialog").open);
}

async function shots(page, dir, name) {
  if (!dir) return;
  await page.screenshot({ path: `${dir}/${name}-desktop.png` });
  await page.setViewport({ width: 390, height: 844, deviceScaleFactor: 2, isMobile: true });
  await new Promise((r) => setTimeout(r, 300));
  await page.screenshot({ path: `${dir}/${name}-phone.png` });
  await page.setViewport({ width: 1280, height: 800 });
}

const assistantText = (page) => page.$$eval(".msg.assistant .body", (els) =>
  els.length ? els[els.length - 1].textContent : "");

async function chat(shotDir) {
  const page = await newPage();
  // The tiny test model may end a reply at once; ask the server to go on until max_tokens,
  // so that there is a stream to watch and to stop.
  await page.setRequestInterception(true);
  page.on("request", (r) => {
    if (r.url().endsWith("/v1/chat/completions") && r.method() === "POST") {
      const body = JSON.parse(r.postData());
      body.ignore_eos = true;
      return r.continue({ postData: JSON.stringify(body) });
    }
    return r.continue();
  });
  await page.goto(base + "/", { waitUntil: "load" });
  await giveKey(page);
  await page.waitForFunction(() => document.querySelector("#model").textContent.length > 0);
  await page.$eval("#max-tokens", (el) => {
    el.value = "30000";
    el.dispatchEvent(new Event("change"));
  });
  await page.type("#input", "Tell me a long story.");
  await page.keyboard.press("Enter");
  // Streamed: the answer grows while it is being written.
  await page.waitForFunction(() => {
    const b = document.querySelectorAll(".msg.assistant .body");
    return b.length && b[b.length - 1].textContent.length > 20;
  }, { timeout: 20000 });
  const first = (await assistantText(page)).length;
  await new Promise((r) => setTimeout(r, 400));
  const second = (await assistantText(page)).length;
  if (!(second > first)) fail(`the answer did not grow while streaming (${first} -> ${second})`);
  if (await page.$eval("#stop", (b) => b.disabled)) fail("stop is disabled while streaming");
  await page.click("#stop");
  await page.waitForSelector(".msg.assistant.done", { timeout: 10000 });
  const meta = await page.$eval(".msg.assistant.done .meta", (m) => m.textContent);
  if (!meta.startsWith("stopped")) fail(`a stopped answer says '${meta}'`);
  const stoppedAt = (await assistantText(page)).length;
  await new Promise((r) => setTimeout(r, 500));
  if ((await assistantText(page)).length !== stoppedAt) fail("text kept coming after stop");
  // The server cancelled it.
  const metrics = await (await fetch(base + "/metrics",
    { headers: { Authorization: "Bearer " + key } })).text();
  if (!/hearth_requests_finished_total\{reason="cancelled"\} [1-9]/.test(metrics)) {
    fail("the server did not count a cancelled request");
  }
  // A short second turn, then the conversation survives a reload.
  await page.$eval("#max-tokens", (el) => {
    el.value = "6";
    el.dispatchEvent(new Event("change"));
  });
  await page.type("#input", "And a `short` one?");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelectorAll(".msg.assistant.done").length === 2,
                             { timeout: 20000 });
  await page.reload({ waitUntil: "load" });
  await page.waitForFunction(() => document.querySelectorAll(".msg").length === 4);
  const code = await page.$$eval(".msg.user code", (c) => c.map((e) => e.textContent));
  if (!code.includes("short")) fail("inline code was not rendered as code");
  await shots(page, shotDir, "chat");
  console.log(`browser check (chat): ok (streamed ${first} -> ${second} chars, stopped at ${stoppedAt})`);
}

async function cluster(devices, shotDir) {
  const page = await newPage();
  await page.goto(base + "/cluster", { waitUntil: "load" });
  await giveKey(page);
  await page.waitForFunction((n) => document.querySelectorAll("#devices tr").length === n,
                             { timeout: 15000 }, devices);
  const steps = () => page.$$eval("#devices tr", (rows) =>
    rows.map((r) => r.lastElementChild.textContent).join(","));
  const before = await steps();
  // A request runs: the numbers move while it does.
  const running = fetch(base + "/v1/chat/completions", {
    method: "POST",
    headers: { Authorization: "Bearer " + key, "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "go" }], max_tokens: 1500,
                           ignore_eos: true }),
  });
  await page.waitForFunction((b) => {
    const now = [...document.querySelectorAll("#devices tr")]
      .map((r) => r.lastElementChild.textContent).join(",");
    return now !== b;
  }, { timeout: 20000 }, before);
  const names = await page.$$eval("#ring g.device", (g) => g.length);
  if (names !== devices) fail(`the ring picture has ${names} devices, not ${devices}`);
  await shots(page, shotDir, "cluster");
  const after = await steps();
  await running;
  console.log(`browser check (cluster): ok (${devices} devices, steps ${before} -> ${after})`);
}

try {
  if (mode === "chat") await chat(rest[0]);
  else if (mode === "cluster") await cluster(Number(rest[0]), rest[1]);
  else fail(`unknown mode ${mode}`);
  if (problems.length) fail(`console errors: ${problems.join(" | ")}`);
} catch (e) {
  if (!process.exitCode) console.error(`browser check (${mode}): ${e.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
