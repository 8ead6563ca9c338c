import { act } from "preact/test-utils";
import { afterEach, describe, expect, it, vi } from "vitest";
import { NoBackendError, wailsBridge, type Bridge } from "./bridge";
import { renderBlocks } from "./markdown";
import { click, flush, key, mountApp, q, root, testid, type, unmount } from "./testing/dom";
import { fakeBridge, manualFrames } from "./testing/fake";
import type { Model, Preferences, Theme, Thread } from "./types";

// renderBlocks, counted: the streaming test checks how often it runs.
vi.mock("./markdown", async (importOriginal) => {
  const m = await importOriginal<typeof import("./markdown")>();
  return { ...m, renderBlocks: vi.fn(m.renderBlocks) };
});

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
const conv = {
  id: 1,
  title: "Evil",
  modelId: 0,
  promptId: 0,
  systemPrompt: "",
  activeLeafId: 2,
  titleSource: "" as const,
  pinned: false,
  draft: "",
  createdAt: "",
  updatedAt: "",
};
const thread: Thread = {
  conversation: conv,
  messages: [
    { id: 1, conversationId: 1, parentId: 0, role: "user", content: "<b>hi</b>", createdAt: "" },
    {
      id: 2,
      conversationId: 1,
      parentId: 1,
      role: "assistant",
      content: 'ok <script>window.pwned=1</script><img src=x onerror="window.pwned=2"> **bold**',
      createdAt: "",
    },
  ],
  path: [1, 2],
  generating: 0,
  model: null,
  settings: { temperature: 0, maxTokens: 10, speculationWidth: 4 },
};
const prefs: Preferences = {
  speculationWidth: 4,
  kvQuotaBytes: 2 * 1024 ** 3,
  defaultModelId: 0,
  maxTokens: 10,
  temperature: 0,
  highlightDrafted: true,
  defaultSystemPrompt: "",
  theme: "system",
  modelTitles: false,
};
const model: Model = {
  id: 5,
  path: "/m/SmolLM2-135M-Instruct.gguf",
  kind: "gguf",
  name: "SmolLM2-135M-Instruct",
  fingerprint: "f",
  sizeBytes: 1 << 20,
  meta: { arch: "llama", quant: "Q8_0", contextLen: 8192, backend: "cpu", declaredName: "Smollm2 135M 8k" },
  addedAt: "",
  lastUsedAt: "",
};

// What every window asks first.
const basics = {
  "System.Info": () => info,
  "Chat.ListConversations": () => [conv],
  "Chat.Thread": () => thread,
  "Settings.Get": () => prefs,
  "Models.List": () => ({ models: [model], defaultId: 5, modelsDir: "/d/models" }),
  "Downloads.List": () => [],
};

afterEach(() => {
  unmount();
  delete document.documentElement.dataset["theme"];
});

let frames = manualFrames();
async function mount(bridge: Bridge, theme: Theme = "system") {
  frames = await mountApp(bridge, theme);
}

const openConversation = () => click(q(".conv"));

