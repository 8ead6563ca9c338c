// The window's store: the shared core (state/core.ts: one state, its
// subscribers, the one error path) and one module per domain, each owning
// its part of the state and the actions on it, as well-kept chat clients
// split theirs. Components read the state with useStore (useStore.ts) and
// change it only through these actions: store.conversations.open(id),
// store.streaming.send(text), store.library.prepare(id), ...
import type { Api } from "./api";
import type { Bridge } from "./bridge";
import { animationFrames, type Frames } from "./logic";
import { Conversations, initialConversations } from "./state/conversations";
import { Core, errorText, type AppState, type Page, type Scope } from "./state/core";
import { initialLibrary, Library } from "./state/library";
import { initialModels, Models } from "./state/models";
import { initialSettings, Settings, themeOnPage } from "./state/settings";
import { Streaming } from "./state/streaming";
import type { ExportFile, Theme } from "./types";

export type { AppState, Page, Scope } from "./state/core";
export type { ModelLoad } from "./state/models";
export { themeOnPage } from "./state/settings";
export type { Theme } from "./types";

/** The window's state and the actions that change it, by domain; the window's own actions on itself. */
export class Store {
  private readonly core: Core;
  readonly conversations: Conversations;
  readonly streaming: Streaming;
  readonly library: Library;
  readonly models: Models;
  readonly settings: Settings;

  constructor(api: Api, bridge: Bridge, frames: Frames = animationFrames, theme: Theme = themeOnPage()) {
    this.core = new Core(api, bridge, {
      window: { page: "chat", notice: null, help: false, info: null },
      conversations: initialConversations(),
      streams: {},
      library: initialLibrary(),
      models: initialModels(),
      settings: initialSettings(theme),
    });
    this.conversations = new Conversations(this.core);
    this.streaming = new Streaming(this.core, this.conversations, frames);
    this.library = new Library(this.core);
    this.settings = new Settings(this.core);
    this.models = new Models(this.core, this.settings);
  }

  /** The current state (replaced, never changed in place). */
  get state(): AppState {
    return this.core.state;
  }

  /** Calls f after every change; returns the unsubscribe function. */
  subscribe(f: () => void): () => void {
    return this.core.subscribe(f);
  }

  /** Loads what the window shows first and listens to the Go side's events; returns the function that stops listening. */
  start(): () => void {
    const { api } = this.core;
    void this.core.attempt("app", async () => this.core.update("window", { info: await api.system.info() }), true);
    void this.conversations.reloadList();
    void this.settings.reload();
    void this.models.reload();
    void this.models.reloadDownloads();
    const offs: (() => void)[] = [];
    try {
      for (const d of [this.streaming, this.conversations, this.models]) offs.push(...d.listen());
    } catch (e) {
      this.core.tell({ kind: "error", text: errorText(e), scope: "app" });
    }
    return () => {
      offs.forEach((off) => {
        off();
      });
      this.conversations.stop();
    };
  }

  /** Shows a page, reading again what it shows. */
  go(page: Page) {
    this.core.update("window", { page });
    if (page === "library") void this.library.reload();
    if (page === "models") {
      void this.models.reload();
      void this.models.reloadDownloads();
      void this.models.loadCatalog();
    }
    if (page === "settings") {
      void this.settings.reload();
      void this.settings.reloadFacts();
    }
  }

  /** Hides the notice. */
  dismiss() {
    this.core.tell(null);
  }

  /** Reports a value the user typed that cannot be sent (it names the field). */
  refuse(scope: Scope, text: string) {
    this.core.tell({ kind: "error", text, scope });
  }

  setHelp(help: boolean) {
    this.core.update("window", { help });
  }

  /** Copies text to the clipboard; false (with a notice) if it could not. */
  async copy(text: string): Promise<boolean> {
    const ok = await this.core.attempt("app", async () => {
      await this.core.bridge.copyText(text);
      return true;
    });
    return ok === true;
  }

  /** Opens an http(s) or mailto URL in the system's browser (never in this window). */
  openURL(url: string) {
    void this.core.attempt("app", async () => {
      this.core.bridge.openURL(url);
      return Promise.resolve();
    });
  }

  /**
   * Saves an export through the window's save dialog (the web view cannot
   * download a file): the path written, "" when cancelled, undefined on failure.
   */
  saveFile(scope: Scope, title: string, f: ExportFile) {
    return this.core.attempt(scope, () => this.core.api.system.saveFile(title, f));
  }
}
