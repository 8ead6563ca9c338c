// Types of the values the Go services (package app, storage) send and take.
// They mirror the Go structs' JSON tags; time.Time arrives as an RFC 3339 string.
// app/frontend_types_test.go fails when they and api.ts drift from the Go code.

/** Who wrote a conversation's title: "" is the default ("New chat"). */
export type TitleSource = "" | "message" | "model" | "prompt" | "import" | "user";

export interface Conversation {
  id: number;
  title: string;
  titleSource: TitleSource;
  /** The model it answers with (the default at its creation); 0 for the default. */
  modelId: number;
  promptId: number;
  systemPrompt: string;
  /** Its own generation settings (Chat.SetOptions); absent: the Settings page's. */
  options?: ConversationOptions;
  activeLeafId: number;
  /** Pinned conversations are listed first. */
  pinned: boolean;
  /** The composer's unsent text, stored (Chat.SetDraft); "" when none. */
  draft: string;
  createdAt: string;
  updatedAt: string;
}

/** A conversation's own settings; a field left out follows the Settings page. */
export interface ConversationOptions {
  temperature?: number;
  maxTokens?: number;
  speculationWidth?: Width;
}

/** What the next reply of a conversation runs with. */
export interface GenerationSettings {
  temperature: number;
  maxTokens: number;
  speculationWidth: Width;
}

/** What Chat.DeleteConversation hid, and until when Chat.UndoDelete brings it back. */
export interface DeletedConversation {
  conversationId: number;
  title: string;
  undoUntil: string;
}

/** A file to offer for saving (exports). */
export interface ExportFile {
  fileName: string;
  mimeType: string;
  text: string;
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
  /** The model that answers the next message (for the header's picker); null if none. */
  model: Model | null;
  /** What the next reply runs with: the conversation's options over the Settings page's. */
  settings: GenerationSettings;
}

/**
 * Chat.AttachDocument: a file read for the next message. block is the
 * document as the message carries it (a fenced block headed by the file
 * name, Go documents.Format); tokens is its size in the conversation's
 * model's tokens, contextTokens that model's context.
 */
export interface Attachment {
  name: string;
  block: string;
  tokens: number;
  contextTokens: number;
}

export interface Turn {
  conversationId: number;
  user: Message;
}

/**
 * Chat.StartFromPrompt: the conversation and the prompt's message sent
 * (user), or, when it could not be sent, kept as the conversation's draft:
 * then user.id is 0 and unsent says why.
 */
export interface PromptStart {
  conversationId: number;
  user: Message;
  unsent: string;
}

export interface GenerateStats {
  tokens: number;
  prefillTokens: number;
  resumedTokens: number;
  targetCalls: number;
  drafted: number;
  accepted: number;
  /** Calls sent without drafts because wide calls cost more lately than measured. */
  declined?: number;
  /** Calls that sent such drafts all the same, to measure the cost afresh. */
  probes?: number;
  /** Why the reply drafted less than it could ("drafting paused: wide calls measured 3.1x width 1"). */
  draftNote?: string;
  ttftMs: number;
  decodeTokS: number;
  width: number;
  stopped: string;
  /** Stretches of the reply from accepted drafts: [start, end) in UTF-16 units. */
  draftedSpans?: [number, number][];
  /** Name of the model that wrote the reply. */
  model?: string;
  /** Title of the prepared library prompt whose KV snapshot the reply resumed from. */
  resumedPrompt?: string;
}

