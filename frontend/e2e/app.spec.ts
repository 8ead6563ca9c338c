import { expect, test } from "./fixtures";

test("the status bar shows what the Go backend reports", async ({ page }) => {
  await page.goto("/");
  // The platform comes from app.System.Info over the Wails IPC, not from the page.
  await expect(page.getByTestId("status")).toContainText(/anechat .+ · (linux|darwin)\/(amd64|arm64)/);
});
