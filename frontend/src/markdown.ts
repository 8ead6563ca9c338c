import DOMPurify from "dompurify";
import { Marked, type Token, type Tokens } from "marked";

// Model output and prompt text are untrusted: they are rendered as Markdown and
// the resulting HTML always goes through DOMPurify, and the sanitizer's output
// is what reaches the DOM, untouched: nothing edits the HTML after it.
const marked = new Marked({ gfm: true, breaks: true, async: false });

const purifyOptions = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe"],
  // srcset is a list of URLs the URL rule below does not read: dropped whole.
  FORBID_ATTR: ["style", "srcset"],
};

// The attributes that hold a URL the browser fetches or navigates to.
const URL_ATTRS = new Set([
  "href",
  "src",
  "cite",
  "poster",
  "action",
  "formaction",
  "background",
  "xlink:href",
  "usemap",
]);
const URL_SCHEMES = new Set(["http:", "https:", "mailto:"]);

/**
 * Whether a URL attribute's value may stay: a fragment ("#..."), or an
 * absolute http, https or mailto URL as the browser's URL parser reads it
 * (which ignores leading and trailing controls and spaces, and tabs and
 * newlines anywhere). Anything else, relative paths included, is dropped.
 */
export function allowedUrl(value: string): boolean {
  // eslint-disable-next-line no-control-regex -- the controls the URL parser skips
  if (/^[\u0000-\u0020]*#/.test(value)) return true;
  try {
    return URL_SCHEMES.has(new URL(value).protocol);
  } catch {
    return false;
  }
}

// A private DOMPurify instance, so that its hook applies to this page's
// Markdown only. DOMPurify's ALLOWED_URI_REGEXP cannot say this: it also
// judges attributes such as <ol start> and <td align>, and it lets data: URIs
// through on <img> whatever it says.
// Its configuration is set once: DOMPurify re-reads one passed with each call.
const purifier = DOMPurify(window);
purifier.setConfig(purifyOptions);
purifier.addHook("uponSanitizeAttribute", (_node, ev) => {
  if (URL_ATTRS.has(ev.attrName) && !allowedUrl(ev.attrValue)) ev.keepAttr = false;
});

function sanitize(html: string): string {
  return purifier.sanitize(html);
}

/** A stretch [start, end) of the source text, in UTF-16 code units. */
export type Span = readonly [number, number];

// Drafted stretches are marked in the Markdown source with two Unicode
// noncharacters (reserved for internal use, never meaningful text), which
// survive parsing as plain text; the text between them is then wrapped in
// <mark class="drafted"> and the markers removed, all before sanitizing.
const OPEN = "\uFDD0";
const CLOSE = "\uFDD1";
const MARKERS = /[\uFDD0\uFDD1]/g;
const HAS_MARKER = /[\uFDD0\uFDD1]/;

// Characters Markdown may read as syntax at the edge of a stretch (list
// bullets, heading hashes, emphasis, fences, link brackets) and whitespace: a
// marker is moved over them, into the stretch, so it never splits a construct.
const SYNTAX = /[\s#>*_\-+`~|[\]()!=:.]/;

/**
 * Inserts the drafted markers into src around each span (see SYNTAX). Spans
 * may be garbage (they come from the database and from imported files): they
 * are cut to the text, whole numbers, sorted and merged first (see
 * cleanSpans). The work is linear in src's length and the number of spans,
 * but for a binary search per step (and a sort of spans out of order): the
 * text is read a fixed number of times, never again per span.
 */
export function markSpans(src: string, spans: readonly Span[]): string {
  const reach = listPrefixes(src);
  const zones = noMarkZones(src, reach);
  let out = "";
  let at = 0;
  for (const [s0, e0] of cleanSpans(spans, src.length)) {
    let s = s0;
    let e = e0;
    // beforeListNumber's answer for e (it may read far ahead): a round that
    // only moved s asks again for the same e.
    let eAsked = -1;
    let eList = e;
    // Each round moves s forward or e back, inside [s0, e0): the rounds of
    // all the spans together are at most the text's length.
    while (s < e) {
      const s1 = s;
      const e1 = e;
      while (s < e && SYNTAX.test(src.charAt(s))) s++;
      s = afterListNumber(src, reach, s);
      s = zones.after(s);
      while (e > s && SYNTAX.test(src.charAt(e - 1))) e--;
      if (e !== eAsked) {
        eAsked = e;
        eList = beforeListNumber(src, reach, e);
      }
      e = Math.max(s, eList);
      e = Math.max(s, zones.before(e));
      if (s === s1 && e === e1) break;
    }
    if (s < e) {
      // Disjoint spans stay disjoint and in order (each only shrank).
      out += src.slice(at, s) + OPEN + src.slice(s, e) + CLOSE;
      at = e;
    }
  }
  return out + src.slice(at);
}

/**
 * The spans as markSpans uses them: each a pair of whole numbers cut to
 * [0, n), the empty ones dropped, sorted by start, and overlapping ones
 * merged (touching ones stay apart). Anything that is not a pair of finite
 * numbers is dropped. At most n come out.
 */
export function cleanSpans(spans: readonly Span[], n: number): [number, number][] {
  const out: [number, number][] = [];
  let sorted = true;
  for (const sp of spans as readonly unknown[]) {
    if (!Array.isArray(sp)) continue;
    const [a, b] = sp as unknown[];
    if (typeof a !== "number" || typeof b !== "number" || !Number.isFinite(a) || !Number.isFinite(b)) continue;
    const s = Math.max(0, Math.trunc(a));
    const e = Math.min(n, Math.trunc(b));
    if (s >= e) continue;
    const last = out[out.length - 1];
    if (last && s < last[0]) sorted = false;
    out.push([s, e]);
  }
  if (!sorted) out.sort((x, y) => x[0] - y[0]);
  const merged: [number, number][] = [];
  for (const sp of out) {
    const last = merged[merged.length - 1];
    if (last && sp[0] < last[1]) last[1] = Math.max(last[1], sp[1]);
    else merged.push(sp);
  }
  return merged;
}

// Characters a line's container prefix is made of (besides ordered list
// numbers "12." and "3)"): indentation, quotes and bullets.
const PREFIX_CHAR = /[\s>*+-]/;

function isDigit(src: string, i: number): boolean {
  const c = src.charCodeAt(i);
  return c >= 48 && c <= 57;
}

/**
 * listPrefixes marks, for each position t of src, whether the text from its
 * line's start to t is all container prefix: prefix characters and ordered
 * list numbers (1 to 9 digits and "." or ")"), in any order: "- 1. " is
 * one, and the "12" after it is a list marker if a "." follows. It is
 * computed once, in one pass, for the rules that used to test the text
 * from the line's start again at each span.
 */
function listPrefixes(src: string): Uint8Array {
  const n = src.length;
  const reach = new Uint8Array(n + 1);
  reach[0] = 1;
  for (let i = 0; i < n; i++) {
    const c = src.charAt(i);
    if (c === "\n") {
      reach[i + 1] = 1;
      continue;
    }
    if (!reach[i]) continue;
    if (PREFIX_CHAR.test(c)) reach[i + 1] = 1;
    else if (isDigit(src, i)) {
      let j = i;
      while (j < n && j - i <= 9 && isDigit(src, j)) j++;
      if (j - i <= 9 && (src.charAt(j) === "." || src.charAt(j) === ")")) reach[j + 1] = 1;
    }
  }
  return reach;
}

// The start of the run of digits that ends at i, looking back at most 10.
function digitsBack(src: string, i: number): number {
  let t = i;
  while (t > 0 && i - t <= 9 && isDigit(src, t - 1)) t--;
  return t;
}

/**
 * A span starting at s inside (or at) an ordered list's number in a line's
 * prefix ("12. " at the start of a line, or "- 1. "): where it starts
 * instead, after the marker; s itself otherwise.
 */
function afterListNumber(src: string, reach: Uint8Array, s: number): number {
  const t = digitsBack(src, s);
  if (!reach[t]) return s;
  let j = s;
  while (j < src.length && j - t <= 9 && isDigit(src, j)) j++;
  const digits = j - t;
  return digits >= 1 && digits <= 9 && (src.charAt(j) === "." || src.charAt(j) === ")") ? j + 1 : s;
}

/**
 * A span ending at e after the start of a line's ordered list number (a
 * marker would make "12." text): where it ends instead, before the number;
 * e itself otherwise.
 */
function beforeListNumber(src: string, reach: Uint8Array, e: number): number {
  const t = digitsBack(src, e);
  if (t === e || e - t > 9 || !reach[t]) return e;
  // Spans are disjoint, so at most 9 of them end in the first digits of
  // one run (and markSpans asks once per end): the scans stay linear.
  let j = e;
  while (j < src.length && isDigit(src, j)) j++;
  return src.charAt(j) === "." || src.charAt(j) === ")" ? t : e;
}

/** A piece of text, drafted or not (see splitDrafted). */
export interface Part {
  text: string;
  drafted: boolean;
}

/**
 * Cuts pieces (consecutive stretches of one text, such as a code block's
 * highlighted tokens) at the edges of the drafted spans of that text: for
 * each piece, its parts in order. One walk over both lists (after
 * cleanSpans): linear in their lengths, however many spans a piece holds.
 */
export function splitDrafted(pieces: readonly string[], drafted: readonly Span[]): Part[][] {
  let total = 0;
  for (const p of pieces) total += p.length;
  const spans = cleanSpans(drafted, total);
  const out: Part[][] = [];
  let at = 0; // the pieces' offset in the text
  let k = 0; // the first span that ends after at
  for (const text of pieces) {
    const end = at + text.length;
    const parts: Part[] = [];
    let from = at;
    for (; k < spans.length; k++) {
      const [s, e] = spans[k] ?? [0, 0];
      if (s >= end) break;
      if (s > from) parts.push({ text: text.slice(from - at, s - at), drafted: false });
      const to = Math.min(e, end);
      parts.push({ text: text.slice(Math.max(s, from) - at, to - at), drafted: true });
      from = to;
      if (e > end) break; // the span goes on into the next piece
    }
    if (from < end || parts.length === 0) parts.push({ text: text.slice(from - at), drafted: false });
    out.push(parts);
    at = end;
  }
  return out;
}

// A reference definition's start: the line's container prefix (quotes, list
// markers, indentation), then "[label]:".
const REF_DEF = new RegExp(String.raw`^([ \t>*+-]*(?:\d{1,9}[.)][ \t]*)*)\[((?:[^[\]\\\n]|\\.)+)\]:`, "gm");

// A link label as Markdown compares them: case and runs of whitespace do not count.
function normalLabel(l: string): string {
  return l.trim().replace(/\s+/g, " ").toLowerCase();
}

/**
 * Stretches of the text a marker must not sit strictly inside, merged into
 * disjoint ones and sorted, so that a position is looked up by binary search.
 */
class Zones {
  private readonly starts: number[] = [];
  private readonly ends: number[] = [];

  constructor(zones: [number, number][]) {
    zones.sort((a, b) => a[0] - b[0]);
    for (const [zs, ze] of zones) {
      if (ze - zs < 2) continue; // no position lies strictly inside
      const k = this.starts.length - 1;
      // Positions are whole numbers: (1, 5) and (4, 8) leave none between them.
      if (k >= 0 && zs < (this.ends[k] ?? 0)) this.ends[k] = Math.max(this.ends[k] ?? 0, ze);
      else {
        this.starts.push(zs);
        this.ends.push(ze);
      }
    }
  }

  // The zone with p strictly inside, as its index, or -1.
  private find(p: number): number {
    let lo = 0;
    let hi = this.starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.starts[mid] ?? 0) < p) lo = mid + 1;
      else hi = mid;
    }
    // lo - 1 is the last zone starting before p.
    return lo > 0 && p < (this.ends[lo - 1] ?? 0) ? lo - 1 : -1;
  }

  /** p, or the end of the zone it is strictly inside. */
  after(p: number): number {
    const k = this.find(p);
    return k < 0 ? p : (this.ends[k] ?? p);
  }

  /** p, or the start of the zone it is strictly inside. */
  before(p: number): number {
    const k = this.find(p);
    return k < 0 ? p : (this.starts[k] ?? p);
  }
}

