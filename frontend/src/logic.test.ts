import { describe, expect, it } from "vitest";
import {
  branchRows,
  bytesToGiB,
  gibToBytes,
  humanBytes,
  parseTags,
  parseWidth,
  pieceSpans,
  progressLine,
  resumedNote,
  statsLine,
  tau,
  streamProgress,
  streamCleared,
  streamDone,
  streamError,
  streamStarted,
  streamToken,
  streamTokens,
  frameBatcher,
  type Frames,
  type Streams,
  dedupeHits,
  finalStats,
  titleFrom,
  liveStats,
  modelFacts,
  modelLabel,
  promptVariables,
  humanDuration,
  downloadLine,
  secondsUntil,
  documentNames,
  documentNote,
} from "./logic";
import type { Download, Message, Thread, TokenEvent } from "./types";

const msg = (id: number, parentId: number, role: Message["role"], content = `m${id}`): Message => ({
  id,
  parentId,
  role,
  content,
  conversationId: 1,
  createdAt: "2026-01-01T00:00:00Z",
});

const thread = (messages: Message[], path: number[]): Thread => ({
  conversation: {
    id: 1,
    title: "t",
    modelId: 0,
    promptId: 0,
    systemPrompt: "",
    titleSource: "",
    pinned: false,
    draft: "",
    activeLeafId: path[path.length - 1] ?? 0,
    createdAt: "",
    updatedAt: "",
  },
  messages,
  path,
  generating: 0,
  model: null,
  settings: { temperature: 0, maxTokens: 64, speculationWidth: 4 },
});

describe("branchRows", () => {
  it("lists the active path with each message's sibling versions", () => {
    // 1 user -> 2 answer; 1 edited as 3 -> 4 answer, regenerated as 5.
    const t = thread(
      [msg(1, 0, "user"), msg(2, 1, "assistant"), msg(3, 0, "user"), msg(4, 3, "assistant"), msg(5, 3, "assistant")],
      [3, 5],
    );
    const rows = branchRows(t);
    expect(rows.map((r) => r.message.id)).toEqual([3, 5]);
    expect(rows[0]).toMatchObject({ siblings: [1, 3], index: 1 });
    expect(rows[1]).toMatchObject({ siblings: [4, 5], index: 1 });
  });

  it("gives a lone message itself as its only version", () => {
    const rows = branchRows(thread([msg(7, 0, "user")], [7]));
    expect(rows).toEqual([{ message: msg(7, 0, "user"), siblings: [7], index: 0 }]);
  });

  it("skips path ids missing from the tree", () => {
    expect(branchRows(thread([msg(1, 0, "user")], [1, 99]))).toHaveLength(1);
  });
});

