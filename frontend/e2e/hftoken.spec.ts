import { mkdirSync } from "node:fs";
import { expect, test } from "./fixtures";
import { ensureModel } from "./helpers";

// Issue 24: a gated catalog entry with the Hugging Face token pasted in
// Settings, against the real Go services and the fake Hub e2e.sh starts
// (internal/e2ehub: gemma-3-270m-it's repository is gated there, and its
// files are served only with the fake Hub's granted token, hubtest.Token).
// The token is kept in the data dir's hf-token (mode 0600) on Linux.
const granted = "hf_anechatFakeHubGrantedToken0000000";
const wrong = "hf_notATokenTheFakeHubKnowsAnyWxyz";
const dir = "../build/bin/screens";

test("a gated catalog entry downloads with the token pasted in Settings", async ({ page }) => {
  mkdirSync(dir, { recursive: true });
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.goto("/");
  await ensureModel(page);
  const gemma = page.locator('[data-testid="catalog-entry"][data-name="gemma-3-270m-it"]');
  // No token: refused in words, with the link to the licence and where a token goes.
  await expect(gemma.getByTestId("catalog-error")).toContainText("gated repository");
  await expect(gemma.getByTestId("catalog-error")).toContainText("Settings");
  await expect(gemma.getByTestId("catalog-gated")).toBeVisible();

  await page.getByTestId("nav-settings").click();
  const section = page.getByTestId("hf-token");
  await expect(section.getByTestId("hf-token-state")).toContainText("No token is stored");
  await expect(section.getByTestId("hf-token-where")).toContainText("mode 0600");
  await expect(section.getByTestId("hf-token-input")).toHaveAttribute("type", "password");

  // A token the Hub refuses is not stored: the Settings page says so at once.
  await section.getByTestId("hf-token-input").fill(wrong);
  await section.getByTestId("hf-token-save").click();
  await expect(page.getByTestId("notice")).toContainText("the token was refused: ");
  await expect(section.getByTestId("hf-token-state")).toContainText("No token is stored");
  expect(await page.content()).not.toContain(wrong);

  // The granted token: checked with the Hub, stored; the gated entry's size
  // is read and one click downloads it.
  await section.getByTestId("hf-token-input").fill(granted);
  await section.getByTestId("hf-token-save").click();
  await expect(section.getByTestId("hf-token-masked")).toHaveText("hf_…0000");
  await expect(section.getByTestId("hf-token-account")).toContainText("anechat-tester");
  await expect(section.getByTestId("hf-token-input")).toHaveValue("");
  await section.scrollIntoViewIfNeeded();
  for (const scheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.screenshot({ path: `${dir}/settings-hf-token-${scheme}.png` });
  }
  await page.emulateMedia({ colorScheme: null });
  await page.getByTestId("nav-models").click();
  await expect(gemma.getByTestId("catalog-size")).toHaveText("1.1 MiB on disk");
  await expect(gemma.getByTestId("catalog-error")).toHaveCount(0);
  await gemma.getByTestId("catalog-pull").click();
  // The fake Hub serves the test model's bytes under Gemma's name: checked,
  // and flagged as the same file as the model registered already.
  const got = page.getByTestId("download").filter({ hasText: "gemma-3-270m-it-Q4_K_M.gguf" });
  await expect(got).toHaveAttribute("data-state", "done");
  await expect(got.getByTestId("dl-error")).toContainText("same file (same sha256)");
  await got.getByTestId("dl-dismiss").click();
  expect(await page.content()).not.toContain(granted);

  // Cleared: refused again.
  await page.getByTestId("nav-settings").click();
  await section.getByTestId("hf-token-clear").click();
  await expect(section.getByTestId("hf-token-state")).toContainText("No token is stored");
});
