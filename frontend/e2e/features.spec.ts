import { expect, test } from "./fixtures";
import { chat, chooseTheme, ensureModel, newChat, setMaxTokens, unlabelled } from "./helpers";

// Each item of the desktop app, in Chromium against the real Go services (see
// build/scripts/e2e.sh). The tests share one data dir: each makes its own data.

test.beforeEach(async ({ page }) => {
  page.on("dialog", (d) => void d.accept());
  await page.goto("/");
});

test("the start page names the default model and starts a chat from an example prompt", async ({ page }) => {
  await ensureModel(page);
  await page.getByRole("button", { name: "anechat: start page" }).click();
  await expect(page.getByTestId("welcome-model")).toContainText("Replies come from stories260K");
  const examples = page.getByTestId("examples").getByRole("button");
  await expect(examples).toHaveCount(3);
  const first = (await examples.first().textContent()) ?? "";
  await examples.first().click();
  await expect(page.getByTestId("msg-user").locator(".plain")).toHaveText(first);
  await expect(page.getByTestId("msg-assistant").getByTestId("msg-stats")).toContainText(/\d+ tokens/);
});

test("the chat header shows which model answers, and a conversation keeps the model chosen", async ({ page }) => {
  await ensureModel(page);
  await newChat(page);
  const picker = page.getByTestId("model-picker");
  // A new conversation remembers the model it starts with (the default one).
  await expect(picker.locator("option:checked")).toHaveText("stories260K");
  await picker.selectOption({ label: "Default: stories260K" });
  await page.getByRole("button", { name: "Rename" }).click();
  await page.getByTestId("title-input").fill("Pinned model");
  await page.getByRole("button", { name: "Save title" }).click();
  await page.reload();
  await page.getByTestId("conversations").getByText("Pinned model").click();
  await expect(page.getByTestId("model-picker").locator("option:checked")).toHaveText("Default: stories260K");
});

test("a conversation is titled from its first message", async ({ page }) => {
  await ensureModel(page);
  await chat(page, "Tom had a red kite");
  await expect(page.getByTestId("chat-title")).toHaveText("Tom had a red kite");
  await expect(page.getByTestId("conversations")).toContainText("Tom had a red kite");
});

test("the Models page names models by their file and shows architecture, context length and backend", async ({
  page,
}) => {
  await ensureModel(page);
  const row = page.getByTestId("model-row").filter({ hasText: "stories260K" });
  await expect(row.getByTestId("model-name")).toContainText("stories260K");
  await expect(row).toContainText("llama");
  await expect(row).toContainText(/\d+ tokens/); // context length
  await expect(row.getByTestId("model-backend")).toHaveText("cpu");
});

test("messages and code blocks are copied; code is highlighted and its HTML shown as text", async ({ page }) => {
  await ensureModel(page);
  await chat(page, "Once upon a time");
  const reply = page.getByTestId("msg-assistant");
  const text = (await reply.locator(".markdown").innerText()).trim();
  await reply.getByTestId("copy-message").click();
  await expect(reply.getByTestId("copy-message")).toHaveText("Copied");
  expect((await page.evaluate(() => navigator.clipboard.readText())).trim()).toBe(text);

  // A stored reply with a code block (internal/e2eseed, the hostile corpus).
  await page.getByTestId("conversations").getByText("Hostile Markdown").click();
  const block = page.getByTestId("code-block").first();
  await expect(block.locator("code")).toHaveText("f('<b onclick=a()>')//x");
  await expect(block.locator(".tok-string")).toHaveText("'<b onclick=a()>'");
  await expect(block.locator(".tok-comment")).toHaveText("//x");
  await expect(block.locator("b")).toHaveCount(0);
  await block.getByTestId("copy-code").click();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe("f('<b onclick=a()>')//x");
});

test("a link in a reply opens in the system browser and never navigates the window", async ({ page }) => {
  await page.getByTestId("conversations").getByText("Hostile Markdown").click();
  // The Wails runtime's BrowserOpenURL hands the URL to the system; here it is recorded instead.
  await page.evaluate(() => {
    const w = window as unknown as { runtime: { BrowserOpenURL(u: string): void }; __opened: string[] };
    w.__opened = [];
    w.runtime.BrowserOpenURL = (u) => w.__opened.push(u);
  });
  const before = page.url();
  const link = page.locator('[data-testid=messages] a[href^="http://a/"]').first();
  const href = (await link.getAttribute("href")) ?? "";
  await link.click();
  await link.click({ button: "middle" });
  expect(page.url()).toBe(before);
  await expect(page.getByTestId("messages")).toBeVisible();
  expect(await page.evaluate(() => (window as unknown as { __opened: string[] }).__opened)).toEqual([href]);
  expect(page.context().pages()).toHaveLength(1);
});

