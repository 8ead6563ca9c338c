import { render } from "preact";
import { act } from "preact/test-utils";
import { afterEach, describe, expect, it, vi } from "vitest";
import { App } from "./App";
import type { Bridge } from "./bridge";
import { wailsBridge, NoBackendError } from "./bridge";
import type { Frames } from "./logic";
import { renderMarkdown } from "./markdown";
import type { Thread } from "./types";

// renderMarkdown, counted: the streaming test checks how often it runs.
vi.mock("./markdown", async (importOriginal) => {
  const m = await importOriginal<typeof import("./markdown")>();
  return { ...m, renderMarkdown: vi.fn(m.renderMarkdown) };
});

// Animation frames the test runs by hand: tick() runs the callbacks waiting.
function manualFrames() {
  const waiting = new Map<number, () => void>();
  let next = 1;
  const frames: Frames = {
    request: (cb) => {
      waiting.set(next, cb);
      return next++;
    },
    cancel: (id) => void waiting.delete(id),
  };
  const tick = () => {
    const cbs = [...waiting.values()];
    waiting.clear();
    cbs.forEach((cb) => cb());
  };
  return { frames, tick, waiting: () => waiting.size };
}

// A fake backend: answers calls from a table and lets the test fire events.
function fakeBridge(answers: Record<string, (...a: unknown[]) => unknown>) {
  const listeners = new Map<string, ((d: unknown) => void)[]>();
  const calls: string[] = [];
  const bridge: Bridge = {
    async call<T>(service: string, method: string, ...args: unknown[]) {
      const key = `${service}.${method}`;
      calls.push(key);
      const f = answers[key];
      if (!f) throw new Error(`unexpected call ${key}`);
      return f(...args) as T;
    },
    on(event, cb) {
      listeners.set(event, [...(listeners.get(event) ?? []), cb]);
      return () => listeners.set(event, (listeners.get(event) ?? []).filter((x) => x !== cb));
    },
  };
  const fire = (event: string, data: unknown) => (listeners.get(event) ?? []).forEach((cb) => cb(data));
  return { bridge, calls, fire };
}

const info = { version: "1.0", os: "linux", arch: "amd64", go: "go1", dataDir: "/d", database: "/d/anechat.db", schemaVersion: 1, storageError: "", engineError: "" };
const conv = { id: 1, title: "Evil", titleSource: "" as const, modelId: 0, promptId: 0, systemPrompt: "", activeLeafId: 2, pinned: false, createdAt: "", updatedAt: "" };
const thread: Thread = {
  conversation: conv,
  messages: [
    { id: 1, conversationId: 1, parentId: 0, role: "user", content: "<b>hi</b>", createdAt: "" },
    { id: 2, conversationId: 1, parentId: 1, role: "assistant", content: "ok <script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\"> **bold**", createdAt: "" },
  ],
  path: [1, 2],
  generating: 0,
  model: null,
  settings: { temperature: 0, maxTokens: 10, speculationWidth: 4 },
};

const flush = () => act(async () => { for (let i = 0; i < 5; i++) await Promise.resolve(); });
let root: HTMLElement;
afterEach(() => { render(null, root); root.remove(); });

let frames = manualFrames();

async function mount(bridge: Bridge) {
  root = document.createElement("div");
  document.body.append(root);
  frames = manualFrames();
  await act(() => render(<App bridge={bridge} frames={frames.frames} />, root));
}

