// The one module that owns the window's state. Components read it with
// useStore (useStore.ts) and change it only through the Store's actions; every
// call to the Go services goes through attempt, the one place where a failure
// becomes the notice the window shows.
import type { Api } from "./api";
import type { Bridge } from "./bridge";
import { dedupeHits, fillVariables, titleFrom, UNTITLED } from "./logic";
import {
  animationFrames,
  frameBatcher,
  streamCleared,
  streamDone,
  streamError,
  streamProgress,
  streamStarted,
  streamTokens,
  type Frames,
  type Streams,
} from "./logic";
import type {
  Conversation,
  ModelList,
  Preferences,
  Prompt,
  PromptInput,
  SearchHit,
  SystemInfo,
  TagCount,
  Thread,
  TokenEvent,
  Turn,
} from "./types";

/** The pages of the window. */
export type Page = "chat" | "library" | "models" | "settings";

/** The colour scheme: the system's, or one chosen by hand. */
export type Theme = "system" | "light" | "dark";

/**
 * What the window tells the user about the last thing that went wrong (an
 * error) or that is worth knowing although nothing failed (info: a fact such
 * as "this prompt is too short to need preparing"). scope is where it came
 * from: a later success there clears it.
 */
export interface Notice {
  kind: "error" | "info";
  text: string;
  scope: Scope;
}

/** Where an action runs: a page, or the window as a whole. */
export type Scope = Page | "app";

/** The prompt library's view: its filter and what it lists. */
export interface LibraryView {
  tag: string;
  query: string;
  prompts: Prompt[];
  tags: TagCount[];
  /** The prompt being prepared (its KV cache computed), 0 if none. */
  preparing: number;
}

/** Everything the window shows. */
export interface AppState {
  info: SystemInfo | null;
  page: Page;
  conversations: Conversation[];
  /** The open conversation, and its thread once loaded. */
  current: number | null;
  thread: Thread | null;
  streams: Streams;
  /** Text waiting in the composer of the next conversation opened (from a prompt). */
  draft: string;
  /** The message to show and mark when its thread opens (a search hit). */
  focusMessage: number;
  query: string;
  hits: SearchHit[] | null;
  notice: Notice | null;
  theme: Theme;
  help: boolean;
  prefs: Preferences | null;
  models: ModelList | null;
  library: LibraryView;
}

/** Where the store keeps what outlives a window (the theme). */
export interface Keep {
  get(key: string): string | null;
  set(key: string, value: string): void;
}

/** localStorage, or nothing where it is not there. */
export const browserKeep: Keep = {
  get: (k) => {
    try {
      return localStorage.getItem(k);
    } catch {
      return null;
    }
  },
  set: (k, v) => {
    try {
      localStorage.setItem(k, v);
    } catch {
      // No storage (private mode): the choice lasts this session.
    }
  },
};

/** Facts the Go side reports as errors that are not failures. */
const FACTS = [/too short to (prepare|need preparing)/i];

/** How a failure is shown: an error, or info when it states a fact. */
export function classify(e: unknown): { kind: Notice["kind"]; text: string } {
  const text = e instanceof Error ? e.message : String(e);
  return { kind: FACTS.some((f) => f.test(text)) ? "info" : "error", text };
}

function initialTheme(keep: Keep): Theme {
  const t = keep.get("anechat.theme");
  return t === "light" || t === "dark" ? t : "system";
}

/** The window's state and the actions that change it. */
export class Store {
  private s: AppState;
  private readonly subs = new Set<() => void>();
  private searchTimer: ReturnType<typeof setTimeout> | undefined;
  private searchSeq = 0;
  private librarySeq = 0;
  private threadSeq = 0;
  private listSeq = 0;

  constructor(
    readonly api: Api,
    readonly bridge: Bridge,
    private readonly frames: Frames = animationFrames,
    private readonly keep: Keep = browserKeep,
  ) {
    this.s = {
      info: null,
      page: "chat",
      conversations: [],
      current: null,
      thread: null,
      streams: {},
      draft: "",
      focusMessage: 0,
      query: "",
      hits: null,
      notice: null,
      theme: initialTheme(keep),
      help: false,
      prefs: null,
      models: null,
      library: { tag: "", query: "", prompts: [], tags: [], preparing: 0 },
    };
  }

  /** The current state (replaced, never changed in place). */
  get state(): AppState {
    return this.s;
  }