// Bare URLs and e-mail addresses, which GFM autolinks. An address is read
// from the start of its run of local-part characters (the lookbehind):
// trying one from every character of a long word took time quadratic in the
// word's length (a 100 KB word: 11 s). AUTOLINK_AT reads one at a given
// position, without the lookbehind.
const AUTOLINK_BODY = String.raw`[A-Za-z0-9._+-]+@[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+`;
const AUTOLINK_URL = String.raw`(?:(?:https?|ftp):\/\/|www\.)[^\s<]*`;
const AUTOLINK = new RegExp(`${AUTOLINK_URL}|(?<![A-Za-z0-9._+-])${AUTOLINK_BODY}`, "g");
const AUTOLINK_AT = new RegExp(`${AUTOLINK_URL}|${AUTOLINK_BODY}`, "y");
const LOCAL_PART = /[A-Za-z0-9._+-]/;

/** The bare URLs and e-mail addresses of src, in order, as GFM finds them. */
function autolinks(src: string): [number, number][] {
  const out: [number, number][] = [];
  const re = new RegExp(AUTOLINK);
  const at = new RegExp(AUTOLINK_AT);
  for (let m = re.exec(src); m; m = re.exec(src)) {
    let end = m.index + m[0].length;
    out.push([m.index, end]);
    // An address may start right where one ends, inside a run of
    // local-part characters ("a@b.c+x@d.e" is two), which the lookbehind
    // refuses: that one place is tried on its own.
    while (LOCAL_PART.test(src.charAt(end))) {
      at.lastIndex = end;
      if (!at.exec(src)) break;
      out.push([end, at.lastIndex]);
      end = at.lastIndex;
    }
    re.lastIndex = end;
  }
  return out;
}