export interface TokenEvent {
  conversationId: number;
  parentId: number;
  /** Position of the piece in its stream; events may arrive out of order. */
  seq: number;
  text: string;
  /** The piece came from an accepted speculative draft. */
  drafted: boolean;
  /** The reply's counts when the piece came out: tokens so far, those from accepted drafts, model calls made. */
  tokens: number;
  accepted: number;
  calls: number;
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

/** A conversation's title changed, or the model started (pending) or stopped writing one. */
export interface TitleEvent {
  conversationId: number;
  title: string;
  source: TitleSource;
  pending: boolean;
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
  /** On the branch on screen; otherwise Chat.OpenMessage selects its branch. */
  onActiveBranch: boolean;
  /** Its place (1-based) among its alternatives (edits, regenerations), and how many there are. */
  alternative: number;
  alternatives: number;
  /** Identical copies on other branches folded into this hit. */
  duplicates: number;
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
  /** Its {{name}} placeholders, in order: ask for them when a chat starts (Chat.StartFromPrompt). */
  variables: string[];
  /** Its prepared KV snapshot; null when not prepared. */
  snapshot: PromptSnapshot | null;
}

export interface PromptSnapshot {
  id: number;
  tokens: number;
  bytes: number;
  createdAt: string;
  /** The model it was made with (0 and "" when no longer registered). */
  modelId: number;
  modelName: string;
  /** A chat started now resumes from it; otherwise reason says why and what to do. */
  ready: boolean;
  reason: string;
}

/**
 * How an action ended when that is more than success or failure (Go
 * app.OutcomeKind, the one list of kinds): the window switches on kind and
 * shows message as it is. A failure is an error, whose text is never matched.
 */
export type OutcomeKind = "prepared" | "too_short" | "loaded" | "cancelled";

export interface Outcome {
  kind: OutcomeKind;
  message: string;
}

/** Library.Prepare: "too_short" is a fact (the message says so), not an error. */
export interface PrepareResult {
  prompt: Prompt;
  outcome: Outcome;
}

/** Chat.Import: the conversation stored, and what of the file was left out (a sentence each). */
export interface ImportedConversation {
  conversation: Conversation;
  warnings: string[];
}

export interface PromptImport {
  created: Prompt[];
  /** Titles of prompts the library already held. */
  skipped: string[];
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

export type Theme = "system" | "light" | "dark";

export interface Preferences {
  speculationWidth: Width;
  kvQuotaBytes: number;
  defaultModelId: number;
  maxTokens: number;
  temperature: number;
  /** Shade reply text that came from accepted drafts. */
  highlightDrafted: boolean;
  /** The system prompt of new conversations not started from a library prompt. */
  defaultSystemPrompt: string;
  theme: Theme;
  /** After the first reply the model writes a short title in the background. */
  modelTitles: boolean;
}

export interface Model {
  id: number;
  path: string;
  kind: string;
  /** Readable name: the file or folder name. */
  name: string;
  fingerprint: string;
  sizeBytes: number;
  meta?: ModelMeta;
  addedAt: string;
  lastUsedAt: string;
}

export interface ModelMeta {
  arch: string;
  quant?: string;
  contextLen?: number;
  vocabSize?: number;
  /** The backend that runs it here ("cpu"); absent when none does (see unsupported). */
  backend?: string;
  /** The name the file gives itself (GGUF general.name), often a training label. */
  declaredName?: string;
  /** Why no backend of this build runs it (a Core ML bundle on Linux). */
  unsupported?: string;
  /** The file's sha256, once a registration compared it with another model's. */
  sha256?: string;
}

/** Models.Import: registered, and whether this build runs it (note says why not). */
export interface ImportResult {
  model: Model;
  runnable: boolean;
  backend: string;
  note: string;
}

export type DownloadState = "running" | "paused" | "verifying" | "done" | "failed" | "cancelled";

export interface Download {
  /** The file name in the models folder; identifies the download. */
  name: string;
  url: string;
  sha256: string;
  state: DownloadState;
  received: number;
  /** -1 while unknown. */
  total: number;
  bytesPerSec: number;
  /** -1 while unknown. */
  etaSeconds: number;
  /** How long nothing has arrived while running, once that is a few seconds (0 while bytes flow). */
  stalledSeconds: number;
  /** Why it failed, or why it paused by itself (Resume continues). */
  error: string;
  model: Model | null;
  /** Each file's progress when the download is a bundle (a folder of files fetched as one); absent for one file. */
  files?: FileProgress[];
  /** Where a bundle comes from (OWNER/NAME@COMMIT); "" for one file (url says it). */
  source: string;
}

/** A bundle file's state (download.FileState). */
export type FileState = "waiting" | "running" | "verifying" | "done" | "failed" | "interrupted";

/** One file of a bundle download. */
export interface FileProgress {
  path: string;
  received: number;
  size: number;
  state: FileState;
}

/** How a model fits this machine (catalog.Verdict). */
export type Verdict = "fits" | "tight" | "too-large" | "elsewhere" | "unknown";

/** A model's size on disk, the memory it needs and whether it fits this machine (catalog.Fit). */
export interface Fit {
  verdict: Verdict;
  size: number;
  need: number;
  ram: number;
  /** It runs on the Neural Engine here (Apple silicon). */
  neuralEngine: boolean;
  note: string;
}

/** One model of the curated catalog (Catalog.List). */
export interface CatalogEntry {
  name: string;
  title: string;
  repo: string;
  format: string;
  backend: string;
  context: number;
  licence: string;
  licenceURL: string;
  /** The licence must be accepted on Hugging Face (at link) before the files download. */
  acceptOnHub: boolean;
  link: string;
  fit: Fit;
  /** fit.size is the Hub's tree's, not the catalog's approximate figure. */
  sizeExact: boolean;
  recommended: boolean;
  /** The name its download and its file or folder in the models folder have. */
  download: string;
  /** The registered model it installed, 0 when none. */
  modelId: number;
  /** Why the Hub could not tell its size. */
  error: string;
}

export interface CatalogList {
  entries: CatalogEntry[];
  ram: number;
  neuralEngine: boolean;
  hub: string;
}

/** A repository the Hugging Face search found. */
export interface HubModel {
  id: string;
  format: string;
  downloads: number;
  likes: number;
  gated: boolean;
  link: string;
}

/** A GGUF file of a repository: a quantisation to pick. */
export interface RepoFile {
  path: string;
  size: number;
  fit: Fit;
}

/** What a repository offers (Catalog.Files). */
export interface RepoFiles {
  repo: string;
  commit: string;
  gated: boolean;
  link: string;
  quantisations: RepoFile[];
  /** No GGUF file: the whole repository downloads as one folder (files, size, fit). */
  bundle: boolean;
  files: number;
  size: number;
  fit: Fit;
}

/** What Settings shows of the Hugging Face access token (Settings.HubToken): never the token itself. */
export interface HubToken {
  /** A token is stored: the Hub client sends it to Hugging Face (only to its own host). */
  set: boolean;
  /** Its kind and last four characters ("hf_…wxyz"). */
  masked: string;
  /** Where it is (or would be) kept: the macOS login keychain, or a file only this user can read. */
  where: string;
  tokensURL: string;
  /** Why the stored token could not be read; "" when it could. */
  error: string;
  /** The account the Hub named for the token when it was saved (SetHubToken's answer only). */
  account: string;
  /** Why the Hub could not be asked when it was saved (the token was stored unchecked). */
  note: string;
}

/** What Catalog.Pull downloads: a catalog entry, or a repository and (for GGUF) the file. */
export interface PullRequest {
  entry: string;
  repo: string;
  file: string;
}

export interface DownloadRequest {
  url: string;
  /** 64 hex digits, or "" to skip the check. */
  sha256: string;
  /** "" takes the URL's file name. */
  fileName: string;
  /** The file's size in bytes when known (a catalog's), 0 when not: the download stops at it. */
  size: number;
}

export interface CacheUsage {
  usedBytes: number;
  quotaBytes: number;
  snapshots: number;
  /** Prepared prompts' snapshots, kept by Clear cache unless asked. */
  pinnedBytes: number;
  pinned: number;
  dir: string;
}

export interface ClearCacheResult {
  removed: number;
  freedBytes: number;
  usage: CacheUsage;
  problems: { path: string; error: string }[];
}

export interface BackendInfo {
  /** The backend running the default model ("cpu"), "" if none. */
  backend: string;
  model: string;
  why: string;
  available: string[];
  /** Whether this build runs Core ML bundles, and why not. */
  coreML: string;
}

export interface Example {
  title: string;
  text: string;
}

/** What an empty window shows. */
export interface FirstRun {
  empty: boolean;
  defaultModel: Model | null;
  /** What to do when there is no model. */
  noModel: string;
  modelsDir: string;
  examples: Example[];
}

export interface ModelList {
  models: Model[];
  defaultId: number;
  /** The model loaded in memory now (by Load now or a reply), 0 when none. */
  loadedId: number;
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

/** The Core ML part of Settings: the compute-units setting and what runs the loaded model. */
export interface CoreMLSettings {
  computeUnits: string;
  computeUnitChoices: string[];
  /** The loaded model's backend ("coreml", "cpu"), "" when none is loaded; what runs it; its path. */
  running: string;
  executor: string;
  model: string;
  /** Whether this build runs Core ML here, and what runs or why not. */
  available: boolean;
  detail: string;
}

/** How far Models.Load is: done of total steps (the backend's own units). */
export interface ModelProgress {
  modelId: number;
  done: number;
  total: number;
}

/** The HTTP API switch (Settings): the OpenAI-compatible server inside the app. */
export interface APIStatus {
  running: boolean;
  /** The switch is on (stored): the server starts with the app. */
  enabled: boolean;
  /** Base URL, e.g. http://127.0.0.1:11435/v1; "" when stopped. */
  url: string;
  /** Where Ollama's clients point (OLLAMA_HOST: the same server, its /api routes); "" when stopped. */
  ollamaHost: string;
  port: number;
  /** Bearer token requests need, kept in tokenFile in the data directory. */
  token: string;
  tokenFile: string;
  /** The name requests give as "model" (the default model); "" when none. */
  model: string;
  /** Why it is not running although enabled; "" otherwise. */
  error: string;
}
