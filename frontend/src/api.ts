import type { Bridge } from "./bridge";
import type {
  Conversation,
  DoneEvent,
  ErrorEvent,
  ModelList,
  Model,
  NewConversation,
  Preferences,
  ProgressEvent,
  Prompt,
  PromptInput,
  ScanResult,
  SearchHit,
  SystemInfo,
  TagCount,
  Thread,
  TokenEvent,
  Turn,
} from "./types";

/** Typed access to the Go services; every call is one bound Go method. */
export function api(b: Bridge) {
  const chat = <T>(m: string, ...a: unknown[]) => b.call<T>("Chat", m, ...a);
  const lib = <T>(m: string, ...a: unknown[]) => b.call<T>("Library", m, ...a);
  const set = <T>(m: string, ...a: unknown[]) => b.call<T>("Settings", m, ...a);
  const mod = <T>(m: string, ...a: unknown[]) => b.call<T>("Models", m, ...a);
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
      setModel: (id: number, modelId: number) => chat<Conversation>("SetModel", id, modelId),
      remove: (id: number) => chat<void>("DeleteConversation", id),
      thread: (id: number) => chat<Thread>("Thread", id),
      selectBranch: (messageId: number) => chat<Thread>("SelectBranch", messageId),
      send: (id: number, text: string) => chat<Turn>("Send", id, text),
      edit: (messageId: number, text: string) => chat<Turn>("Edit", messageId, text),
      regenerate: (messageId: number) => chat<Turn>("Regenerate", messageId),
      cancel: (id: number) => chat<boolean>("Cancel", id),
      search: (q: string) => chat<SearchHit[]>("Search", q),
    },
    library: {
      list: (tag = "", query = "") => lib<Prompt[]>("List", tag, query),
      get: (id: number) => lib<Prompt>("Get", id),
      create: (p: PromptInput) => lib<Prompt>("Create", p),
      update: (id: number, p: PromptInput) => lib<Prompt>("Update", id, p),
      remove: (id: number) => lib<void>("Delete", id),
      tags: () => lib<TagCount[]>("Tags"),
      prepare: (id: number) => lib<Prompt>("Prepare", id),
    },
    settings: {
      get: () => set<Preferences>("Get"),
      update: (p: Preferences) => set<Preferences>("Update", p),
      reset: () => set<Preferences>("Reset"),
    },
    models: {
      list: () => mod<ModelList>("List"),
      scan: () => mod<ScanResult>("Scan"),
      register: (path: string) => mod<Model>("Register", path),
      setDefault: (id: number) => mod<void>("SetDefault", id),
      remove: (id: number) => mod<void>("Remove", id),
    },
    system: { info: () => b.call<SystemInfo>("System", "Info") },
    events: {
      onToken: (cb: (e: TokenEvent) => void) => b.on("chat:token", (d) => cb(d as TokenEvent)),
      onDone: (cb: (e: DoneEvent) => void) => b.on("chat:done", (d) => cb(d as DoneEvent)),
      onProgress: (cb: (e: ProgressEvent) => void) => b.on("chat:progress", (d) => cb(d as ProgressEvent)),
      onError: (cb: (e: ErrorEvent) => void) => b.on("chat:error", (d) => cb(d as ErrorEvent)),
    },
  };
}

export type Api = ReturnType<typeof api>;