describe("streams", () => {
  it("accumulates tokens, ends on done, keeps text and error on failure", () => {
    let s = streamStarted({}, 1, 10);
    s = streamToken(s, {
      conversationId: 1,
      parentId: 10,
      seq: 0,
      text: "Hel",
      drafted: false,
      tokens: 0,
      accepted: 0,
      calls: 0,
    });
    s = streamToken(s, {
      conversationId: 1,
      parentId: 10,
      seq: 1,
      text: "lo",
      drafted: false,
      tokens: 0,
      accepted: 0,
      calls: 0,
    });
    s = streamToken(s, {
      conversationId: 2,
      parentId: 20,
      seq: 0,
      text: "other",
      drafted: false,
      tokens: 0,
      accepted: 0,
      calls: 0,
    });
    expect(s[1]).toEqual({
      parentId: 10,
      pieces: ["Hel", "lo"],
      drafted: [false, false],
      text: "Hello",
      error: null,
      running: true,
    });
    expect(s[2]?.text).toBe("other");
    const failed = streamError(s, { conversationId: 1, parentId: 10, error: "boom" });
    expect(failed[1]).toMatchObject({ parentId: 10, text: "Hello", error: "boom", running: false });
    const done = streamDone(s, { conversationId: 1, parentId: 10, message: null, stats: {} as never });
    expect(done[1]?.running).toBe(false);
    expect(done[2]?.text).toBe("other");
    // The start acknowledged after the end does not revive the stream.
    expect(streamStarted(done, 1, 10)[1]?.running).toBe(false);
    expect(streamCleared(done, 1)[1]).toBeUndefined();
    // A token that straggles in after the end is ignored.
    expect(
      streamToken(done, {
        conversationId: 1,
        parentId: 10,
        seq: 2,
        text: "late",
        drafted: false,
        tokens: 0,
        accepted: 0,
        calls: 0,
      })[1]?.running,
    ).toBe(false);
  });

  it("orders pieces by sequence number, whatever order they arrive in", () => {
    let s = streamToken(
      {},
      { conversationId: 1, parentId: 10, seq: 2, text: "c", drafted: false, tokens: 0, accepted: 0, calls: 0 },
    );
    expect(s[1]?.text).toBe("c");
    s = streamToken(s, {
      conversationId: 1,
      parentId: 10,
      seq: 0,
      text: "a",
      drafted: false,
      tokens: 0,
      accepted: 0,
      calls: 0,
    });
    s = streamToken(s, {
      conversationId: 1,
      parentId: 10,
      seq: 1,
      text: "b",
      drafted: false,
      tokens: 0,
      accepted: 0,
      calls: 0,
    });
    expect(s[1]?.text).toBe("abc");
  });

  it("keeps tokens that arrived before the start was acknowledged", () => {
    let s = streamToken(
      {},
      { conversationId: 1, parentId: 10, seq: 0, text: "early", drafted: false, tokens: 0, accepted: 0, calls: 0 },
    );
    s = streamStarted(s, 1, 10);
    expect(s[1]?.text).toBe("early");
    expect(streamStarted(s, 1, 11)[1]).toEqual({
      parentId: 11,
      pieces: [],
      drafted: [],
      text: "",
      error: null,
      running: true,
    });
  });

  it("restarts when a token belongs to a new reply", () => {
    let s = streamToken(
      {},
      { conversationId: 1, parentId: 10, seq: 0, text: "old", drafted: false, tokens: 0, accepted: 0, calls: 0 },
    );
    s = streamToken(s, {
      conversationId: 1,
      parentId: 11,
      seq: 0,
      text: "new",
      drafted: false,
      tokens: 0,
      accepted: 0,
      calls: 0,
    });
    expect(s[1]).toMatchObject({ parentId: 11, text: "new" });
  });
});

describe("token batches", () => {
  const tok = (conversationId: number, parentId: number, seq: number, text: string, drafted = false): TokenEvent => ({
    conversationId,
    parentId,
    seq,
    text,
    drafted,
    tokens: 0,
    accepted: 0,
    calls: 0,
  });

  it("give the same streams as their tokens one by one, and leave the state they start from alone", () => {
    // In order, out of order (holes filled later), a duplicate, two conversations, a new reply, a stream that ended.
    let start = streamStarted({}, 1, 10);
    start = streamToken(start, tok(1, 10, 0, "He"));
    start = streamDone(streamStarted(start, 3, 30), {
      conversationId: 3,
      parentId: 30,
      message: null,
      stats: {} as never,
    });
    const batch = [
      tok(1, 10, 1, "l"),
      tok(1, 10, 4, "!"),
      tok(2, 20, 0, "x", true),
      tok(1, 10, 2, "l", true),
      tok(1, 10, 3, "o"),
      tok(1, 10, 3, "o"),
      tok(2, 21, 0, "new"),
      tok(3, 30, 0, "late"),
      tok(2, 21, 1, " reply", true),
    ];
    const before = JSON.stringify(start);
    let one: Streams = start;
    for (const e of batch) one = streamToken(one, e);
    const all = streamTokens(start, batch);
    expect(all).toEqual(one);
    expect(all[1]).toEqual({
      parentId: 10,
      pieces: ["He", "l", "l", "o", "!"],
      drafted: [false, false, true, false, false],
      text: "Hello!",
      error: null,
      running: true,
    });
    expect(all[2]).toMatchObject({ parentId: 21, text: "new reply", drafted: [false, true] });
    expect(all[3]).toBe(start[3]);
    expect(JSON.stringify(start)).toBe(before);
    expect(streamTokens(start, [])).toBe(start);
  });
});

