// Pure UI logic, kept apart from the components so that unit tests cover it.
import type {
  DoneEvent,
  ErrorEvent,
  GenerateStats,
  Message,
  Model,
  ProgressEvent,
  Prompt,
  PromptInput,
  SearchHit,
  Thread,
  TokenEvent,
  Width,
} from "./types";

/** A message on the active branch with its alternatives (same parent). */
export interface Row {
  message: Message;
  /** Ids of every version at this point of the conversation, oldest first. */
  siblings: number[];
  /** Position of message among siblings (0-based). */
  index: number;
}

/** The active branch of a thread, each message with its sibling versions. */
export function branchRows(t: Thread): Row[] {
  const byId = new Map(t.messages.map((m) => [m.id, m]));
  const kids = new Map<number, number[]>();
  for (const m of t.messages) {
    const list = kids.get(m.parentId) ?? [];
    list.push(m.id);
    kids.set(m.parentId, list);
  }
  for (const list of kids.values()) list.sort((a, b) => a - b);
  const rows: Row[] = [];
  for (const id of t.path) {
    const message = byId.get(id);
    if (!message) continue; // the tree and the path come from one call; be safe anyway
    const siblings = kids.get(message.parentId) ?? [id];
    rows.push({ message, siblings, index: siblings.indexOf(id) });
  }
  return rows;
}

/** A reply being streamed (or that just failed) in one conversation. */
export interface Stream {
  parentId: number;
  /** The pieces received so far, by sequence number (holes until they arrive). */
  pieces: string[];
  /** drafted[seq]: piece seq came from an accepted draft. */
  drafted: boolean[];
  text: string;
  error: string | null;
  running: boolean;
  /** The prompt's prefill: tokens read of total (null before any report). */
  progress?: { done: number; total: number } | null;
}

/** Streams by conversation id. */
export type Streams = Readonly<Record<number, Stream>>;

/**
 * A reply to parentId has started. Its tokens, or even its end, may have
 * arrived before the call that started it returned: then keep what they
 * recorded (the caller clears the conversation's stream before starting).
 */
export function streamStarted(s: Streams, conversationId: number, parentId: number): Streams {
  const cur = s[conversationId];
  if (cur && cur.parentId === parentId) return s;
  return { ...s, [conversationId]: { parentId, pieces: [], drafted: [], text: "", error: null, running: true } };
}

/**
 * Adds a token's text to its stream at its sequence number (starting a stream
 * if the event came first). Tokens of a stream that has ended are late
 * duplicates of stored text: ignored.
 */
export function streamToken(s: Streams, e: TokenEvent): Streams {
  return streamTokens(s, [e]);
}

/**
 * streamToken for a batch of tokens (those of one animation frame): each
 * stream they touch is copied once, and its text grows by the pieces that
 * come after every piece so far, so a long reply is not re-joined per token
 * (only a piece that fills a hole re-joins it).
 */
export function streamTokens(s: Streams, es: readonly TokenEvent[]): Streams {
  let out: Record<number, Stream> | null = null;
  // The streams copied for this batch, which it may change in place.
  const own = new Set<Stream>();
  for (const e of es) {
    const cur = (out ?? s)[e.conversationId];
    if (cur && cur.parentId === e.parentId && !cur.running) continue;
    let st = cur && cur.parentId === e.parentId ? cur : null;
    if (!st || !own.has(st)) {
      const base = st ?? { parentId: e.parentId, pieces: [], drafted: [], text: "", error: null, running: true };
      st = { ...base, pieces: base.pieces.slice(), drafted: base.drafted.slice(), running: true };
      own.add(st);
      out ??= { ...s };
      out[e.conversationId] = st;
    }
    const last = e.seq >= st.pieces.length;
    st.pieces[e.seq] = e.text;
    st.drafted[e.seq] = e.drafted;
    st.text = last ? st.text + e.text : st.pieces.join("");
  }
  return out ?? s;
}

