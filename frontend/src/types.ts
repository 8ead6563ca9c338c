// Types of the values the Go services (package app, storage) send and take.
// They mirror the Go structs' JSON tags; time.Time arrives as an RFC 3339 string.
// app/frontend_types_test.go fails when they and api.ts drift from the Go code.

export interface Conversation {
  id: number;
  title: string;
  modelId: number;
  promptId: number;
  systemPrompt: string;
  options?: unknown;
  activeLeafId: number;
  createdAt: string;
  updatedAt: string;
}

/** What Chat.CreateConversation takes; 0 and "" mean the defaults. */
export interface NewConversation {
  title: string;
  modelId: number;
  promptId: number;
}

export type Role = "system" | "user" | "assistant";

export interface Message {
  id: number;
  conversationId: number;
  parentId: number;
  role: Role;
  content: string;
  stats?: GenerateStats;
  createdAt: string;
}

export interface Thread {
  conversation: Conversation;
  messages: Message[];
  path: number[];
  generating: number;
}

export interface Turn {
  conversationId: number;
  user: Message;
}

export interface GenerateStats {
  tokens: number;
  prefillTokens: number;
  resumedTokens: number;
  targetCalls: number;
  drafted: number;
  accepted: number;
  ttftMs: number;
  decodeTokS: number;
  width: number;
  stopped: string;
  /** Stretches of the reply from accepted drafts: [start, end) in UTF-16 units. */
  draftedSpans?: [number, number][];
}

export interface TokenEvent {
  conversationId: number;
  parentId: number;
  /** Position of the piece in its stream; events may arrive out of order. */
  seq: number;
  text: string;
  /** The piece came from an accepted speculative draft. */
  drafted: boolean;
}

/** How far the prompt's prefill is (before the first token). */
export interface ProgressEvent {
  conversationId: number;
  parentId: number;
  done: number;
  total: number;
}

export interface DoneEvent {
  conversationId: number;
  parentId: number;
  message: Message | null;
  stats: GenerateStats;
}

export interface ErrorEvent {
  conversationId: number;
  parentId: number;
  error: string;
}

export interface SearchHit {
  messageId: number;
  conversationId: number;
  parentId: number;
  role: Role;
  createdAt: string;
  conversationTitle: string;
  snippet: string;
  segments: { text: string; match: boolean }[];
}

export interface Prompt {
  id: number;
  title: string;
  systemPrompt: string;
  body: string;
  tags: string[];
  pinnedSnapshotId: number;
  createdAt: string;
  updatedAt: string;
}

export interface PromptInput {
  title: string;
  systemPrompt: string;
  body: string;
  tags: string[];
}

export interface TagCount {
  tag: string;
  prompts: number;
}

/** Speculation width: 1 (off) to 8, or "auto". */
export type Width = number | "auto";

export interface Preferences {
  speculationWidth: Width;
  kvQuotaBytes: number;
  defaultModelId: number;
  maxTokens: number;
  temperature: number;
  /** Shade reply text that came from accepted drafts. */
  highlightDrafted: boolean;
}

export interface Model {
  id: number;
  path: string;
  kind: string;
  name: string;
  fingerprint: string;
  sizeBytes: number;
  /** What the file says of itself (app.modelMeta). */
  meta?: {
    arch?: string;
    quant?: string;
    contextLen?: number;
    vocabSize?: number;
    backend?: string;
    /** The name the model gives itself (GGUF general.name). */
    declaredName?: string;
  };
  addedAt: string;
  lastUsedAt: string;
}

export interface ModelList {
  models: Model[];
  defaultId: number;
  modelsDir: string;
}

export interface ScanResult {
  registered: Model[];
  problems: { path: string; error: string }[];
}

export interface SystemInfo {
  version: string;
  os: string;
  arch: string;
  go: string;
  dataDir: string;
  database: string;
  schemaVersion: number;
  storageError: string;
  engineError: string;
}