describe("frameBatcher", () => {
  function frames() {
    const waiting = new Map<number, () => void>();
    let next = 1;
    const f: Frames = { request: (cb) => (waiting.set(next, cb), next++), cancel: (id) => void waiting.delete(id) };
    return {
      f,
      waiting,
      tick: () => {
        const cbs = [...waiting.values()];
        waiting.clear();
        cbs.forEach((cb) => cb());
      },
    };
  }

  it("hands over what arrived, in order, once per frame", () => {
    const fr = frames();
    const got: number[][] = [];
    const b = frameBatcher<number>(fr.f, (xs) => got.push(xs));
    for (let i = 0; i < 100; i++) b.add(i);
    expect(fr.waiting.size).toBe(1); // one frame asked for, not a hundred
    expect(got).toEqual([]);
    fr.tick();
    expect(got).toEqual([Array.from({ length: 100 }, (_, i) => i)]);
    fr.tick(); // nothing new: no call
    expect(got).toHaveLength(1);
    b.add(100);
    b.add(101);
    fr.tick();
    expect(got[1]).toEqual([100, 101]);
  });

  it("flushes at once when asked, and drops everything when stopped", () => {
    const fr = frames();
    const got: string[][] = [];
    const b = frameBatcher<string>(fr.f, (xs) => got.push(xs));
    b.add("a");
    b.flushNow();
    expect(got).toEqual([["a"]]);
    expect(fr.waiting.size).toBe(0); // its frame was cancelled
    b.flushNow(); // nothing waiting: no call
    expect(got).toHaveLength(1);
    b.add("b");
    b.stop();
    fr.tick();
    expect(got).toHaveLength(1);
    expect(fr.waiting.size).toBe(0);
  });
});

describe("settings helpers", () => {
  it("parses widths 1-8 and auto, rejects the rest", () => {
    expect(parseWidth("auto")).toBe("auto");
    expect(parseWidth("1")).toBe(1);
    expect(parseWidth("8")).toBe(8);
    for (const bad of ["0", "9", "2.5", "", "x"]) expect(() => parseWidth(bad)).toThrow();
  });

  it("converts the quota between GiB and bytes", () => {
    expect(gibToBytes(2)).toBe(2 * 1024 ** 3);
    expect(bytesToGiB(2 * 1024 ** 3)).toBe(2);
    expect(bytesToGiB(gibToBytes(0.5))).toBe(0.5);
    expect(() => gibToBytes(-1)).toThrow();
    expect(() => gibToBytes(Number.NaN)).toThrow();
  });

  it("parses comma separated tags", () => {
    expect(parseTags(" a, b ,, C ")).toEqual(["a", "b", "C"]);
    expect(parseTags("")).toEqual([]);
  });

  it("formats sizes and stats", () => {
    expect(humanBytes(512)).toBe("512 B");
    expect(humanBytes(1536)).toBe("1.5 KiB");
    expect(humanBytes(2 * 1024 ** 3)).toBe("2.0 GiB");
    expect(
      statsLine({
        tokens: 5,
        prefillTokens: 1,
        resumedTokens: 0,
        targetCalls: 3,
        drafted: 4,
        accepted: 2,
        ttftMs: 12.4,
        decodeTokS: 30.25,
        width: 4,
        stopped: "cancelled",
      }),
    ).toBe("5 tokens · τ 1.67 · drafted 4 · accepted 2 · 30.3 tok/s · first token 12 ms · width 4 · cancelled");
    expect(
      statsLine({
        tokens: 8,
        prefillTokens: 0,
        resumedTokens: 40,
        targetCalls: 8,
        drafted: 0,
        accepted: 0,
        ttftMs: 0,
        decodeTokS: 0,
        width: 0,
        stopped: "stop",
      }),
    ).toBe("8 tokens · τ 1.00 · drafted 0 · accepted 0 · resumed 40 · width auto");
    expect(
      statsLine({
        tokens: 64,
        prefillTokens: 20,
        resumedTokens: 0,
        targetCalls: 64,
        drafted: 0,
        accepted: 0,
        declined: 40,
        probes: 1,
        draftNote: "drafting paused: wide calls measured 3.1x width 1",
        ttftMs: 0,
        decodeTokS: 0,
        width: 4,
        stopped: "length",
      }),
    ).toBe(
      "64 tokens · τ 1.00 · drafted 0 · accepted 0 · width 4 · length · drafting paused: wide calls measured 3.1x width 1",
    );
    expect(statsLine(undefined)).toBe("");
  });

  it("says in the reply when it resumed from a prepared prompt", () => {
    const st = {
      tokens: 8,
      prefillTokens: 1,
      resumedTokens: 175,
      targetCalls: 8,
      drafted: 0,
      accepted: 0,
      ttftMs: 0,
      decodeTokS: 0,
      width: 4,
      stopped: "stop",
    };
    expect(resumedNote({ ...st, resumedPrompt: "Python code reviewer" })).toBe(
      "Started from the prepared prompt “Python code reviewer”: 175 tokens resumed from its KV cache, not read again.",
    );
    expect(resumedNote(st)).toBe(""); // resumed from the conversation's own cache: the stats line says so
    expect(resumedNote({ ...st, resumedPrompt: "x", resumedTokens: 0 })).toBe("");
    expect(resumedNote(undefined)).toBe("");
  });
});