/** Runs callbacks before the next repaint (window.requestAnimationFrame). */
export interface Frames {
  request(cb: () => void): number;
  cancel(id: number): void;
}

/** The browser's animation frames. */
export const animationFrames: Frames = {
  request: (cb) => requestAnimationFrame(() => cb()),
  cancel: (id) => cancelAnimationFrame(id),
};

/**
 * Collects items and hands them to flush at most once per animation frame,
 * all those that arrived since the last flush, in order. flushNow hands them
 * over at once (before an event that must come after them); stop drops them.
 */
export function frameBatcher<T>(frames: Frames, flush: (items: T[]) => void) {
  let items: T[] = [];
  let id: number | null = null;
  const run = () => {
    id = null;
    const batch = items;
    items = [];
    if (batch.length > 0) flush(batch);
  };
  return {
    add(item: T) {
      items.push(item);
      id ??= frames.request(run);
    },
    flushNow() {
      if (id !== null) frames.cancel(id);
      run();
    },
    stop() {
      if (id !== null) frames.cancel(id);
      id = null;
      items = [];
    },
  };
}

/**
 * The prompt's prefill advanced. Reports may arrive out of order: the
 * furthest wins. Ignored once the stream has ended.
 */
export function streamProgress(s: Streams, e: ProgressEvent): Streams {
  const cur = s[e.conversationId];
  if (cur && cur.parentId === e.parentId && !cur.running) return s;
  const base =
    cur && cur.parentId === e.parentId
      ? cur
      : { parentId: e.parentId, pieces: [], drafted: [], text: "", error: null, running: true };
  if (base.progress && base.progress.done >= e.done) return s;
  return { ...s, [e.conversationId]: { ...base, progress: { done: e.done, total: e.total } } };
}

/** "Reading the prompt: 128/512 tokens (25%)", or "" when there is nothing to say. */
export function progressLine(p: Stream["progress"]): string {
  if (!p || p.total <= 0) return "";
  return `Reading the prompt: ${p.done}/${p.total} tokens (${Math.floor((100 * p.done) / p.total)}%)`;
}

/** A stream ended and its reply is stored (the thread reloads): not running. */
export function streamDone(s: Streams, e: DoneEvent): Streams {
  return {
    ...s,
    [e.conversationId]: { parentId: e.parentId, pieces: [], drafted: [], text: "", error: null, running: false },
  };
}

/** Forgets the conversation's stream (before starting another). */
export function streamCleared(s: Streams, conversationId: number): Streams {
  const { [conversationId]: _gone, ...rest } = s;
  return rest;
}

/** A stream failed: keep what it showed and the error, not running. */
export function streamError(s: Streams, e: ErrorEvent): Streams {
  const cur = s[e.conversationId];
  return {
    ...s,
    [e.conversationId]: {
      parentId: e.parentId,
      pieces: cur?.pieces ?? [],
      drafted: cur?.drafted ?? [],
      text: cur?.text ?? "",
      error: e.error,
      running: false,
    },
  };
}

/** Splits "a, b ,, C" into tags as typed (the Go side normalises them). */
export function parseTags(text: string): string[] {
  return text
    .split(",")
    .map((t) => t.trim())
    .filter((t) => t !== "");
}

/** The speculation widths the settings page offers. */
export const widthChoices: Width[] = ["auto", 1, 2, 3, 4, 5, 6, 7, 8];

/** Parses the width select's value. */
export function parseWidth(v: string): Width {
  if (v === "auto") return "auto";
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 8) throw new Error(`speculation width ${v}: want 1-8 or auto`);
  return n;
}

const GiB = 1024 ** 3;

/** Bytes as GiB for the quota field (two decimals at most). */
export function bytesToGiB(n: number): number {
  return Math.round((n / GiB) * 100) / 100;
}

