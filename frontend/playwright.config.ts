import { defineConfig } from "@playwright/test";

// The end-to-end tests drive Debian's Chromium (a Playwright browser download
// cannot work here) against the page the real Go backend serves: the Wails dev
// binary started by build/scripts/e2e.sh, whose URL arrives in ANECHAT_E2E_URL.
export default defineConfig({
  testDir: "e2e",
  timeout: 60_000,
  expect: { timeout: 15_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [["list"]],
  outputDir: "../build/bin/e2e-results",
  use: {
    baseURL: process.env.ANECHAT_E2E_URL ?? "http://127.0.0.1:34115",
    trace: "off",
  },
});
