// Conversations: the list in the sidebar, the one open and its thread, the
// search over messages, delete with Undo, titles the model is writing, and
// import and export. A reply's stream is streaming.ts's.
import { dedupeHits, fillVariables } from "../logic";
import type {
  Conversation,
  ConversationOptions,
  DeletedConversation,
  Prompt,
  SearchHit,
  Thread,
  TitleEvent,
} from "../types";
import type { Core } from "./core";

/** The conversations' part of the state. */
export interface ConversationsState {
  list: Conversation[];
  /** The open conversation, and its thread once loaded. */
  current: number | null;
  thread: Thread | null;
  /** Text waiting in the composer of the next conversation opened (from a prompt). */
  draft: string;
  /** The message to show and mark when its thread opens (a search hit). */
  focusMessage: number;
  /** The search box, and its hits (null: no search). */
  query: string;
  hits: SearchHit[] | null;
  /** The conversation just deleted, while Undo can bring it back. */
  undo: DeletedConversation | null;
  /** Conversations whose title the model is writing. */
  titling: Readonly<Record<number, boolean>>;
  /** The start page's import panel is open. */
  importing: boolean;
}

/** The conversations' part before anything is loaded. */
export function initialConversations(): ConversationsState {
  return {
    list: [],
    current: null,
    thread: null,
    draft: "",
    focusMessage: 0,
    query: "",
    hits: null,
    undo: null,
    titling: {},
    importing: false,
  };
}

/** The conversations' actions. */
export class Conversations {
  private searchTimer: ReturnType<typeof setTimeout> | undefined;
  private searchSeq = 0;
  private threadSeq = 0;
  private listSeq = 0;

  constructor(private readonly core: Core) {}

  private get s(): ConversationsState {
    return this.core.state.conversations;
  }

  private update(patch: Partial<ConversationsState> | ((c: ConversationsState) => Partial<ConversationsState>)) {
    this.core.update("conversations", patch);
  }

  /** Listens to chat:title: a title written by the model, or the first message's, lands in the sidebar at once. */
  listen(): (() => void)[] {
    return [
      this.core.api.events.onTitle((e) => {
        this.retitle(e);
      }),
    ];
  }

  private retitle(e: TitleEvent) {
    this.listSeq++; // a list fetched before it is stale
    this.update((s) => {
      const rename = (c: Conversation) =>
        c.id === e.conversationId ? { ...c, title: e.title, titleSource: e.source } : c;
      const titling: Record<number, boolean> = Object.fromEntries(
        Object.entries(s.titling).filter(([id]) => Number(id) !== e.conversationId),
      );
      if (e.pending) titling[e.conversationId] = true;
      return {
        titling,
        list: s.list.map(rename),
        thread: s.thread ? { ...s.thread, conversation: rename(s.thread.conversation) } : s.thread,
      };
    });
  }

  /** Stops the search waiting for the typing to pause. */
  stop() {
    clearTimeout(this.searchTimer);
  }

  /** Lists the conversations; a list asked for before a later change (a rename) is dropped. */
  async reloadList() {
    const n = ++this.listSeq;
    const cs = await this.core.attempt("app", () => this.core.api.chat.list(), true);
    if (cs && n === this.listSeq) this.update({ list: cs });
  }

  /** Opens conversation id on the chat page. */
  async open(id: number, focusMessage = 0) {
    this.core.set((s) => ({
      window: { ...s.window, page: "chat" },
      conversations: {
        ...s.conversations,
        current: id,
        focusMessage,
        thread: s.conversations.thread?.conversation.id === id ? s.conversations.thread : null,
      },
    }));
    await this.loadThread();
  }

  /** Shows the start page (no conversation open). */
  close() {
    this.core.set((s) => ({
      window: { ...s.window, page: "chat" },
      conversations: { ...s.conversations, current: null, thread: null },
    }));
  }

  /** Loads the open conversation's thread (the latest request wins). */
  async loadThread() {
    const id = this.s.current;
    if (id === null) return;
    const n = ++this.threadSeq;
    const t = await this.core.attempt("chat", () => this.core.api.chat.thread(id), true);
    if (t && n === this.threadSeq && this.s.current === id) this.update({ thread: t });
  }

  /** Starts a conversation (from a library prompt, whose body waits in the composer). */
  async create(from?: { promptId: number; body: string }) {
    const c = await this.core.attempt("chat", () => this.core.api.chat.create({ promptId: from?.promptId ?? 0 }));
    if (!c) return;
    await this.reloadList();
    this.update({ draft: from?.body ?? "" });
    await this.open(c.id);
  }

  /**
   * Starts a chat from prompt p, its {{name}} placeholders filled with
   * values: the body waits in the composer, the system prompt is the filled one.
   */
  async createFromPrompt(p: Prompt, values: Readonly<Record<string, string>> = {}) {
    await this.create({ promptId: p.id, body: fillVariables(p.body, values) });
    const system = fillVariables(p.systemPrompt, values);
    if (system !== p.systemPrompt && this.s.thread?.conversation.promptId === p.id) await this.setSystemPrompt(system);
  }

