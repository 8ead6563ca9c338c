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
  APIStatus,
  BackendInfo,
  CacheUsage,
  ClearCacheResult,
  Conversation,
  ConversationOptions,
  CoreMLSettings,
  DeletedConversation,
  Download,
  DownloadRequest,
  ExportFile,
  ImportResult,
  ModelList,
  Outcome,
  Preferences,
  Prompt,
  PromptImport,
  PromptInput,
  SearchHit,
  SystemInfo,
  TagCount,
  Theme,
  Thread,
  TokenEvent,
  Turn,
} from "./types";

/** The pages of the window. */
export type Page = "chat" | "library" | "models" | "settings";

/** The colour scheme: the system's, or one chosen by hand (Preferences.theme). */
export type { Theme } from "./types";

/**
 * What the window tells the user about the last thing that went wrong (an
 * error) or that is worth knowing although nothing failed (info: a fact such
 * as "this prompt is too short to need preparing", from a typed outcome).
 * scope is where it came from: a later success there clears it.
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
  /** The conversation just deleted, while Undo can bring it back. */
  undo: DeletedConversation | null;
  /** Conversations whose title the model is writing. */
  titling: Readonly<Record<number, boolean>>;
  /** The model downloads, by file name. */
  downloads: Download[];
  /** A model being loaded ahead of the first reply (CoreML.Load), or the last one. */
  load: ModelLoad | null;
  /** What the Settings page shows of the backends and the KV cache. */
  backend: BackendInfo | null;
  coreml: CoreMLSettings | null;
  cache: CacheUsage | null;
  /** The local OpenAI-compatible HTTP API (API service): on or off, where, its token. */
  apiServer: APIStatus | null;
  /** The start page's import panel is open. */
  importing: boolean;
}

/** A model loading (CoreML.Load): how far, and how it ended. */
export interface ModelLoad {
  modelId: number;
  done: number;
  total: number;
  running: boolean;
  /** How it ended ("loaded" or "cancelled", with what to say); null while it runs or when it failed. */
  outcome: Outcome | null;
  /** Why it failed; "" otherwise. */
  error: string;
}

/**
 * The theme the page was drawn with: the Go side answers theme.js (see
 * index.html) with the stored one before the page's code runs.
 */
export function themeOnPage(doc: Document = document): Theme {
  const t = doc.documentElement.dataset["theme"];
  return t === "light" || t === "dark" ? t : "system";
}

