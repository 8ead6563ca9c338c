import { mkdirSync } from "node:fs";
import type { Page } from "@playwright/test";
import { expect, test } from "./fixtures";
import { chat, chooseTheme, ensureModel, newChat } from "./helpers";

// Screenshots of every page in light and dark mode, for people to look at:
// build/bin/screens/<page>-<light|dark>.png. Each is checked not to be blank
// (a page that painted nothing has a handful of colours).
const dir = "../build/bin/screens";

// The distinct colours of a PNG, counted in the browser (no image library here).
async function colours(page: Page, png: Buffer): Promise<number> {
  const blank = await page.context().newPage();
  try {
    return await blank.evaluate(async (b64) => {
      const img = new Image();
      img.src = `data:image/png;base64,${b64}`;
      await img.decode();
      const c = document.createElement("canvas");
      c.width = img.width;
      c.height = img.height;
      const g = c.getContext("2d");
      if (!g) return 0;
      g.drawImage(img, 0, 0);
      const d = g.getImageData(0, 0, c.width, c.height).data;
      const seen = new Set<number>();
      for (let i = 0; i < d.length; i += 4) seen.add((d[i]! << 16) | (d[i + 1]! << 8) | d[i + 2]!);
      return seen.size;
    }, png.toString("base64"));
  } finally {
    await blank.close();
  }
}

async function shoot(page: Page, name: string) {
  for (const scheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.mouse.move(0, 0); // no hover state in the picture
    const png = await page.screenshot({ path: `${dir}/${name}-${scheme}.png` });
    expect(await colours(page, png), `${name}-${scheme}`).toBeGreaterThan(16);
  }
}

test("screenshots of every page in light and dark mode", async ({ page }) => {
  test.setTimeout(120_000); // every page twice, and a download that retries before it pauses
  mkdirSync(dir, { recursive: true });
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.goto("/");
  await ensureModel(page);
  await chooseTheme(page, "System");

  await page.getByRole("button", { name: "anechat: start page" }).click();
  await expect(page.getByTestId("welcome-model")).toContainText("stories260K");
  await shoot(page, "start");

  await chat(page, "Once upon a time, Lily found a little cat");
  await shoot(page, "chat");
  await page.getByTestId("export-chat").click();
  await expect(page.getByTestId("chat-export").getByTestId("export-name")).toHaveText(/\.md$/);
  await shoot(page, "chat-export");
  await page.getByTestId("export-chat").click();

  await page.getByTestId("conversations").getByText("Hostile Markdown").click();
  await page.getByTestId("code-block").first().scrollIntoViewIfNeeded();
  await shoot(page, "chat-code");

  await page.getByTestId("search").fill("Lily");
  await expect(page.getByTestId("hits").getByRole("button").first()).toBeVisible();
  await shoot(page, "search");
  await page.getByTestId("search").fill("");

  await page.getByTestId("nav-library").click();
  await expect(page.getByTestId("prompt-list")).toBeVisible();
  await shoot(page, "library");

  await page.getByTestId("nav-models").click();
  await expect(page.getByTestId("model-row").first()).toBeVisible();
  await shoot(page, "models");
  // A download from a port nothing listens on: it retries, then pauses with the reason.
  await page.getByTestId("dl-url").fill("http://127.0.0.1:9/offline-model.gguf");
  await page.getByTestId("dl-start").click();
  const dl = page.getByTestId("download").filter({ hasText: "offline-model.gguf" });
  await expect(dl).toHaveAttribute("data-state", "paused", { timeout: 30_000 });
  await expect(dl.getByTestId("dl-error")).toContainText("the server could not be reached");
  await shoot(page, "models-download");

  await page.getByTestId("nav-settings").click();
  await expect(page.getByTestId("settings")).toBeVisible();
  await shoot(page, "settings");
  await expect(page.getByTestId("cache-usage")).toBeVisible();
  await page.getByTestId("open-data-dir").scrollIntoViewIfNeeded();
  await shoot(page, "settings-backend");

  await page.keyboard.press("Control+/");
  await expect(page.getByTestId("help")).toBeVisible();
  await shoot(page, "help");
  await page.keyboard.press("Escape");

  await newChat(page);
  await page.getByTestId("delete-chat").click();
  await expect(page.getByTestId("undo-toast")).toBeVisible();
  await shoot(page, "undo");
  await page.getByTestId("undo").click();
});
