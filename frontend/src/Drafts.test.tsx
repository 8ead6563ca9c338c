import { act } from "preact/test-utils";
import { afterEach, describe, expect, it, vi } from "vitest";
import { DRAFT_SAVE_MS } from "./state/conversations";
import { flush, mountApp, root, type, unmount } from "./testing/dom";
import { fakeBridge } from "./testing/fake";
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
  const stored: Record<number, string> = { 1: "", 2: "stored before", 3: "" };
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
    "Chat.CreateConversation": () => conv(3),
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

afterEach(() => {
  unmount();
  vi.useRealTimers();
});
const mount = (f: ReturnType<typeof fakeBridge>) => mountApp(f.bridge);
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
const typeDraft = (text: string) => type(composer(), text);

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

  it("sends only once a save of the draft on its way has landed, so it cannot bring the sent text back", async () => {
    const { f, stored } = backend();
    let land: () => void = () => undefined;
    const answers = f.bridge.call.bind(f.bridge);
    f.bridge.call = (<T,>(service: string, method: string, ...a: unknown[]) => {
      if (method !== "SetDraft") return answers<T>(service, method, ...a);
      f.calls.push("Chat.SetDraft");
      return new Promise<T>((resolve) => {
        land = () => {
          stored[Number(a[0])] = String(a[1]);
          resolve(undefined as T);
        };
      });
    }) as typeof f.bridge.call;
    await mount(f);
    await openConv("C1");
    vi.useFakeTimers();
    await typeDraft("on its way");
    await act(() => {
      vi.advanceTimersByTime(DRAFT_SAVE_MS);
    });
    await flush();
    expect(f.calls.filter((c) => c === "Chat.SetDraft")).toHaveLength(1);
    await act(() => {
      root.querySelector<HTMLButtonElement>("[data-testid=send]")!.click();
    });
    await flush();
    expect(f.calls).not.toContain("Chat.Send");
    await act(() => {
      land();
    });
    await flush();
    expect(f.args["Chat.Send"]).toEqual([[1, "on its way"]]);
    expect(stored[1]).toBe(""); // Send cleared it after the save
  });

  it("puts a start page example in a new chat's composer, stored, when there is no model to send it to", async () => {
    const { f, stored } = backend();
    await mount(f);
    const example = root.querySelector<HTMLButtonElement>("[data-testid=examples] button")!;
    await act(() => {
      example.click();
    });
    await flush();
    expect(f.calls).not.toContain("Chat.Send");
    expect(composer().value).toBe(example.textContent);
    expect(stored[3]).toBe(example.textContent);
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
