import { act } from "preact/test-utils";
import { afterEach, describe, expect, it } from "vitest";
import { api } from "./api";
import { LibraryPage } from "./LibraryPage";
import { Store } from "./store";
import { click, flush, mountNode, root, testid, type, unmount } from "./testing/dom";
import { fakeBridge, manualFrames } from "./testing/fake";
import type { Prompt } from "./types";
import { StoreContext } from "./useStore";

// A prompt, prepared with SmolLM2 (ready or made for a model no longer the default) or not.
const prompt = (id: number, prepared: "ready" | "stale" | null = null, body = "body"): Prompt => ({
  id,
  title: `P${id}`,
  systemPrompt: "sys",
  body,
  tags: [],
  pinnedSnapshotId: prepared ? 70 + id : 0,
  variables: [],
  snapshot: prepared && {
    id: 70 + id,
    tokens: 80,
    bytes: 4096,
    createdAt: "",
    modelId: 5,
    modelName: "SmolLM2-135M-Instruct",
    ready: prepared === "ready",
    reason:
      prepared === "ready"
        ? ""
        : "made with SmolLM2-135M-Instruct; the default model is now stories260K: prepare it again",
  },
  createdAt: "",
  updatedAt: "",
});

afterEach(unmount);
async function mount(f: ReturnType<typeof fakeBridge>) {
  const store = new Store(api(f.bridge), f.bridge, manualFrames().frames, "system");
  await mountNode(
    <StoreContext.Provider value={store}>
      <LibraryPage />
    </StoreContext.Provider>,
  );
  await act(() => store.library.reload());
  await flush();
  return store;
}
const items = () => [...root.querySelectorAll("[data-testid=prompt]")];

