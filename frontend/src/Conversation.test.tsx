import { act } from "preact/test-utils";
import { afterEach, describe, expect, it } from "vitest";
import type { Bridge } from "./bridge";
import { click, flush, mountApp, root, submit, testid, type, unmount } from "./testing/dom";
import { fakeBridge } from "./testing/fake";
import type { Conversation, Download, Model, Preferences, Thread } from "./types";

// Issue 14's second round in the window: per-conversation settings, pin,
// delete with Undo, export and import, downloads, the Settings page's facts.

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
const conv: Conversation = {
  id: 1,
  title: "Story",
  modelId: 0,
  promptId: 0,
  systemPrompt: "",
  activeLeafId: 2,
  titleSource: "",
  pinned: false,
  draft: "",
  createdAt: "",
  updatedAt: "",
};
const threadOf = (c: Conversation, maxTokens = 10): Thread => ({
  conversation: c,
  messages: [
    { id: 1, conversationId: c.id, parentId: 0, role: "user", content: "hi", createdAt: "" },
    { id: 2, conversationId: c.id, parentId: 1, role: "assistant", content: "hello", createdAt: "" },
  ],
  path: [1, 2],
  generating: 0,
  model: null,
  settings: { temperature: 0, maxTokens, speculationWidth: 4 },
});
const prefs: Preferences = {
  speculationWidth: 4,
  kvQuotaBytes: 2 * 1024 ** 3,
  defaultModelId: 5,
  maxTokens: 10,
  temperature: 0,
  highlightDrafted: true,
  defaultSystemPrompt: "",
  theme: "system",
  modelTitles: false,
};
const model: Model = {
  id: 5,
  path: "/m/stories.gguf",
  kind: "gguf",
  name: "stories",
  fingerprint: "f",
  sizeBytes: 1 << 20,
  meta: { arch: "llama", quant: "F32", contextLen: 512, backend: "cpu", declaredName: "" },
  addedAt: "",
  lastUsedAt: "",
};
const download = (d: Partial<Download>): Download => ({
  name: "a.gguf",
  url: "https://h/a.gguf",
  source: "",
  sha256: "",
  state: "running",
  received: 1024 * 1024,
  total: 4 * 1024 * 1024,
  bytesPerSec: 1024 * 1024,
  etaSeconds: 3,
  stalledSeconds: 0,
  error: "",
  model: null,
  ...d,
});

const basics = (over: Record<string, (...a: unknown[]) => unknown> = {}) => ({
  "System.Info": () => info,
  "Chat.ListConversations": () => [conv],
  "Chat.Thread": () => threadOf(conv),
  "Settings.Get": () => prefs,
  "Models.List": () => ({ models: [model], defaultId: 5, modelsDir: "/d/models" }),
  "Downloads.List": () => [],
  ...over,
});

afterEach(unmount);
const mount = (bridge: Bridge) => mountApp(bridge);

const openConversation = () => click(root.querySelector(".conv"));

