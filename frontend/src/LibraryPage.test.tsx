import { render } from "preact";
import { act } from "preact/test-utils";
import { afterEach, describe, expect, it } from "vitest";
import { api } from "./api";
import { LibraryPage } from "./LibraryPage";
import { Store } from "./store";
import { fakeBridge, manualFrames, memoryKeep } from "./testing/fake";
import type { Prompt } from "./types";
import { StoreContext } from "./useStore";

const prompt = (id: number, pinnedSnapshotId: number, body = "body"): Prompt => ({
  id,
  title: `P${id}`,
  systemPrompt: "sys",
  body,
  tags: [],
  pinnedSnapshotId,
  variables: [],
  snapshot: null,
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
  const store = new Store(api(f.bridge), f.bridge, manualFrames().frames, memoryKeep());
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
  await act(() => store.reloadLibrary());
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
  it("shows which prompts are ready to resume and prepares the others", async () => {
    let prompts = [prompt(1, 7), prompt(2, 0)];
    const f = fakeBridge({
      "Library.List": () => prompts,
      "Library.Tags": () => [],
      "Library.Prepare": (id) => {
        prompts = prompts.map((p) => (p.id === id ? { ...p, pinnedSnapshotId: 9 } : p));
        return prompts.find((p) => p.id === id);
      },
    });
    await mount(f);
    expect(items().map((li) => li.querySelector("[data-testid=prompt-ready]") !== null)).toEqual([true, false]);
    expect(items().map((li) => li.querySelector("[data-testid=prompt-prepare]") !== null)).toEqual([false, true]);
    await click(items()[1]!.querySelector("[data-testid=prompt-prepare]"));
    expect(f.args["Library.Prepare"]).toEqual([[2]]);
    expect(items().map((li) => li.querySelector("[data-testid=prompt-ready]")?.textContent?.trim())).toEqual([
      "ready to resume",
      "ready to resume",
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
    const store = new Store(api(f.bridge), f.bridge, manualFrames().frames, memoryKeep());
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
    void store.reloadLibrary();
    await flush();
    await type(testid("prompt-search"), "sql");
    await act(() => answers["sql"]!([prompt(2, 0)]));
    await act(() => answers[""]!([prompt(1, 0), prompt(2, 0)])); // the first list, late
    await flush();
    expect([...root.querySelectorAll("[data-testid=prompt] strong")].map((e) => e.textContent)).toEqual(["P2"]);
  });

  it("asks for a prompt's {{variables}} and starts the chat with them filled in", async () => {
    const p = { ...prompt(4, 0, "Translate {{text}} into {{ language }}."), systemPrompt: "You speak {{language}}." };
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
    expect(store.state.draft).toBe("Translate good morning into Portuguese.");
  });

  it("exports the library as JSON and imports it back, refusing a broken file with the field named", async () => {
    const created: unknown[] = [];
    const f = fakeBridge({
      "Library.List": () => [{ ...prompt(1, 0), tags: ["work"] }],
      "Library.Tags": () => [],
      "Library.Create": (p) => {
        created.push(p);
        return prompt(created.length + 1, 0);
      },
    });
    await mount(f);
    await click(testid("export-prompts"));
    const json = testid<HTMLTextAreaElement>("export-json")!.value;
    expect(JSON.parse(json)).toEqual({
      anechat: "prompts",
      version: 1,
      prompts: [{ title: "P1", systemPrompt: "sys", body: "body", tags: ["work"] }],
    });
    await click(testid("import-prompts"));
    await type(testid("import-json"), '{"prompts": [{"title": "A"}, {"title": 3}]}');
    await click(testid("import-start"));
    expect(created).toEqual([]);
    // The store's notice names the place; the page shows nothing imported.
    expect(testid("import-done")).toBeNull();
    await type(testid("import-json"), json);
    await click(testid("import-start"));
    expect(created).toEqual([{ title: "P1", systemPrompt: "sys", body: "body", tags: ["work"] }]);
    expect(testid("import-done")?.textContent).toBe("Imported 1 of 1 prompt.");
  });
});
