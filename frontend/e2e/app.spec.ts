import { expect, test } from "./fixtures";
import { newChat } from "./helpers";

// These run against the real Go backend on a fresh data directory (see
// build/scripts/e2e.sh); they share it, so each test makes its own data.

test.beforeEach(async ({ page }) => {
  page.on("dialog", (d) => void d.accept());
  await page.goto("/");
});

test("the status bar shows what the Go backend reports", async ({ page }) => {
  // The platform and data dir come from app.System.Info over the Wails IPC.
  await expect(page.getByTestId("status")).toContainText(
    /anechat .+ · (linux|darwin)\/(amd64|arm64) · \/.+ · schema v\d+/,
  );
  await expect(page.getByTestId("storage-error")).toHaveCount(0);
});

test("a page load fetches nothing that fails and logs no error of ours", async ({ page }) => {
  const failed: string[] = [];
  const errors: string[] = [];
  page.on("response", (r) => {
    if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
  });
  page.on("console", (m) => {
    // Wails's own dev-mode script (/wails/ipc.js, its Svelte overlay) is
    // not ours to fix; everything else is.
    if (m.type() === "error" && !m.location().url.includes("/wails/")) errors.push(`${m.text()} (${m.location().url})`);
  });
  await page.reload();
  await expect(page.getByTestId("status")).toContainText("anechat");
  expect(failed).toEqual([]);
  expect(errors).toEqual([]);
});

test("conversations are created, renamed, kept across reloads and deleted", async ({ page }) => {
  await newChat(page);
  await expect(page.getByTestId("chat-title")).toHaveText("New chat");
  await page.getByTestId("rename").click();
  await page.getByTestId("title-input").fill("Trip to Lisbon");
  await page.getByRole("button", { name: "Save title" }).click();
  await expect(page.getByTestId("chat-title")).toHaveText("Trip to Lisbon");
  await page.reload();
  const item = page.getByTestId("conversations").getByText("Trip to Lisbon");
  await expect(item).toBeVisible();
  await item.click();
  await page.getByTestId("delete-chat").click();
  await expect(page.getByTestId("conversations").getByText("Trip to Lisbon")).toHaveCount(0);
});

test("sending without a model says so and stores nothing", async ({ page }) => {
  await newChat(page);
  await page.getByTestId("composer").fill("Hello?");
  await page.getByTestId("send").click();
  await expect(page.getByTestId("notice")).toContainText("no model available");
  await expect(page.getByTestId("notice")).toHaveAttribute("data-kind", "error");
  await expect(page.getByTestId("msg-user")).toHaveCount(0);
});