describe("conversations", () => {
  it("pins a conversation and lists pinned ones first", async () => {
    let pinned = false;
    const other = { ...conv, id: 2, title: "Newer" };
    const fb = fakeBridge(
      basics({
        "Chat.ListConversations": () => (pinned ? [{ ...conv, pinned }, other] : [other, conv]),
        "Chat.Thread": () => threadOf({ ...conv, pinned }),
        "Chat.SetPinned": (_id, p) => {
          pinned = p as boolean;
          return { ...conv, pinned };
        },
      }),
    );
    await mount(fb.bridge);
    await click([...root.querySelectorAll(".conv")].find((b) => b.textContent?.includes("Story")));
    expect(testid("pin")?.getAttribute("aria-pressed")).toBe("false");
    await click(testid("pin"));
    expect(fb.args["Chat.SetPinned"]).toEqual([[1, true]]);
    expect(testid("pin")?.getAttribute("aria-pressed")).toBe("true");
    const first = root.querySelector(".conv");
    expect(first?.textContent).toContain("Story");
    expect(first?.querySelector('[data-testid="pinned"]')).toBeTruthy();
  });

  it("deletes at once, offers Undo with the time left, and Undo reopens the conversation", async () => {
    let gone = false;
    const until = new Date(Date.now() + 60_000).toISOString();
    const fb = fakeBridge(
      basics({
        "Chat.ListConversations": () => (gone ? [] : [conv]),
        "Chat.DeleteConversation": () => {
          gone = true;
          return { conversationId: 1, title: "Story", undoUntil: until };
        },
        "Chat.UndoDelete": () => {
          gone = false;
          return conv;
        },
      }),
    );
    await mount(fb.bridge);
    await openConversation();
    await click(testid("delete-chat"));
    expect(fb.args["Chat.DeleteConversation"]).toEqual([[1]]);
    expect(root.querySelector(".conv")).toBeNull();
    expect(testid("undo-toast")?.textContent).toContain("Deleted “Story”.");
    expect(testid("undo-left")?.textContent).toMatch(/^\d+ s to undo$/);
    expect(document.activeElement).toBe(testid("undo"));
    await click(testid("undo"));
    expect(fb.args["Chat.UndoDelete"]).toEqual([[1]]);
    expect(testid("undo-toast")).toBeNull();
    expect(testid("chat-title")?.textContent).toBe("Story");
    expect(root.querySelector(".conv")?.textContent).toContain("Story");
  });

  it("drops the Undo offer once its time has passed", async () => {
    const fb = fakeBridge(
      basics({
        "Chat.DeleteConversation": () => ({ conversationId: 1, title: "Story", undoUntil: "2000-01-01T00:00:00Z" }),
      }),
    );
    await mount(fb.bridge);
    await openConversation();
    await click(testid("delete-chat"));
    expect(testid("undo-toast")).toBeNull();
  });

  it("sets the conversation's own reply length and resets it to the Settings page's", async () => {
    let options: Conversation["options"] = undefined;
    const fb = fakeBridge(
      basics({
        "Chat.Thread": () => threadOf({ ...conv, options }, options?.maxTokens ?? 10),
        "Chat.SetOptions": (_id, o) => {
          options = o as Conversation["options"];
          return { ...conv, options };
        },
      }),
    );
    await mount(fb.bridge);
    await openConversation();
    expect(testid("opt-source")?.textContent).toBe("from the Settings page");
    await type(testid<HTMLInputElement>("opt-max-tokens"), "3");
    await submit(testid("reply-settings"));
    expect(fb.args["Chat.SetOptions"]).toEqual([[1, { maxTokens: 3 }]]);
    expect(testid<HTMLInputElement>("opt-max-tokens")?.value).toBe("3");
    expect(testid("reply-settings")?.querySelector(".own")?.textContent).toBe("this chat");
    // A value the field refuses is told on leaving it (Enter: the browser's own check).
    testid("opt-max-tokens")!.focus();
    await type(testid<HTMLInputElement>("opt-max-tokens"), "0");
    await act(() => {
      testid("opt-max-tokens")!.blur();
    });
    await flush();
    expect(testid("notice")?.textContent).toContain('max tokens "0": want a whole number, 1 or more');
    expect(fb.args["Chat.SetOptions"]).toHaveLength(1);
    await click(testid("opt-reset"));
    expect(fb.args["Chat.SetOptions"]?.[1]).toEqual([1, {}]);
    expect(testid("opt-source")).toBeTruthy();
    expect(testid<HTMLInputElement>("opt-max-tokens")?.value).toBe("10");
  });

  it("says beside Regenerate that temperature 0 gives the same reply, and leads to the field that changes it", async () => {
    let temperature = 0;
    const fb = fakeBridge(
      basics({
        "Chat.Thread": () => ({ ...threadOf(conv), settings: { temperature, maxTokens: 10, speculationWidth: 4 } }),
        "Chat.SetOptions": (_id, o) => {
          temperature = (o as { temperature: number }).temperature;
          return { ...conv, options: o as Conversation["options"] };
        },
      }),
    );
    await mount(fb.bridge);
    await openConversation();
    const hint = testid("regenerate-hint");
    expect(hint?.textContent).toContain("same reply at temperature 0");
    const regen = [...root.querySelectorAll("button")].find((b) => b.textContent?.trim() === "Regenerate");
    expect(regen?.getAttribute("aria-describedby")).toBe(hint?.id);
    await click(hint);
    expect(document.activeElement).toBe(testid("opt-temperature"));
    await type(testid<HTMLInputElement>("opt-temperature"), "0.7");
    await submit(testid("reply-settings"));
    expect(fb.args["Chat.SetOptions"]).toEqual([[1, { temperature: 0.7 }]]);
    expect(testid("regenerate-hint")).toBeNull();
  });

  it("exports the conversation as Markdown or JSON, saved through the dialog, and imports a JSON file", async () => {
    const imported = { ...conv, id: 9, title: "Story (imported)" };
    const fb = fakeBridge(
      basics({
        "Chat.Export": (_id, format) =>
          format === "json"
            ? { fileName: "Story.json", mimeType: "application/json", text: '{"format":"anechat.conversation"}' }
            : { fileName: "Story.md", mimeType: "text/markdown", text: "# Story" },
        "System.SaveFile": () => "/home/u/Story.json",
        // The second import left some drafted highlighting out.
        "Chat.Import": () => ({
          conversation: imported,
          warnings:
            (fb.args["Chat.Import"]?.length ?? 0) > 1
              ? ["messages[3].stats.draftedSpans[0]: [5, 2]: ends before it starts"]
              : [],
        }),
        "Chat.Thread": (id) => threadOf(id === 9 ? imported : conv),
      }),
    );
    await mount(fb.bridge);
    await openConversation();
    await click(testid("export-chat"));
    expect(testid("export-name")?.textContent).toBe("Story.md");
    expect(testid<HTMLTextAreaElement>("export-text")?.value).toBe("# Story");
    const json = [...testid("chat-export")!.querySelectorAll<HTMLInputElement>("input[type=radio]")][1];
    await click(json);
    expect(fb.args["Chat.Export"]).toEqual([
      [1, "markdown"],
      [1, "json"],
    ]);
    expect(testid("export-name")?.textContent).toBe("Story.json");
    await click(testid("export-save"));
    expect(fb.args["System.SaveFile"]?.[0]?.[1]).toEqual({
      fileName: "Story.json",
      mimeType: "application/json",
      text: '{"format":"anechat.conversation"}',
    });
    expect(testid("export-done")?.textContent).toBe("Saved to /home/u/Story.json.");

    await click(testid("import-chat"));
    expect(testid("chat-import")).toBeTruthy();
    await type(testid<HTMLTextAreaElement>("import-json"), '{"format":"anechat.conversation"}');
    await submit(testid("chat-import"));
    expect(fb.args["Chat.Import"]).toEqual([['{"format":"anechat.conversation"}']]);
    expect(testid("chat-title")?.textContent).toBe("Story (imported)");
    expect(testid("notice")).toBeNull();

    // What the import left out is said, once the conversation is open.
    await click(testid("import-chat"));
    await type(testid<HTMLTextAreaElement>("import-json"), '{"format":"anechat.conversation"}');
    await submit(testid("chat-import"));
    expect(testid("chat-title")?.textContent).toBe("Story (imported)");
    expect(testid("notice")?.dataset["kind"]).toBe("info");
    expect(testid("notice")?.textContent).toContain(
      "Imported, but: messages[3].stats.draftedSpans[0]: [5, 2]: ends before it starts.",
    );
  });
});