describe("App", () => {
  it("shows backend info, opens a conversation and renders its reply sanitized", async () => {
    const f = fakeBridge(basics);
    await mount(f.bridge);
    expect(testid("status")?.textContent).toContain("anechat 1.0 · linux/amd64 · /d · schema v1");
    const item = [...root.querySelectorAll<HTMLButtonElement>(".conv")].find((b) => b.textContent === "Evil");
    await click(item);
    const assistant = testid("msg-assistant")!;
    expect(assistant.querySelector("strong")?.textContent).toBe("bold");
    expect(assistant.innerHTML).not.toMatch(/<script|onerror/i);
    expect((window as unknown as { pwned?: number }).pwned).toBeUndefined();
    // The user's own text is shown as text, not HTML.
    expect(q("[data-testid=msg-user] .plain")?.textContent).toBe("<b>hi</b>");
  });

  it("streams tokens of the open conversation and reloads when done", async () => {
    const f = fakeBridge(basics);
    await mount(f.bridge);
    await openConversation();
    await act(() => {
      f.fire("chat:progress", { conversationId: 1, parentId: 2, done: 64, total: 200 });
    });
    expect(testid("progress")?.textContent).toContain("Reading the prompt: 64/200 tokens (32%)");
    expect(testid("stop")).not.toBeNull(); // Stop cancels the prefill too
    await act(() => {
      f.fire("chat:token", {
        conversationId: 1,
        parentId: 2,
        seq: 1,
        text: "lo *you*",
        drafted: false,
        tokens: 0,
        accepted: 0,
        calls: 0,
      });
      f.fire("chat:token", {
        conversationId: 1,
        parentId: 2,
        seq: 0,
        text: "Hel",
        drafted: false,
        tokens: 0,
        accepted: 0,
        calls: 0,
      });
    });
    await act(() => {
      frames.tick();
    });
    const streaming = testid("streaming")!;
    expect(streaming.textContent?.trim()).toBe("Hello you");
    expect(testid("progress")).toBeNull(); // text arrived: no progress bar
    expect(streaming.querySelector("em")?.textContent).toBe("you");
    const before = f.calls.filter((c) => c === "Chat.Thread").length;
    await act(() => {
      f.fire("chat:done", { conversationId: 1, parentId: 2, message: null, stats: {} });
    });
    await flush();
    expect(testid("streaming")).toBeNull();
    expect(f.calls.filter((c) => c === "Chat.Thread").length).toBe(before + 1);
  });

  it("shades drafted text of stored and streamed replies, shows τ and the legend, unless the setting is off", async () => {
    const stats = {
      tokens: 6,
      prefillTokens: 3,
      resumedTokens: 0,
      targetCalls: 3,
      drafted: 4,
      accepted: 3,
      ttftMs: 5,
      decodeTokS: 20,
      width: 4,
      stopped: "stop",
      draftedSpans: [[4, 9]] as [number, number][],
    };
    const drafted: Thread = {
      conversation: conv,
      messages: [
        { id: 1, conversationId: 1, parentId: 0, role: "user", content: "copy", createdAt: "" },
        { id: 2, conversationId: 1, parentId: 1, role: "assistant", content: "The quick fox", stats, createdAt: "" },
      ],
      path: [1, 2],
      generating: 0,
      model: null,
      settings: { temperature: 0, maxTokens: 10, speculationWidth: 4 },
    };
    for (const highlightDrafted of [true, false]) {
      const f = fakeBridge({
        ...basics,
        "Chat.Thread": () => drafted,
        "Settings.Get": () => ({ ...prefs, highlightDrafted }),
      });
      await mount(f.bridge);
      await openConversation();
      const assistant = testid("msg-assistant")!;
      const marks = [...assistant.querySelectorAll("mark.drafted")].map((m) => m.textContent);
      expect(marks).toEqual(highlightDrafted ? ["quick"] : []);
      expect(assistant.querySelector(".markdown")?.textContent?.trim()).toBe("The quick fox");
      expect(testid("msg-stats")?.textContent).toBe(
        "6 tokens · τ 2.00 · drafted 4 · accepted 3 · 20.0 tok/s · first token 5 ms · width 4",
      );
      expect(testid("legend") !== null).toBe(highlightDrafted);
      await act(() => {
        f.fire("chat:token", {
          conversationId: 1,
          parentId: 2,
          seq: 0,
          text: "Hel",
          drafted: false,
          tokens: 0,
          accepted: 0,
          calls: 0,
        });
        f.fire("chat:token", {
          conversationId: 1,
          parentId: 2,
          seq: 1,
          text: "lo",
          drafted: true,
          tokens: 0,
          accepted: 0,
          calls: 0,
        });
        f.fire("chat:token", {
          conversationId: 1,
          parentId: 2,
          seq: 2,
          text: " w",
          drafted: true,
          tokens: 0,
          accepted: 0,
          calls: 0,
        });
        f.fire("chat:token", {
          conversationId: 1,
          parentId: 2,
          seq: 3,
          text: "orld",
          drafted: false,
          tokens: 0,
          accepted: 0,
          calls: 0,
        });
      });
      await act(() => {
        frames.tick();
      });
      const streamed = [...root.querySelectorAll("[data-testid=streaming] mark.drafted")].map((m) => m.textContent);
      expect(streamed).toEqual(highlightDrafted ? ["lo w"] : []);
      // The reply in progress: 4 tokens in 2 calls, half of them drafted.
      expect(testid("live-tau")?.textContent).toBe("τ 2.00");
      expect(testid("live-share")?.textContent).toBe("50%");
      // "drafted" is the drafts proposed (the stats line's "drafted 4"); the
      // share is of tokens that came from accepted ones.
      expect(testid("live-stats")?.textContent).toContain("came from accepted drafts");
      unmount();
    }
  });

  it("renders a streamed reply once per animation frame, and puts only the blocks that changed into the DOM", async () => {
    const f = fakeBridge(basics);
    await mount(f.bridge);
    await openConversation();
    const renders = vi.mocked(renderBlocks);
    const piece = (i: number) => (i % 10 === 9 ? `w${i}\n\n` : `w${i} `);
    // Each token is its own task, as the Wails events are: no batching by act.
    const fire = async (from: number, to: number) => {
      for (let i = from; i < to; i++)
        await act(() => {
          f.fire("chat:token", {
            conversationId: 1,
            parentId: 2,
            seq: i,
            text: piece(i),
            drafted: i % 4 === 0,
            tokens: 0,
            accepted: 0,
            calls: 0,
          });
        });
    };
    const text = (n: number) => Array.from({ length: n }, (_, i) => piece(i)).join("");
    const N = 400;

    renders.mockClear();
    await fire(0, N);
    // Nothing is rendered before the frame...
    expect(renders).not.toHaveBeenCalled();
    expect(testid("streaming")).toBeNull();
    // ...and the frame renders the reply once, whole.
    await act(() => {
      frames.tick();
    });
    expect(renders.mock.calls.map((c) => c[0])).toEqual([text(N)]);
    const streaming = () => testid("streaming")!;
    expect(streaming().querySelectorAll("p")).toHaveLength(N / 10);
    expect(streaming().querySelectorAll("mark.drafted")).toHaveLength(N / 4);

    // The next frame's tokens: one more render, and the paragraphs that were
    // complete are the same DOM, untouched.
    const first = streaming().querySelector(".md-block")!;
    const changes: MutationRecord[] = [];
    const watch = new MutationObserver((rs) => changes.push(...rs));
    watch.observe(first, { subtree: true, childList: true, characterData: true, attributes: true });
    renders.mockClear();
    await fire(N, N + 50);
    await act(() => {
      frames.tick();
    });
    expect(renders).toHaveBeenCalledTimes(1);
    expect(renders.mock.calls[0]?.[0]).toBe(text(N + 50));
    expect(streaming().querySelector(".md-block")).toBe(first);
    expect(streaming().querySelectorAll("p")).toHaveLength((N + 50) / 10);
    changes.push(...watch.takeRecords());
    watch.disconnect();
    expect(changes).toEqual([]);
    // A frame without tokens renders nothing.
    await act(() => {
      frames.tick();
    });
    expect(renders).toHaveBeenCalledTimes(1);

    // The end comes after the tokens still waiting for a frame: they are shown with the error.
    await act(() => {
      f.fire("chat:token", {
        conversationId: 1,
        parentId: 2,
        seq: N + 50,
        text: "tail",
        drafted: false,
        tokens: 0,
        accepted: 0,
        calls: 0,
      });
      f.fire("chat:error", { conversationId: 1, parentId: 2, error: "boom" });
    });
    expect(frames.waiting()).toBe(0);
    expect(renders.mock.calls.at(-1)?.[0]).toBe(`${text(N + 50)}tail`);
    expect([...streaming().querySelectorAll("p")].at(-1)?.textContent).toBe("tail");
    expect(testid("stream-error")?.textContent).toBe("boom");
  }, 60_000);

  it("shows the storage error with its path", async () => {
    const f = fakeBridge({
      ...basics,
      "System.Info": () => ({
        ...info,
        storageError: "storage: open database /d/anechat.db: database file is corrupt (move it aside)",
      }),
      "Chat.ListConversations": () => {
        throw new Error("storage: corrupt");
      },
    });
    await mount(f.bridge);
    expect(testid("storage-error")?.textContent).toContain("/d/anechat.db");
    expect(testid<HTMLButtonElement>("new-chat")?.disabled).toBe(true);
  });
});

