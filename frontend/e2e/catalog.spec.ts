import { mkdirSync } from "node:fs";
import type { Locator, Page } from "@playwright/test";
import { expect, test } from "./fixtures";
import { ensureModel } from "./helpers";

// Issue 24 in the window, against the real Go services and the fake Hugging
// Face Hub build/scripts/e2e.sh starts (internal/e2ehub, ANECHAT_HUB): the
// catalog with sizes from the Hub's trees, one click on an entry, the
// search with a repository's quantisations, a whole-repository (bundle)
// download in progress, paused, resumed and cancelled. Screenshots go to
// build/bin/screens/models-{catalog,search,bundle}-{light,dark}.png.
const dir = "../build/bin/screens";

async function shoot(page: Page, what: Locator, name: string) {
  await what.scrollIntoViewIfNeeded();
  await page.mouse.move(0, 0);
  for (const scheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.screenshot({ path: `${dir}/${name}-${scheme}.png` });
  }
  await page.emulateMedia({ colorScheme: null });
}

test("the catalog, the Hugging Face search and a bundle download", async ({ page }) => {
  mkdirSync(dir, { recursive: true });
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.goto("/");
  await ensureModel(page);

  // The catalog: every entry, sizes from the fake Hub's trees where it has
  // the repository, the others saying in words that it has not.
  const entries = page.getByTestId("catalog-entry");
  const smol = page.locator('[data-testid="catalog-entry"][data-name="smollm2-135m-instruct"]');
  await expect(smol.getByTestId("catalog-size")).toHaveText("1.1 MiB on disk");
  await expect(smol.getByTestId("catalog-fit")).toHaveText("Fits this machine");
  await expect(smol.getByTestId("catalog-facts")).toContainText("needs about");
  await expect(smol.getByTestId("catalog-licence")).toContainText("Licence:");
  expect(await entries.count()).toBeGreaterThan(8);
  await expect(page.getByTestId("catalog-recommended")).toHaveCount(1);
  await expect(page.getByTestId("catalog-pick")).toContainText("Recommended here:");
  const ane = page.locator('[data-testid="catalog-entry"][data-name="gemma-4-e2b-ane"]');
  if (process.platform !== "darwin") {
    await expect(ane.getByTestId("catalog-fit")).toHaveText("Needs an Apple silicon Mac");
    await expect(smol.getByTestId("catalog-recommended")).toBeVisible();
  }
  await expect(ane.getByTestId("catalog-error")).toContainText("was not found on the Hub");
  await shoot(page, page.getByTestId("catalog"), "models-catalog");

  // One click: downloaded, checked and, since the fake Hub serves the test
  // model's bytes under SmolLM2's name, flagged as the same file as the
  // model registered already, not added again.
  await smol.getByTestId("catalog-pull").click();
  const got = page.getByTestId("download").filter({ hasText: "SmolLM2-135M-Instruct-Q8_0.gguf" });
  await expect(got).toHaveAttribute("data-state", "done");
  await expect(got.getByTestId("dl-error")).toContainText("same file (same sha256)");
  await got.getByTestId("dl-dismiss").click();
  await expect(page.getByTestId("model-row").filter({ hasText: "SmolLM2" })).toHaveCount(0);

  // The search: results, a repository's quantisations with sizes.
  await page.getByTestId("hub-search").fill("stories");
  await page.getByTestId("hub-search-go").click();
  const results = page.getByTestId("hub-result");
  await expect(results).toHaveCount(2);
  await expect(results.first()).toHaveAttribute("data-repo", "anechat-test/stories260K-GGUF");
  await results.first().getByTestId("hub-open").click();
  await expect(page.getByTestId("repo-file")).toHaveCount(2);
  await expect(page.getByTestId("repo-file").first()).toContainText("stories260K-Q8_0.gguf");
  await expect(page.getByTestId("repo-file").first()).toContainText("39.1 KiB");
  await shoot(page, page.getByTestId("hub"), "models-search");
  await page.getByTestId("hub-search").fill("gated");
  await page.getByTestId("hub-search-go").click();
  await expect(page.getByTestId("hub-gated")).toContainText("accept its licence on Hugging Face first");
  await page.getByTestId("hub-search").fill("no-such-model-anywhere");
  await page.getByTestId("hub-search-go").click();
  await expect(page.getByTestId("hub-none")).toBeVisible();

  // A whole repository: one download of a folder of files, each with its
  // progress (the fake Hub trickles this repository's files).
  await page.getByTestId("hub-search").fill("tiny-coreml");
  await page.getByTestId("hub-search-go").click();
  await page.getByTestId("hub-open").click();
  await expect(page.getByTestId("repo-bundle")).toContainText("whole repository downloads as one folder — 12 files");
  await page.getByTestId("repo-pull").click();
  const bundle = page.getByTestId("download").filter({ hasText: "tiny-coreml" });
  await expect(bundle).toHaveAttribute("data-state", "running");
  // Past the first large file: some files checked, the rest to come.
  await expect(bundle.getByTestId("dl-files-done")).toHaveText(/^([4-9]|1[01]) of 12 files checked$/);
  await expect(bundle.getByTestId("dl-file-current")).toContainText("(downloading)");
  await expect(bundle.getByTestId("dl-file")).toHaveCount(12);
  await shoot(page, bundle, "models-bundle");
  await bundle.getByTestId("dl-pause").click();
  await expect(bundle).toHaveAttribute("data-state", "paused");
  await bundle.getByTestId("dl-resume").click();
  await expect(bundle).toHaveAttribute("data-state", "running");
  await bundle.getByTestId("dl-cancel").click();
  await expect(bundle).toHaveCount(0);
  await expect(page.getByTestId("model-row").filter({ hasText: "tiny" })).toHaveCount(0);
});

test("Settings' default-model list shows a whole long name", async ({ page }) => {
  await page.goto("/");
  await ensureModel(page);
  await page.getByTestId("nav-settings").click();
  const select = page.getByTestId("default-model");
  await expect(select).toBeVisible();
  // The name of the bundled chat model was cut at "SmolLM2-135M-Instruct.Q4_":
  // the list is as wide as its longest name.
  const fits = await select.evaluate((el: HTMLSelectElement) => {
    const o = document.createElement("option");
    o.text = "SmolLM2-135M-Instruct.Q4_1 (a long model name)";
    el.add(o);
    const ctx = document.createElement("canvas").getContext("2d")!;
    ctx.font = getComputedStyle(el).font;
    const need = ctx.measureText(o.text).width;
    const have = el.getBoundingClientRect().width;
    o.remove();
    return { need, have };
  });
  expect(fits.have).toBeGreaterThan(fits.need);
});
