// Models and downloads: the models the app knows (scan, import, the
// default, forget), loading one ahead of the first reply, and the model
// downloads with their progress.
import type {
  CatalogList,
  Download,
  DownloadRequest,
  HubModel,
  ImportResult,
  ModelList,
  Outcome,
  PullRequest,
  RepoFiles,
} from "../types";
import { errorText, type Core } from "./core";
import type { Settings } from "./settings";

/** A model loading (Models.Load): how far, and how it ended. */
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

/** The Hugging Face search: what was asked, what came back, and the repository opened to pick a file. */
export interface HubSearch {
  text: string;
  busy: boolean;
  results: HubModel[] | null;
  /** Why the search (or opening a repository) failed, in the Hub client's plain words; "" otherwise. */
  error: string;
  /** The repository whose files are shown (quantisations, or its size as a bundle). */
  repo: RepoFiles | null;
  /** The repository being opened, "" when none. */
  opening: string;
}

/** The models' part of the state. */
export interface ModelsState {
  list: ModelList | null;
  /** The curated catalog for this machine (sizes exact once the Hub answered). */
  catalog: CatalogList | null;
  search: HubSearch;
  /** The model downloads, by file name. */
  downloads: Download[];
  /** A model being loaded ahead of the first reply (Models.Load), or the last one. */
  load: ModelLoad | null;
}

/** The models' part before anything is loaded. */
export function initialModels(): ModelsState {
  return { list: null, catalog: null, search: initialSearch(), downloads: [], load: null };
}

function initialSearch(): HubSearch {
  return { text: "", busy: false, results: null, error: "", repo: null, opening: "" };
}

/** ds with d in its place (by name), or added; a cancelled download is gone (the Go side forgets it). */
function upsertDownload(ds: readonly Download[], d: Download): Download[] {
  const rest = ds.filter((x) => x.name !== d.name);
  if (d.state === "cancelled") return rest;
  return [...rest, d].sort((a, b) => a.name.localeCompare(b.name));
}

/** The actions on models and downloads. */
export class Models {
  constructor(
    private readonly core: Core,
    private readonly settings: Settings,
  ) {}

  private update(patch: Partial<ModelsState> | ((m: ModelsState) => Partial<ModelsState>)) {
    this.core.update("models", patch);
  }

  /** Listens to the downloads' progress (a finished one is a model) and a load's. */
  listen(): (() => void)[] {
    const { events } = this.core.api;
    return [
      events.onDownload((d) => {
        this.update((s) => ({ downloads: upsertDownload(s.downloads, d) }));
        if (d.state === "done") {
          void this.reload();
          void this.reloadCatalog();
        }
      }),
      events.onModelProgress((p) => {
        this.update((s) =>
          s.load?.running && s.load.modelId === p.modelId
            ? { load: { ...s.load, done: Math.max(s.load.done, p.done), total: p.total } }
            : {},
        );
      }),
    ];
  }

  async reload() {
    const m = await this.core.attempt("models", () => this.core.api.models.list(), true);
    if (m) this.update({ list: m });
  }

  private async act<T>(f: () => Promise<T>): Promise<T | undefined> {
    const v = await this.core.attempt("models", f);
    await this.reload();
    return v;
  }

  scan() {
    return this.act(() => this.core.api.models.scan());
  }

  setDefault(id: number) {
    return this.act(() => this.core.api.models.setDefault(id));
  }

  forget(id: number) {
    return this.act(() => this.core.api.models.remove(id));
  }

  /** Registers a .gguf file, a model folder or a Core ML bundle folder (the result says whether it runs here). */
  importPath(path: string): Promise<ImportResult | undefined> {
    return this.act(() => this.core.api.models.importPath(path));
  }

  /** Asks for a folder with the window's dialog: its path, "" when cancelled. */
  chooseFolder(title: string) {
    return this.core.attempt("models", () => this.core.api.system.chooseFolder(title));
  }

