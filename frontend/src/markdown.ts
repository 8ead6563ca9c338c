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

// A line's start up to an ordered list number, through (possibly nested)
// list markers and quotes: "- 1. 12" ends in a number that "." makes a marker.
const LIST_PREFIX = String.raw`(?:[\s>*+-]|\d{1,9}[.)])*`;
const LIST_PREFIX_DIGITS = new RegExp(`^${LIST_PREFIX}\\d*$`);
const LIST_PREFIX_ITEM = new RegExp(`^${LIST_PREFIX}\\d{1,9}[.)]$`);
const LIST_PREFIX_NUMBER = new RegExp(`^${LIST_PREFIX}(\\d{1,9})$`);
const LIST_PREFIX_ONLY = new RegExp(`^${LIST_PREFIX}$`);

/** Inserts the drafted markers into src around each span (see SYNTAX). */
export function markSpans(src: string, spans: readonly Span[]): string {
  const clean = src;
  const opens = new Set<number>();
  const closes = new Set<number>();
  const zones = noMarkZones(clean);
  const inside = (p: number) => zones.find(([zs, ze]) => zs < p && p < ze);
  for (const [s0, e0] of spans) {
    let s = Math.max(0, s0);
    let e = Math.min(clean.length, e0);
    // Each step only moves s forward and e back: a few rounds settle it.
    for (let round = 0; round < 8; round++) {
      const s1 = s;
      const e1 = e;
      while (s < e && SYNTAX.test(clean.charAt(s))) s++;
      // An ordered list's number ("12. ") at the start of a line.
      const lineStart = clean.lastIndexOf("\n", s - 1) + 1;
      const list = /^\d*[.)]/.exec(clean.slice(s));
      if (
        list &&
        LIST_PREFIX_DIGITS.test(clean.slice(lineStart, s)) &&
        LIST_PREFIX_ITEM.test(clean.slice(lineStart, s + list[0].length))
      ) {
        s += list[0].length;
      }
      const zs = inside(s);
      if (zs) s = zs[1];
      while (e > s && SYNTAX.test(clean.charAt(e - 1))) e--;
      const eLine = clean.lastIndexOf("\n", e - 1) + 1;
      const num = LIST_PREFIX_NUMBER.exec(clean.slice(eLine, e));
      if (num && /^\d*[.)]/.test(clean.slice(e))) e = Math.max(s, e - (num[1] ?? "").length);
      const ze = inside(e);
      if (ze) e = Math.max(s, ze[0]);
      if (s === s1 && e === e1) break;
    }
    if (s < e) {
      opens.add(s);
      closes.add(e);
    }
  }
  let out = "";
  for (let i = 0; i <= clean.length; i++) {
    if (closes.has(i)) out += CLOSE;
    if (opens.has(i)) out += OPEN;
    if (i < clean.length) out += clean.charAt(i);
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

// noMarkZones lists the stretches (zs, ze) of src a marker must not sit
// strictly inside: link destinations "](url)", which are not text (marked
// would percent-encode a marker into the URL), reference definitions
// "[label]: url" and the labels that use them, entities ("&amp;"), raw HTML
// tags, and bare URLs and e-mail addresses with the whitespace around them,
// which GFM autolinks only when nothing is attached. None of this is needed
// for safety (the sanitizer runs last); it keeps the highlighted document's
// structure the same as the plain one's.
function noMarkZones(src: string): [number, number][] {
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
    const lineStart = LIST_PREFIX_ONLY.test(src.slice(src.lastIndexOf("\n", m.index - 1) + 1, m.index));
    zones.push([lineStart ? m.index - 1 : m.index, m.index + m[0].length]);
  }
  for (const m of src.matchAll(
    /(?:(?:https?|ftp):\/\/|www\.)[^\s<]*|[A-Za-z0-9._+-]+@[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+/g,
  )) {
    const zs = m.index > 0 && /\s/.test(src.charAt(m.index - 1)) ? m.index - 1 : m.index;
    const end = m.index + m[0].length;
    zones.push([zs, end < src.length && /\s/.test(src.charAt(end)) ? end + 1 : end]);
  }
  return zones;
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
