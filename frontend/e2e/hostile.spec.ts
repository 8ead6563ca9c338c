import { readFileSync } from "node:fs";
import { unsafeDom } from "../src/testing/unsafeDom";
import { expect, test } from "./fixtures";

// Hostile Markdown as stored replies with drafted spans (build/scripts/e2e.sh
// seeds them with internal/e2eseed before the backend starts): the real page
// fetches them from the Go services, renders and highlights them, and the DOM
// Chromium builds must hold nothing that runs script or leaves http, https,
// mailto and fragments. The unit test (src/markdown.safety.test.ts) tries
// every span of the same corpus in jsdom; this is the browser's view.
const corpus = JSON.parse(readFileSync(new URL("../testdata/hostile-markdown.json", import.meta.url), "utf8")) as {
  docs: string[];
};
// internal/e2eseed stores each document with four span patterns.
const patterns = 4;

test("hostile Markdown in stored replies renders without script, handlers or unsafe URLs", async ({ page }) => {
  // Any script that runs is recorded: the payloads call alert, a and x.
  const dialogs: string[] = [];
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  await page.addInitScript(() => {
    const w = window as unknown as Record<string, unknown>;
    const ran: unknown[] = [];
    w["__ran"] = ran;
    for (const name of ["alert", "a", "x"]) w[name] = (...args: unknown[]) => ran.push([name, ...args]);
  });
  await page.goto("/");
  await page.getByTestId("conversations").getByText("Hostile Markdown").click();
  const replies = page.getByTestId("msg-assistant");
  await expect(replies).toHaveCount(corpus.docs.length * patterns);
  // Highlighting is on (the default): the drafted spans are shaded.
  expect(await page.locator("[data-testid=messages] mark.drafted").count()).toBeGreaterThan(0);
  // Links that are allowed survive (an autolink in the corpus).
  await expect(page.locator('[data-testid=messages] a[href^="http://a/"]').first()).toBeAttached();

  expect(await page.getByTestId("messages").evaluate(unsafeDom)).toEqual([]);

  // Highlighting changes no element, attribute or text: the four renders of
  // each document are the same once the marks are left out.
  const shapes = await replies.locator(".markdown").evaluateAll((els) =>
    els.map((el) => {
      const tags = Array.from(el.querySelectorAll("*"))
        .filter((e) => e.tagName !== "MARK")
        .map(
          (e) =>
            `${e.tagName}${Array.from(e.attributes)
              .map((a) => ` ${a.name}=${JSON.stringify(a.value)}`)
              .join("")}`,
        );
      return `${tags.join()}|${el.textContent ?? ""}`;
    }),
  );
  for (let i = 0; i < corpus.docs.length; i++) {
    const same = shapes.slice(i * patterns, (i + 1) * patterns);
    expect(same, corpus.docs[i]).toEqual(Array(patterns).fill(same[0]));
  }

  // Nothing ran: no payload reached a script, a handler or a URL.
  expect(await page.evaluate(() => (window as unknown as { __ran: unknown[] }).__ran)).toEqual([]);
  expect(dialogs).toEqual([]);
});