describe("speculation stats", () => {
  it("τ is tokens per target call, null without calls", () => {
    expect(tau({ tokens: 10, targetCalls: 4 })).toBe(2.5);
    expect(tau({ tokens: 1, targetCalls: 0 })).toBeNull();
  });

  it("merges adjacent drafted pieces into UTF-16 spans, as the Go side stores them", () => {
    // Same case as app's TestDraftedPiecesAreMarkedAndTheirSpansStored.
    expect(pieceSpans(["A", "é", "😀", "b", "c", "d"], [false, true, true, false, true, true])).toEqual([
      [1, 4],
      [5, 7],
    ]);
    // Holes (pieces not arrived yet) and empty pieces take no room.
    expect(pieceSpans(["a", "", "b"], [true, true, true])).toEqual([[0, 2]]);
    const holes: string[] = [];
    holes[2] = "c";
    expect(pieceSpans(holes, [false, false, true])).toEqual([[0, 1]]);
  });

  it("tracks which streamed pieces were drafted, by sequence number", () => {
    let s = streamToken(
      {},
      { conversationId: 1, parentId: 10, seq: 1, text: "b", drafted: true, tokens: 0, accepted: 0, calls: 0 },
    );
    s = streamToken(s, {
      conversationId: 1,
      parentId: 10,
      seq: 0,
      text: "a",
      drafted: false,
      tokens: 0,
      accepted: 0,
      calls: 0,
    });
    expect(s[1]?.drafted).toEqual([false, true]);
    expect(pieceSpans(s[1]!.pieces, s[1]!.drafted)).toEqual([[1, 2]]);
  });
});

describe("prefill progress", () => {
  it("keeps the furthest report of the running stream and says how far it is", () => {
    let s = streamStarted({}, 1, 10);
    s = streamProgress(s, { conversationId: 1, parentId: 10, done: 128, total: 512 });
    s = streamProgress(s, { conversationId: 1, parentId: 10, done: 64, total: 512 }); // late, older
    expect(s[1]?.progress).toEqual({ done: 128, total: 512 });
    expect(progressLine(s[1]?.progress)).toBe("Reading the prompt: 128/512 tokens (25%)");
    expect(progressLine(null)).toBe("");
    // After the end, a straggler does not revive the stream.
    const done = streamDone(s, { conversationId: 1, parentId: 10, message: null, stats: {} as never });
    expect(streamProgress(done, { conversationId: 1, parentId: 10, done: 512, total: 512 })).toBe(done);
  });
});

