import { afterEach, describe, expect, it } from "vitest";
import { click, mountApp, root, submit, testid, type, unmount } from "./testing/dom";
import { fakeBridge } from "./testing/fake";
import type { CatalogList, HubToken, ModelList } from "./types";

// Issue 24: the Hugging Face token for gated models, on the Settings page.

const info = {
  version: "1.0",
  os: "linux",
  arch: "amd64",
  go: "go1",
  dataDir: "/d",
  database: "/d/anechat.db",
  schemaVersion: 1,
  storageError: "",
  engineError: "",
};
const token = "hf_PastedFromTheTokensPage0000wxyz";
const where = "the file /d/hf-token, which only your user account can read (mode 0600)";
const none: HubToken = {
  set: false,
  masked: "",
  where,
  tokensURL: "https://huggingface.co/settings/tokens",
  error: "",
  account: "",
  note: "",
};
const empty: CatalogList = { entries: [], ram: 0, neuralEngine: false, hub: "http://hub" };

const basics = (over: Record<string, (...a: unknown[]) => unknown> = {}) => ({
  "System.Info": () => info,
  "Chat.ListConversations": () => [],
  "Settings.Get": () => ({
    speculationWidth: 4,
    kvQuotaBytes: 0,
    defaultModelId: 0,
    maxTokens: 10,
    temperature: 0,
    highlightDrafted: true,
    defaultSystemPrompt: "",
    theme: "system",
    modelTitles: false,
  }),
  "Models.List": (): ModelList => ({ models: [], defaultId: 0, loadedId: 0, modelsDir: "/d/models" }),
  "Downloads.List": () => [],
  "Catalog.List": () => empty,
  "Catalog.Sizes": () => empty,
  ...over,
});

afterEach(unmount);
/** Submits the token's form, as its Save button does. */
const save = () => submit(testid("hf-token-save")?.closest("form"));

describe("the Hugging Face token in Settings", () => {
  it("is pasted masked, stored, shown only by its last characters, cleared; the catalog's sizes are asked again", async () => {
    let stored: HubToken = none;
    const f = fakeBridge(
      basics({
        "Settings.HubToken": () => stored,
        "Settings.SetHubToken": () => ({
          ...(stored = { ...none, set: true, masked: "hf_…wxyz" }),
          account: "anechat-tester",
        }),
        "Settings.ClearHubToken": () => (stored = none),
      }),
    );
    await mountApp(f.bridge);
    await click(testid("nav-models"));
    await click(testid("nav-settings"));
    const sec = testid("hf-token")!;
    expect(sec).toBeTruthy();
    // Where it is kept, in the page's words: a file of mode 0600 here.
    expect(testid("hf-token-where")?.textContent).toBe(where);
    expect(testid("hf-token-state")?.textContent).toContain("No token is stored");
    expect(testid("hf-token-clear")).toBeNull();
    const input = testid<HTMLInputElement>("hf-token-input")!;
    expect(input.type).toBe("password");
    expect(input.autocomplete).toBe("off");
    expect(testid<HTMLButtonElement>("hf-token-save")?.disabled).toBe(true);
    // Pasted with spaces around: the Go side trims it.
    await type(input, ` ${token} `);
    await save();
    expect(f.args["Settings.SetHubToken"]).toEqual([[` ${token} `]]);
    // Stored: the field is emptied, the token shows only as its last four.
    expect(testid<HTMLInputElement>("hf-token-input")?.value).toBe("");
    expect(testid("hf-token-masked")?.textContent).toBe("hf_…wxyz");
    // Checked with the Hub when it was saved: whose it is.
    expect(testid("hf-token-account")?.textContent).toContain("anechat-tester");
    expect(root.innerHTML).not.toContain(token);
    // The link to make a token opens in the browser.
    await click(testid("hf-token-link"));
    expect(f.opened).toEqual(["https://huggingface.co/settings/tokens"]);
    // Back on the Models page the catalog asks the Hub again, with the token.
    const before = f.calls.filter((c) => c === "Catalog.Sizes").length;
    await click(testid("nav-models"));
    expect(f.calls.filter((c) => c === "Catalog.Sizes").length).toBe(before + 1);
    await click(testid("nav-settings"));
    await click(testid("hf-token-clear"));
    expect(f.calls).toContain("Settings.ClearHubToken");
    expect(testid("hf-token-state")?.textContent).toContain("No token is stored");
  });

  it("says when the Hub could not check the token it stored", async () => {
    const f = fakeBridge(
      basics({
        "Settings.HubToken": () => none,
        "Settings.SetHubToken": () => ({
          ...none,
          set: true,
          masked: "hf_…wxyz",
          note: "stored without being checked: the Hub at huggingface.co could not be reached (are you offline?)",
        }),
      }),
    );
    await mountApp(f.bridge);
    await click(testid("nav-settings"));
    await type(testid<HTMLInputElement>("hf-token-input"), token);
    await save();
    expect(testid("hf-token-masked")?.textContent).toBe("hf_…wxyz");
    expect(testid("hf-token-account")).toBeNull();
    expect(testid("hf-token-note")?.textContent).toContain("stored without being checked");
  });

  it("says why a paste is refused, and why a stored token cannot be read", async () => {
    const f = fakeBridge(
      basics({
        "Settings.HubToken": () => ({
          ...none,
          error:
            "the Hugging Face token file /d/hf-token may be read by other users (mode 0644): clear the token in Settings and paste it again (or chmod 600 it)",
        }),
        "Settings.SetHubToken": () => {
          throw "the token pasted has a space or a character a Hugging Face access token never has (it is hf_ and letters): paste only the token";
        },
      }),
    );
    await mountApp(f.bridge);
    await click(testid("nav-settings"));
    expect(testid("hf-token-error")?.textContent).toContain("mode 0644");
    expect(testid("hf-token-clear")).toBeTruthy();
    await type(testid<HTMLInputElement>("hf-token-input"), "hf_two words");
    await save();
    expect(testid("notice")?.textContent).toContain("paste only the token");
    expect(testid("notice")?.textContent).not.toContain("two words");
  });
});
