import type { Bridge } from "./bridge";
import type {
  APIStatus,
  CatalogList,
  HubModel,
  HubToken,
  PullRequest,
  RepoFiles,
  BackendInfo,
  CacheUsage,
  ClearCacheResult,
  CoreMLSettings,
  Conversation,
  ConversationOptions,
  DeletedConversation,
  DoneEvent,
  Download,
  DownloadRequest,
  ErrorEvent,
  ExportFile,
  FirstRun,
  ImportResult,
  ImportedConversation,
  ModelList,
  Model,
  ModelProgress,
  NewConversation,
  Outcome,
  Preferences,
  PrepareResult,
  ProgressEvent,
  PromptStart,
  Prompt,
  PromptImport,
  PromptInput,
  ScanResult,
  SearchHit,
  SystemInfo,
  TagCount,
  Thread,
  TitleEvent,
  TokenEvent,
  Turn,
  Attachment,
} from "./types";

/** Typed access to the Go services; every call is one bound Go method. */
export function api(b: Bridge) {
  const chat = <T>(m: string, ...a: unknown[]) => b.call<T>("Chat", m, ...a);
  const lib = <T>(m: string, ...a: unknown[]) => b.call<T>("Library", m, ...a);
  const set = <T>(m: string, ...a: unknown[]) => b.call<T>("Settings", m, ...a);
  const mod = <T>(m: string, ...a: unknown[]) => b.call<T>("Models", m, ...a);
  const sys = <T>(m: string, ...a: unknown[]) => b.call<T>("System", m, ...a);
  const dl = <T>(m: string, ...a: unknown[]) => b.call<T>("Downloads", m, ...a);
  const ml = <T>(m: string, ...a: unknown[]) => b.call<T>("CoreML", m, ...a);
  const srv = <T>(m: string, ...a: unknown[]) => b.call<T>("API", m, ...a);
  const cat = <T>(m: string, ...a: unknown[]) => b.call<T>("Catalog", m, ...a);
  return {
    chat: {
      list: () => chat<Conversation[]>("ListConversations"),
      create: (c: Partial<NewConversation>) =>
        chat<Conversation>("CreateConversation", {
          title: "",
          modelId: 0,
          promptId: 0,
          ...c,
        } satisfies NewConversation),
      rename: (id: number, title: string) => chat<Conversation>("RenameConversation", id, title),
      setSystemPrompt: (id: number, s: string) => chat<Conversation>("SetSystemPrompt", id, s),
      /** The header's model picker: 0 follows the default model. */
      setModel: (id: number, modelId: number) => chat<Conversation>("SetModel", id, modelId),
      setOptions: (id: number, o: ConversationOptions) => chat<Conversation>("SetOptions", id, o),
      setPinned: (id: number, pinned: boolean) => chat<Conversation>("SetPinned", id, pinned),
      /** Hides it at once; undoDelete brings it back until undoUntil. */
      remove: (id: number) => chat<DeletedConversation>("DeleteConversation", id),
      undoDelete: (id: number) => chat<Conversation>("UndoDelete", id),
      thread: (id: number) => chat<Thread>("Thread", id),
      selectBranch: (messageId: number) => chat<Thread>("SelectBranch", messageId),
      /** Opens a search hit: its conversation with the message on the branch shown. */
      openMessage: (messageId: number) => chat<Thread>("OpenMessage", messageId),
      send: (id: number, text: string) => chat<Turn>("Send", id, text),
      /** Reads a file for conversation id's next message (its bytes, base64): sized, or refused past the context. */
      attachDocument: (id: number, name: string, dataBase64: string) =>
        chat<Attachment>("AttachDocument", id, name, dataBase64),
      edit: (messageId: number, text: string) => chat<Turn>("Edit", messageId, text),
      regenerate: (messageId: number) => chat<Turn>("Regenerate", messageId),
      cancel: (id: number) => chat<boolean>("Cancel", id),
      cancelTitle: (id: number) => chat<boolean>("CancelTitle", id),
      search: (q: string) => chat<SearchHit[]>("Search", q),
      /** A chat from a library prompt, its {{variables}} filled from values: sent, or kept as its draft (unsent says why). */
      startFromPrompt: (promptId: number, values: Record<string, string>) =>
        chat<PromptStart>("StartFromPrompt", promptId, values),
      /** Stores the composer's unsent text ("" clears it). */
      setDraft: (id: number, text: string) => chat<void>("SetDraft", id, text),
      exportAs: (id: number, format: "markdown" | "json") => chat<ExportFile>("Export", id, format),
      /** The conversation, opened by the caller, and what of the file was left out. */
      importJSON: (text: string) => chat<ImportedConversation>("Import", text),
    },
    library: {
      list: (tag = "", query = "") => lib<Prompt[]>("List", tag, query),
      get: (id: number) => lib<Prompt>("Get", id),
      create: (p: PromptInput) => lib<Prompt>("Create", p),
      update: (id: number, p: PromptInput) => lib<Prompt>("Update", id, p),
      remove: (id: number) => lib<void>("Delete", id),
      tags: () => lib<TagCount[]>("Tags"),
      prepare: (id: number) => lib<PrepareResult>("Prepare", id),
      /** Drops the prompt's warm snapshot (its file too). */
      unprepare: (id: number) => lib<Prompt>("Unprepare", id),
      /** All prompts when ids is empty. */
      exportJSON: (ids: number[] = []) => lib<ExportFile>("Export", ids),
      importJSON: (text: string) => lib<PromptImport>("Import", text),
    },
    settings: {
      get: () => set<Preferences>("Get"),
      update: (p: Preferences) => set<Preferences>("Update", p),
      reset: () => set<Preferences>("Reset"),
      cache: () => set<CacheUsage>("Cache"),
      clearCache: (includePinned: boolean) => set<ClearCacheResult>("ClearCache", includePinned),
      /** Whether a Hugging Face token is stored (masked), and where. */
      hubToken: () => set<HubToken>("HubToken"),
      /** Stores the token pasted (gated repositories then download with it). */
      setHubToken: (token: string) => set<HubToken>("SetHubToken", token),
      clearHubToken: () => set<HubToken>("ClearHubToken"),
    },
    models: {
      list: () => mod<ModelList>("List"),
      scan: () => mod<ScanResult>("Scan"),
      register: (path: string) => mod<Model>("Register", path),
      /** A .gguf file, a model folder or a Core ML bundle folder. */
      importPath: (path: string) => mod<ImportResult>("Import", path),
      setDefault: (id: number) => mod<void>("SetDefault", id),
      remove: (id: number) => mod<void>("Remove", id),
      /** Loads model id now (model:progress events); resolves once loaded ("loaded") or stopped ("cancelled"). */
      load: (id: number) => mod<Outcome>("Load", id),
      cancelLoad: () => mod<boolean>("CancelLoad"),
    },
    downloads: {
      list: () => dl<Download[]>("List"),
      start: (r: DownloadRequest) => dl<Download>("Start", r),
      pause: (name: string) => dl<Download>("Pause", name),
      resume: (name: string) => dl<Download>("Resume", name),
      cancel: (name: string) => dl<void>("Cancel", name),
      dismiss: (name: string) => dl<void>("Dismiss", name),
    },
    /** The curated catalog and the Hugging Face search; Pull starts a download (downloads.* then). */
    catalog: {
      /** What is known now, no network. */
      list: () => cat<CatalogList>("List"),
      /** Every entry's size from the Hub's tree. */
      sizes: () => cat<CatalogList>("Sizes"),
      search: (text: string) => cat<HubModel[]>("Search", text),
      files: (repo: string) => cat<RepoFiles>("Files", repo),
      pull: (r: PullRequest) => cat<Download>("Pull", r),
    },
    /** The Settings switch that serves the OpenAI-compatible HTTP API on 127.0.0.1. */
    apiServer: {
      status: () => srv<APIStatus>("Status"),
      /** 0: the stored port, else 11435. */
      start: (port: number) => srv<APIStatus>("Start", port),
      stop: () => srv<APIStatus>("Stop"),
    },
    system: {
      info: () => b.call<SystemInfo>("System", "Info"),
      backend: () => sys<BackendInfo>("Backend"),
      openDataDir: () => sys<void>("OpenDataDir"),
      chooseFolder: (title: string) => sys<string>("ChooseFolder", title),
      /** The save dialog, then the file written there: its path, "" when cancelled. */
      saveFile: (title: string, f: ExportFile) => sys<string>("SaveFile", title, f),
      firstRun: () => sys<FirstRun>("FirstRun"),
    },
    coreml: {
      settings: () => ml<CoreMLSettings>("Settings"),
      setComputeUnits: (units: string) => ml<CoreMLSettings>("SetComputeUnits", units),
    },
    events: {
      onToken: (cb: (e: TokenEvent) => void) => b.on("chat:token", (d) => cb(d as TokenEvent)),
      onDone: (cb: (e: DoneEvent) => void) => b.on("chat:done", (d) => cb(d as DoneEvent)),
      onProgress: (cb: (e: ProgressEvent) => void) => b.on("chat:progress", (d) => cb(d as ProgressEvent)),
      onError: (cb: (e: ErrorEvent) => void) => b.on("chat:error", (d) => cb(d as ErrorEvent)),
      onTitle: (cb: (e: TitleEvent) => void) => b.on("chat:title", (d) => cb(d as TitleEvent)),
      onDownload: (cb: (e: Download) => void) => b.on("download:update", (d) => cb(d as Download)),
      onModelProgress: (cb: (e: ModelProgress) => void) => b.on("model:progress", (d) => cb(d as ModelProgress)),
    },
  };
}

export type Api = ReturnType<typeof api>;
