// The prompt library: its filter and what it lists, editing, import and
// export, and preparing a prompt (computing and pinning its KV cache) or
// dropping that cache. A chat started from a prompt is conversations.ts's.
import type { Prompt, PromptImport, PromptInput, TagCount } from "../types";
import type { Core } from "./core";

/** The prompt library's part of the state: its filter and what it lists. */
export interface LibraryView {
  tag: string;
  query: string;
  prompts: Prompt[];
  tags: TagCount[];
  /** The prompt being prepared (its KV cache computed), 0 if none. */
  preparing: number;
}

/** The library's part before anything is loaded. */
export function initialLibrary(): LibraryView {
  return { tag: "", query: "", prompts: [], tags: [], preparing: 0 };
}

/** The library's actions. */
export class Library {
  private seq = 0;

  constructor(private readonly core: Core) {}

  /** Lists the prompts for the library's filter (the latest request wins). */
  async reload() {
    const n = ++this.seq;
    const { tag, query } = this.core.state.library;
    const { library } = this.core.api;
    const r = await this.core.attempt("library", () => Promise.all([library.list(tag, query), library.tags()]), true);
    if (r && n === this.seq) this.core.update("library", { prompts: r[0], tags: r[1] });
  }

  filter(f: { tag?: string; query?: string }) {
    this.core.update("library", f);
    void this.reload();
  }

  /** Creates (id 0) or updates a prompt; false if refused. */
  async save(id: number, p: PromptInput): Promise<boolean> {
    const { library } = this.core.api;
    const saved = await this.core.attempt("library", () => (id ? library.update(id, p) : library.create(p)));
    if (!saved) return false;
    await this.reload();
    return true;
  }

  async remove(id: number) {
    await this.core.attempt("library", () => this.core.api.library.remove(id));
    await this.reload();
  }

  /** The whole library as a prompt library file. */
  exportAll() {
    return this.core.attempt("library", () => this.core.api.library.exportJSON([]), true);
  }

  /** Adds the prompts of a library file (the Go side checks it whole first); what it added and skipped. */
  async importJSON(text: string): Promise<PromptImport | undefined> {
    const r = await this.core.attempt("library", () => this.core.api.library.importJSON(text));
    await this.reload();
    return r;
  }

  /** Drops prompt id's warm snapshot (its file too): chats from it read its opening again. */
  async unprepare(id: number) {
    await this.core.attempt("library", () => this.core.api.library.unprepare(id));
    await this.reload();
  }

  /** Computes and pins prompt id's KV cache so that chats from it resume. */
  async prepare(id: number) {
    this.core.update("library", { preparing: id });
    const r = await this.core.attempt("library", () => this.core.api.library.prepare(id));
    // Too short to need preparing is a fact, not a failure; once prepared, the list says so.
    if (r?.outcome.kind === "too_short") this.core.tell({ kind: "info", text: r.outcome.message, scope: "library" });
    this.core.update("library", { preparing: 0 });
    await this.reload();
  }
}
