import { expect, test } from "./fixtures";
import { ensureModel } from "./helpers";

// The local HTTP API switch on the Settings page, against the real Go side:
// turned on, the app serves the OpenAI protocol on 127.0.0.1 with the token
// the page shows, answered by the default model; turned off, nothing listens.

test("Settings turns the local OpenAI-compatible API on and off, and a client gets a reply with the token shown", async ({
  page,
  request,
}) => {
  await page.goto("/");
  await ensureModel(page);
  await page.getByTestId("nav-settings").click();
  const box = page.getByTestId("api-enabled");
  await expect(box).not.toBeChecked();
  // A port of its own, so that the test never meets another server on the default one.
  await page.getByTestId("api-port").fill("34191");
  await box.check();
  await expect(page.getByTestId("api-url")).toHaveText("http://127.0.0.1:34191/v1");
  const token = (await page.getByTestId("api-token").textContent()) ?? "";
  expect(token.length).toBeGreaterThan(8);
  const model = (await page.getByTestId("api-model").textContent()) ?? "";
  await expect(page.getByTestId("api-ollama")).toHaveText("OLLAMA_HOST=http://127.0.0.1:34191");

  const base = "http://127.0.0.1:34191/v1";
  const refused = await request.get(`${base}/models`);
  expect(refused.status()).toBe(401);
  const headers = { Authorization: `Bearer ${token}` };
  const models = await request.get(`${base}/models`, { headers });
  expect(models.status()).toBe(200);
  const list = (await models.json()) as { data: { id: string }[] };
  expect(list.data.map((m) => m.id)).toContain(model);
  const reply = await request.post(`${base}/chat/completions`, {
    headers,
    data: { model, messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 5, temperature: 0 },
  });
  expect(reply.status()).toBe(200);
  const body = (await reply.json()) as {
    choices: { message: { content: string } }[];
    usage: { completion_tokens: number };
  };
  expect(body.usage.completion_tokens).toBeGreaterThan(0);
  expect(body.choices[0]?.message.content.length).toBeGreaterThan(0);

  // The clients that speak only Ollama's API, on the same server and token.
  const tags = await request.get("http://127.0.0.1:34191/api/tags", { headers });
  expect(tags.status()).toBe(200);
  expect(((await tags.json()) as { models: { name: string }[] }).models.map((m) => m.name)).toContain(model);

  // The switch is stored: after a reload it is still on.
  await page.reload();
  await page.getByTestId("nav-settings").click();
  await expect(page.getByTestId("api-enabled")).toBeChecked();
  await page.getByTestId("api-enabled").uncheck();
  await expect(page.getByTestId("api-facts")).toHaveCount(0);
  await expect(request.get(`${base}/models`, { headers, timeout: 3000 })).rejects.toThrow();
});