test("keyboard shortcuts: new chat, search, focus the composer, help, and Esc stops a reply", async ({ page }) => {
  await ensureModel(page);
  const count = await page.getByTestId("conversations").getByRole("button").count();
  await page.keyboard.press("Control+n");
  await expect(page.getByTestId("conversations").getByRole("button")).toHaveCount(count + 1);
  await expect(page.getByTestId("chat-title")).toHaveText("New chat");
  await page.keyboard.press("Control+k");
  await expect(page.getByTestId("search")).toBeFocused();
  await page.keyboard.press("Control+l");
  await expect(page.getByTestId("composer")).toBeFocused();
  await page.keyboard.press("Control+/");
  const help = page.getByRole("dialog", { name: "Keyboard shortcuts" });
  await expect(help).toContainText("New chat");
  await expect(help).toContainText("Ctrl");
  await expect(page.getByTestId("help-close")).toBeFocused();
  await page.keyboard.press("Escape");
  await expect(help).toHaveCount(0);
  await expect(page.getByTestId("composer")).toBeFocused();

  // Esc while a reply streams stops it (stored as cancelled). A reply may end
  // by itself before the key arrives: try a few times.
  await setMaxTokens(page, 4096);
  let cancelled = false;
  for (let i = 0; i < 5 && !cancelled; i++) {
    await newChat(page);
    await page.getByTestId("composer").fill("Once upon a time there was a dragon");
    await page.getByTestId("composer").press("Enter");
    await page.keyboard.press("Escape");
    const stats = page.getByTestId("msg-assistant").last().getByTestId("msg-stats");
    await expect(stats).toContainText(/\d+ tokens/);
    cancelled = /cancelled/.test((await stats.textContent()) ?? "");
  }
  expect(cancelled).toBe(true);
  await setMaxTokens(page, 40);
});

test("dark mode follows the system until a scheme is chosen, and the choice stays", async ({ page }) => {
  const bg = () => page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
  await page.emulateMedia({ colorScheme: "light" });
  const light = await bg();
  await page.emulateMedia({ colorScheme: "dark" });
  const dark = await bg();
  expect(dark).not.toBe(light);
  await chooseTheme(page, "Light");
  await expect.poll(bg).toBe(light); // chosen by hand: the system's dark no longer counts
  await page.reload();
  await expect.poll(bg).toBe(light);
  await chooseTheme(page, "Dark");
  await page.emulateMedia({ colorScheme: "light" });
  await expect.poll(bg).toBe(dark);
  await chooseTheme(page, "System");
  await expect.poll(bg).toBe(light);
});

test("search lists a regenerated reply once and opens the message in its branch", async ({ page }) => {
  await ensureModel(page);
  await chat(page, "Sue found a blue shell");
  const reply = page.getByTestId("msg-assistant");
  const words = ((await reply.locator(".markdown").innerText()).match(/[A-Za-z]{4,}/g) ?? []).slice(0, 1);
  expect(words).toHaveLength(1);
  // Greedy decoding (temperature 0): the regenerated reply is the same text.
  await reply.getByRole("button", { name: "Regenerate" }).click();
  await expect(reply.getByTestId("versions")).toHaveText(/2\/2/);
  await expect(reply.getByTestId("msg-stats")).toContainText(/\d+ tokens/);
  await page.getByTestId("search").fill(words[0]!);
  const hits = page.getByTestId("hits").getByRole("button").filter({ hasText: "Sue found a blue shell" });
  await expect(hits).toHaveCount(1);
  await hits.first().click();
  await expect(page.locator("[data-testid=messages] .msg.focused")).toBeFocused();
});

test("a prompt too short to prepare is told as a fact; Prepare's help is in the page, not a tooltip", async ({
  page,
}) => {
  await ensureModel(page);
  await page.getByTestId("nav-library").click();
  await page.getByTestId("new-prompt").click();
  await page.getByTestId("prompt-title").fill("Short one");
  await page.getByTestId("prompt-body").fill("Hi.");
  await page.getByTestId("prompt-save").click();
  const item = page.getByTestId("prompt").filter({ hasText: "Short one" });
  await item.getByTestId("prompt-prepare").click();
  const notice = page.getByTestId("notice");
  await expect(notice).toContainText("too short");
  await expect(notice).toHaveAttribute("data-kind", "info");
  await expect(notice).toHaveAttribute("role", "status");
  await expect(page.locator(".page button[title]")).toHaveCount(0);
  await expect(page.locator("#prepare-help")).toContainText("keeps its KV cache");
  await expect(item.getByTestId("prompt-prepare")).toHaveAttribute("aria-describedby", "prepare-help");
});