/** The quota field's GiB as whole bytes. */
export function gibToBytes(g: number): number {
  if (!Number.isFinite(g) || g < 0) throw new Error(`KV cache quota ${g} GiB: want a number of GiB, 0 or more`);
  return Math.round(g * GiB);
}

/** A byte count for people. */
export function humanBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

/**
 * The drafted stretches of a streamed reply, [start, end) in UTF-16 units of
 * its text, adjacent drafted pieces merged (the same spans the Go side stores).
 * Pieces not arrived yet count as empty.
 */
export function pieceSpans(pieces: readonly string[], drafted: readonly boolean[]): [number, number][] {
  const spans: [number, number][] = [];
  let at = 0;
  for (let i = 0; i < pieces.length; i++) {
    const n = (pieces[i] ?? "").length;
    if (drafted[i] && n > 0) {
      const last = spans[spans.length - 1];
      if (last && last[1] === at) last[1] = at + n;
      else spans.push([at, at + n]);
    }
    at += n;
  }
  return spans;
}

/**
 * Tokens per target call (τ): how many tokens each model call yielded on
 * average; 1 without speculation. null when there were no calls.
 */
export function tau(st: { tokens: number; targetCalls: number }): number | null {
  return st.targetCalls > 0 ? st.tokens / st.targetCalls : null;
}

/** One line of generation statistics for a reply. */
export function statsLine(st: Message["stats"]): string {
  if (!st) return "";
  const parts = [`${st.tokens} tokens`];
  const t = tau(st);
  if (t !== null) parts.push(`τ ${t.toFixed(2)}`);
  parts.push(`drafted ${st.drafted}`, `accepted ${st.accepted}`);
  if (st.decodeTokS > 0) parts.push(`${st.decodeTokS.toFixed(1)} tok/s`);
  if (st.ttftMs > 0) parts.push(`first token ${Math.round(st.ttftMs)} ms`);
  if (st.resumedTokens > 0) parts.push(`resumed ${st.resumedTokens}`);
  if (st.width) parts.push(`width ${st.width}`);
  else parts.push("width auto");
  if (st.stopped && st.stopped !== "stop") parts.push(st.stopped);
  return parts.join(" · ");
}

/**
 * Search hits without the copies a regenerated or edited branch makes: hits
 * in one conversation with the same role and the same text are one hit (the
 * first, the best ranked), which opens its own message in its branch.
 */