  /** Calls f after every change; returns the unsubscribe function. */
  subscribe(f: () => void): () => void {
    this.subs.add(f);
    return () => this.subs.delete(f);
  }

  private set(patch: Partial<AppState> | ((s: AppState) => Partial<AppState>)) {
    const p = typeof patch === "function" ? patch(this.s) : patch;
    this.s = { ...this.s, ...p };
    this.subs.forEach((f) => {
      f();
    });
  }

  /**
   * The one error path. Runs f; its failure becomes the notice (an error, or
   * info for a fact) and attempt returns undefined. The success of something
   * the user did (not of a reload, quiet) clears the notice that an earlier
   * failure in the same scope left.
   */
  async attempt<T>(scope: Scope, f: () => Promise<T>, quiet = false): Promise<T | undefined> {
    try {
      const v = await f();
      if (!quiet && this.s.notice?.scope === scope) this.set({ notice: null });
      return v;
    } catch (e) {
      this.set({ notice: { ...classify(e), scope } });
      return undefined;
    }
  }

  /** Hides the notice. */
  dismiss() {
    this.set({ notice: null });
  }

  /**
   * Loads what the window shows first and listens to the chat events.
   * Streamed tokens are applied once per animation frame, so a fast reply
   * re-renders once per frame, not once per token. Returns the function that
   * stops listening.
   */
  start(): () => void {
    void this.attempt("app", async () => this.set({ info: await this.api.system.info() }), true);
    void this.reloadConversations();
    void this.reloadPrefs();
    void this.reloadModels();
    const tokens = frameBatcher<TokenEvent>(this.frames, (es) => {
      this.set((s) => ({ streams: streamTokens(s.streams, es) }));
    });
    let offs: (() => void)[] = [];
    try {
      offs = [
        this.api.events.onToken((e) => {
          tokens.add(e);
        }),
        // The end of a stream comes after its tokens: those still waiting for a frame go first.
        this.api.events.onDone((e) => {
          tokens.flushNow();
          this.set((s) => ({ streams: streamDone(s.streams, e) }));
          if (e.conversationId === this.s.current) void this.loadThread();
          void this.reloadConversations();
        }),
        this.api.events.onError((e) => {
          tokens.flushNow();
          this.set((s) => ({ streams: streamError(s.streams, e) }));
        }),
        this.api.events.onProgress((e) => {
          this.set((s) => ({ streams: streamProgress(s.streams, e) }));
        }),
      ];
    } catch (e) {
      this.set({ notice: { ...classify(e), scope: "app" } });
    }
    return () => {
      tokens.stop();
      offs.forEach((off) => {
        off();
      });
      clearTimeout(this.searchTimer);
    };
  }

  /** Shows a page. */
  go(page: Page) {
    this.set({ page });
    if (page === "library") void this.reloadLibrary();
    if (page === "models") void this.reloadModels();
    if (page === "settings") void this.reloadPrefs();
  }

  // Conversations.

  /** Lists the conversations; a list asked for before a later change (a rename) is dropped. */
  async reloadConversations() {
    const n = ++this.listSeq;
    const cs = await this.attempt("app", () => this.api.chat.list(), true);
    if (cs && n === this.listSeq) this.set({ conversations: cs });
  }

  /** Opens conversation id on the chat page. */
  async open(id: number, focusMessage = 0) {
    this.set((s) => ({
      current: id,
      page: "chat",
      focusMessage,
      thread: s.thread?.conversation.id === id ? s.thread : null,
    }));
    await this.loadThread();
  }

  /** Shows the start page (no conversation open). */
  close() {
    this.set({ current: null, thread: null, page: "chat" });
  }

  /** Loads the open conversation's thread (the latest request wins). */
  async loadThread() {
    const id = this.s.current;
    if (id === null) return;
    const n = ++this.threadSeq;
    const t = await this.attempt("chat", () => this.api.chat.thread(id), true);
    if (t && n === this.threadSeq && this.s.current === id) this.set({ thread: t });
  }

  /** Starts a conversation (from a library prompt, whose body waits in the composer). */
  async newChat(from?: { promptId: number; body: string }) {
    const c = await this.attempt("chat", () => this.api.chat.create({ promptId: from?.promptId ?? 0 }));
    if (!c) return;
    await this.reloadConversations();
    this.set({ draft: from?.body ?? "" });
    await this.open(c.id);
  }

  /** Puts text in the composer of the open conversation. */
  setDraft(text: string) {
    this.set({ draft: text });
  }

