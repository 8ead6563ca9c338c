// Pure UI logic, kept apart from the components so that unit tests cover it.
import type {
  Download,
  DoneEvent,
  ErrorEvent,
  GenerateStats,
  Message,
  Model,
  ProgressEvent,
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
  /** The latest counts the token events carried (tokens, accepted drafts, model calls so far). */
  counts?: Counts;
}

/** A reply's counts so far, as token events carry them. */
export interface Counts {
  tokens: number;
  accepted: number;
  calls: number;
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
    // The counts only grow: a late event's are older.
    if (e.tokens > 0 && e.tokens >= (st.counts?.tokens ?? 0))
      st.counts = { tokens: e.tokens, accepted: e.accepted, calls: e.calls };
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
  // Why it drafted less than it could, so "width 4 · drafted 0" is never a mystery.
  if (st.draftNote) parts.push(st.draftNote);
  return parts.join(" · ");
}

/**
 * The note a reply resumed from a prepared library prompt shows above its
 * text (the stats line's "resumed N" alone is easy to miss); "" otherwise.
 */
export function resumedNote(st: Message["stats"]): string {
  if (!st?.resumedPrompt || st.resumedTokens <= 0) return "";
  const n = st.resumedTokens;
  return `Started from the prepared prompt “${st.resumedPrompt}”: ${n} token${n === 1 ? "" : "s"} resumed from its KV cache, not read again.`;
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
 * Speculation figures of a reply in progress: tokens so far, the share that
 * came from accepted drafts, and τ, tokens per model call (null before the
 * first call). Exact from the counts the token events carry; a Generator
 * that sends none is estimated from the pieces (each call yields its
 * accepted drafts and one token of the model's own, so the calls are the
 * pieces not drafted). null before the first piece.
 */
export function liveStats(
  st: Pick<Stream, "pieces" | "drafted" | "counts">,
): { tokens: number; share: number; tau: number | null } | null {
  const c = st.counts;
  if (c && c.tokens > 0)
    return { tokens: c.tokens, share: c.accepted / c.tokens, tau: c.calls > 0 ? c.tokens / c.calls : null };
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
export function finalStats(st: GenerateStats): { tokens: number; share: number; tau: number | null } | null {
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

/** A duration in seconds for people: "45 s", "3 min 20 s", "1 h 5 min". */
export function humanDuration(sec: number): string {
  const s = Math.max(0, Math.round(sec));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ""}`;
  const m = Math.floor(s / 60);
  return `${Math.floor(m / 60)} h${m % 60 ? ` ${m % 60} min` : ""}`;
}

/** A download's progress for people: "1.2 MiB of 98.0 MiB (1%) · 2.0 MiB/s · 48 s left". */
export function downloadLine(d: Download): string {
  const parts: string[] = [];
  parts.push(
    d.total > 0
      ? `${humanBytes(d.received)} of ${humanBytes(d.total)} (${Math.floor((100 * d.received) / d.total)}%)`
      : humanBytes(d.received),
  );
  if (d.state === "running") {
    if (d.stalledSeconds > 0) {
      // The server went quiet: say so, not the speed before it did.
      parts.push(`nothing received for ${humanDuration(d.stalledSeconds)}`);
    } else {
      if (d.bytesPerSec > 0) parts.push(`${humanBytes(Math.round(d.bytesPerSec))}/s`);
      if (d.etaSeconds >= 0 && d.bytesPerSec > 0) parts.push(`${humanDuration(d.etaSeconds)} left`);
    }
  }
  return parts.join(" · ");
}

/** What a download's state means, in words. */
export const downloadStates: Record<Download["state"], string> = {
  running: "Downloading",
  paused: "Paused",
  verifying: "Checking the file",
  done: "Done",
  failed: "Failed",
  cancelled: "Cancelled",
};

/** Whole seconds from now until an RFC 3339 time (0 once past). */
export function secondsUntil(when: string, now: number = Date.now()): number {
  const t = Date.parse(when);
  return Number.isNaN(t) ? 0 : Math.max(0, Math.ceil((t - now) / 1000));
}

/** Widths the per-conversation picker offers ("" follows the Settings page). */
export function widthLabel(w: Width): string {
  return w === "auto" ? "auto" : w === 1 ? "1 (off)" : String(w);
}

/**
 * The names of the documents a user message carries: the fenced blocks at
 * its start, as the composer puts them (Go documents.Format: a fence, the
 * file name, the text, the same fence). Only a name with an extension
 * counts, so a message that opens with a code block ("```python") is not
 * taken for a document.
 */
export function documentNames(text: string): string[] {
  const names: string[] = [];
  let rest = text;
  for (;;) {
    const m = /^(`{3,})([^\n`]+)\n[\s\S]*?\n\1\n\n?/.exec(rest);
    if (!m?.[2] || !/\.\w+$/.test(m[2])) return names;
    names.push(m[2]);
    rest = rest.slice(m[0].length);
  }
}

/**
 * The note a reply that resumed an earlier question's documents shows above
 * its text: their tokens came from the KV cache, not read again; "" when it
 * resumed nothing, or it is the library's resumedNote.
 */
export function documentNote(st: Message["stats"], documents: string[]): string {
  if (!st || st.resumedTokens <= 0 || st.resumedPrompt || documents.length === 0) return "";
  const names = documents.map((d) => `“${d}”`).join(", ");
  return `Resumed ${st.resumedTokens.toLocaleString("en-US")} tokens from the KV cache, ${documents.length === 1 ? "the document" : "the documents"} ${names} among them: not read again.`;
}