test("the prompt library creates, filters by tag and search, and starts a chat", async ({ page }) => {
  await page.getByTestId("nav-library").click();
  await page.getByTestId("new-prompt").click();
  await page.getByTestId("prompt-title").fill("Haiku writer");
  await page.getByTestId("prompt-system").fill("You answer in haiku.");
  await page.getByTestId("prompt-body").fill("Write a haiku about **autumn**.");
  await page.getByTestId("prompt-tags").fill("Poetry, fun");
  await page.getByTestId("prompt-save").click();
  await expect(page.getByTestId("prompt-editor")).toHaveCount(0); // saved and closed before the next one opens
  await page.getByTestId("new-prompt").click();
  await page.getByTestId("prompt-title").fill("SQL helper");
  await page.getByTestId("prompt-body").fill("Explain this query.");
  await page.getByTestId("prompt-tags").fill("work");
  await page.getByTestId("prompt-save").click();
  await expect(page.getByTestId("prompt")).toHaveCount(2);
  // Tags are normalised by the backend: "Poetry" is stored as "poetry".
  await page.getByRole("button", { name: "poetry (1)" }).click();
  await expect(page.getByTestId("prompt")).toHaveCount(1);
  await expect(page.getByTestId("prompt")).toContainText("Haiku writer");
  // Markdown in the body is rendered.
  await expect(page.getByTestId("prompt").locator("strong", { hasText: "autumn" })).toBeVisible();
  await page.getByRole("button", { name: "all", exact: true }).click();
  await page.getByTestId("prompt-search").fill("query");
  await expect(page.getByTestId("prompt")).toHaveCount(1);
  await expect(page.getByTestId("prompt")).toContainText("SQL helper");
  await page.getByTestId("prompt-search").fill("");
  // No model yet: the chat opens with the prompt waiting in its composer (stored), and says why.
  await page.getByTestId("prompt").filter({ hasText: "Haiku writer" }).getByTestId("prompt-start").click();
  await expect(page.getByTestId("chat-title")).toHaveText("Haiku writer");
  await expect(page.getByTestId("composer")).toHaveValue("Write a haiku about **autumn**.");
  await expect(page.getByTestId("notice")).toContainText("Not sent: no model available");
  // Started again: the same conversation, not an empty duplicate.
  await page.getByTestId("nav-library").click();
  await page.getByTestId("prompt").filter({ hasText: "Haiku writer" }).getByTestId("prompt-start").click();
  await expect(page.getByTestId("composer")).toHaveValue("Write a haiku about **autumn**.");
  await expect(page.getByTestId("conversations").getByRole("button").filter({ hasText: "Haiku writer" })).toHaveCount(
    1,
  );
  await page.reload();
  await page.getByTestId("conversations").getByRole("button").filter({ hasText: "Haiku writer" }).click();
  await expect(page.getByTestId("composer")).toHaveValue("Write a haiku about **autumn**.");
});

test("settings are validated, saved and read back", async ({ page }) => {
  await page.getByTestId("nav-settings").click();
  await expect(page.getByTestId("width")).toHaveValue("4"); // the default
  await expect(page.getByTestId("quota")).toHaveValue("2"); // 2 GiB
  await page.getByTestId("width").selectOption("auto");
  await page.getByTestId("quota").fill("1.5");
  await page.getByTestId("save-settings").click();
  await expect(page.getByTestId("saved")).toBeVisible();
  // Out of range: the Go side refuses it with a message naming the field.
  await page.getByTestId("temperature").fill("5");
  await page.getByTestId("save-settings").click();
  await expect(page.getByTestId("notice")).toContainText("temperature");
  await page.reload();
  await page.getByTestId("nav-settings").click();
  await expect(page.getByTestId("width")).toHaveValue("auto");
  await expect(page.getByTestId("quota")).toHaveValue("1.5");
  // A refusal, then Reset to defaults: the old error goes with the old values.
  await page.getByTestId("temperature").fill("5");
  await page.getByTestId("save-settings").click();
  await expect(page.getByTestId("notice")).toContainText("temperature");
  await page.getByRole("button", { name: "Reset to defaults" }).click();
  await expect(page.getByTestId("width")).toHaveValue("4");
  await expect(page.getByTestId("notice")).toHaveCount(0);
  await expect(page.getByTestId("temperature")).toHaveValue("0");
});

test("the models page shows the models folder and scans it", async ({ page }) => {
  await page.getByTestId("nav-models").click();
  await expect(page.getByTestId("models-dir")).toContainText("/models");
  await page.getByTestId("scan").click();
  await expect(page.getByTestId("scan-result")).toContainText(/Scan registered \d+ model/);
});