  /** The composer took the draft. */
  draftUsed() {
    if (this.s.draft) this.set({ draft: "" });
  }

  private async turn(f: (id: number) => Promise<Turn>): Promise<boolean> {
    const id = this.s.current;
    if (id === null) return false;
    this.set((s) => ({ streams: streamCleared(s.streams, id) }));
    const turn = await this.attempt("chat", () => f(id));
    if (!turn) return false;
    this.set((s) => ({ streams: streamStarted(s.streams, id, turn.user.id) }));
    await this.loadThread();
    void this.reloadConversations(); // the first message titles it
    return true;
  }

  /**
   * Sends text in the open conversation; false if it was refused. The first
   * message titles a conversation still called "New chat" at once (unless
   * the Go side titled it already).
   */
  async send(text: string) {
    const first = this.s.thread?.messages.length === 0;
    const ok = await this.turn((id) => this.api.chat.send(id, text));
    const c = this.s.thread?.conversation;
    if (ok && first && c && c.title === UNTITLED && titleFrom(text)) await this.rename(titleFrom(text));
    return ok;
  }

  /** Replaces user message messageId by text, on a new branch. */
  edit(messageId: number, text: string) {
    return this.turn(() => this.api.chat.edit(messageId, text));
  }

  /** Asks for another version of reply messageId. */
  regenerate(messageId: number) {
    return this.turn(() => this.api.chat.regenerate(messageId));
  }

  /** Shows the branch through messageId. */
  async selectBranch(messageId: number) {
    const t = await this.attempt("chat", () => this.api.chat.selectBranch(messageId));
    if (t && t.conversation.id === this.s.current) this.set({ thread: t });
  }

  /** Stops the open conversation's reply; false if none was running. */
  async stop(): Promise<boolean> {
    const id = this.s.current;
    if (id === null || !this.s.streams[id]?.running) return false;
    await this.attempt("chat", () => this.api.chat.cancel(id));
    return true;
  }

  private async changeConversation(f: (id: number) => Promise<Conversation>) {
    const id = this.s.current;
    if (id === null) return false;
    const c = await this.attempt("chat", () => f(id));
    if (!c) return false;
    this.listSeq++; // a list fetched before this change is stale
    this.set((s) => ({
      conversations: s.conversations.map((x) => (x.id === c.id ? c : x)),
      thread: s.thread?.conversation.id === c.id ? { ...s.thread, conversation: c } : s.thread,
    }));
    return true;
  }

  rename(title: string) {
    return this.changeConversation((id) => this.api.chat.rename(id, title));
  }

  setSystemPrompt(system: string) {
    return this.changeConversation((id) => this.api.chat.setSystemPrompt(id, system));
  }

  /** Makes the open conversation answer with model modelId (0: the default). */
  setModel(modelId: number) {
    return this.changeConversation((id) => this.api.chat.setModel(id, modelId));
  }

  /** Deletes the open conversation. */
  async deleteConversation() {
    const id = this.s.current;
    if (id === null) return;
    const ok = await this.attempt("chat", async () => {
      await this.api.chat.remove(id);
      return true;
    });
    if (!ok) return;
    this.close();
    await this.reloadConversations();
  }

  // Search.

  /** Searches messages for q, 150 ms after the last keystroke. */
  setQuery(q: string) {
    this.set({ query: q });
    clearTimeout(this.searchTimer);
    const n = ++this.searchSeq;
    if (!q.trim()) {
      this.set({ hits: null });
      return;
    }
    this.searchTimer = setTimeout(() => {
      void this.attempt("app", () => this.api.chat.search(q), true).then((hits) => {
        if (hits && n === this.searchSeq) this.set({ hits: dedupeHits(hits) });
      });
    }, 150);
  }

  /** Opens a hit's message in its branch. */
  async openHit(h: SearchHit) {
    await this.attempt("chat", () => this.api.chat.selectBranch(h.messageId));
    this.set({ query: "", hits: null });
    await this.open(h.conversationId, h.messageId);
  }

  // Window.

  setTheme(theme: Theme) {
    this.keep.set("anechat.theme", theme);
    this.set({ theme });
  }

  setHelp(help: boolean) {
    this.set({ help });
  }

  /** Copies text to the clipboard; false (with a notice) if it could not. */
  async copy(text: string): Promise<boolean> {
    const ok = await this.attempt("app", async () => {
      await this.bridge.copyText(text);
      return true;
    });
    return ok === true;
  }