/** A failure's text: an Error's message (Go errors arrive as Errors, see bridge.ts), or the value as a string. */
export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
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
    theme: Theme = themeOnPage(),
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
      theme,
      help: false,
      prefs: null,
      models: null,
      library: { tag: "", query: "", prompts: [], tags: [], preparing: 0 },
      undo: null,
      titling: {},
      downloads: [],
      load: null,
      backend: null,
      coreml: null,
      cache: null,
      apiServer: null,
      importing: false,
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
   * The one error path. Runs f; its failure becomes an error notice and
   * attempt returns undefined. The success of something the user did (not
   * of a reload, quiet) clears the notice that an earlier failure in the
   * same scope left. A failure's text is shown, never read: what the window
   * acts on comes from the Go side as a typed outcome (types.ts Outcome).
   */
  async attempt<T>(scope: Scope, f: () => Promise<T>, quiet = false): Promise<T | undefined> {
    try {
      const v = await f();
      if (!quiet && this.s.notice?.scope === scope) this.set({ notice: null });
      return v;
    } catch (e) {
      this.set({ notice: { kind: "error", text: errorText(e), scope } });
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
    void this.reloadDownloads();
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
        // A title written by the model, or the first message's, lands in the sidebar at once.
        this.api.events.onTitle((e) => {
          this.listSeq++; // a list fetched before it is stale
          this.set((s) => {
            const rename = (c: Conversation) =>
              c.id === e.conversationId ? { ...c, title: e.title, titleSource: e.source } : c;
            const titling: Record<number, boolean> = Object.fromEntries(
              Object.entries(s.titling).filter(([id]) => Number(id) !== e.conversationId),
            );
            if (e.pending) titling[e.conversationId] = true;
            return {
              titling,
              conversations: s.conversations.map(rename),
              thread: s.thread ? { ...s.thread, conversation: rename(s.thread.conversation) } : s.thread,
            };
          });
        }),
        this.api.events.onDownload((d) => {
          this.set((s) => ({ downloads: upsertDownload(s.downloads, d) }));
          if (d.state === "done") void this.reloadModels();
        }),
        this.api.events.onModelProgress((p) => {
          this.set((s) =>
            s.load?.running && s.load.modelId === p.modelId
              ? { load: { ...s.load, done: Math.max(s.load.done, p.done), total: p.total } }
              : {},
          );
        }),
      ];
    } catch (e) {
      this.set({ notice: { kind: "error", text: errorText(e), scope: "app" } });
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
    if (page === "models") {
      void this.reloadModels();
      void this.reloadDownloads();
    }
    if (page === "settings") {
      void this.reloadPrefs();
      void this.reloadSettingsFacts();
    }
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

  /** Sets the open conversation's own generation settings (a field left out follows the Settings page). */
  async setOptions(o: ConversationOptions) {
    const ok = await this.changeConversation((id) => this.api.chat.setOptions(id, o));
    if (ok) await this.loadThread(); // Thread.settings: what the next reply runs with
    return ok;
  }

  /** Pins the open conversation to the top of the list, or unpins it. */
  async setPinned(pinned: boolean) {
    const ok = await this.changeConversation((id) => this.api.chat.setPinned(id, pinned));
    if (ok) await this.reloadConversations(); // pinned ones come first
    return ok;
  }

  /** Deletes the open conversation; Undo brings it back until its undoUntil. */
  async deleteConversation() {
    const id = this.s.current;
    if (id === null) return;
    const gone = await this.attempt("chat", () => this.api.chat.remove(id));
    if (!gone) return;
    this.close();
    this.set({ undo: gone });
    await this.reloadConversations();
  }

  /** Brings the conversation just deleted back, and opens it. */
  async undoDelete() {
    const gone = this.s.undo;
    if (!gone) return;
    const c = await this.attempt("app", () => this.api.chat.undoDelete(gone.conversationId));
    this.set({ undo: null });
    if (!c) return;
    await this.reloadConversations();
    await this.open(c.id);
  }

  /** Forgets the undo offer (its time is up, or the user closed it). */
  dropUndo() {
    if (this.s.undo) this.set({ undo: null });
  }

  /** Stops the model writing conversation id's title. */
  cancelTitle(id: number) {
    return this.attempt("chat", () => this.api.chat.cancelTitle(id));
  }

  /** The open conversation as a file: Markdown (the branch on screen) or JSON (every branch). */
  exportConversation(format: "markdown" | "json") {
    const id = this.s.current;
    if (id === null) return Promise.resolve(undefined);
    return this.attempt("chat", () => this.api.chat.exportAs(id, format), true);
  }

  /**
   * Adds a conversation from an exported JSON file and opens it; false if
   * refused. What of the file was left out (drafted highlighting that did
   * not fit its message) becomes the notice.
   */
  async importConversation(text: string): Promise<boolean> {
    const r = await this.attempt("chat", () => this.api.chat.importJSON(text));
    if (!r) return false;
    this.set({ importing: false });
    await this.reloadConversations();
    await this.open(r.conversation.id);
    if (r.warnings.length > 0) {
      this.set({ notice: { kind: "info", text: `Imported, but: ${r.warnings.join("; ")}.`, scope: "chat" } });
    }
    return true;
  }

  /** Opens or closes the start page's import panel. */
  setImporting(importing: boolean) {
    this.set(importing ? { importing, current: null, thread: null, page: "chat" } : { importing });
  }

  /**
   * Saves an export through the window's save dialog (the web view cannot
   * download a file): the path written, "" when cancelled, undefined on failure.
   */
  saveFile(scope: Scope, title: string, f: ExportFile) {
    return this.attempt(scope, () => this.api.system.saveFile(title, f));
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

  /** Shows theme at once and stores it (Preferences.theme), so the next start draws with it. */
  async setTheme(theme: Theme) {
    this.set({ theme });
    const saved = await this.attempt("app", async () => {
      const p = await this.api.settings.get();
      return this.api.settings.update({ ...p, theme });
    });
    if (saved) this.set({ prefs: saved });
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
    if (p) this.set({ prefs: p, theme: p.theme });
  }

  /** Saves p (with the theme the window shows: the sidebar's switch owns it); the stored preferences, or undefined if refused. */
  async savePrefs(p: Preferences) {
    const saved = await this.attempt("settings", () => this.api.settings.update({ ...p, theme: this.s.theme }));
    if (saved) this.set({ prefs: saved });
    return saved;
  }

  async resetPrefs() {
    const p = await this.attempt("settings", () => this.api.settings.reset());
    if (p) this.set({ prefs: p, theme: p.theme });
    return p;
  }

  /** What the Settings page shows beside the preferences: the backends, Core ML and the KV cache. */
  async reloadSettingsFacts() {
    const [backend, coreml, cache, apiServer] = await Promise.all([
      this.attempt("settings", () => this.api.system.backend(), true),
      this.attempt("settings", () => this.api.coreml.settings(), true),
      this.attempt("settings", () => this.api.settings.cache(), true),
      this.attempt("settings", () => this.api.apiServer.status(), true),
    ]);
    this.set((s) => ({
      backend: backend ?? s.backend,
      coreml: coreml ?? s.coreml,
      cache: cache ?? s.cache,
      apiServer: apiServer ?? s.apiServer,
    }));
  }

  /**
   * Turns the local HTTP API on (on the port given, 0 for the stored or
   * default one) or off; the choice is stored, so the API starts with the app.
   */
  async setAPIServer(on: boolean, port: number) {
    const st = await this.attempt("settings", () => (on ? this.api.apiServer.start(port) : this.api.apiServer.stop()));
    if (st) this.set({ apiServer: st });
  }

  /** Sets where Core ML runs models (neural-engine, gpu, cpu, all), from the next load. */
  async setComputeUnits(units: string) {
    const c = await this.attempt("settings", () => this.api.coreml.setComputeUnits(units));
    if (c) this.set({ coreml: c });
  }

  /** Removes the KV snapshots (the prepared prompts' too when asked). */
  async clearCache(includePinned: boolean): Promise<ClearCacheResult | undefined> {
    const r = await this.attempt("settings", () => this.api.settings.clearCache(includePinned));
    if (r) this.set({ cache: r.usage });
    return r;
  }

  /** Shows the data directory in the desktop's file manager. */
  openDataDir() {
    return this.attempt("settings", () => this.api.system.openDataDir());
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

  /** Registers a .gguf file, a model folder or a Core ML bundle folder (the result says whether it runs here). */
  importModel(path: string): Promise<ImportResult | undefined> {
    return this.modelAction(() => this.api.models.importPath(path));
  }

  /** Asks for a folder with the window's dialog: its path, "" when cancelled. */
  chooseFolder(title: string) {
    return this.attempt("models", () => this.api.system.chooseFolder(title));
  }

  /**
   * Loads model id now (progress from model:progress), so the first reply
   * does not wait for it. How it ends is CoreML.Load's typed outcome; a
   * failure is an error, shown as it is.
   */
  async loadModel(id: number) {
    if (this.s.load?.running) return;
    this.set({ load: { modelId: id, done: 0, total: 0, running: true, outcome: null, error: "" } });
    let end: Pick<ModelLoad, "outcome" | "error">;
    try {
      end = { outcome: await this.api.coreml.load(id), error: "" };
    } catch (e) {
      end = { outcome: null, error: errorText(e) };
    }
    this.set((s) => ({ load: s.load && { ...s.load, ...end, running: false } }));
    if (this.s.page === "settings") void this.reloadSettingsFacts();
  }

  /** Stops the model load running. */
  cancelLoad() {
    return this.attempt("models", () => this.api.coreml.cancelLoad());
  }

  // Downloads.

  async reloadDownloads() {
    const ds = await this.attempt("models", () => this.api.downloads.list(), true);
    if (ds) this.set({ downloads: ds });
  }

  /** Starts downloading a model file into the models folder; false if refused. */
  async startDownload(r: DownloadRequest): Promise<boolean> {
    const d = await this.attempt("models", () => this.api.downloads.start(r));
    if (d) this.set((s) => ({ downloads: upsertDownload(s.downloads, d) }));
    return d !== undefined;
  }

  private async downloadAction(f: () => Promise<Download | void>) {
    const d = await this.attempt("models", f);
    if (d) this.set((s) => ({ downloads: upsertDownload(s.downloads, d) }));
    await this.reloadDownloads();
  }

  pauseDownload(name: string) {
    return this.downloadAction(() => this.api.downloads.pause(name));
  }

  resumeDownload(name: string) {
    return this.downloadAction(() => this.api.downloads.resume(name));
  }

  /** Stops a download and removes what arrived. */
  cancelDownload(name: string) {
    return this.downloadAction(() => this.api.downloads.cancel(name));
  }

  /** Removes a finished, failed or cancelled download from the list. */
  dismissDownload(name: string) {
    return this.downloadAction(() => this.api.downloads.dismiss(name));
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

  /** The whole library as a prompt library file. */
  exportLibrary() {
    return this.attempt("library", () => this.api.library.exportJSON([]), true);
  }

  /** Adds the prompts of a library file (the Go side checks it whole first); what it added and skipped. */
  async importLibrary(text: string): Promise<PromptImport | undefined> {
    const r = await this.attempt("library", () => this.api.library.importJSON(text));
    await this.reloadLibrary();
    return r;
  }

  /** Computes and pins prompt id's KV cache so that chats from it resume. */
  async preparePrompt(id: number) {
    this.set((s) => ({ library: { ...s.library, preparing: id } }));
    const r = await this.attempt("library", () => this.api.library.prepare(id));
    // Too short to need preparing is a fact, not a failure; once prepared, the list says so.
    if (r?.outcome.kind === "too_short")
      this.set({ notice: { kind: "info", text: r.outcome.message, scope: "library" } });
    this.set((s) => ({ library: { ...s.library, preparing: 0 } }));
    await this.reloadLibrary();
  }
}

/** ds with d in its place (by name), or added; a cancelled download is gone (the Go side forgets it). */
export function upsertDownload(ds: readonly Download[], d: Download): Download[] {
  const rest = ds.filter((x) => x.name !== d.name);
  if (d.state === "cancelled") return rest;
  return [...rest, d].sort((a, b) => a.name.localeCompare(b.name));
}
