import { render } from "preact";
import { act } from "preact/test-utils";
import { afterEach, describe, expect, it } from "vitest";
import { api } from "./api";
import { LibraryPage } from "./LibraryPage";
import { Store } from "./store";
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

let root: HTMLElement;
afterEach(() => {
  render(null, root);
  root.remove();
});
const flush = () =>
  act(async () => {
    for (let i = 0; i < 8; i++) await Promise.resolve();
  });

async function mount(f: ReturnType<typeof fakeBridge>) {
  const store = new Store(api(f.bridge), f.bridge, manualFrames().frames, "system");
  root = document.createElement("div");
  document.body.append(root);
  await act(() => {
    render(
      <StoreContext.Provider value={store}>
        <LibraryPage />
      </StoreContext.Provider>,
      root,
    );
  });
  await act(() => store.library.reload());
  await flush();
  return store;
}
const items = () => [...root.querySelectorAll("[data-testid=prompt]")];
const testid = <T extends HTMLElement = HTMLElement>(id: string) => root.querySelector<T>(`[data-testid="${id}"]`);
const type = async (el: HTMLInputElement | HTMLTextAreaElement | null, value: string) => {
  await act(() => {
    el!.value = value;
    el!.dispatchEvent(new Event("input", { bubbles: true }));
  });
  await flush();
};
const click = async (el: Element | null | undefined) => {
  await act(() => {
    (el as HTMLElement).click();
  });
  await flush();
};

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
    root = document.createElement("div");
    document.body.append(root);
    await act(() => {
      render(
        <StoreContext.Provider value={store}>
          <LibraryPage />
        </StoreContext.Provider>,
        root,
      );
    });
    void store.library.reload();
    await flush();
    await type(testid("prompt-search"), "sql");
    await act(() => answers["sql"]!([prompt(2)]));
    await act(() => answers[""]!([prompt(1), prompt(2)])); // the first list, late
    await flush();
    expect([...root.querySelectorAll("[data-testid=prompt] strong")].map((e) => e.textContent)).toEqual(["P2"]);
  });

  it("asks for a prompt's {{variables}} and starts the chat with them filled in", async () => {
    const p = {
      ...prompt(4, null, "Translate {{text}} into {{ language }}."),
      systemPrompt: "You speak {{language}}.",
    };
    const conv = {
      titleSource: "" as const,
      pinned: false,
      id: 9,
      title: "P4",
      modelId: 0,
      promptId: 4,
      systemPrompt: p.systemPrompt,
      activeLeafId: 0,
      createdAt: "",
      updatedAt: "",
    };
    const f = fakeBridge({
      "Library.List": () => [p],
      "Library.Tags": () => [],
      "Chat.CreateConversation": () => conv,
      "Chat.ListConversations": () => [conv],
      "Chat.Thread": () => ({ conversation: conv, messages: [], path: [], generating: 0 }),
      "Chat.SetSystemPrompt": (id, s) => ({ ...conv, id, systemPrompt: s }),
    });
    const store = await mount(f);
    await click(testid("prompt-start"));
    expect(f.calls).not.toContain("Chat.CreateConversation");
    const form = testid("variables")!;
    expect([...form.querySelectorAll("label")].map((l) => l.textContent)).toEqual(["text", "language"]);
    await type(testid("variable-text"), "good morning");
    await type(testid("variable-language"), "Portuguese");
    await click(testid("variables-start"));
    expect(f.args["Chat.CreateConversation"]).toEqual([[{ title: "", modelId: 0, promptId: 4 }]]);
    expect(f.args["Chat.SetSystemPrompt"]).toEqual([[9, "You speak Portuguese."]]);
    expect(store.state.conversations.draft).toBe("Translate good morning into Portuguese.");
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