test("a registered model answers with streamed text, and edit/regenerate make branches", async ({ page }) => {
  const model = process.env.ANECHAT_E2E_MODEL;
  if (!model) throw new Error("ANECHAT_E2E_MODEL is not set: run through build/scripts/e2e.sh");
  await page.getByTestId("nav-models").click();
  await page.getByTestId("model-path").fill(model);
  await page.getByTestId("model-import").click();
  await expect(page.getByTestId("model-table")).toContainText("stories260K");
  await expect(page.getByTestId("model-table").getByRole("radio")).toBeChecked(); // the first model becomes the default

  // Short replies keep the test quick (and prove the setting reaches the engine).
  await page.getByTestId("nav-settings").click();
  await expect(page.getByTestId("highlight-drafted")).toBeChecked(); // on by default
  await page.getByTestId("max-tokens").fill("40");
  await page.getByTestId("save-settings").click();
  await expect(page.getByTestId("saved")).toBeVisible();

  await newChat(page);
  await page.getByTestId("composer").fill("Once upon a time");
  await page.getByTestId("send").click();
  // The reply is real model output from the Go engine, stored with its stats.
  const answer = page.getByTestId("msg-assistant");
  await expect(answer).toHaveCount(1);
  await expect(answer).toContainText(/\b([1-9]|[1-3]\d|40) tokens · .* · length/);
  // Speculation stats: tokens per target call (τ), drafted and accepted.
  await expect(answer.getByTestId("msg-stats")).toHaveText(/^\d+ tokens · τ \d+\.\d\d · drafted \d+ · accepted \d+ · /);
  expect((await answer.locator(".markdown").innerText()).trim().length).toBeGreaterThan(0);

  await answer.getByRole("button", { name: "Regenerate" }).click();
  await expect(page.getByTestId("msg-assistant").getByTestId("versions")).toHaveText(/2\/2/);

  await page.getByTestId("msg-user").getByRole("button", { name: "Edit" }).click();
  await page.getByTestId("msg-user").locator("textarea").fill("Lily and Ben");
  await page.getByRole("button", { name: "Send edit" }).click();
  await expect(page.getByTestId("msg-user").getByTestId("versions")).toHaveText(/2\/2/);
  await expect(page.getByTestId("msg-user")).toContainText("Lily and Ben");
  await expect(page.getByTestId("msg-assistant")).toContainText(/\d+ tokens/);
  // Back to the first version of the question: its two answers are still there.
  await page.getByTestId("msg-user").getByRole("button", { name: "previous version" }).click();
  await expect(page.getByTestId("msg-user")).toContainText("Once upon a time");
  await expect(page.getByTestId("msg-assistant").getByTestId("versions")).toHaveText(/2\/2/);
  await page.screenshot({ path: "../build/bin/e2e-chat.png" }); // for people to look at

  // Full-text search (SQLite FTS5) finds the edited question; opening the hit
  // shows the branch that holds it.
  await page.getByTestId("search").fill("Ben");
  const hit = page.getByTestId("hits").getByRole("button").first();
  await expect(hit).toContainText("Lily and Ben");
  await expect(hit.locator("mark")).toHaveText("Ben");
  await hit.click();
  await expect(page.getByTestId("msg-user")).toContainText("Lily and Ben");

  // A prompt long enough for a KV snapshot is prepared once (its KV cache
  // pinned); a chat started from it then resumes instead of prefilling it.
  await page.getByTestId("nav-library").click();
  await page.getByTestId("new-prompt").click();
  await page.getByTestId("prompt-title").fill("Lily story");
  await page
    .getByTestId("prompt-system")
    .fill(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. " +
        "One day, Lily saw a big red ball under a tree. She ran to the ball and picked it up. Her friend Tom came and said, " +
        '"Can I play with the ball too?" Lily smiled and said, "Yes, let\'s play together!" They played all day and were very happy.',
    );
  await page.getByTestId("prompt-body").fill("Tell me more.");
  await page.getByTestId("prompt-save").click();
  const story = page.getByTestId("prompt").filter({ hasText: "Lily story" });
  await expect(story.getByTestId("prompt-ready")).toHaveCount(0);
  await story.getByTestId("prompt-prepare").click();
  await expect(story.getByTestId("prompt-ready")).toHaveText("ready to resume with stories260K"); // the model its snapshot is for
  await story.getByTestId("prompt-start").click(); // sends the prompt
  await expect(page.getByTestId("msg-assistant").getByTestId("msg-stats")).toContainText(/resumed \d+/);
  await expect(page.getByTestId("msg-assistant").getByTestId("resumed-note")).toContainText("“Lily story”");
});