// noMarkZones lists the stretches (zs, ze) of src a marker must not sit
// strictly inside: link destinations "](url)", which are not text (marked
// would percent-encode a marker into the URL), reference definitions
// "[label]: url" and the labels that use them, entities ("&amp;"), raw HTML
// tags, and bare URLs and e-mail addresses with the whitespace around them,
// which GFM autolinks only when nothing is attached. None of this is needed
// for safety (the sanitizer runs last); it keeps the highlighted document's
// structure the same as the plain one's. reach is listPrefixes(src).
function noMarkZones(src: string, reach: Uint8Array): Zones {
  const zones: [number, number][] = [];
  for (const m of src.matchAll(/\]\([^()\s]*\)?/g)) zones.push([m.index, m.index + m[0].length]);
  // A reference definition, from its line's start (a marker before the "["
  // would make it text) to the end of its destination and title, which may
  // each sit on a line of their own.
  const labels = new Set<string>();
  for (const m of src.matchAll(REF_DEF)) {
    const open = m.index + (m[1] ?? "").length;
    labels.add(normalLabel(m[2] ?? ""));
    let end = lineEnd(src, open);
    if (src.slice(m.index + m[0].length, end).trim() === "") end = lineEnd(src, end + 1);
    if (/^[ \t]*["'(]/.test(src.slice(end + 1))) end = lineEnd(src, end + 1);
    // Nothing may follow the title or destination on its line, not even a marker.
    zones.push([open - 1, end + 1]);
  }
  // The label of a full or collapsed reference "[text][label]", "[text][]",
  // and a shortcut "[label]" whose label is defined: a marker would make
  // it a different label.
  for (const m of src.matchAll(/\]\[[^[\]\n]*\]/g)) zones.push([m.index, m.index + m[0].length]);
  if (labels.size > 0) {
    for (const m of src.matchAll(/\[((?:[^[\]\\]|\\.)+)\]/g)) {
      if (labels.has(normalLabel(m[1] ?? ""))) zones.push([m.index, m.index + m[0].length]);
    }
  }
  for (const m of src.matchAll(/&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});/g))
    zones.push([m.index, m.index + m[0].length]);
  // Raw HTML tags (and comments) in the text: a marker would break them.
  // At a line's (or list item's) start a tag opens an HTML block: nothing
  // may precede it.
  for (const m of src.matchAll(/<!--[\s\S]*?(?:-->|$)|<\/?[A-Za-z][^<>]*>?/g)) {
    zones.push([reach[m.index] ? m.index - 1 : m.index, m.index + m[0].length]);
  }
  for (const [start, end] of autolinks(src)) {
    const zs = start > 0 && /\s/.test(src.charAt(start - 1)) ? start - 1 : start;
    zones.push([zs, end < src.length && /\s/.test(src.charAt(end)) ? end + 1 : end]);
  }
  return new Zones(zones);
}