export function dedupeHits(hits: readonly SearchHit[]): SearchHit[] {
  const seen = new Set<string>();
  return hits.filter((h) => {
    const key = JSON.stringify([h.conversationId, h.role, h.segments.map((s) => s.text).join("")]);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * Speculation figures of a reply in progress, from its pieces: how many
 * arrived, the share that came from accepted drafts, and τ, tokens per model
 * call. Each call yields its accepted drafts and one token of the model's own
 * (the correction or the next token), so the calls so far are the pieces that
 * were not drafted. null before the first piece.
 */
export function liveStats(
  st: Pick<Stream, "pieces" | "drafted">,
): { tokens: number; share: number; tau: number } | null {
  let tokens = 0;
  let drafted = 0;
  for (let i = 0; i < st.pieces.length; i++) {
    if (st.pieces[i] === undefined) continue;
    tokens++;
    if (st.drafted[i]) drafted++;
  }
  if (tokens === 0) return null;
  const calls = tokens - drafted;
  return { tokens, share: drafted / tokens, tau: calls > 0 ? tokens / calls : tokens };
}

/** The same figures for a finished reply, from its stored stats; null without tokens or calls. */
export function finalStats(st: GenerateStats): { tokens: number; share: number; tau: number } | null {
  const t = tau(st);
  if (st.tokens <= 0 || t === null) return null;
  return { tokens: st.tokens, share: Math.min(1, st.accepted / st.tokens), tau: t };
}

// A {{name}} placeholder: letters, digits, _, - and spaces inside, trimmed.
const VARIABLE = /\{\{\s*([\p{L}\p{N}_][\p{L}\p{N}_ -]*?)\s*\}\}/gu;

/** The distinct {{name}} placeholders of the texts, in order of appearance. */
export function promptVariables(...texts: string[]): string[] {
  const names: string[] = [];
  for (const t of texts) for (const m of t.matchAll(VARIABLE)) if (m[1] && !names.includes(m[1])) names.push(m[1]);
  return names;
}

/** text with each {{name}} replaced by values[name] (placeholders without a value stay). */
export function fillVariables(text: string, values: Readonly<Record<string, string>>): string {
  return text.replace(VARIABLE, (whole, name: string) => values[name] ?? whole);
}

/** The title a conversation gets before its first message. */
export const UNTITLED = "New chat";

/** A first message as a conversation title: its first line, at most 60 characters, cut at a word. */
export function titleFrom(text: string): string {
  const line = text.trim().split("\n")[0]?.trim() ?? "";
  if (line.length <= 60) return line;
  const cut = line.slice(0, 60);
  const space = cut.lastIndexOf(" ");
  return `${(space > 30 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

/** A model's readable name: the one the Go side gives it (its file's), else its path's last part. */
export function modelLabel(m: Pick<Model, "name" | "path">): string {
  return (
    m.name.trim() ||
    m.path
      .split(/[\\/]/)
      .filter((p) => p !== "")
      .pop() ||
    m.path
  );
}

/** What the Models page says of a model: architecture, quantisation, context length, backend. */
export function modelFacts(m: Model): { arch: string; quant: string; context: string; backend: string } {
  const meta: Partial<NonNullable<Model["meta"]>> = m.meta ?? {};
  return {
    arch: meta.arch ?? "",
    quant: meta.quant ?? "",
    context: meta.contextLen ? `${meta.contextLen.toLocaleString("en-US")} tokens` : "",
    backend: meta.backend ?? "",
  };
}

/** The JSON the prompt library exports and imports. */
export interface PromptFile {
  anechat: "prompts";
  version: 1;
  prompts: { title: string; systemPrompt: string; body: string; tags: string[] }[];
}

/** The prompts as the library's export file. */
export function promptsToJSON(ps: readonly Pick<Prompt, "title" | "systemPrompt" | "body" | "tags">[]): string {
  const file: PromptFile = {
    anechat: "prompts",
    version: 1,
    prompts: ps.map((p) => ({ title: p.title, systemPrompt: p.systemPrompt, body: p.body, tags: [...p.tags] })),
  };
  return `${JSON.stringify(file, null, 2)}\n`;
}

/**
 * Reads an export file (or a bare list of prompts). Every prompt needs a
 * title; a wrong field is named with the prompt's place in the file.
 */
export function promptsFromJSON(text: string): PromptInput[] {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(`prompt file: not JSON (${(e as Error).message})`);
  }
  const list: unknown = Array.isArray(v) ? v : (v as { prompts?: unknown } | null)?.prompts;
  if (!Array.isArray(list)) throw new Error('prompt file: want {"prompts": [...]} or a list of prompts');
  return list.map((raw: unknown, i) => {
    const at = `prompt file: prompts[${i}]`;
    if (typeof raw !== "object" || raw === null) throw new Error(`${at}: want an object`);
    const p = raw as Record<string, unknown>;
    const str = (k: string, need: boolean) => {
      const x = p[k];
      if (x === undefined && !need) return "";
      if (typeof x !== "string") throw new Error(`${at}.${k}: want a string`);
      return x;
    };
    const title = str("title", true).trim();
    if (!title) throw new Error(`${at}.title: empty (every prompt needs a title)`);
    const tags = p["tags"] ?? [];
    if (!Array.isArray(tags) || tags.some((t) => typeof t !== "string"))
      throw new Error(`${at}.tags: want a list of strings`);
    return { title, systemPrompt: str("systemPrompt", false), body: str("body", false), tags: tags as string[] };
  });
}