describe("dedupeHits", () => {
  const hit = (messageId: number, conversationId: number, text: string, role: "user" | "assistant" = "assistant") => ({
    messageId,
    conversationId,
    parentId: 1,
    role,
    createdAt: "",
    conversationTitle: "c",
    snippet: text,
    segments: [{ text, match: true }],
    onActiveBranch: true,
    alternative: 1,
    alternatives: 1,
    duplicates: 0,
  });
  it("keeps the first of the hits with one conversation, role and text", () => {
    const hits = [hit(2, 1, "fox"), hit(5, 1, "fox"), hit(6, 1, "fox", "user"), hit(7, 2, "fox"), hit(8, 1, "foxes")];
    expect(dedupeHits(hits).map((h) => h.messageId)).toEqual([2, 6, 7, 8]);
  });
});

describe("liveStats", () => {
  it("counts the pieces so far, the drafted share and τ (one own token per call)", () => {
    expect(liveStats({ pieces: [], drafted: [] })).toBeNull();
    // Calls: [a], [b c d] (two drafted + own), [e]: 5 tokens in 3 calls.
    const st = { pieces: ["a", "b", "c", "d", "e"], drafted: [false, true, true, false, false] };
    expect(liveStats(st)).toEqual({ tokens: 5, share: 2 / 5, tau: 5 / 3 });
    // A hole (a piece not arrived yet) is not counted.
    const holes: string[] = [];
    holes[0] = "a";
    holes[2] = "c";
    expect(liveStats({ pieces: holes, drafted: [false, false, true] })).toEqual({ tokens: 2, share: 0.5, tau: 2 });
  });
  it("is exact from the counts the token events carry, the latest of them winning", () => {
    // 7 tokens (one held back by the detokenizer: 6 pieces), 4 of them drafted, in 3 calls.
    const ev = (seq: number, tokens: number, accepted: number, calls: number): TokenEvent => ({
      conversationId: 1,
      parentId: 10,
      seq,
      text: "x",
      drafted: false,
      tokens,
      accepted,
      calls,
    });
    let s: Streams = streamStarted({}, 1, 10);
    s = streamTokens(s, [ev(0, 1, 0, 1), ev(2, 4, 2, 2), ev(1, 3, 2, 2)]); // the older one arrived last
    expect(s[1]?.counts).toEqual({ tokens: 4, accepted: 2, calls: 2 });
    s = streamTokens(s, [ev(3, 5, 3, 2), ev(5, 7, 4, 3), ev(4, 6, 4, 3)]);
    expect(liveStats(s[1]!)).toEqual({ tokens: 7, share: 4 / 7, tau: 7 / 3 });
    // A first token picked before any call (resumed from a snapshot's logits): no τ yet.
    expect(liveStats({ pieces: ["a"], drafted: [false], counts: { tokens: 1, accepted: 0, calls: 0 } })).toEqual({
      tokens: 1,
      share: 0,
      tau: null,
    });
  });
  it("reads a finished reply's from its stats", () => {
    const st = {
      tokens: 6,
      prefillTokens: 0,
      resumedTokens: 0,
      targetCalls: 3,
      drafted: 4,
      accepted: 3,
      ttftMs: 0,
      decodeTokS: 0,
      width: 4,
      stopped: "stop",
    };
    expect(finalStats(st)).toEqual({ tokens: 6, share: 0.5, tau: 2 });
    expect(finalStats({ ...st, targetCalls: 0 })).toBeNull();
  });
});

describe("prompt variables", () => {
  it("finds each {{name}} once, in order (the Go side fills them in: Chat.StartFromPrompt)", () => {
    expect(promptVariables("Hi {{ name }}, {{topic}} and {{name}}", "{{tone-of voice}} {{}} {{ }} {x}")).toEqual([
      "name",
      "topic",
      "tone-of voice",
    ]);
  });
});