// The index of the newline that ends the line holding i (or src's length).
function lineEnd(src: string, i: number): number {
  const n = src.indexOf("\n", i);
  return n < 0 ? src.length : n;
}

/**
 * Renders Markdown to HTML that is safe to assign to innerHTML. With spans,
 * the text of those stretches of src is wrapped in <mark class="drafted">
 * (text only: the document's structure is the same as without them).
 */
export function renderMarkdown(src: string, spans: readonly Span[] = []): string {
  // Text that holds the markers itself (never seen in practice) is not highlighted.
  if (spans.length === 0 || HAS_MARKER.test(src)) return sanitize(marked.parse(src, { async: false }));
  return sanitize(highlight(marked.parse(markSpans(src, spans), { async: false }), false).html);
}

/**
 * A piece of a rendered document: sanitized HTML, safe to assign to
 * innerHTML as it is, or a code block, whose text the window shows as text
 * (highlighted, with a copy button), never as HTML. drafted lists the
 * stretches of code that came from accepted drafts.
 */
export type Block = { kind: "html"; html: string } | { kind: "code"; lang: string; code: string; drafted: Span[] };

// Sanitized blocks by their unsanitized HTML and the drafted state at their
// start: while a reply streams, every block but the last is the same as in
// the frame before, and is not sanitized again.
const blockCache = new Map<string, { html: string; on: boolean }>();
const BLOCK_CACHE_MAX = 4000;