  /** Puts text in the composer of the open conversation. */
  setDraft(text: string) {
    this.update({ draft: text });
  }

  /** The composer took the draft. */
  draftUsed() {
    if (this.s.draft) this.update({ draft: "" });
  }

  /** Shows the branch through messageId. */
  async selectBranch(messageId: number) {
    const t = await this.core.attempt("chat", () => this.core.api.chat.selectBranch(messageId));
    if (t && t.conversation.id === this.s.current) this.update({ thread: t });
  }

  private async change(f: (id: number) => Promise<Conversation>) {
    const id = this.s.current;
    if (id === null) return false;
    const c = await this.core.attempt("chat", () => f(id));
    if (!c) return false;
    this.listSeq++; // a list fetched before this change is stale
    this.update((s) => ({
      list: s.list.map((x) => (x.id === c.id ? c : x)),
      thread: s.thread?.conversation.id === c.id ? { ...s.thread, conversation: c } : s.thread,
    }));
    return true;
  }

  rename(title: string) {
    return this.change((id) => this.core.api.chat.rename(id, title));
  }

  setSystemPrompt(system: string) {
    return this.change((id) => this.core.api.chat.setSystemPrompt(id, system));
  }

  /** Makes the open conversation answer with model modelId (0: the default). */
  setModel(modelId: number) {
    return this.change((id) => this.core.api.chat.setModel(id, modelId));
  }

  /** Sets the open conversation's own generation settings (a field left out follows the Settings page). */
  async setOptions(o: ConversationOptions) {
    const ok = await this.change((id) => this.core.api.chat.setOptions(id, o));
    if (ok) await this.loadThread(); // Thread.settings: what the next reply runs with
    return ok;
  }

  /** Pins the open conversation to the top of the list, or unpins it. */
  async setPinned(pinned: boolean) {
    const ok = await this.change((id) => this.core.api.chat.setPinned(id, pinned));
    if (ok) await this.reloadList(); // pinned ones come first
    return ok;
  }

  /** Deletes the open conversation; Undo brings it back until its undoUntil. */
  async remove() {
    const id = this.s.current;
    if (id === null) return;
    const gone = await this.core.attempt("chat", () => this.core.api.chat.remove(id));
    if (!gone) return;
    this.close();
    this.update({ undo: gone });
    await this.reloadList();
  }

  /** Brings the conversation just deleted back, and opens it. */
  async undoRemove() {
    const gone = this.s.undo;
    if (!gone) return;
    const c = await this.core.attempt("app", () => this.core.api.chat.undoDelete(gone.conversationId));
    this.update({ undo: null });
    if (!c) return;
    await this.reloadList();
    await this.open(c.id);
  }

  /** Forgets the undo offer (its time is up, or the user closed it). */
  dropUndo() {
    if (this.s.undo) this.update({ undo: null });
  }

  /** Stops the model writing conversation id's title. */
  cancelTitle(id: number) {
    return this.core.attempt("chat", () => this.core.api.chat.cancelTitle(id));
  }

  /** The open conversation as a file: Markdown (the branch on screen) or JSON (every branch). */
  exportAs(format: "markdown" | "json") {
    const id = this.s.current;
    if (id === null) return Promise.resolve(undefined);
    return this.core.attempt("chat", () => this.core.api.chat.exportAs(id, format), true);
  }

  /**
   * Adds a conversation from an exported JSON file and opens it; false if
   * refused. What of the file was left out (drafted highlighting that did
   * not fit its message) becomes the notice.
   */
  async importJSON(text: string): Promise<boolean> {
    const r = await this.core.attempt("chat", () => this.core.api.chat.importJSON(text));
    if (!r) return false;
    this.update({ importing: false });
    await this.reloadList();
    await this.open(r.conversation.id);
    if (r.warnings.length > 0) {
      this.core.tell({ kind: "info", text: `Imported, but: ${r.warnings.join("; ")}.`, scope: "chat" });
    }
    return true;
  }

  /** Opens or closes the start page's import panel. */
  setImporting(importing: boolean) {
    if (!importing) {
      this.update({ importing });
      return;
    }
    this.core.set((s) => ({
      window: { ...s.window, page: "chat" },
      conversations: { ...s.conversations, importing, current: null, thread: null },
    }));
  }

  /** Searches messages for q, 150 ms after the last keystroke. */
  search(q: string) {
    this.update({ query: q });
    clearTimeout(this.searchTimer);
    const n = ++this.searchSeq;
    if (!q.trim()) {
      this.update({ hits: null });
      return;
    }
    this.searchTimer = setTimeout(() => {
      void this.core
        .attempt("app", () => this.core.api.chat.search(q), true)
        .then((hits) => {
          if (hits && n === this.searchSeq) this.update({ hits: dedupeHits(hits) });
        });
    }, 150);
  }

  /** Opens a hit's message in its branch. */
  async openHit(h: SearchHit) {
    await this.core.attempt("chat", () => this.core.api.chat.selectBranch(h.messageId));
    this.update({ query: "", hits: null });
    await this.open(h.conversationId, h.messageId);
  }
}