describe("the one notice", () => {
  it("shows a refusal once, and a later success in the same place clears it (Reset to defaults)", async () => {
    const f = fakeBridge({
      ...basics,
      "Settings.Update": () => {
        throw "settings: temperature 5: want 0 to 2";
      },
      "Settings.Reset": () => prefs,
    });
    await mount(f.bridge);
    await click(testid("nav-settings"));
    await type(testid("temperature"), "5");
    await click(testid("save-settings"));
    expect(root.querySelectorAll("[data-testid=notice]")).toHaveLength(1);
    expect(testid("notice")?.dataset["kind"]).toBe("error");
    expect(testid("notice")?.getAttribute("role")).toBe("alert");
    expect(testid("notice")?.textContent).toContain("temperature 5");
    await click(testid("reset-settings"));
    expect(testid("notice")).toBeNull();
    expect(testid<HTMLInputElement>("temperature")?.value).toBe("0");
  });

  it("tells a prompt too short to prepare as a fact (Prepare's outcome), and a failure as an error whatever its text", async () => {
    const p = {
      id: 3,
      title: "Hi",
      systemPrompt: "",
      body: "hi",
      tags: [],
      pinnedSnapshotId: 0,
      createdAt: "",
      updatedAt: "",
      variables: [],
      snapshot: null,
    };
    let fail = false;
    const f = fakeBridge({
      ...basics,
      "Library.List": () => [p],
      "Library.Tags": () => [],
      "Library.Prepare": () => {
        if (fail) throw "library: prepare prompt 3: too short to prepare: disk is full";
        return {
          prompt: p,
          outcome: {
            kind: "too_short",
            message: "this prompt is too short to need preparing; it starts quickly anyway",
          },
        };
      },
    });
    await mount(f.bridge);
    await click(testid("nav-library"));
    await click(testid("prompt-prepare"));
    expect(testid("notice")?.dataset["kind"]).toBe("info");
    expect(testid("notice")?.getAttribute("role")).toBe("status");
    expect(testid("notice")?.textContent).toContain("too short to need preparing");
    // The outcome's kind decides, never an error's text: this failure is an error.
    fail = true;
    await click(testid("prompt-prepare"));
    expect(testid("notice")?.dataset["kind"]).toBe("error");
    expect(testid("notice")?.getAttribute("role")).toBe("alert");
    expect(testid("notice")?.textContent).toContain("disk is full");
    // No tooltip: what Prepare does is said in the page, beside the button.
    expect(testid("prompt-prepare")?.hasAttribute("title")).toBe(false);
    const help = testid("prompt-prepare")?.getAttribute("aria-describedby") ?? "";
    expect(root.querySelector(`[id="${help}"]`)?.textContent).toContain("keeps its KV cache");
  });
});