test("the Settings header's rule spans the page", async ({ page }) => {
  await page.getByTestId("nav-settings").click();
  const head = await page.locator(".page-head").boundingBox();
  const main = await page.locator("main").boundingBox();
  expect(head && main && Math.round(head.width)).toBe(main && Math.round(main.width));
});

test("the prompt library asks for {{variables}}, and exports and imports JSON", async ({ page }) => {
  await ensureModel(page);
  await page.getByTestId("nav-library").click();
  await page.getByTestId("new-prompt").click();
  await page.getByTestId("prompt-title").fill("Poem maker");
  await page.getByTestId("prompt-body").fill("Write a poem about {{topic}} for {{ who }}.");
  await page.getByTestId("prompt-save").click();
  await page.getByTestId("prompt").filter({ hasText: "Poem maker" }).getByTestId("prompt-start").click();
  await page.getByTestId("variable-topic").fill("the sea");
  await page.getByTestId("variable-who").fill("Ben");
  await page.getByTestId("variables-start").click();
  await expect(page.getByTestId("chat-title")).toHaveText("Poem maker");
  await expect(page.getByTestId("msg-user")).toContainText("Write a poem about the sea for Ben."); // filled in and sent

  await page.getByTestId("nav-library").click();
  await page.getByTestId("export-prompts").click();
  await expect(page.getByTestId("export-name")).toHaveText(/\.json$/);
  const json = await page.getByTestId("export-text").inputValue();
  const file = JSON.parse(json) as { format: string; prompts: { title: string; body: string; tags?: string[] }[] };
  expect(file.prompts.find((p) => p.title === "Poem maker")?.body).toBe("Write a poem about {{topic}} for {{ who }}.");
  await page.getByTestId("import-prompts").click();
  // The exported file with one new prompt and one already there (skipped, by title).
  const poem = file.prompts.find((p) => p.title === "Poem maker")!;
  file.prompts = [{ title: "Imported helper", body: "Help me {{task}}.", tags: ["imported"] }, poem];
  await page.getByTestId("import-json").fill(JSON.stringify(file));
  await page.getByTestId("import-start").click();
  await expect(page.getByTestId("import-done")).toHaveText("Imported 1 prompt; 1 already in the library: Poem maker.");
  await expect(page.getByTestId("prompt").filter({ hasText: "Imported helper" })).toContainText("imported");
});

test("the reply panel shows τ and the drafted share, with the legend of the drafted shading", async ({ page }) => {
  await ensureModel(page);
  await chat(page, "Once upon a time");
  await expect(page.getByTestId("live-tau")).toHaveText(/^τ \d+\.\d\d$/);
  await expect(page.getByTestId("live-share")).toHaveText(/^\d+%$/);
  await expect(page.getByTestId("live-stats")).toContainText("came from accepted drafts");
  await expect(page.getByTestId("legend")).toContainText("guessed by speculative drafting");
  await expect(page.getByTestId("legend").locator("mark.drafted")).toBeVisible();
});

test("every control has a label, focus is visible, and a chat works by keyboard alone", async ({ page }) => {
  await ensureModel(page);
  for (const nav of ["nav-library", "nav-models", "nav-settings"]) {
    await page.getByTestId(nav).click();
    expect(await unlabelled(page), nav).toEqual([]);
  }
  await page.goto("/");
  expect(await unlabelled(page), "start page").toEqual([]);

  // From the top of the page, by keyboard: the skip link, then New chat.
  await page.keyboard.press("Tab");
  await expect(page.getByRole("link", { name: "Skip to the page" })).toBeFocused();
  let found = false;
  for (let i = 0; i < 6 && !found; i++) {
    await page.keyboard.press("Tab");
    found = await page.getByTestId("new-chat").evaluate((el) => el === document.activeElement);
  }
  expect(found).toBe(true);
  // The focused control shows it (an outline, not the browser's nothing).
  const outline = await page.getByTestId("new-chat").evaluate((el) => getComputedStyle(el).outlineStyle);
  expect(outline).not.toBe("none");
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("chat-title")).toHaveText("New chat");
  await page.keyboard.press("Control+l");
  await page.keyboard.type("Lily went to the park");
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("msg-assistant").getByTestId("msg-stats")).toContainText(/\d+ tokens/);
  expect(await unlabelled(page), "chat page").toEqual([]);
  // Tab reaches the reply's Copy button, and Enter presses it.
  found = false;
  for (let i = 0; i < 40 && !found; i++) {
    await page.keyboard.press("Shift+Tab");
    found = await page
      .getByTestId("msg-assistant")
      .getByTestId("copy-message")
      .evaluate((el) => el === document.activeElement);
  }
  expect(found).toBe(true);
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("msg-assistant").getByTestId("copy-message")).toHaveText("Copied");
});
