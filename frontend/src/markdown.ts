import DOMPurify from "dompurify";
import { Marked } from "marked";

// Model output and prompt text are untrusted: they are rendered as Markdown and
// the resulting HTML always goes through DOMPurify before it reaches the DOM.
const marked = new Marked({ gfm: true, breaks: true, async: false });

const purifyOptions = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe"],
  FORBID_ATTR: ["style"],
};

/** A stretch [start, end) of the source text, in UTF-16 code units. */
export type Span = readonly [number, number];

// Drafted stretches are marked in the Markdown source with two Unicode
// noncharacters (reserved for internal use, never meaningful text), which
// survive parsing as plain text; after sanitizing, the text between them is
// wrapped in <mark class="drafted">.
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
      if (list && LIST_PREFIX_DIGITS.test(clean.slice(lineStart, s)) && LIST_PREFIX_ITEM.test(clean.slice(lineStart, s + list[0].length))) {
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
    if (i < clean.length) out += clean[i];
  }
  return out;
}

// noMarkZones lists the stretches (zs, ze) of src a marker must not sit
// strictly inside: link destinations "](url)", which are not text (marked
// would percent-encode a marker into the URL), raw HTML tags, and bare URLs with the
// whitespace around them, which GFM autolinks only when nothing is attached.
function noMarkZones(src: string): [number, number][] {
  const zones: [number, number][] = [];
  for (const m of src.matchAll(/\]\([^()\s]*\)?/g)) zones.push([m.index, m.index + m[0].length]);
  // Raw HTML tags (and comments) in the text: a marker would break them.
  // At a line's (or list item's) start a tag opens an HTML block: nothing
  // may precede it.
  for (const m of src.matchAll(/<!--[\s\S]*?(?:-->|$)|<\/?[A-Za-z][^<>]*>?/g)) {
    const lineStart = LIST_PREFIX_ONLY.test(src.slice(src.lastIndexOf("\n", m.index - 1) + 1, m.index));
    zones.push([lineStart ? m.index - 1 : m.index, m.index + m[0].length]);
  }
  for (const m of src.matchAll(/(?:https?:\/\/|www\.)[^\s<]*/g)) {
    const zs = m.index > 0 && /\s/.test(src.charAt(m.index - 1)) ? m.index - 1 : m.index;
    const end = m.index + m[0].length;
    zones.push([zs, end < src.length && /\s/.test(src.charAt(end)) ? end + 1 : end]);
  }
  return zones;
}

/**
 * Renders Markdown to HTML that is safe to assign to innerHTML. With spans,
 * the text of those stretches of src is wrapped in <mark class="drafted">
 * (text only: the document's structure is the same as without them).
 */
export function renderMarkdown(src: string, spans: readonly Span[] = []): string {
  // Text that holds the markers itself (never seen in practice) is not highlighted.
  if (spans.length === 0 || HAS_MARKER.test(src)) return DOMPurify.sanitize(marked.parse(src, { async: false }), purifyOptions);
  const frag = DOMPurify.sanitize(marked.parse(markSpans(src, spans), { async: false }), {
    ...purifyOptions,
    RETURN_DOM_FRAGMENT: true,
  });
  wrapMarked(frag);
  const div = document.createElement("div");
  div.appendChild(frag);
  return div.innerHTML;
}

// wrapMarked walks the nodes in document order, strips the markers and wraps
// each run of text between an OPEN and a CLOSE in <mark class="drafted">. A
// marker that ended up in an attribute (a link's URL) still switches the state.
function wrapMarked(root: Node) {
  let on = false;
  const visit = (n: Node) => {
    if (n.nodeType === Node.ELEMENT_NODE) {
      const el = n as Element;
      for (const a of Array.from(el.attributes)) {
        // A URL holds them percent-encoded.
        const v = a.value.replace(/%EF%B7%90/gi, OPEN).replace(/%EF%B7%91/gi, CLOSE);
        if (!HAS_MARKER.test(v)) continue;
        for (const ch of v) if (ch === OPEN) on = true; else if (ch === CLOSE) on = false;
        el.setAttribute(a.name, v.replace(MARKERS, ""));
      }
      for (const c of Array.from(n.childNodes)) visit(c);
      return;
    }
    if (n.nodeType !== Node.TEXT_NODE) return;
    const text = n.nodeValue ?? "";
    if (!on && !HAS_MARKER.test(text)) return;
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
  for (const c of Array.from(root.childNodes)) visit(c);
}
