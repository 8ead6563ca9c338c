import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { expect, test } from "./fixtures";
import { chat, chooseTheme, ensureModel, newChat } from "./helpers";

// Issue 14's second round against the real Go services: per-conversation
// settings, pin, delete with undo, export and import, downloads, Core ML
// compute units, the KV cache, the theme stored in the preferences.

test.beforeEach(async ({ page }) => {
  page.on("dialog", (d) => void d.accept());
  await page.goto("/");
});

test("a conversation's own reply length applies to its replies, stays after a reload, and resets", async ({ page }) => {
  await ensureModel(page);
  await newChat(page);
  const settings = page.getByTestId("reply-settings");
  await expect(page.getByTestId("opt-source")).toHaveText("from the Settings page");
  await page.getByTestId("opt-max-tokens").fill("3");
  await page.getByTestId("opt-max-tokens").press("Enter");
  await expect(settings.locator("label", { hasText: "Max tokens" }).locator(".own")).toHaveText("this chat");
  await page.getByTestId("composer").fill("Once upon a time there was a dragon");
  await page.getByTestId("send").click();
  const stats = page.getByTestId("msg-assistant").last().getByTestId("msg-stats");
  await expect(stats).toContainText(/\b3 tokens/);
  await page.getByRole("button", { name: "Rename" }).click();
  await page.getByTestId("title-input").fill("Three tokens");
  await page.getByRole("button", { name: "Save title" }).click();

  await page.reload();
  await page.getByTestId("conversations").getByText("Three tokens").click();
  await expect(page.getByTestId("opt-max-tokens")).toHaveValue("3");
  await page.getByTestId("opt-reset").click();
  await expect(page.getByTestId("opt-source")).toBeVisible();
  await expect(page.getByTestId("opt-max-tokens")).not.toHaveValue("3");
});

test("a pinned conversation comes first in the list, after a reload too", async ({ page }) => {
  await ensureModel(page);
  await newChat(page);
  await page.getByRole("button", { name: "Rename" }).click();
  await page.getByTestId("title-input").fill("Pin me");
  await page.getByRole("button", { name: "Save title" }).click();
  await newChat(page); // a newer one, listed above it until it is pinned
  const first = page.getByTestId("conversations").getByRole("button").first();
  await expect(first).not.toContainText("Pin me");
  await page.getByTestId("conversations").getByText("Pin me").click();
  await page.getByTestId("pin").click();
  await expect(page.getByTestId("pin")).toHaveAttribute("aria-pressed", "true");
  await expect(first).toContainText("Pin me");
  await expect(first.getByTestId("pinned")).toBeVisible();
  await page.reload();
  await expect(page.getByTestId("conversations").getByRole("button").first()).toContainText("Pin me");
  await page.getByTestId("conversations").getByText("Pin me").click();
  await page.getByTestId("pin").click();
  await expect(page.getByTestId("pin")).toHaveAttribute("aria-pressed", "false");
  await expect(page.getByTestId("conversations").getByRole("button").first()).not.toContainText("Pin me");
});

test("a deleted conversation comes back with Undo, messages and all; closing the offer keeps it deleted", async ({
  page,
}) => {
  await ensureModel(page);
  await chat(page, "Max saw a big frog");
  const reply = (await page.getByTestId("msg-assistant").locator(".markdown").textContent()) ?? "";
  const list = page.getByTestId("conversations");
  await page.getByTestId("delete-chat").click();
  const toast = page.getByTestId("undo-toast");
  await expect(toast).toContainText("Deleted “Max saw a big frog”");
  await expect(list).not.toContainText("Max saw a big frog");
  await expect(page.getByTestId("undo")).toBeFocused();
  await page.keyboard.press("Enter");
  await expect(toast).toHaveCount(0);
  await expect(page.getByTestId("chat-title")).toHaveText("Max saw a big frog");
  await expect(page.getByTestId("msg-assistant").locator(".markdown")).toHaveText(reply);
  await expect(list).toContainText("Max saw a big frog");

  await page.getByTestId("delete-chat").click();
  await toast.getByRole("button", { name: "Close: keep it deleted" }).click();
  await expect(toast).toHaveCount(0);
  await page.reload();
  await expect(page.getByTestId("conversations")).not.toContainText("Max saw a big frog");
});