describe("chat actions", () => {
  it("copies a message and a code block, highlighted, and opens links in the system browser", async () => {
    const code = 'const x = "hi"; // note';
    const withCode: Thread = {
      ...thread,
      messages: [
        thread.messages[0]!,
        {
          ...thread.messages[1]!,
          content: `See [the docs](https://example.com/docs) and [top](#top).\n\n\`\`\`js\n${code}\n\`\`\`\n`,
        },
      ],
    };
    const f = fakeBridge({ ...basics, "Chat.Thread": () => withCode });
    await mount(f.bridge);
    await openConversation();
    const assistant = testid("msg-assistant")!;
    await click(assistant.querySelector("[data-testid=copy-message]"));
    expect(f.copied).toEqual([withCode.messages[1]!.content]);
    expect(assistant.querySelector("[data-testid=copy-message]")?.textContent).toBe("Copied");

    const block = assistant.querySelector("[data-testid=code-block]")!;
    expect(block.querySelector("code")?.textContent).toBe(code);
    expect(block.querySelector(".tok-keyword")?.textContent).toBe("const");
    expect(block.querySelector(".tok-string")?.textContent).toBe('"hi"');
    expect(block.querySelector(".tok-comment")?.textContent).toBe("// note");
    await click(block.querySelector("[data-testid=copy-code]"));
    expect(f.copied.at(-1)).toBe(code);

    const link = assistant.querySelector<HTMLAnchorElement>('a[href^="https:"]')!;
    const ev = new MouseEvent("click", { bubbles: true, cancelable: true });
    await act(() => {
      link.dispatchEvent(ev);
    });
    expect(ev.defaultPrevented).toBe(true);
    expect(f.opened).toEqual(["https://example.com/docs"]);
    // A fragment stays in the page; the window never navigates away.
    const frag = new MouseEvent("click", { bubbles: true, cancelable: true });
    await act(() => {
      assistant.querySelector<HTMLAnchorElement>('a[href="#top"]')!.dispatchEvent(frag);
    });
    expect(f.opened).toHaveLength(1);
  });

  it("shows the model that answers and remembers another one for the conversation", async () => {
    const other = { ...model, id: 6, name: "gemma-4-e2b", meta: { arch: "gemma4" } };
    const f = fakeBridge({
      ...basics,
      "Models.List": () => ({ models: [model, other], defaultId: 5, modelsDir: "/d/models" }),
      "Chat.SetModel": (id, m) => ({ ...conv, id, modelId: m }),
    });
    await mount(f.bridge);
    await openConversation();
    const picker = testid<HTMLSelectElement>("model-picker")!;
    expect(picker.selectedOptions[0]?.textContent).toBe("Default: SmolLM2-135M-Instruct");
    await act(() => {
      picker.value = "6";
      picker.dispatchEvent(new Event("change", { bubbles: true }));
    });
    await flush();
    expect(f.args["Chat.SetModel"]).toEqual([[1, 6]]);
    expect(testid<HTMLSelectElement>("model-picker")?.selectedOptions[0]?.textContent).toBe("gemma-4-e2b");
  });

  it("lists a regenerated reply's copies as one hit, and opens it in its branch", async () => {
    const hit = (messageId: number) => ({
      messageId,
      conversationId: 1,
      parentId: 1,
      role: "assistant",
      createdAt: "",
      conversationTitle: "Evil",
      snippet: "a fox",
      segments: [
        { text: "a ", match: false },
        { text: "fox", match: true },
      ],
      onActiveBranch: true,
      alternative: 1,
      alternatives: 1,
      duplicates: 0,
    });
    const f = fakeBridge({
      ...basics,
      "Chat.Search": () => [hit(2), hit(7), { ...hit(9), segments: [{ text: "other fox", match: true }] }],
      "Chat.SelectBranch": () => thread,
    });
    await mount(f.bridge);
    vi.useFakeTimers();
    try {
      await type(testid("search"), "fox");
      await act(() => {
        vi.advanceTimersByTime(200);
      });
    } finally {
      vi.useRealTimers();
    }
    await flush();
    const hits = [...root.querySelectorAll("[data-testid=hits] button")];
    expect(hits).toHaveLength(2);
    await click(hits[0]);
    expect(f.args["Chat.SelectBranch"]).toEqual([[2]]);
    expect(document.activeElement?.getAttribute("data-message-id")).toBe("2");
    expect(testid("hits")).toBeNull();
  });
});

