import { test as base, chromium, type BrowserContext, type Page } from "@playwright/test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Where Debian installs Chromium; CHROMIUM overrides it (e.g. on macOS). */
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";

/**
 * `page` comes from a Chromium with a fresh, empty profile directory per test
 * and with the background services off (this machine's network is closed).
 */
export const test = base.extend<{ context: BrowserContext; page: Page }>({
  // eslint-disable-next-line no-empty-pattern
  context: async ({}, use) => {
    const profile = mkdtempSync(join(tmpdir(), "anechat-e2e-"));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      args: [
        "--no-sandbox",
        "--headless",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
      ],
      baseURL: process.env.ANECHAT_E2E_URL ?? "http://127.0.0.1:34115",
      // The copy buttons write the page's clipboard; the tests read it back.
      permissions: ["clipboard-read", "clipboard-write"],
    });
    try {
      await use(context);
    } finally {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    }
  },
  page: async ({ context }, use) => {
    const page = context.pages()[0] ?? (await context.newPage());
    await use(page);
  },
});

export { expect } from "@playwright/test";