  /** Opens an http(s) or mailto URL in the system's browser (never in this window). */
  openURL(url: string) {
    void this.attempt("app", async () => {
      this.bridge.openURL(url);
      return Promise.resolve();
    });
  }

  // Settings.

  async reloadPrefs() {
    const p = await this.attempt("settings", () => this.api.settings.get(), true);
    if (p) this.set({ prefs: p });
  }

  /** Saves p; the stored preferences, or undefined if refused. */
  async savePrefs(p: Preferences) {
    const saved = await this.attempt("settings", () => this.api.settings.update(p));
    if (saved) this.set({ prefs: saved });
    return saved;
  }

  async resetPrefs() {
    const p = await this.attempt("settings", () => this.api.settings.reset());
    if (p) this.set({ prefs: p });
    return p;
  }

  /** Reports a value the user typed that cannot be sent (it names the field). */
  refuse(scope: Scope, text: string) {
    this.set({ notice: { kind: "error", text, scope } });
  }

  // Models.

  async reloadModels() {
    const m = await this.attempt("models", () => this.api.models.list(), true);
    if (m) this.set({ models: m });
  }

  private async modelAction<T>(f: () => Promise<T>): Promise<T | undefined> {
    const v = await this.attempt("models", f);
    await this.reloadModels();
    return v;
  }

  scanModels() {
    return this.modelAction(() => this.api.models.scan());
  }

  registerModel(path: string) {
    return this.modelAction(() => this.api.models.register(path));
  }

  setDefaultModel(id: number) {
    return this.modelAction(() => this.api.models.setDefault(id));
  }

  forgetModel(id: number) {
    return this.modelAction(() => this.api.models.remove(id));
  }

  // Prompt library.

  /** Lists the prompts for the library's filter (the latest request wins). */
  async reloadLibrary() {
    const n = ++this.librarySeq;
    const { tag, query } = this.s.library;
    const r = await this.attempt(
      "library",
      () => Promise.all([this.api.library.list(tag, query), this.api.library.tags()]),
      true,
    );
    if (r && n === this.librarySeq) this.set((s) => ({ library: { ...s.library, prompts: r[0], tags: r[1] } }));
  }

  filterLibrary(f: { tag?: string; query?: string }) {
    this.set((s) => ({ library: { ...s.library, ...f } }));
    void this.reloadLibrary();
  }

  /** Creates (id 0) or updates a prompt; false if refused. */
  async savePrompt(id: number, p: PromptInput): Promise<boolean> {
    const saved = await this.attempt("library", () =>
      id ? this.api.library.update(id, p) : this.api.library.create(p),
    );
    if (!saved) return false;
    await this.reloadLibrary();
    return true;
  }

  async deletePrompt(id: number) {
    await this.attempt("library", () => this.api.library.remove(id));
    await this.reloadLibrary();
  }

  /**
   * Starts a chat from prompt p, its {{name}} placeholders filled with
   * values: the body waits in the composer, the system prompt is the filled one.
   */
  async startFromPrompt(p: Prompt, values: Readonly<Record<string, string>> = {}) {
    await this.newChat({ promptId: p.id, body: fillVariables(p.body, values) });
    const system = fillVariables(p.systemPrompt, values);
    if (system !== p.systemPrompt && this.s.thread?.conversation.promptId === p.id) await this.setSystemPrompt(system);
  }

  /** Every prompt of the library (no filter), for the export file. */
  allPrompts() {
    return this.attempt("library", () => this.api.library.list("", ""), true);
  }

  /** Adds the prompts of an import file; how many were added (all or, on a refusal, those before it). */
  async importPrompts(ps: readonly PromptInput[]): Promise<number> {
    let n = 0;
    for (const p of ps) {
      const ok = await this.attempt("library", () => this.api.library.create(p));
      if (!ok) break;
      n++;
    }
    await this.reloadLibrary();
    return n;
  }

  /** Computes and pins prompt id's KV cache so that chats from it resume. */
  async preparePrompt(id: number) {
    this.set((s) => ({ library: { ...s.library, preparing: id } }));
    const r = await this.attempt("library", () => this.api.library.prepare(id));
    // Too short to need preparing is a fact, not a failure.
    if (r?.status === "too-short") this.set({ notice: { kind: "info", text: r.message, scope: "library" } });
    this.set((s) => ({ library: { ...s.library, preparing: 0 } }));
    await this.reloadLibrary();
  }
}