describe("models for people", () => {
  it("names a model by its file and lists what it is", () => {
    const m = {
      id: 1,
      path: "/m/qwen2.5-0.5b-instruct-q8_0.gguf",
      kind: "gguf",
      name: "",
      fingerprint: "",
      sizeBytes: 1,
      meta: { arch: "qwen2", quant: "Q8_0", contextLen: 32768, backend: "cpu" },
      addedAt: "",
      lastUsedAt: "",
    };
    expect(modelLabel(m)).toBe("qwen2.5-0.5b-instruct-q8_0.gguf");
    expect(modelLabel({ ...m, name: "Qwen 2.5" })).toBe("Qwen 2.5");
    expect(modelFacts(m)).toEqual({ arch: "qwen2", quant: "Q8_0", context: "32,768 tokens", backend: "cpu" });
    expect(modelFacts({ ...m, meta: undefined })).toEqual({ arch: "", quant: "", context: "", backend: "" });
  });
});

describe("titleFrom", () => {
  it("takes the first line, cut at a word past 60 characters", () => {
    expect(titleFrom("  Plan a trip\nto Lisbon")).toBe("Plan a trip");
    expect(titleFrom("word ".repeat(20))).toBe(`${"word ".repeat(12).trim()}…`);
    expect(titleFrom("x".repeat(70))).toBe(`${"x".repeat(60)}…`);
    expect(titleFrom(" \n ")).toBe("");
  });
});

describe("downloads and durations for people", () => {
  const d: Download = {
    name: "m.gguf",
    url: "https://h/m.gguf",
    source: "",
    sha256: "",
    state: "running",
    received: 3 * 1024 ** 2,
    total: 12 * 1024 ** 2,
    bytesPerSec: 1.5 * 1024 ** 2,
    etaSeconds: 6,
    stalledSeconds: 0,
    error: "",
    model: null,
  };
  it("says how far, how fast and how long", () => {
    expect(downloadLine(d)).toBe("3.0 MiB of 12.0 MiB (25%) · 1.5 MiB/s · 6 s left");
    expect(downloadLine({ ...d, total: -1, etaSeconds: -1 })).toBe("3.0 MiB · 1.5 MiB/s");
    expect(downloadLine({ ...d, state: "paused", bytesPerSec: 0, etaSeconds: -1 })).toBe("3.0 MiB of 12.0 MiB (25%)");
    expect(downloadLine({ ...d, bytesPerSec: 0.4 * 1024 ** 2, stalledSeconds: 12.7 })).toBe(
      "3.0 MiB of 12.0 MiB (25%) · nothing received for 13 s",
    );
    expect(humanDuration(59.6)).toBe("1 min");
    expect(humanDuration(200)).toBe("3 min 20 s");
    expect(humanDuration(3900)).toBe("1 h 5 min");
    expect(humanDuration(-3)).toBe("0 s");
  });
  it("counts the seconds left to undo", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(secondsUntil("2026-01-01T00:00:09.2Z", now)).toBe(10);
    expect(secondsUntil("2025-12-31T23:59:00Z", now)).toBe(0);
    expect(secondsUntil("not a time", now)).toBe(0);
  });
});

describe("documentNames and documentNote", () => {
  it("reads the documents at a message's start, as the composer puts them", () => {
    const two = "```a.md\nA\n```\n\n````b.py\nx = '```'\n````\n\nWhat differs?";
    expect(documentNames(two)).toEqual(["a.md", "b.py"]);
    expect(documentNames("```python\nprint(1)\n```\nwhy?")).toEqual([]); // a code block, not a file
    expect(documentNames("look at ```a.md\nA\n```\n")).toEqual([]);
    expect(documentNames("```a.md\nnever closed")).toEqual([]);
  });
  it("says the document came from the KV cache only when something was resumed", () => {
    const st = { resumedTokens: 3006, resumedPrompt: "" } as NonNullable<Message["stats"]>;
    expect(documentNote(st, ["log.txt"])).toBe(
      "Resumed 3,006 tokens from the KV cache, the document “log.txt” among them: not read again.",
    );
    expect(documentNote({ ...st, resumedTokens: 0 }, ["log.txt"])).toBe("");
    expect(documentNote(st, [])).toBe("");
    expect(documentNote({ ...st, resumedPrompt: "Reviewer" }, ["log.txt"])).toBe("");
  });
});
