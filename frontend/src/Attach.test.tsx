import { act } from "preact/test-utils";
import { afterEach, describe, expect, it } from "vitest";
import { click, flush, mountApp, root, settleThroughTimers, unmount } from "./testing/dom";
import { fakeBridge } from "./testing/fake";
import type { Attachment, Conversation, Thread } from "./types";

// Documents in a chat: a file attached to the next message is read and sized
// by the Go side (Chat.AttachDocument), its token count shows before
// sending, a refusal is the page's notice, and the message sent carries the
// document's block before the question.

const conv: Conversation = {
  id: 1,
  title: "C1",
  titleSource: "user",
  modelId: 0,
  promptId: 0,
  systemPrompt: "",
  activeLeafId: 0,
  pinned: false,
  draft: "",
  createdAt: "",
  updatedAt: "",
};
const thread: Thread = {
  conversation: conv,
  messages: [],
  path: [],
  generating: 0,
  model: null,
  settings: { temperature: 0, maxTokens: 10, speculationWidth: 4 },
};

function backend() {
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
    "Chat.ListConversations": () => [conv],
    "Chat.Thread": () => thread,
    "Chat.SetDraft": () => undefined,
    "Chat.AttachDocument": (_id, name, data) => {
      const text = atob(String(data));
      if (name === "huge.txt")
        throw new Error("huge.txt: 9000 tokens does not fit stories's 512-token context; attach an excerpt");
      return {
        name: String(name),
        block: "```" + String(name) + "\n" + text + "\n```\n",
        tokens: 3912,
        contextTokens: 8192,
      } satisfies Attachment;
    },
    "Chat.Send": (id, text) => ({
      conversationId: id,
      user: { id: 7, conversationId: id, parentId: 0, role: "user", content: text },
    }),
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
  return f;
}

// FileReader finishes on a later task: wait on timers, not only microtasks.
settleThroughTimers(); // FileReader reports through timers in jsdom
afterEach(unmount);
async function mount(f: ReturnType<typeof fakeBridge>) {
  await mountApp(f.bridge);
  const b = [...root.querySelectorAll<HTMLButtonElement>("[data-testid=conversations] button")].find((x) =>
    x.textContent?.includes("C1"),
  );
  await click(b);
}
const q = (id: string) => root.querySelector<HTMLElement>(`[data-testid=${id}]`);
async function pick(files: File[]) {
  const input = root.querySelector<HTMLInputElement>("[data-testid=attach-input]")!;
  Object.defineProperty(input, "files", { value: files, configurable: true });
  await act(() => {
    input.dispatchEvent(new Event("change", { bubbles: true }));
  });
  await flush();
}

describe("attachments", () => {
  it("shows a picked file's size in tokens and sends it before the question", async () => {
    const f = backend();
    await mount(f);
    await pick([new File(["Lily went to the park."], "story.md", { type: "text/markdown" })]);
    expect(f.args["Chat.AttachDocument"]).toEqual([[1, "story.md", btoa("Lily went to the park.")]]);
    expect(q("attachment")!.textContent).toContain("story.md");
    expect(q("attachment-tokens")!.textContent).toBe("3,912 tokens");
    expect(q("attachments-total")!.textContent).toBe("3,912 of 8,192 context tokens");
    const box = q("composer") as HTMLTextAreaElement;
    await act(() => {
      box.value = "Who went to the park?";
      box.dispatchEvent(new Event("input", { bubbles: true }));
    });
    await act(() => {
      q("send")!.click();
    });
    await flush();
    expect(f.args["Chat.Send"]).toEqual([[1, "```story.md\nLily went to the park.\n```\n\nWho went to the park?"]]);
    expect(q("attachments")).toBeNull(); // sent: the next message starts bare
  });

  it("attaches a dropped file and a document alone can be sent", async () => {
    const f = backend();
    await mount(f);
    const drop = new Event("drop", { bubbles: true, cancelable: true });
    Object.defineProperty(drop, "dataTransfer", { value: { files: [new File(["x = 1"], "a.py")], types: ["Files"] } });
    await act(() => {
      q("composer-form")!.dispatchEvent(drop);
    });
    await flush();
    expect(drop.defaultPrevented).toBe(true);
    expect(q("attachment")!.textContent).toContain("a.py");
    expect((q("send") as HTMLButtonElement).disabled).toBe(false);
    await act(() => {
      q("send")!.click();
    });
    await flush();
    expect(f.args["Chat.Send"]).toEqual([[1, "```a.py\nx = 1\n```\n"]]);
  });

  it("refuses to send documents that fit alone but not together", async () => {
    const f = backend();
    await mount(f);
    await pick([new File(["a"], "a.md"), new File(["b"], "b.md"), new File(["c"], "c.md")]);
    expect(root.querySelectorAll("[data-testid=attachment]")).toHaveLength(3);
    expect(q("attachments-total")!.textContent).toBe(
      "11,736 of 8,192 context tokens: together they do not fit; remove one",
    );
    expect((q("send") as HTMLButtonElement).disabled).toBe(true);
    await act(() => {
      root.querySelector<HTMLButtonElement>("[aria-label='Remove c.md']")!.click();
    });
    expect(q("attachments-total")!.textContent).toBe("7,824 of 8,192 context tokens");
    expect((q("send") as HTMLButtonElement).disabled).toBe(false);
  });

  it("says why a document past the context is refused and attaches nothing", async () => {
    const f = backend();
    await mount(f);
    await pick([new File(["a lot"], "huge.txt")]);
    expect(q("notice")!.textContent).toContain("huge.txt: 9000 tokens does not fit");
    expect(q("attachments")).toBeNull();
    expect((q("send") as HTMLButtonElement).disabled).toBe(true);
  });
});
