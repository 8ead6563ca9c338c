// Conversations: the list in the sidebar, the one open and its thread, the
// search over messages, delete with Undo, titles the model is writing, and
// import and export. A reply's stream is streaming.ts's.
import { dedupeHits, streamStarted } from "../logic";
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
  /** The library prompt whose chat is being started (Start chat), 0 if none. */
  starting: number;
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
    starting: 0,
    focusMessage: 0,
    query: "",
    hits: null,
    undo: null,
    titling: {},
    importing: false,
  };
}

/** How long typing pauses before the composer's draft is stored (Chat.SetDraft). */
export const DRAFT_SAVE_MS = 400;

/** The conversations' actions. */
export class Conversations {
  /**
   * Drafts typed and not stored yet, by conversation: the text, the timer
   * that stores it, and whether its Chat.SetDraft is queued. An entry stays
   * until its call returns, so a list or thread read meanwhile shows it.
   */
  private readonly unsaved = new Map<number, { text: string; timer: ReturnType<typeof setTimeout>; queued: boolean }>();
  /** Each conversation's Chat.SetDraft calls, one after another (two in flight could land out of order). */
  private readonly saving = new Map<number, Promise<void>>();
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

  /**
   * Listens to chat:title: a title written by the model, or the first
   * message's, lands in the sidebar at once; and stores the drafts still
   * waiting when the page goes (a reload).
   */
  listen(): (() => void)[] {
    const leaving = () => void this.saveDrafts();
    if (typeof window !== "undefined") window.addEventListener("pagehide", leaving);
    return [
      this.core.api.events.onTitle((e) => {
        this.retitle(e);
      }),
      () => {
        if (typeof window !== "undefined") window.removeEventListener("pagehide", leaving);
      },
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

  /** Stops the search waiting for the typing to pause, and stores the drafts still waiting. */
  stop() {
    clearTimeout(this.searchTimer);
    void this.saveDrafts();
  }

  /** c with the draft typed in it and not stored yet (a list or thread read meanwhile holds the stored one). */
  private withUnsaved(c: Conversation): Conversation {
    const u = this.unsaved.get(c.id);
    return u && u.text !== c.draft ? { ...c, draft: u.text } : c;
  }

  /** Lists the conversations; a list asked for before a later change (a rename) is dropped. */
  async reloadList() {
    const n = ++this.listSeq;
    const cs = await this.core.attempt("app", () => this.core.api.chat.list(), true);
    if (cs && n === this.listSeq) this.update({ list: cs.map((c) => this.withUnsaved(c)) });
  }

  /** Opens conversation id on the chat page (the drafts typed elsewhere are stored first). */
  async open(id: number, focusMessage = 0) {
    void this.saveDrafts();
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
    void this.saveDrafts();
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
    if (t && n === this.threadSeq && this.s.current === id) {
      this.update({ thread: { ...t, conversation: this.withUnsaved(t.conversation) } });
    }
  }

  /** Starts an empty conversation and opens it. */
  async create() {
    const c = await this.core.attempt("chat", () => this.core.api.chat.create({}));
    if (!c) return;
    await this.reloadList();
    await this.open(c.id);
  }

  /**
   * Starts a chat from prompt p, its {{name}} placeholders filled with
   * values, and opens it: the Go side sends the prompt's message (its reply
   * streams in), or, when it cannot (no model yet), keeps it as the
   * conversation's draft, and the notice says why. A second start while
   * one is on its way is ignored: a double click starts one chat.
   */
  async startFromPrompt(p: Prompt, values: Readonly<Record<string, string>> = {}) {
    if (this.s.starting) return;
    this.update({ starting: p.id });
    try {
      const r = await this.core.attempt("library", () => this.core.api.chat.startFromPrompt(p.id, { ...values }));
      if (!r) return;
      if (r.user.id) this.core.set((s) => ({ streams: streamStarted(s.streams, r.conversationId, r.user.id) }));
      await this.reloadList();
      await this.open(r.conversationId);
      if (r.unsent) {
        this.core.tell({ kind: "error", text: `Not sent: ${r.unsent}. It waits in the composer.`, scope: "chat" });
      }
    } finally {
      this.update({ starting: 0 });
    }
  }

  /** Patches conversation id where the window holds it: the list and the open thread. */
  private patchConversation(id: number, patch: Partial<Conversation>) {
    this.update((s) => ({
      list: s.list.map((c) => (c.id === id ? { ...c, ...patch } : c)),
      thread:
        s.thread?.conversation.id === id
          ? { ...s.thread, conversation: { ...s.thread.conversation, ...patch } }
          : s.thread,
    }));
  }

  /**
   * The composer of the open conversation holds text: it is stored as the
   * conversation's draft (Chat.SetDraft) once typing pauses for
   * DRAFT_SAVE_MS, or when another conversation opens, or the page goes.
   * The state is not changed: a keystroke re-renders only the composer.
   */
  setDraft(text: string) {
    const id = this.s.current;
    if (id === null) return;
    clearTimeout(this.unsaved.get(id)?.timer);
    const timer = setTimeout(() => void this.saveDraft(id), DRAFT_SAVE_MS);
    this.unsaved.set(id, { text, timer, queued: false });
  }

  /** Puts text in the open conversation's composer (an example of the start page) and stores it as its draft. */
  fillComposer(text: string) {
    const id = this.s.current;
    if (id === null) return;
    this.patchConversation(id, { draft: text });
    this.setDraft(text);
    void this.saveDraft(id);
  }

  /** Stores conversation id's draft if one is waiting; resolves once every save of it queued so far is done. */
  private saveDraft(id: number): Promise<void> {
    const u = this.unsaved.get(id);
    if (!u || u.queued) return this.saving.get(id) ?? Promise.resolve();
    u.queued = true;
    clearTimeout(u.timer);
    const p = (this.saving.get(id) ?? Promise.resolve()).then(async () => {
      await this.core.attempt("chat", () => this.core.api.chat.setDraft(id, u.text), true);
      if (this.unsaved.get(id) === u) this.unsaved.delete(id);
    });
    this.saving.set(id, p);
    void p.then(() => {
      if (this.saving.get(id) === p) this.saving.delete(id);
    });
    return p;
  }

  /** Stores every draft still waiting (before the window goes, or another conversation opens). */
  async saveDrafts() {
    await Promise.all([...this.unsaved.keys()].map((id) => this.saveDraft(id)));
  }

  /**
   * Conversation id's message is about to be sent (Chat.Send clears the
   * stored draft): the draft waiting is dropped, and a save already on its
   * way lands first, so it cannot bring the sent text back.
   */
  async draftSending(id: number) {
    const u = this.unsaved.get(id);
    if (u && !u.queued) {
      clearTimeout(u.timer);
      this.unsaved.delete(id);
    }
    await this.saving.get(id);
  }

  /** Conversation id's message was sent: the Go side cleared its draft. */
  draftSent(id: number) {
    this.patchConversation(id, { draft: "" });
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
