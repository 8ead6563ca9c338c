import { expect, type Page } from "@playwright/test";

/** The test model, registered (and so the default) if it is not yet: tests share one data dir. */
export async function ensureModel(page: Page) {
  const model = process.env["ANECHAT_E2E_MODEL"];
  if (!model) throw new Error("ANECHAT_E2E_MODEL is not set: run through build/scripts/e2e.sh");
  await page.getByTestId("nav-models").click();
  await expect(page.getByTestId("model-table")).toBeVisible();
  if ((await page.getByTestId("model-table").getByText("stories260K").count()) === 0) {
    await page.getByTestId("model-path").fill(model);
    await page.getByTestId("model-import").click();
    await expect(page.getByTestId("model-table")).toContainText("stories260K");
  }
  await page.getByTestId("model-table").getByRole("radio").first().check();
}

/** Sets the reply length limit on the Settings page. */
export async function setMaxTokens(page: Page, n: number) {
  await page.getByTestId("nav-settings").click();
  await page.getByTestId("max-tokens").fill(String(n));
  await page.getByTestId("save-settings").click();
  await expect(page.getByTestId("saved")).toBeVisible();
}

/** Starts a chat and sends text; resolves when the reply is stored. */
export async function chat(page: Page, text: string) {
  await page.getByTestId("new-chat").click();
  await page.getByTestId("composer").fill(text);
  await page.getByTestId("send").click();
  await expect(page.getByTestId("msg-assistant").last().getByTestId("msg-stats")).toContainText(/\d+ tokens/);
}

/**
 * The controls on the page without an accessible name (a label, aria-label,
 * aria-labelledby, their text or a title), described: the names a screen
 * reader would have nothing to say for.
 */
export async function unlabelled(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    const controls = document.querySelectorAll<HTMLElement>("button, input, select, textarea, a[href], [tabindex]");
    for (const el of Array.from(controls)) {
      if (el.tabIndex < 0 && !(el instanceof HTMLInputElement || el instanceof HTMLButtonElement)) continue;
      if (el.closest("[hidden], [aria-hidden=true]")) continue;
      const labels = "labels" in el ? Array.from((el as HTMLInputElement).labels ?? []) : [];
      const byId = (el.getAttribute("aria-labelledby") ?? "")
        .split(/\s+/)
        .map((id) => document.getElementById(id)?.textContent ?? "")
        .join("");
      const name = [
        el.getAttribute("aria-label") ?? "",
        byId,
        ...labels.map((l) => l.textContent ?? ""),
        el instanceof HTMLInputElement || el instanceof HTMLSelectElement || el instanceof HTMLTextAreaElement
          ? ""
          : (el.textContent ?? ""),
        el.getAttribute("title") ?? "",
      ]
        .join("")
        .trim();
      if (!name) out.push(el.outerHTML.slice(0, 120));
    }
    return out;
  });
}

/**
 * Chooses a colour scheme in the sidebar and waits until the Go side has
 * stored it (the window shows it at once; the save follows), so that a
 * reload starts in it.
 */
export async function chooseTheme(page: Page, label: "System" | "Light" | "Dark") {
  await page.getByTestId("theme").getByLabel(label).check();
  const want = label.toLowerCase();
  await expect
    .poll(() =>
      page.evaluate(async () => {
        const w = window as unknown as { go: { app: { Settings: { Get(): Promise<{ theme: string }> } } } };
        return (await w.go.app.Settings.Get()).theme;
      }),
    )
    .toBe(want);
}