/**
 * Renders Markdown as blocks: each top-level code block on its own, the
 * rest as sanitized HTML, one block per top-level element. The document is
 * parsed whole (references, lists and the drafted state carry across blocks),
 * so the blocks' HTML put together is what renderMarkdown returns, except
 * for the code blocks.
 */
export function renderBlocks(src: string, spans: readonly Span[] = []): Block[] {
  const marking = spans.length > 0 && !HAS_MARKER.test(src);
  const tokens = marked.lexer(marking ? markSpans(src, spans) : src);
  const blocks: Block[] = [];
  let on = false;
  let run: Token[] = [];
  const flush = () => {
    if (run.length === 0) return;
    const raw = marked.parser(run);
    run = [];
    if (raw.trim() === "") return;
    if (!marking) {
      blocks.push({ kind: "html", html: cachedSanitize(`-${raw}`, () => ({ html: sanitize(raw), on: false })).html });
      return;
    }
    const start = on;
    const done = cachedSanitize(`${start ? "1" : "0"}${raw}`, () => {
      const h = highlight(raw, start);
      return { html: sanitize(h.html), on: h.on };
    });
    on = done.on;
    blocks.push({ kind: "html", html: done.html });
  };
  for (const t of tokens) {
    if (t.type === "code") {
      flush();
      const c = t as Tokens.Code;
      const lang = readMarkers(c.lang ?? "", on);
      // An indented block's text keeps its last newline; a fenced one's does not.
      const code = readMarkers(c.text.replace(/\n$/, ""), lang.on);
      on = code.on;
      blocks.push({ kind: "code", lang: lang.text.trim().split(/\s+/)[0] ?? "", code: code.text, drafted: code.spans });
    } else if (t.type === "text" && run.length > 0 && run[run.length - 1]?.type === "text") {
      run.push(t); // the parser joins consecutive text tokens into one paragraph
    } else {
      flush();
      run.push(t);
    }
  }
  flush();
  return blocks;
}

function cachedSanitize(key: string, make: () => { html: string; on: boolean }) {
  let v = blockCache.get(key);
  if (!v) {
    v = make();
    if (blockCache.size >= BLOCK_CACHE_MAX) blockCache.clear();
    blockCache.set(key, v);
  }
  return v;
}