test("a conversation exported as JSON imports as a new one with the same messages; Markdown shows the branch", async ({
  page,
}) => {
  await ensureModel(page);
  await chat(page, "Ann had a green hat");
  const reply = (await page.getByTestId("msg-assistant").locator(".markdown").textContent()) ?? "";
  await page.getByTestId("export-chat").click();
  const panel = page.getByTestId("chat-export");
  await expect(panel.getByTestId("export-name")).toHaveText(/\.md$/);
  await expect(panel.getByTestId("export-text")).toHaveValue(/Ann had a green hat/);
  await panel.getByLabel("JSON (every branch, for Import)").check();
  await expect(panel.getByTestId("export-name")).toHaveText(/\.json$/);
  const json = await panel.getByTestId("export-text").inputValue();
  expect(() => JSON.parse(json) as unknown).not.toThrow();
  await panel.getByTestId("export-copy").click();
  await expect(panel.getByTestId("export-done")).toHaveText("Copied to the clipboard.");
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(json);

  const before = await page.getByTestId("conversations").getByText("Ann had a green hat").count();
  await page.getByTestId("import-chat").click();
  await page.getByTestId("chat-import").getByTestId("import-json").fill("{not json");
  await page.getByTestId("chat-import").getByTestId("import-start").click();
  await expect(page.getByTestId("notice")).toHaveAttribute("data-kind", "error");
  await page.getByTestId("chat-import").getByTestId("import-json").fill(json);
  await page.getByTestId("chat-import").getByTestId("import-start").click();
  await expect(page.getByTestId("chat-title")).toContainText("Ann had a green hat");
  await expect(page.getByTestId("msg-user").locator(".plain")).toHaveText("Ann had a green hat");
  await expect(page.getByTestId("msg-assistant").locator(".markdown")).toHaveText(reply);
  await expect(page.getByTestId("conversations").getByText("Ann had a green hat")).toHaveCount(before + 1);
});

/**
 * A local model server (http to this machine is allowed): /NAME.gguf serves
 * the test model with range requests; with a gate set, it sends the first
 * 64 KiB and holds the rest until the gate opens.
 */
function modelServer(file: Buffer) {
  let gate: Promise<void> | null = null;
  let open: () => void = () => undefined;
  const ranges: string[] = [];
  const server: Server = createServer((req, res) => {
    ranges.push(req.headers.range ?? "");
    const m = /bytes=(\d+)-/.exec(req.headers.range ?? "");
    const from = m ? Number(m[1]) : 0;
    const body = file.subarray(from);
    res.writeHead(m ? 206 : 200, {
      "Content-Type": "application/octet-stream",
      "Content-Length": String(body.length),
      "Accept-Ranges": "bytes",
      ETag: '"e2e-model"',
      ...(m ? { "Content-Range": `bytes ${from}-${file.length - 1}/${file.length}` } : {}),
    });
    const held = gate;
    if (!held) {
      res.end(body);
      return;
    }
    res.write(body.subarray(0, 64 * 1024));
    void held.then(() => {
      if (!res.destroyed) res.end(body.subarray(64 * 1024));
    });
  });
  return {
    server,
    ranges,
    hold() {
      gate = new Promise((r) => (open = r));
    },
    release() {
      gate = null;
      open();
    },
  };
}