describe("App", () => {
  it("shows backend info, opens a conversation and renders its reply sanitized", async () => {
    const f = fakeBridge({
      "System.Info": () => info,
      "Chat.ListConversations": () => [conv],
      "Chat.Thread": () => thread,
    });
    await mount(f.bridge);
    await flush();
    expect(root.querySelector("[data-testid=status]")?.textContent).toContain("anechat 1.0 · linux/amd64 · /d · schema v1");
    const item = [...root.querySelectorAll<HTMLButtonElement>(".conv")].find((b) => b.textContent === "Evil");
    expect(item).toBeDefined();
    await act(() => item!.click());
    await flush();
    const assistant = root.querySelector("[data-testid=msg-assistant]")!;
    expect(assistant.querySelector("strong")?.textContent).toBe("bold");
    expect(assistant.innerHTML).not.toMatch(/<script|onerror/i);
    expect((window as unknown as { pwned?: number }).pwned).toBeUndefined();
    // The user's own text is shown as text, not HTML.
    expect(root.querySelector("[data-testid=msg-user] .plain")?.textContent).toBe("<b>hi</b>");
  });

  it("streams tokens of the open conversation and reloads when done", async () => {
    const f = fakeBridge({
      "System.Info": () => info,
      "Chat.ListConversations": () => [conv],
      "Chat.Thread": () => thread,
    });
    await mount(f.bridge);
    await flush();
    await act(() => root.querySelector<HTMLButtonElement>(".conv")!.click());
    await flush();
    await act(() => f.fire("chat:progress", { conversationId: 1, parentId: 2, done: 64, total: 200 }));
    expect(root.querySelector("[data-testid=progress]")?.textContent).toContain("Reading the prompt: 64/200 tokens (32%)");
    expect(root.querySelector("[data-testid=stop]")).not.toBeNull(); // Stop cancels the prefill too
    await act(() => {
      f.fire("chat:token", { conversationId: 1, parentId: 2, seq: 1, text: "lo *you*" });
      f.fire("chat:token", { conversationId: 1, parentId: 2, seq: 0, text: "Hel" });
    });
    await act(() => frames.tick());
    const streaming = root.querySelector("[data-testid=streaming]")!;
    expect(streaming.textContent?.trim()).toBe("Hello you");
    expect(root.querySelector("[data-testid=progress]")).toBeNull(); // text arrived: no progress bar
    expect(streaming.querySelector("em")?.textContent).toBe("you");
    expect(root.querySelector("[data-testid=stop]")).not.toBeNull();
    const before = f.calls.filter((c) => c === "Chat.Thread").length;
    await act(() => f.fire("chat:done", { conversationId: 1, parentId: 2, message: null, stats: {} }));
    await flush();
    expect(root.querySelector("[data-testid=streaming]")).toBeNull();
    expect(f.calls.filter((c) => c === "Chat.Thread").length).toBe(before + 1);
  });

  it("shades drafted text of stored and streamed replies, and shows τ, unless the setting is off", async () => {
    const stats = { tokens: 6, prefillTokens: 3, resumedTokens: 0, targetCalls: 3, drafted: 4, accepted: 3, ttftMs: 5, decodeTokS: 20, width: 4, stopped: "stop", draftedSpans: [[4, 9]] };
    const drafted: Thread = {
      conversation: conv,
      messages: [
        { id: 1, conversationId: 1, parentId: 0, role: "user", content: "copy", createdAt: "" },
        { id: 2, conversationId: 1, parentId: 1, role: "assistant", content: "The quick fox", stats, createdAt: "" },
      ],
      path: [1, 2],
      generating: 0,
    } as Thread;
    for (const highlightDrafted of [true, false]) {
      const f = fakeBridge({
        "System.Info": () => info,
        "Chat.ListConversations": () => [conv],
        "Chat.Thread": () => drafted,
        "Settings.Get": () => ({ speculationWidth: 4, kvQuotaBytes: 1, defaultModelId: 0, maxTokens: 10, temperature: 0, highlightDrafted }),
      });
      await mount(f.bridge);
      await flush();
      await act(() => root.querySelector<HTMLButtonElement>(".conv")!.click());
      await flush();
      const assistant = root.querySelector("[data-testid=msg-assistant]")!;
      const marks = [...assistant.querySelectorAll("mark.drafted")].map((m) => m.textContent);
      expect(marks).toEqual(highlightDrafted ? ["quick"] : []);
      expect(assistant.querySelector(".markdown")?.textContent?.trim()).toBe("The quick fox");
      expect(root.querySelector("[data-testid=msg-stats]")?.textContent).toBe("6 tokens · τ 2.00 · drafted 4 · accepted 3 · 20.0 tok/s · first token 5 ms · width 4");
      await act(() => {
        f.fire("chat:token", { conversationId: 1, parentId: 2, seq: 0, text: "Hel", drafted: false });
        f.fire("chat:token", { conversationId: 1, parentId: 2, seq: 1, text: "lo", drafted: true });
      });
      await act(() => frames.tick());
      const streamed = [...root.querySelectorAll("[data-testid=streaming] mark.drafted")].map((m) => m.textContent);
      expect(streamed).toEqual(highlightDrafted ? ["lo"] : []);
      render(null, root);
      root.remove();
    }
    root = document.createElement("div"); // for afterEach
  });

  it("renders a streamed reply's Markdown once per animation frame, however many tokens it brought", async () => {
    const f = fakeBridge({
      "System.Info": () => info,
      "Chat.ListConversations": () => [conv],
      "Chat.Thread": () => thread,
    });
    await mount(f.bridge);
    await flush();
    await act(() => root.querySelector<HTMLButtonElement>(".conv")!.click());
    await flush();
    const renders = vi.mocked(renderMarkdown);
    const piece = (i: number) => (i % 10 === 9 ? `w${i}\n\n` : `w${i} `);
    // Each token is its own task, as the Wails events are: no batching by act.
    const fire = async (from: number, to: number) => {
      for (let i = from; i < to; i++) await act(() => f.fire("chat:token", { conversationId: 1, parentId: 2, seq: i, text: piece(i), drafted: i % 4 === 0 }));
    };
    const text = (n: number) => Array.from({ length: n }, (_, i) => piece(i)).join("");
    const N = 400;

    renders.mockClear();
    await fire(0, N);
    // Nothing is rendered before the frame...
    expect(renders).not.toHaveBeenCalled();
    expect(root.querySelector("[data-testid=streaming]")).toBeNull();
    // ...and the frame renders the reply once, whole.
    await act(() => frames.tick());
    expect(renders.mock.calls.map((c) => c[0])).toEqual([text(N)]);
    const streaming = () => root.querySelector("[data-testid=streaming]")!;
    expect(streaming().querySelectorAll("p")).toHaveLength(N / 10);
    expect(streaming().querySelectorAll("mark.drafted")).toHaveLength(N / 4);

    // The next frame's tokens: one more render.
    renders.mockClear();
    await fire(N, N + 50);
    await act(() => frames.tick());
    expect(renders).toHaveBeenCalledTimes(1);
    expect(renders.mock.calls[0]?.[0]).toBe(text(N + 50));
    // A frame without tokens renders nothing.
    await act(() => frames.tick());
    expect(renders).toHaveBeenCalledTimes(1);

    // The end comes after the tokens still waiting for a frame: they are shown with the error.
    await act(() => {
      f.fire("chat:token", { conversationId: 1, parentId: 2, seq: N + 50, text: "tail", drafted: false });
      f.fire("chat:error", { conversationId: 1, parentId: 2, error: "boom" });
    });
    expect(frames.waiting()).toBe(0);
    expect(renders.mock.calls.at(-1)?.[0]).toBe(`${text(N + 50)}tail`);
    expect(streaming().querySelector("p:last-of-type")?.textContent).toBe("tail");
    expect(root.querySelector("[data-testid=stream-error]")?.textContent).toBe("boom");
  }, 60_000);

  it("shows the storage error with its path", async () => {
    const f = fakeBridge({
      "System.Info": () => ({ ...info, storageError: "storage: open database /d/anechat.db: database file is corrupt (move it aside)" }),
      "Chat.ListConversations": () => { throw new Error("storage: corrupt"); },
    });
    await mount(f.bridge);
    await flush();
    expect(root.querySelector("[data-testid=storage-error]")?.textContent).toContain("/d/anechat.db");
    expect(root.querySelector<HTMLButtonElement>("[data-testid=new-chat]")?.disabled).toBe(true);
  });
});

describe("wailsBridge", () => {
  it("calls window.go.app.Service.Method and turns Go error strings into Errors", async () => {
    const w = {
      go: { app: { Chat: {
        Thread: async (id: unknown) => ({ id }),
        Send: async () => { throw "chat: the message is empty"; },
      } } },
    };
    const b = wailsBridge(w as never);
    await expect(b.call("Chat", "Thread", 7)).resolves.toEqual({ id: 7 });
    await expect(b.call("Chat", "Send")).rejects.toThrow("chat: the message is empty");
    await expect(b.call("Chat", "Nope")).rejects.toBeInstanceOf(NoBackendError);
    expect(() => b.on("x", () => {})).toThrow(NoBackendError);
  });
});