describe("LibraryPage", () => {
  it("shows which prompts are ready to resume, with which model, and prepares the others", async () => {
    let prompts = [prompt(1, "ready"), prompt(2), prompt(3, "stale")];
    const f = fakeBridge({
      "Library.List": () => prompts,
      "Library.Tags": () => [],
      "Library.Prepare": (id) => {
        prompts = prompts.map((p) => (p.id === id ? prompt(p.id, "ready") : p));
        return {
          prompt: prompts.find((p) => p.id === id),
          outcome: { kind: "prepared", message: "ready to resume with SmolLM2-135M-Instruct" },
        };
      },
    });
    await mount(f);
    const ready = () => items().map((li) => li.querySelector("[data-testid=prompt-ready]")?.textContent?.trim() ?? "");
    expect(ready()).toEqual(["ready to resume with SmolLM2-135M-Instruct", "", ""]);
    expect(items().map((li) => li.querySelector("[data-testid=prompt-prepare]") !== null)).toEqual([false, true, true]);
    // Prepared for another model: it says so, and what to do.
    expect(items()[2]!.querySelector("[data-testid=prompt-reason]")?.textContent).toContain("prepare it again");
    await click(items()[1]!.querySelector("[data-testid=prompt-prepare]"));
    expect(f.args["Library.Prepare"]).toEqual([[2]]);
    expect(ready()).toEqual([
      "ready to resume with SmolLM2-135M-Instruct",
      "ready to resume with SmolLM2-135M-Instruct",
      "",
    ]);
  });

  it("shows the answer to the latest query even when an older one arrives last", async () => {
    const answers: Record<string, (v: Prompt[]) => void> = {};
    const f = fakeBridge({
      "Library.Tags": () => [],
      "Library.List": (_tag, query) =>
        new Promise<Prompt[]>((resolve) => {
          answers[String(query)] = resolve;
        }),
    });
    const store = new Store(api(f.bridge), f.bridge, manualFrames().frames, "system");
    await mountNode(
      <StoreContext.Provider value={store}>
        <LibraryPage />
      </StoreContext.Provider>,
    );
    void store.library.reload();
    await flush();
    await type(testid("prompt-search"), "sql");
    await act(() => answers["sql"]!([prompt(2)]));
    await act(() => answers[""]!([prompt(1), prompt(2)])); // the first list, late
    await flush();
    expect([...root.querySelectorAll("[data-testid=prompt] strong")].map((e) => e.textContent)).toEqual(["P2"]);
  });

  it("asks for a prompt's {{variables}} and starts the chat: sent by the Go side, once however often it is clicked", async () => {
    const p = {
      ...prompt(4, null, "Translate {{text}} into {{ language }}."),
      systemPrompt: "You speak {{language}}.",
    };
    const conv = {
      titleSource: "prompt" as const,
      pinned: false,
      draft: "",
      id: 9,
      title: "P4",
      modelId: 0,
      promptId: 4,
      systemPrompt: "You speak Portuguese.",
      activeLeafId: 0,
      createdAt: "",
      updatedAt: "",
    };
    const user = {
      id: 31,
      conversationId: 9,
      parentId: 0,
      role: "user" as const,
      content: "Translate good morning into Portuguese.",
      createdAt: "",
    };
    let answer: (v: unknown) => void = () => undefined;
    const f = fakeBridge({
      "Library.List": () => [p],
      "Library.Tags": () => [],
      "Chat.StartFromPrompt": () =>
        new Promise((resolve) => {
          answer = resolve;
        }),
      "Chat.ListConversations": () => [conv],
      "Chat.Thread": () => ({ conversation: conv, messages: [user], path: [31], generating: 31 }),
    });
    const store = await mount(f);
    await click(testid("prompt-start"));
    expect(f.calls).not.toContain("Chat.StartFromPrompt");
    const form = testid("variables")!;
    expect([...form.querySelectorAll("label")].map((l) => l.textContent)).toEqual(["text", "language"]);
    await type(testid("variable-text"), "good morning");
    await type(testid("variable-language"), "Portuguese");
    await click(testid("variables-start"));
    // While it is on its way the button says so and a second start is ignored.
    expect(testid("prompt-start")?.textContent).toBe("Starting…");
    expect(testid<HTMLButtonElement>("prompt-start")?.disabled).toBe(true);
    await act(() => store.conversations.startFromPrompt(p, { text: "x", language: "y" }));
    expect(f.args["Chat.StartFromPrompt"]).toEqual([[4, { text: "good morning", language: "Portuguese" }]]);
    await act(() => {
      answer({ conversationId: 9, user, unsent: "" });
    });
    await flush();
    expect(f.calls.filter((c) => c === "Chat.CreateConversation")).toEqual([]);
    expect(store.state.window.page).toBe("chat");
    expect(store.state.conversations.current).toBe(9);
    expect(store.state.streams[9]).toMatchObject({ parentId: 31, running: true });
    expect(store.state.conversations.starting).toBe(0);
    expect(store.state.window.notice).toBeNull();
  });

  it("opens a chat whose prompt could not be sent with it in the composer, and says why", async () => {
    const conv = {
      titleSource: "prompt" as const,
      pinned: false,
      draft: "body",
      id: 9,
      title: "P1",
      modelId: 0,
      promptId: 1,
      systemPrompt: "sys",
      activeLeafId: 0,
      createdAt: "",
      updatedAt: "",
    };
    const f = fakeBridge({
      "Library.List": () => [prompt(1)],
      "Library.Tags": () => [],
      "Chat.StartFromPrompt": () => ({
        conversationId: 9,
        user: { id: 0, conversationId: 0, parentId: 0, role: "user", content: "", createdAt: "" },
        unsent: "no model available: put a model in the models folder",
      }),
      "Chat.ListConversations": () => [conv],
      "Chat.Thread": () => ({ conversation: conv, messages: [], path: [], generating: 0 }),
    });
    const store = await mount(f);
    await click(testid("prompt-start"));
    expect(store.state.conversations.current).toBe(9);
    expect(store.state.conversations.thread?.conversation.draft).toBe("body");
    expect(store.state.streams[9]).toBeUndefined();
    expect(store.state.window.notice).toEqual({
      kind: "error",
      scope: "chat",
      text: "Not sent: no model available: put a model in the models folder. It waits in the composer.",
    });
  });

  it("shows each prepared prompt's snapshot size and unprepares it", async () => {
    let prompts = [prompt(1, "ready"), prompt(2), prompt(3, "stale")];
    const f = fakeBridge({
      "Library.List": () => prompts,
      "Library.Tags": () => [],
      "Library.Unprepare": (id) => {
        prompts = prompts.map((p) => (p.id === id ? prompt(p.id) : p));
        return prompts.find((p) => p.id === id);
      },
    });
    await mount(f);
    const sizes = () =>
      items().map((li) => li.querySelector("[data-testid=prompt-snapshot-size]")?.textContent?.trim() ?? "");
    expect(sizes()).toEqual(["KV cache 4.0 KiB (80 tokens)", "", "KV cache 4.0 KiB (80 tokens)"]);
    expect(items().map((li) => li.querySelector("[data-testid=prompt-unprepare]") !== null)).toEqual([
      true,
      false,
      true,
    ]);
    await click(items()[0]!.querySelector("[data-testid=prompt-unprepare]"));
    expect(f.args["Library.Unprepare"]).toEqual([[1]]);
    expect(sizes()).toEqual(["", "", "KV cache 4.0 KiB (80 tokens)"]);
    expect(items()[0]!.querySelector("[data-testid=prompt-prepare]")).not.toBeNull();
  });

  it("exports the library through the save dialog or the clipboard, and imports a file through the Go side", async () => {
    const file = {
      fileName: "anechat-prompts.json",
      mimeType: "application/json",
      text: '{"format": "anechat.prompts"}',
    };
    let saveTo = "/home/u/anechat-prompts.json";
    const f = fakeBridge({
      "Library.List": () => [prompt(1)],
      "Library.Tags": () => [],
      "Library.Export": () => file,
      "System.SaveFile": () => saveTo,
      "Library.Import": (text) => {
        if (text === "broken") throw new Error("library: import: prompts[1].title: a prompt needs a title");
        return { created: [prompt(2)], skipped: ["P1"] };
      },
    });
    const store = await mount(f);
    await click(testid("export-prompts"));
    expect(f.args["Library.Export"]).toEqual([[[]]]); // every prompt
    expect(testid<HTMLTextAreaElement>("export-text")!.value).toBe(file.text);
    expect(testid("export-name")?.textContent).toBe("anechat-prompts.json");
    await click(testid("export-save"));
    expect(f.args["System.SaveFile"]).toEqual([["Export the prompt library", file]]);
    expect(testid("export-done")?.textContent).toBe("Saved to /home/u/anechat-prompts.json.");
    saveTo = ""; // the dialog was cancelled
    await click(testid("export-save"));
    expect(testid("export-done")?.textContent).toBe("Not saved: the dialog was cancelled.");
    await click(testid("export-copy"));
    expect(f.copied).toEqual([file.text]);

    await click(testid("import-prompts"));
    await type(testid("import-json"), "broken");
    await click(testid("import-start"));
    // The store's notice names the place; the panel shows nothing imported.
    expect(store.state.window.notice?.text).toContain("prompts[1].title");
    expect(testid("import-done")).toBeNull();
    await type(testid("import-json"), file.text);
    await click(testid("import-start"));
    expect(f.args["Library.Import"]).toEqual([["broken"], [file.text]]);
    expect(testid("import-done")?.textContent).toBe("Imported 1 prompt; 1 already in the library: P1.");
  });
});
