import { mkdirSync } from "node:fs";
import type { Page } from "@playwright/test";
import { expect, test } from "./fixtures";
import { ensureModel, newChat, setMaxTokens } from "./helpers";

// Issue 23.2: the library's Start chat sends the prompt, once per start and
// never leaving empty duplicates; the composer's unsent text is stored with
// its conversation; a prepared prompt shows its cache's size, can be
// unprepared, and a chat that resumed from it says so in the reply. Against
// the real Go backend and stories260K (see build/scripts/e2e.sh).

test.beforeEach(async ({ page }) => {
  page.on("dialog", (d) => void d.accept());
  await page.goto("/");
});

// Long enough for a KV snapshot (over one 64-token block on stories260K).
const story =
  "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. " +
  "One day, Lily saw a big red ball under a tree. She ran to the ball and picked it up. Her friend Tom came and said, " +
  '"Can I play with the ball too?" Lily smiled and said, "Yes, let\'s play together!" They played all day and were very happy.';

/** The sidebar's conversations titled title. */
const listed = (page: Page, title: string) =>
  page.getByTestId("conversations").getByRole("button").filter({ hasText: title });

/** The Go side's stored draft of conversation id (what a reload reads). */
const storedDraft = (page: Page, id: number) =>
  page.evaluate(async (cid) => {
    const w = window as unknown as {
      go: { app: { Chat: { Thread(id: number): Promise<{ conversation: { draft: string } }> } } };
    };
    return (await w.go.app.Chat.Thread(cid)).conversation.draft;
  }, id);

const shownId = async (page: Page) =>
  Number(await page.locator(".chat[data-conversation-id]").getAttribute("data-conversation-id"));

test("Start chat sends the prompt once, a prepared prompt shows its size, resumes and says so, and unprepares", async ({
  page,
}) => {
  await ensureModel(page);
  await setMaxTokens(page, 12);
  const title = "Storyteller 23";
  await page.getByTestId("nav-library").click();
  await page.getByTestId("new-prompt").click();
  await page.getByTestId("prompt-title").fill(title);
  await page.getByTestId("prompt-system").fill(story);
  // Its own opening: a prompt with the same one (app.spec's "Lily story")
  // would share its snapshot, and unpreparing this one would leave it.
  await page.getByTestId("prompt-body").fill("Tell me more about Lily.");
  await page.getByTestId("prompt-save").click();
  const item = page.getByTestId("prompt").filter({ hasText: title });
  await expect(item.getByTestId("prompt-snapshot-size")).toHaveCount(0);

  // A double click starts one chat, and the prompt is sent: no empty chat waits.
  await item.getByTestId("prompt-start").dblclick();
  await expect(page.getByTestId("chat-title")).toHaveText(title);
  await expect(page.getByTestId("msg-user")).toContainText("Tell me more about Lily.");
  await expect(page.getByTestId("msg-assistant").getByTestId("msg-stats")).toContainText(/\d+ tokens/);
  await expect(page.getByTestId("composer")).toHaveValue("");
  await expect(listed(page, title)).toHaveCount(1);
  // Its first use prepared it (its prefill was the reply's): no resume to claim.
  await expect(page.getByTestId("resumed-note")).toHaveCount(0);

  // The library shows the prepared prompt's cache and its size.
  await page.getByTestId("nav-library").click();
  await expect(item.getByTestId("prompt-ready")).toHaveText("ready to resume with stories260K");
  await expect(item.getByTestId("prompt-snapshot-size")).toHaveText(/^KV cache \d+\.\d (KiB|MiB) \(\d+ tokens\)$/);

  // The next chat from it resumes from that cache, and the reply says so.
  await item.getByTestId("prompt-start").click();
  await expect(page.getByTestId("msg-user")).toContainText("Tell me more about Lily.");
  const note = page.getByTestId("msg-assistant").getByTestId("resumed-note");
  await expect(note).toHaveText(
    new RegExp(`^Started from the prepared prompt “${title}”: \\d+ tokens resumed from its KV cache`),
  );
  await expect(note).toBeVisible();
  await expect(listed(page, title)).toHaveCount(2); // two starts, two chats, both sent
  mkdirSync("../build/bin/screens", { recursive: true });
  await page.screenshot({ path: "../build/bin/screens/library-resumed-chat.png" });

  await page.emulateMedia({ colorScheme: "dark" });
  await page.screenshot({ path: "../build/bin/screens/library-resumed-chat-dark.png" });
  await page.emulateMedia({ colorScheme: "light" });

  await page.getByTestId("nav-library").click();
  await page.screenshot({ path: "../build/bin/screens/library-prepared.png" });
  await page.emulateMedia({ colorScheme: "dark" });
  await page.screenshot({ path: "../build/bin/screens/library-prepared-dark.png" });
  await page.emulateMedia({ colorScheme: "light" });
  const pinned = () =>
    page.evaluate(async () => {
      const w = window as unknown as { go: { app: { Settings: { Cache(): Promise<{ pinned: number }> } } } };
      return (await w.go.app.Settings.Cache()).pinned;
    });
  const before = await pinned();
  // Unprepare drops the cache: no size, not ready, Prepare offered again.
  await item.getByTestId("prompt-unprepare").click();
  await expect(item.getByTestId("prompt-snapshot-size")).toHaveCount(0);
  await expect(item.getByTestId("prompt-ready")).toHaveCount(0);
  await expect(item.getByTestId("prompt-prepare")).toBeVisible();
  await expect(item.getByTestId("prompt-unprepare")).toHaveCount(0);
  // The KV cache (the Settings page's figures) holds one pinned snapshot fewer.
  expect(await pinned()).toBe(before - 1);
});