describe("keyboard and appearance", () => {
  it("has shortcuts for a new chat, search, the composer, stop and the help that lists them", async () => {
    const created = { ...conv, id: 8, title: "New chat" };
    const f = fakeBridge({
      ...basics,
      "Chat.CreateConversation": () => created,
      "Chat.Thread": (id) => (id === 8 ? { ...thread, conversation: created, messages: [], path: [] } : thread),
      "Chat.Cancel": () => true,
    });
    await mount(f.bridge);
    await key({ key: "k", ctrlKey: true });
    expect(document.activeElement).toBe(testid("search"));
    await key({ key: "n", ctrlKey: true }, document.activeElement!);
    expect(f.calls).toContain("Chat.CreateConversation");
    expect(testid("chat-title")?.textContent).toBe("New chat");
    await key({ key: "l", ctrlKey: true });
    expect(document.activeElement).toBe(testid("composer"));
    // Esc stops the reply in progress.
    await act(() => {
      f.fire("chat:token", {
        conversationId: 8,
        parentId: 1,
        seq: 0,
        text: "x",
        drafted: false,
        tokens: 0,
        accepted: 0,
        calls: 0,
      });
      frames.tick();
    });
    await key({ key: "Escape" }, document.activeElement!);
    expect(f.args["Chat.Cancel"]).toEqual([[8]]);
    // The help lists every shortcut; Esc closes it and focus goes back.
    await key({ key: "/", ctrlKey: true });
    const help = testid("help")!;
    expect(help.querySelector("[role=dialog]")?.getAttribute("aria-modal")).toBe("true");
    const rows = [...help.querySelectorAll("tr")].map((r) => r.textContent);
    for (const what of ["New chat", "Search messages", "Focus the message box", "Stop the reply"])
      expect(rows.some((r) => r?.includes(what))).toBe(true);
    expect(rows.some((r) => r?.includes("Ctrl + N"))).toBe(true);
    expect(document.activeElement).toBe(testid("help-close"));
    await key({ key: "Escape" }, document.activeElement!);
    expect(testid("help")).toBeNull();
    expect(document.activeElement).toBe(testid("composer"));
  });

  it("follows the system's colour scheme until one is chosen, and stores the choice in the settings", async () => {
    let stored: Preferences = { ...prefs };
    const f = fakeBridge({
      ...basics,
      "Settings.Get": () => stored,
      "Settings.Update": (p) => (stored = p as Preferences),
    });
    await mount(f.bridge);
    expect(document.documentElement.dataset["theme"]).toBeUndefined();
    const radio = (t: string) => q<HTMLInputElement>(`[data-testid=theme] input[value=${t}]`)!;
    expect(radio("system").checked).toBe(true);
    await click(radio("dark"));
    expect(document.documentElement.dataset["theme"]).toBe("dark");
    expect(f.args["Settings.Update"]).toEqual([[{ ...prefs, theme: "dark" }]]);
    // Saving the Settings page keeps it (the sidebar's switch owns the theme).
    await click(testid("nav-settings"));
    await click(testid("save-settings"));
    expect(stored.theme).toBe("dark");
    unmount();
    delete document.documentElement.dataset["theme"];
    // The next window: theme.js drew it dark before the code ran (the page
    // starts with that theme), and the settings agree.
    let answer: (p: Preferences) => void = () => undefined;
    await mount(
      fakeBridge({
        ...basics,
        "Settings.Get": () =>
          new Promise<Preferences>((r) => {
            answer = r;
          }),
      }).bridge,
      "dark",
    );
    expect(document.documentElement.dataset["theme"]).toBe("dark");
    expect(radio("dark").checked).toBe(true);
    await act(() => {
      answer({ ...prefs, theme: "light" }); // changed elsewhere (another window)
    });
    await flush();
    expect(document.documentElement.dataset["theme"]).toBe("light");
  });
});