// readMarkers removes the drafted markers from s, starting in state on: the
// text, the drafted stretches of it, and the state at its end.
function readMarkers(s: string, on: boolean): { text: string; spans: Span[]; on: boolean } {
  let text = "";
  const spans: [number, number][] = [];
  let from = on ? 0 : -1;
  for (const ch of s) {
    if (ch === OPEN) {
      if (from < 0) from = text.length;
    } else if (ch === CLOSE) {
      if (from >= 0 && from < text.length) spans.push([from, text.length]);
      from = -1;
    } else text += ch;
  }
  if (from >= 0 && from < text.length) spans.push([from, text.length]);
  return { text, spans, on: from >= 0 };
}

// The document highlight parses into: one of its own, which has no window,
// so nothing in it runs or loads (made once: making one is slow).
let inert: Document | undefined;

// highlight turns the markers in html, which is still untrusted, into
// <mark class="drafted"> and removes them; the caller sanitizes the result.
// on is the drafted state at html's start; the state at its end comes back.
// It returns HTML text, not the tree: removing markers can change what the
// text parses to (a "</sty\uFDD0le>" inside a <style> becomes an end tag),
// and the sanitizer must judge what the browser will parse, not this tree.
function highlight(html: string, on: boolean): { html: string; on: boolean } {
  inert ??= document.implementation.createHTMLDocument("");
  const box = inert.createElement("div");
  box.innerHTML = html;
  const end = wrapMarked(box, on);
  // A marker can only be left in a tag's or attribute's name.
  return { html: box.innerHTML.replace(MARKERS, ""), on: end };
}

// Elements whose text is not shown as text (or not kept): their markers
// switch the state and go, but nothing is wrapped in them.
const RAW_TEXT = new Set([
  "SCRIPT",
  "STYLE",
  "TEXTAREA",
  "TITLE",
  "XMP",
  "NOSCRIPT",
  "NOEMBED",
  "NOFRAMES",
  "IFRAME",
  "PLAINTEXT",
]);

// wrapMarked walks the nodes in document order, strips the markers and wraps
// each run of text between an OPEN and a CLOSE in <mark class="drafted">. A
// marker that ended up in an attribute (a link's URL) or a comment still
// switches the state.
function wrapMarked(root: Node, start: boolean): boolean {
  let on = start;
  // The markers in s switch the state; s without them.
  const read = (s: string) => {
    for (const ch of s)
      if (ch === OPEN) on = true;
      else if (ch === CLOSE) on = false;
    return s.replace(MARKERS, "");
  };
  const visit = (n: Node, wrap: boolean) => {
    if (n.nodeType === Node.ELEMENT_NODE) {
      const el = n as Element;
      for (const a of Array.from(el.attributes)) {
        // A URL holds them percent-encoded.
        const v = a.value.replace(/%EF%B7%90/gi, OPEN).replace(/%EF%B7%91/gi, CLOSE);
        if (HAS_MARKER.test(v)) el.setAttribute(a.name, read(v));
      }
      const inner = wrap && !RAW_TEXT.has(el.tagName);
      const kids = el instanceof HTMLTemplateElement ? el.content.childNodes : el.childNodes;
      for (const c of Array.from(kids)) visit(c, inner);
      return;
    }
    if (n.nodeType === Node.COMMENT_NODE) {
      const text = n.nodeValue ?? "";
      if (HAS_MARKER.test(text)) n.nodeValue = read(text);
      return;
    }
    if (n.nodeType !== Node.TEXT_NODE) return;
    const text = n.nodeValue ?? "";
    if (!on && !HAS_MARKER.test(text)) return;
    if (!wrap) {
      n.nodeValue = read(text);
      return;
    }
    const doc = n.ownerDocument ?? document;
    const parts: Node[] = [];
    let run = "";
    const flush = () => {
      if (run === "") return;
      // Whitespace between blocks (or lines) is not shaded.
      if (on && run.trim() !== "") {
        const m = doc.createElement("mark");
        m.className = "drafted";
        m.textContent = run;
        parts.push(m);
      } else parts.push(doc.createTextNode(run));
      run = "";
    };
    for (const ch of text) {
      if (ch === OPEN || ch === CLOSE) {
        flush();
        on = ch === OPEN;
      } else run += ch;
    }
    flush();
    (n as ChildNode).replaceWith(...parts);
  };
  for (const c of Array.from(root.childNodes)) visit(c, true);
  return on;
}