  /**
   * Loads model id now (progress from model:progress), so the first reply
   * does not wait for it. How it ends is Models.Load's typed outcome; a
   * failure is an error, shown as it is.
   */
  async load(id: number) {
    if (this.core.state.models.load?.running) return;
    this.update({ load: { modelId: id, done: 0, total: 0, running: true, outcome: null, error: "" } });
    let end: Pick<ModelLoad, "outcome" | "error">;
    try {
      end = { outcome: await this.core.api.models.load(id), error: "" };
    } catch (e) {
      end = { outcome: null, error: errorText(e) };
    }
    this.update((s) => ({ load: s.load && { ...s.load, ...end, running: false } }));
    void this.reload(); // the list says which model is loaded now
    if (this.core.state.window.page === "settings") void this.settings.reloadFacts();
  }

  /** Stops the model load running. */
  cancelLoad() {
    return this.core.attempt("models", () => this.core.api.models.cancelLoad());
  }

  async reloadDownloads() {
    const ds = await this.core.attempt("models", () => this.core.api.downloads.list(), true);
    if (ds) this.update({ downloads: ds });
  }

  /** Starts downloading a model file into the models folder; false if refused. */
  async startDownload(r: DownloadRequest): Promise<boolean> {
    const d = await this.core.attempt("models", () => this.core.api.downloads.start(r));
    if (d) this.update((s) => ({ downloads: upsertDownload(s.downloads, d) }));
    return d !== undefined;
  }

  private async download(f: () => Promise<Download | void>) {
    const d = await this.core.attempt("models", f);
    if (d) this.update((s) => ({ downloads: upsertDownload(s.downloads, d) }));
    await this.reloadDownloads();
  }

  pauseDownload(name: string) {
    return this.download(() => this.core.api.downloads.pause(name));
  }

  resumeDownload(name: string) {
    return this.download(() => this.core.api.downloads.resume(name));
  }

  /** Stops a download and removes what arrived. */
  cancelDownload(name: string) {
    return this.download(() => this.core.api.downloads.cancel(name));
  }

  /**
   * The catalog: what is known at once, then every entry's exact size from
   * the Hub (the first shows while the second is asked for).
   */
  async loadCatalog() {
    await this.reloadCatalog();
    if (this.sizesAsked) return; // the Go side keeps what the Hub said
    this.sizesAsked = true;
    const c = await this.core.attempt("models", () => this.core.api.catalog.sizes(), true);
    if (c) this.update({ catalog: c });
    else this.sizesAsked = false;
  }

  /** Whether the Hub was asked for the catalog's sizes this session. */
  private sizesAsked = false;

  /** The Hugging Face token changed: the catalog's sizes are asked for again on the next look. */
  tokenChanged() {
    this.sizesAsked = false;
  }

  async reloadCatalog() {
    const c = await this.core.attempt("models", () => this.core.api.catalog.list(), true);
    if (c) this.update({ catalog: c });
  }

  private setSearch(patch: Partial<HubSearch>) {
    this.update((s) => ({ search: { ...s.search, ...patch } }));
  }

  /** Asks the Hub for GGUF and Core ML repositories whose name holds text; an error is kept in words beside the box. */
  async searchHub(text: string) {
    this.setSearch({ text, busy: true, error: "", repo: null });
    try {
      const results = await this.core.api.catalog.search(text);
      this.setSearch({ results, busy: false });
    } catch (e) {
      this.setSearch({ results: null, busy: false, error: errorText(e) });
    }
  }

  /** Reads a repository's files: the quantisations to pick, or its size as a bundle. */
  async openRepo(repo: string) {
    this.setSearch({ opening: repo, error: "", repo: null });
    try {
      const files = await this.core.api.catalog.files(repo);
      this.setSearch({ repo: files, opening: "" });
    } catch (e) {
      this.setSearch({ opening: "", error: errorText(e) });
    }
  }

  /** Starts the download of a catalog entry or a repository's file (or whole repository); false if refused. */
  async pull(r: PullRequest): Promise<boolean> {
    const d = await this.core.attempt("models", () => this.core.api.catalog.pull(r));
    if (d) this.update((s) => ({ downloads: upsertDownload(s.downloads, d) }));
    return d !== undefined;
  }

  /** Removes a finished, failed or cancelled download from the list. */
  dismissDownload(name: string) {
    return this.download(() => this.core.api.downloads.dismiss(name));
  }
}