describe("titles", () => {
  it("shows that the model is writing a title, stops it, and puts the title in the list and the header", async () => {
    const fb = fakeBridge(basics({ "Chat.CancelTitle": () => true }));
    await mount(fb.bridge);
    await openConversation();
    await act(() => {
      fb.fire("chat:title", { conversationId: 1, title: "Story", source: "message", pending: true });
    });
    expect(testid("titling")?.textContent).toContain("The model is writing a title");
    expect(root.querySelector(".conv [aria-label='the model is writing its title']")).toBeTruthy();
    await click(testid("titling")?.querySelector("button"));
    expect(fb.args["Chat.CancelTitle"]).toEqual([[1]]);
    await act(() => {
      fb.fire("chat:title", { conversationId: 1, title: "The cat and the kite", source: "model", pending: false });
    });
    expect(testid("titling")).toBeNull();
    expect(testid("chat-title")?.textContent).toBe("The cat and the kite");
    expect(root.querySelector(".conv")?.textContent).toBe("The cat and the kite");
  });
});

describe("models and settings", () => {
  it("shows downloads with progress and their errors, and pauses, resumes, cancels and dismisses them", async () => {
    let list = [
      download({ name: "a.gguf" }),
      download({
        name: "b.gguf",
        url: "https://h/b.gguf",
        state: "failed",
        error: "sha256 mismatch: expected 00, got 11",
      }),
    ];
    const fb = fakeBridge(
      basics({
        "Downloads.List": () => list,
        "Downloads.Pause": (n) => download({ name: n as string, state: "paused", bytesPerSec: 0, etaSeconds: -1 }),
        "Downloads.Resume": (n) => download({ name: n as string }),
        "Downloads.Cancel": (n) => {
          list = list.filter((d) => d.name !== n);
        },
        "Downloads.Dismiss": (n) => {
          list = list.filter((d) => d.name !== n);
        },
        "Downloads.Start": (r) => download({ name: "c.gguf", url: (r as { url: string }).url, received: 0 }),
      }),
    );
    await mount(fb.bridge);
    await click(testid("nav-models"));
    const row = (name: string) =>
      [...root.querySelectorAll<HTMLElement>('[data-testid="download"]')].find((li) => li.textContent?.includes(name));
    expect(row("a.gguf")?.querySelector('[data-testid="dl-line"]')?.textContent).toBe(
      "1.0 MiB of 4.0 MiB (25%) · 1.0 MiB/s · 3 s left",
    );
    expect(row("b.gguf")?.dataset["state"]).toBe("failed");
    expect(row("b.gguf")?.querySelector('[data-testid="dl-error"]')?.textContent).toBe(
      "sha256 mismatch: expected 00, got 11",
    );
    await click(row("a.gguf")?.querySelector('[data-testid="dl-pause"]'));
    expect(fb.args["Downloads.Pause"]).toEqual([["a.gguf"]]);
    list = [download({ name: "a.gguf", state: "paused" }), list[1]!];
    await act(() => {
      fb.fire("download:update", download({ name: "a.gguf", state: "paused" }));
    });
    expect(row("a.gguf")?.dataset["state"]).toBe("paused");
    await click(row("a.gguf")?.querySelector('[data-testid="dl-resume"]'));
    expect(fb.args["Downloads.Resume"]).toEqual([["a.gguf"]]);
    await click(row("a.gguf")?.querySelector('[data-testid="dl-cancel"]'));
    expect(fb.args["Downloads.Cancel"]).toEqual([["a.gguf"]]);
    await flush();
    expect(row("a.gguf")).toBeUndefined();
    await click(row("b.gguf")?.querySelector('[data-testid="dl-dismiss"]'));
    expect(row("b.gguf")).toBeUndefined();

    // A finished download is a model: the table is read again.
    const before = fb.calls.filter((c) => c === "Models.List").length;
    await act(() => {
      fb.fire("download:update", download({ name: "d.gguf", state: "done", received: 4 << 20, model }));
    });
    await flush();
    expect(row("d.gguf")?.querySelector('[data-testid="dl-line"]')?.textContent).toBe(
      "4.0 MiB · registered as stories",
    );
    expect(fb.calls.filter((c) => c === "Models.List").length).toBe(before + 1);

    await type(testid<HTMLInputElement>("dl-url"), "https://h/c.gguf");
    await type(testid<HTMLInputElement>("dl-sha"), "ab");
    await submit(testid("dl-url")?.closest("form"));
    expect(fb.args["Downloads.Start"]).toEqual([[{ url: "https://h/c.gguf", sha256: "ab", fileName: "", size: 0 }]]);
  });

  it("says how a load ended from Models.Load's outcome, and a failure as it is, whatever its text", async () => {
    const ends: (() => unknown)[] = [
      () => ({ kind: "cancelled", message: "Cancelled." }),
      () => {
        throw "models: load stories.gguf: read weights: context canceled by the disk driver";
      },
    ];
    const fb = fakeBridge(basics({ "Models.Load": () => ends.shift()?.() }));
    await mount(fb.bridge);
    await click(testid("nav-models"));
    await click(testid("load-model"));
    expect(testid("load-outcome")?.textContent?.trim()).toBe("Cancelled.");
    await click(testid("load-model"));
    expect(testid("load-outcome")?.textContent?.trim()).toBe(
      "models: load stories.gguf: read weights: context canceled by the disk driver",
    );
    expect(testid("load-outcome")?.className).toContain("error");
  });

  it("loads a model now with its progress, and Settings shows what runs it, compute units and the cache", async () => {
    let loaded = () => undefined as unknown;
    let units = "neural-engine";
    const coreml = () => ({
      computeUnits: units,
      computeUnitChoices: ["neural-engine", "gpu", "cpu", "all"],
      running: "cpu",
      executor: "the pure-Go CPU backend",
      model: "/m/stories.gguf",
      available: false,
      detail: "this build has no Core ML",
    });
    const usage = {
      usedBytes: 3 << 20,
      quotaBytes: 2 * 1024 ** 3,
      snapshots: 2,
      pinnedBytes: 1 << 20,
      pinned: 1,
      dir: "/d/kv",
    };
    const fb = fakeBridge(
      basics({
        "Models.Load": () =>
          new Promise((r) => {
            loaded = () => {
              r({ kind: "loaded", message: "Loaded." });
            };
          }),
        "System.Backend": () => ({
          backend: "cpu",
          model: "stories",
          why: "Core ML is not in this build",
          available: ["cpu"],
          coreML: "no",
        }),
        "CoreML.Settings": coreml,
        "CoreML.SetComputeUnits": (u) => {
          units = u as string;
          return coreml();
        },
        "Settings.Cache": () => usage,
        "Settings.ClearCache": () => ({
          removed: 2,
          freedBytes: 3 << 20,
          usage: { ...usage, usedBytes: 0, snapshots: 0, pinnedBytes: 0, pinned: 0 },
          problems: [],
        }),
        "System.OpenDataDir": () => undefined,
      }),
    );
    await mount(fb.bridge);
    await click(testid("nav-models"));
    await click(testid("load-model"));
    await act(() => {
      fb.fire("model:progress", { modelId: 5, done: 2, total: 4 });
    });
    expect(testid("model-loading")?.textContent).toContain("2/4");
    await act(() => {
      loaded();
    });
    await flush();
    expect(testid("load-outcome")?.textContent).toContain("Loaded.");

    await click(testid("nav-settings"));
    expect(testid("backend-why")?.textContent).toBe(
      "cpu runs the default model (stories): Core ML is not in this build",
    );
    expect(testid("running")?.textContent).toContain("stories.gguf on cpu");
    // Core ML's state is said once, in its own part, not again beside the build's backends.
    expect(testid("backend-build")?.textContent).toBe("This build has: cpu.");
    expect(testid("coreml-detail")?.textContent).toBe("Core ML: this build has no Core ML");
    const select = testid<HTMLSelectElement>("compute-units")!;
    expect(select.value).toBe("neural-engine");
    await act(() => {
      select.value = "cpu";
      select.dispatchEvent(new Event("change", { bubbles: true }));
    });
    await flush();
    expect(fb.args["CoreML.SetComputeUnits"]).toEqual([["cpu"]]);
    expect(testid<HTMLSelectElement>("compute-units")?.value).toBe("cpu");
    expect(testid("cache-usage")?.textContent).toBe(
      "3.0 MiB of 2.0 GiB in 2 snapshots; 1.0 MiB in 1 of them kept for prepared prompts",
    );
    await click(testid("clear-cache"));
    expect(fb.args["Settings.ClearCache"]).toEqual([[false]]);
    expect(testid("clear-result")?.textContent).toBe("Removed 2 snapshots, 3.0 MiB freed.");
    expect(testid("cache-usage")?.textContent).toBe("0 B of 2.0 GiB in 0 snapshots");
    await click(testid("open-data-dir"));
    expect(fb.calls).toContain("System.OpenDataDir");
  });
  it("turns the local API on and off from Settings and shows the URL, token and model a client needs", async () => {
    const off = {
      running: false,
      enabled: false,
      url: "",
      ollamaHost: "",
      port: 11435,
      token: "",
      tokenFile: "/d/api-token",
      model: "",
      error: "",
    };
    const on = (port: number) => ({
      ...off,
      running: true,
      enabled: true,
      port,
      url: `http://127.0.0.1:${port}/v1`,
      ollamaHost: `http://127.0.0.1:${port}`,
      token: "tok123",
      model: "stories",
    });
    const fb = fakeBridge(
      basics({
        "System.Backend": () => ({ backend: "cpu", model: "stories", why: "", available: ["cpu"], coreML: "no" }),
        "CoreML.Settings": () => ({
          computeUnits: "neural-engine",
          computeUnitChoices: ["neural-engine"],
          running: "",
          executor: "",
          model: "",
          available: false,
          detail: "",
        }),
        "Settings.Cache": () => ({
          usedBytes: 0,
          quotaBytes: 1,
          snapshots: 0,
          pinnedBytes: 0,
          pinned: 0,
          dir: "/d/kv",
        }),
        "API.Status": () => off,
        "API.Start": (port) => on((port as number) || 11435),
        "API.Stop": () => off,
      }),
    );
    await mount(fb.bridge);
    await click(testid("nav-settings"));
    const box = testid<HTMLInputElement>("api-enabled")!;
    expect(box.checked).toBe(false);
    expect(testid<HTMLInputElement>("api-port")?.value).toBe("11435");
    expect(testid("api-facts")).toBeNull();

    await type(testid<HTMLInputElement>("api-port"), "70000");
    await click(box);
    expect(fb.args["API.Start"]).toBeUndefined();
    expect(root.textContent).toContain("API port: 70000 is not a port number");

    await type(testid<HTMLInputElement>("api-port"), "18080");
    await click(testid("api-enabled"));
    expect(fb.args["API.Start"]).toEqual([[18080]]);
    expect(testid<HTMLInputElement>("api-enabled")?.checked).toBe(true);
    expect(testid("api-url")?.textContent).toBe("http://127.0.0.1:18080/v1");
    expect(testid("api-token")?.textContent).toBe("tok123");
    expect(testid("api-model")?.textContent).toBe("stories");
    expect(testid("api-ollama")?.textContent).toBe("OLLAMA_HOST=http://127.0.0.1:18080");
    expect(testid<HTMLInputElement>("api-port")?.disabled).toBe(true);

    await click(testid("api-enabled"));
    expect(fb.calls).toContain("API.Stop");
    expect(testid("api-facts")).toBeNull();
  });
});