describe("first run", () => {
  it("names the default model and starts a chat from an example prompt", async () => {
    const created = { ...conv, id: 8, title: "New chat" };
    let listed: (typeof created)[] = [];
    const f = fakeBridge({
      ...basics,
      // The stored title stays "New chat": the rename is the window's.
      "Chat.ListConversations": () => listed,
      "Chat.CreateConversation": () => {
        listed = [created];
        return created;
      },
      "Chat.Thread": () => ({ ...thread, conversation: created, messages: [], path: [] }),
      "Chat.Send": (_id, text) => ({ conversationId: 8, user: { ...thread.messages[0]!, content: text } }),
      "Chat.RenameConversation": (id, title) => ({ ...created, id, title }),
    });
    await mount(f.bridge);
    expect(testid("welcome-model")?.textContent).toContain("SmolLM2-135M-Instruct");
    const examples = [...root.querySelectorAll("[data-testid=examples] button")];
    expect(examples).toHaveLength(3);
    await click(examples[1]);
    expect(f.args["Chat.Send"]?.[0]).toEqual([8, examples[1]!.textContent]);
    // The first message titles the conversation at once.
    expect(f.args["Chat.RenameConversation"]).toEqual([[8, examples[1]!.textContent]]);
    expect(testid("chat-title")?.textContent).toBe(examples[1]!.textContent);
    // The sidebar too, though the list it asked for after sending predates the title.
    expect(q(".conv.active")?.textContent).toBe(`● ${examples[1]!.textContent}`); // ●: replying
    expect(testid("notice")).toBeNull();
  });
});

describe("wailsBridge", () => {
  it("calls window.go.app.Service.Method and turns Go error strings into Errors", async () => {
    const w = {
      go: {
        app: {
          Chat: {
            Thread: async (id: unknown) => ({ id }),
            Send: async () => {
              throw "chat: the message is empty";
            },
          },
        },
      },
    };
    const b = wailsBridge(w as never);
    await expect(b.call("Chat", "Thread", 7)).resolves.toEqual({ id: 7 });
    await expect(b.call("Chat", "Send")).rejects.toThrow("chat: the message is empty");
    await expect(b.call("Chat", "Nope")).rejects.toBeInstanceOf(NoBackendError);
    expect(() => b.on("x", () => {})).toThrow(NoBackendError);
  });

  it("opens URLs and copies through the Wails runtime when the page's clipboard is not there", async () => {
    const opened: string[] = [];
    const copied: string[] = [];
    const runtime = {
      EventsOnMultiple: () => () => {},
      BrowserOpenURL: (u: string) => opened.push(u),
      ClipboardSetText: async (t: string) => {
        copied.push(t);
        return true;
      },
    };
    const b = wailsBridge({ runtime } as never);
    b.openURL("https://a.b/");
    await b.copyText("x");
    expect(opened).toEqual(["https://a.b/"]);
    expect(copied).toEqual(["x"]);
    const refused = wailsBridge({ runtime: { ...runtime, ClipboardSetText: async () => false } } as never);
    await expect(refused.copyText("y")).rejects.toThrow("clipboard");
  });
});