test("downloads: a wrong SHA-256 fails and says so; pause, resume and a checked download register the model; cancel removes it", async ({
  page,
}) => {
  const model = process.env["ANECHAT_E2E_MODEL"]!;
  // The test model with bytes after its tensors (which the loader does not
  // read): another file than the registered test model, which a download of
  // the same bytes would be flagged as and not registered again.
  const file = Buffer.concat([readFileSync(model), Buffer.from("downloaded copy\n")]);
  const sum = createHash("sha256").update(file).digest("hex");
  const srv = modelServer(file);
  await new Promise<void>((r) => srv.server.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${(srv.server.address() as AddressInfo).port}`;
  try {
    await ensureModel(page);
    const dl = (name: string) => page.getByTestId("download").filter({ hasText: name });
    const start = async (name: string, sha: string) => {
      await page.getByTestId("dl-url").fill(`${base}/${name}`);
      await page.getByTestId("dl-sha").fill(sha);
      await page.getByTestId("dl-start").click();
      await expect(dl(name)).toBeVisible();
    };

    // A malformed checksum is refused before anything starts.
    await page.getByTestId("dl-url").fill(`${base}/e2e-bad.gguf`);
    await page.getByTestId("dl-sha").fill("abc");
    await page.getByTestId("dl-start").click();
    await expect(page.getByTestId("notice")).toContainText("want 64 hexadecimal digits");

    // The wrong checksum: the whole file arrives, then the check fails it.
    await start("e2e-wrong.gguf", "0".repeat(64));
    await expect(dl("e2e-wrong.gguf")).toHaveAttribute("data-state", "failed");
    await expect(dl("e2e-wrong.gguf").getByTestId("dl-error")).toContainText(`sha256 mismatch`);
    await expect(dl("e2e-wrong.gguf").getByTestId("dl-error")).toContainText(sum);
    await dl("e2e-wrong.gguf").getByTestId("dl-dismiss").click();
    await expect(dl("e2e-wrong.gguf")).toHaveCount(0);
    await expect(page.getByTestId("model-table")).not.toContainText("e2e-wrong");

    // Held after 64 KiB: pause, then resume (a range request) to the end.
    // (The Go side's count, asked directly: its progress events are spaced
    // in time, so the window may not have seen the last bytes of a stall.)
    const received = (name: string) =>
      page.evaluate(async (n) => {
        const w = window as unknown as {
          go: { app: { Downloads: { List(): Promise<{ name: string; received: number }[]> } } };
        };
        return (await w.go.app.Downloads.List()).find((d) => d.name === n)?.received ?? -1;
      }, name);
    srv.hold();
    const sent = srv.ranges.length;
    await start("e2e-dl.gguf", sum);
    await expect.poll(() => received("e2e-dl.gguf")).toBe(64 * 1024);
    await dl("e2e-dl.gguf").getByTestId("dl-pause").click();
    await expect(dl("e2e-dl.gguf")).toHaveAttribute("data-state", "paused");
    await expect(dl("e2e-dl.gguf").getByTestId("dl-line")).toHaveText("64.0 KiB of 1.1 MiB (5%)");
    srv.release();
    await dl("e2e-dl.gguf").getByTestId("dl-resume").click();
    await expect(dl("e2e-dl.gguf")).toHaveAttribute("data-state", "done");
    await expect(dl("e2e-dl.gguf").getByTestId("dl-line")).toContainText("registered as");
    expect(srv.ranges.slice(sent)).toEqual(["", "bytes=65536-"]); // resumed where it stopped
    const row = page.getByTestId("model-row").filter({ hasText: "e2e-dl" });
    await expect(row).toBeVisible();
    await expect(row.getByTestId("model-backend")).toHaveText("cpu");

    // Cancel while it runs: the download is gone from the list and no model appears.
    srv.hold();
    await start("e2e-cancel.gguf", "");
    await expect.poll(() => received("e2e-cancel.gguf")).toBe(64 * 1024);
    await dl("e2e-cancel.gguf").getByTestId("dl-cancel").click();
    await expect(dl("e2e-cancel.gguf")).toHaveCount(0);
    await expect(page.getByTestId("model-table")).not.toContainText("e2e-cancel");
    srv.release();

    // The other tests' default stays the test model.
    await dl("e2e-dl.gguf").getByTestId("dl-dismiss").click();
    await row.getByRole("button", { name: /^Forget/ }).click();
    await expect(row).toHaveCount(0);
  } finally {
    srv.release();
    await new Promise((r) => srv.server.close(r));
  }
});

test("Load now loads the model ahead of the first reply", async ({ page }) => {
  await ensureModel(page);
  const row = page.getByTestId("model-row").filter({ hasText: "stories260K" });
  await row.getByTestId("load-model").click();
  await expect(row.getByTestId("load-outcome")).toHaveText("Loaded.");
  await page.getByTestId("nav-settings").click();
  await expect(page.getByTestId("running")).toContainText("stories260K");
});

test("Settings: the backend, Core ML compute units, the KV cache's usage and Clear, and the data folder", async ({
  page,
}) => {
  await ensureModel(page);
  await chat(page, "Tim had a small dog"); // a snapshot in the cache
  await page.getByTestId("nav-settings").click();
  await expect(page.getByTestId("backend")).toBeVisible();
  await expect(page.getByTestId("backend-why")).not.toBeEmpty();
  const units = page.getByTestId("compute-units");
  await expect(units.locator("option")).not.toHaveCount(0);
  const choices = await units.locator("option").evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value));
  expect(choices).toContain("cpu");
  const was = await units.inputValue();
  await units.selectOption("cpu");
  await page.reload();
  await page.getByTestId("nav-settings").click();
  await expect(page.getByTestId("compute-units")).toHaveValue("cpu");
  await page.getByTestId("compute-units").selectOption(was);

  await expect(page.getByTestId("cache-usage")).toBeVisible();
  await page.getByTestId("clear-cache").click();
  await expect(page.getByTestId("clear-result")).toContainText(/Removed \d+/);
  await expect(page.getByTestId("open-data-dir")).toBeEnabled();
});

test("the theme is stored in the preferences: the page starts in it after a reload", async ({ page }) => {
  await chooseTheme(page, "Dark");
  await page.getByTestId("nav-settings").click(); // the preferences, saved from here, keep it
  await page.getByTestId("save-settings").click();
  await expect(page.getByTestId("saved")).toBeVisible();
  await page.reload();
  // theme.js (answered by the Go side) set it before the page's code ran.
  expect(await page.evaluate(() => document.documentElement.dataset["theme"])).toBe("dark");
  await expect(page.getByTestId("theme").getByLabel("Dark")).toBeChecked();
  await chooseTheme(page, "System");
  await page.reload();
  expect(await page.evaluate(() => document.documentElement.dataset["theme"] ?? "")).toBe("");
});
