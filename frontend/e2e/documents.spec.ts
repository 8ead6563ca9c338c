import { fileURLToPath } from "node:url";
import { expect, test } from "./fixtures";
import { ensureModel, newChat, setMaxTokens } from "./helpers";

// Documents in a chat, on the real Go backend: a file picked with the
// Attach button is read and sized by the conversation's model, sent as part
// of the message, and the second question about it resumes it from the KV
// snapshot; a document past the context is refused.

test.beforeEach(async ({ page }) => {
  page.on("dialog", (d) => void d.accept());
  await page.goto("/");
});

test("an attached document is sized, sent with the question and resumed by the next one", async ({ page }) => {
  await ensureModel(page);
  await setMaxTokens(page, 4);
  await newChat(page);
  const story = "Lily went to the park with her mom and they played with a big red ball. ".repeat(4);
  await page.getByTestId("attach-input").setInputFiles({
    name: "story.md",
    mimeType: "text/markdown",
    buffer: Buffer.from(story),
  });
  await expect(page.getByTestId("attachment")).toContainText("story.md");
  await expect(page.getByTestId("attachment-tokens")).toHaveText(/^\d[\d,]* tokens$/);
  await expect(page.getByTestId("attachments-total")).toContainText("context tokens");
  await page.getByTestId("composer-form").screenshot({ path: "../build/bin/screens/composer-attachment.png" });
  await page.getByTestId("composer").fill("Who went to the park?");
  await page.getByTestId("send").click();
  await expect(page.getByTestId("msg-assistant").last().getByTestId("msg-stats")).toContainText(/\d+ tokens/);
  await expect(page.getByTestId("msg-user").first()).toContainText("Lily went to the park");
  await expect(page.getByTestId("attachments")).toHaveCount(0);

  await page.getByTestId("composer").fill("What color was the ball?");
  await page.getByTestId("send").click();
  await expect(page.getByTestId("msg-assistant")).toHaveCount(2);
  await expect(page.getByTestId("msg-assistant").last().getByTestId("msg-stats")).toContainText(/resumed \d+/);
  await expect(page.getByTestId("msg-assistant").last().getByTestId("document-note")).toContainText(
    "the document “story.md” among them",
  );

  // A PDF's text, extracted on the Go side (a committed fixture).
  await page
    .getByTestId("attach-input")
    .setInputFiles(fileURLToPath(new URL("../../internal/documents/testdata/two-pages.pdf", import.meta.url)));
  await expect(page.getByTestId("attachment")).toContainText("two-pages.pdf");
  await expect(page.getByTestId("attachment-tokens")).toHaveText(/^\d[\d,]* tokens$/);
  await page.getByRole("button", { name: "Remove two-pages.pdf" }).click();
  await expect(page.getByTestId("attachments")).toHaveCount(0);

  // Past the model's context: refused, nothing attached.
  await page.getByTestId("attach-input").setInputFiles({
    name: "huge.txt",
    mimeType: "text/plain",
    buffer: Buffer.from(story.repeat(40)),
  });
  await expect(page.getByTestId("notice")).toContainText("huge.txt: ");
  await expect(page.getByTestId("notice")).toContainText("context");
  await expect(page.getByTestId("attachments")).toHaveCount(0);
});