test("the composer's unsent text stays with its conversation across switching chats and a reload", async ({ page }) => {
  const make = async (title: string) => {
    await newChat(page);
    await page.getByTestId("rename").click();
    await page.getByTestId("title-input").fill(title);
    await page.getByRole("button", { name: "Save title" }).click();
    await expect(page.getByTestId("chat-title")).toHaveText(title);
    return shownId(page);
  };
  const a = await make("Draft keeper A");
  await page.getByTestId("composer").fill("a thought for A, not sent");
  const b = await make("Draft keeper B"); // opened straight away: A's draft is stored on the way
  await expect(page.getByTestId("composer")).toHaveValue("");
  await page.getByTestId("composer").fill("B's own words");
  await listed(page, "Draft keeper A").click();
  await expect(page.locator(".chat")).toHaveAttribute("data-conversation-id", String(a));
  await expect(page.getByTestId("composer")).toHaveValue("a thought for A, not sent");
  await listed(page, "Draft keeper B").click();
  await expect(page.getByTestId("composer")).toHaveValue("B's own words");

  // Stored by the Go side: a reload shows them again.
  await expect.poll(() => storedDraft(page, a)).toBe("a thought for A, not sent");
  await expect.poll(() => storedDraft(page, b)).toBe("B's own words");
  await page.reload();
  await listed(page, "Draft keeper A").click();
  await expect(page.getByTestId("composer")).toHaveValue("a thought for A, not sent");
  await listed(page, "Draft keeper B").click();
  await expect(page.getByTestId("composer")).toHaveValue("B's own words");
  // Sending it clears it, stored too.
  await ensureModel(page);
  await listed(page, "Draft keeper B").click();
  await page.getByTestId("send").click();
  await expect(page.getByTestId("msg-user")).toContainText("B's own words");
  await expect(page.getByTestId("composer")).toHaveValue("");
  await expect.poll(() => storedDraft(page, b)).toBe("");
  await page.reload();
  await listed(page, "Draft keeper B").click();
  await expect(page.getByTestId("msg-user")).toContainText("B's own words");
  await expect(page.getByTestId("composer")).toHaveValue("");
});
