import { render } from "preact";
import { act } from "preact/test-utils";
import { afterEach, describe, expect, it, vi } from "vitest";
import { App } from "./App";
import { DRAFT_SAVE_MS } from "./state/conversations";
import { fakeBridge, manualFrames } from "./testing/fake";
import type { Conversation, Thread } from "./types";

// The composer's unsent text is the conversation's draft, stored by the Go
// side (Chat.SetDraft): it survives opening another conversation and a reload.

const conv = (id: number, draft = ""): Conversation => ({
  id,
  title: `C${id}`,
  titleSource: "user",
  modelId: 0,
  promptId: 0,
  systemPrompt: "",
  activeLeafId: 0,
  pinned: false,
  draft,
  createdAt: "",
  updatedAt: "",
});
const threadOf = (c: Conversation): Thread => ({
  conversation: c,
  messages: [],
  path: [],
  generating: 0,
  model: null,
  settings: { temperature: 0, maxTokens: 10, speculationWidth: 4 },
});

/** A Go side that stores drafts as Chat.SetDraft does. */
function backend() {
  const stored: Record<number, string> = { 1: "", 2: "stored before" };
  const f = fakeBridge({
    "System.Info": () => ({
      version: "1.0",
      os: "linux",
      arch: "amd64",
      go: "go1",
      dataDir: "/d",
      database: "/d/anechat.db",
      schemaVersion: 3,
      storageError: "",
      engineError: "",
    }),
    "Chat.ListConversations": () => [conv(1, stored[1]), conv(2, stored[2])],
    "Chat.Thread": (id) => threadOf(conv(Number(id), stored[Number(id)])),
    "Chat.SetDraft": (id, text) => {
      stored[Number(id)] = String(text);
    },
    "Chat.Send": (id, text) => {
      stored[Number(id)] = "";
      return { conversationId: id, user: { id: 7, conversationId: id, parentId: 0, role: "user", content: text } };
    },
    "Settings.Get": () => ({
      speculationWidth: 4,
      kvQuotaBytes: 1 << 30,
      defaultModelId: 0,
      maxTokens: 10,
      temperature: 0,
      highlightDrafted: true,
      defaultSystemPrompt: "",
      theme: "system",
      modelTitles: false,
    }),
    "Models.List": () => ({ models: [], defaultId: 0, modelsDir: "" }),
    "Downloads.List": () => [],
  });
  return { f, stored };
}

const flush = () =>
  act(async () => {
    for (let i = 0; i < 30; i++) await Promise.resolve();
  });
let root: HTMLElement;
afterEach(() => {
  render(null, root);
  root.remove();
  vi.useRealTimers();
});
async function mount(f: ReturnType<typeof fakeBridge>) {
  root = document.createElement("div");
  document.body.append(root);
  await act(() => {
    render(<App bridge={f.bridge} frames={manualFrames().frames} theme="system" />, root);
  });
  await flush();
}
const composer = () => root.querySelector<HTMLTextAreaElement>("[data-testid=composer]")!;
const openConv = async (title: string) => {
  const b = [...root.querySelectorAll<HTMLButtonElement>("[data-testid=conversations] button")].find((x) =>
    x.textContent?.includes(title),
  );
  await act(() => {
    b!.click();
  });
  await flush();
};
const typeDraft = async (text: string) => {
  await act(() => {
    composer().value = text;
    composer().dispatchEvent(new Event("input", { bubbles: true }));
  });
  await flush();
};

describe("drafts", () => {
  it("stores what is typed once typing pauses, and shows it again after opening another chat", async () => {
    const { f, stored } = backend();
    await mount(f);
    await openConv("C1");
    expect(composer().value).toBe("");
    vi.useFakeTimers();
    await typeDraft("half");
    await typeDraft("half a thought");
    expect(f.calls).not.toContain("Chat.SetDraft"); // typing has not paused yet
    await act(() => {
      vi.advanceTimersByTime(DRAFT_SAVE_MS);
    });
    await flush();
    expect(f.args["Chat.SetDraft"]).toEqual([[1, "half a thought"]]); // once, the last text
    vi.useRealTimers();

    // Typed and opened another chat at once: stored on the way out.
    await typeDraft("half a thought, more");
    await openConv("C2");
    expect(stored[1]).toBe("half a thought, more");
    expect(composer().value).toBe("stored before"); // C2's own draft
    await openConv("C1");
    expect(composer().value).toBe("half a thought, more");
  });

  it("keeps a draft typed while a reload of the list or thread brings the stored one", async () => {
    const { f } = backend();
    await mount(f);
    await openConv("C2");
    vi.useFakeTimers();
    await typeDraft("newer words");
    // A reply ends meanwhile: the thread and list read again hold "stored before".
    await act(() => {
      f.fire("chat:done", { conversationId: 2, parentId: 0, message: null, stats: {} });
    });
    await flush();
    expect(f.calls.filter((c) => c === "Chat.Thread").length).toBeGreaterThan(1);
    expect(f.calls).not.toContain("Chat.SetDraft");
    expect(composer().value).toBe("newer words");
  });

  it("clears the draft when it is sent, without a late save bringing it back", async () => {
    const { f, stored } = backend();
    await mount(f);
    await openConv("C1");
    vi.useFakeTimers();
    await typeDraft("send me");
    await act(() => {
      root.querySelector<HTMLButtonElement>("[data-testid=send]")!.click();
    });
    await flush();
    await act(() => {
      vi.advanceTimersByTime(DRAFT_SAVE_MS * 2);
    });
    await flush();
    expect(f.args["Chat.Send"]).toEqual([[1, "send me"]]);
    expect(f.calls).not.toContain("Chat.SetDraft");
    expect(stored[1]).toBe("");
    expect(composer().value).toBe("");
  });
});
