// The shared core of the window's state: one immutable AppState (a part per
// domain: the window's own, conversations, streams, library, models and
// downloads, settings), the subscribers that hear each change, and attempt,
// the one error path, where a failed call to the Go services becomes the
// notice the window shows. The domain modules beside this file own their
// part and the actions on it; store.ts puts them together.
import type { Api } from "../api";
import type { Bridge } from "../bridge";
import type { Streams } from "../logic";
import type { SystemInfo } from "../types";
import type { ConversationsState } from "./conversations";
import type { LibraryView } from "./library";
import type { ModelsState } from "./models";
import type { SettingsState } from "./settings";

/** The pages of the window. */
export type Page = "chat" | "library" | "models" | "settings";

/** Where an action runs: a page, or the window as a whole. */
export type Scope = Page | "app";

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

/** The window's own part: the page shown, the notice, the help overlay, what the Go side says of itself. */
export interface WindowState {
  page: Page;
  notice: Notice | null;
  help: boolean;
  info: SystemInfo | null;
}

/** Everything the window shows, one part per domain. */
export interface AppState {
  window: WindowState;
  conversations: ConversationsState;
  /** The replies streaming or just ended, by conversation (logic.ts's stream functions). */
  streams: Streams;
  library: LibraryView;
  models: ModelsState;
  settings: SettingsState;
}

/** The parts of AppState that are records of fields (all but streams). */
type Part = Exclude<keyof AppState, "streams">;

/** A failure's text: an Error's message (Go errors arrive as Errors, see bridge.ts), or the value as a string. */
export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The state, its subscribers and the one error path, shared by the domain modules. */
export class Core {
  private s: AppState;
  private readonly subs = new Set<() => void>();

  constructor(
    readonly api: Api,
    readonly bridge: Bridge,
    initial: AppState,
  ) {
    this.s = initial;
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

  /** Replaces the parts patch gives, then tells the subscribers (once, however many parts changed). */
  set(patch: Partial<AppState> | ((s: AppState) => Partial<AppState>)) {
    const p = typeof patch === "function" ? patch(this.s) : patch;
    this.s = { ...this.s, ...p };
    this.subs.forEach((f) => {
      f();
    });
  }

  /** Changes the fields patch gives in one part of the state. */
  update<K extends Part>(part: K, patch: Partial<AppState[K]> | ((p: AppState[K]) => Partial<AppState[K]>)) {
    this.set((s) => {
      const p = typeof patch === "function" ? patch(s[part]) : patch;
      return { [part]: { ...s[part], ...p } };
    });
  }

  /** Shows notice (null hides it). */
  tell(notice: Notice | null) {
    this.update("window", { notice });
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
      if (!quiet && this.s.window.notice?.scope === scope) this.tell(null);
      return v;
    } catch (e) {
      this.tell({ kind: "error", text: errorText(e), scope });
      return undefined;
    }
  }
}
