import { describe, expect, it } from "vitest";
import { cleanSpans, markSpans, renderBlocks, renderMarkdown, splitDrafted, type Block, type Span } from "./markdown";

describe("renderMarkdown", () => {
  it("renders emphasis, code and lists", () => {
    const html = renderMarkdown("**bold** and `x < y`\n\n- one\n- two");
    expect(html).toContain("<strong>bold</strong>");
    expect(html).toContain("<code>x &lt; y</code>");
    expect(html).toContain("<li>one</li>");
  });

  it("strips script tags and their content", () => {
    const html = renderMarkdown("hi <script>alert(1)</script> there");
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toContain("alert(1)");
    expect(html).toContain("hi");
  });

  it("strips event handlers and javascript: links", () => {
    const html = renderMarkdown('<img src="x" onerror="alert(1)"> [click](javascript:alert(2))');
    expect(html).not.toMatch(/onerror/i);
    expect(html).not.toMatch(/javascript:/i);
  });

  it("drops iframes, forms and inline styles", () => {
    const html = renderMarkdown(
      '<iframe src="https://example.invalid"></iframe><form><input></form><p style="color:red">t</p>',
    );
    expect(html).not.toMatch(/<iframe|<form|<input|style=/i);
    expect(html).toContain("<p>t</p>");
  });
});

// The element structure of rendered HTML: tag names in document order, marks left out.
function shape(html: string): { tags: string[]; text: string } {
  const d = document.createElement("div");
  d.innerHTML = html;
  const tags = Array.from(d.querySelectorAll("*"))
    .map((e) => e.tagName)
    .filter((t) => t !== "MARK");
  return { tags, text: d.textContent ?? "" };
}

function marked(html: string): string[] {
  const d = document.createElement("div");
  d.innerHTML = html;
  return Array.from(d.querySelectorAll("mark.drafted")).map((m) => m.textContent ?? "");
}

describe("drafted highlighting", () => {
  it("wraps the text of each span in mark.drafted", () => {
    const src = "The quick brown fox";
    const html = renderMarkdown(src, [
      [4, 9],
      [16, 19],
    ]);
    expect(marked(html)).toEqual(["quick", "fox"]);
    expect(shape(html)).toEqual(shape(renderMarkdown(src)));
  });

  it("keeps the Markdown structure when spans start or end on syntax", () => {
    const src = "# Title\n\n- **bold** item\n1. one\n\n```\ncode line\n```\n\nsee [a link](https://example.com/x) end";
    // Spans over every piece of syntax: the heading hash, the bullet and
    // the emphasis, the ordered list number, the fence, the link.
    const at = (s: string) => src.indexOf(s);
    const spans: [number, number][] = [
      [0, 7],
      [at("- **"), at(" item")],
      [at("1. one"), at("1. one") + 6],
      [at("```"), at("code line") + 9],
      [at("[a link]"), at(" end")],
    ];
    const html = renderMarkdown(src, spans);
    expect(shape(html)).toEqual(shape(renderMarkdown(src)));
    expect(marked(html)).toEqual(["Title", "bold", "one", "code line", "a link"]);
    const d = document.createElement("div");
    d.innerHTML = html;
    expect(d.querySelector("a")?.getAttribute("href")).toBe("https://example.com/x");
    expect(html).not.toMatch(/[\uFDD0\uFDD1]/);
  });

  it("highlights a span across paragraphs in each text it covers", () => {
    const src = "one two\n\nthree four";
    const html = renderMarkdown(src, [[4, 14]]);
    expect(marked(html)).toEqual(["two", "three"]);
    expect(shape(html)).toEqual(shape(renderMarkdown(src)));
  });

  it("counts offsets in UTF-16 units and stays sanitized", () => {
    const src = "😀 é <img src=x onerror=alert(1)> ok";
    const html = renderMarkdown(src, [
      [0, 4],
      [src.length - 2, src.length],
    ]);
    expect(marked(html)).toEqual(["😀 é", "ok"]);
    expect(html).not.toMatch(/onerror/i);
  });

  it("moves markers off syntax and drops empty spans", () => {
    expect(markSpans("**x**", [[0, 5]])).toBe("**\uFDD0x\uFDD1**");
    expect(markSpans("- ", [[0, 2]])).toBe("- ");
    expect(markSpans("12. x", [[0, 5]])).toBe("12. \uFDD0x\uFDD1");
  });
});

describe("drafted highlighting on unfinished text", () => {
  it("terminates and stays sane on a link cut off mid-URL (a streaming reply)", () => {
    const src = "see [a](https://exa";
    for (let s = 0; s < src.length; s++) {
      for (let e = s + 1; e <= src.length; e++) {
        const html = renderMarkdown(src, [[s, e]]);
        expect(shape(html)).toEqual(shape(renderMarkdown(src)));
      }
    }
  }, 60_000);
});

describe("drafted highlighting, every span", () => {
  it("never changes the document's structure or text, for any one span", () => {
    const src = "# T\n\n- **b** [a](http://x.y) _i_\n1. o `c` www.z.com ~~s~~\n\n> q";
    const want = shape(renderMarkdown(src));
    for (let s = 0; s < src.length; s++) {
      for (let e = s + 1; e <= src.length; e++) {
        const got = shape(renderMarkdown(src, [[s, e]]));
        if (got.tags.join() !== want.tags.join() || got.text !== want.text) {
          expect({ span: [s, e], text: src.slice(s, e), got }).toEqual({
            span: [s, e],
            text: src.slice(s, e),
            got: want,
          });
        }
      }
    }
  }, 180_000);
});

describe("drafted highlighting, random documents", () => {
  it("keeps structure and text for random Markdown (lists, quotes, emphasis, code, links, references, entities, URLs, raw HTML) and spans", () => {
    // A fixed-seed generator: the same documents every run.
    let seed = 12345;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const atoms = [
      "# ",
      "## ",
      "- ",
      "* ",
      "1. ",
      "> ",
      "**",
      "*",
      "_",
      "`",
      "```\n",
      "[x](http://a.b/c)",
      "http://e.f/g ",
      "word",
      " ",
      "\n",
      "\n\n",
      "|",
      "~~",
      "(",
      ")",
      "!",
      "<b>",
      "</b>",
      "2",
      ".",
      "[r]",
      "\n[r]: http://a.b/r\n",
      "&amp;",
      "a@b.co ",
    ];
    for (let k = 0; k < 600; k++) {
      let src = "";
      const n = 3 + rnd(12);
      for (let i = 0; i < n; i++) src += atoms[rnd(atoms.length)] ?? "";
      const s = rnd(src.length);
      const e = s + 1 + rnd(src.length - s);
      const want = shape(renderMarkdown(src));
      const got = shape(renderMarkdown(src, [[s, e]]));
      if (got.tags.join() !== want.tags.join() || got.text !== want.text) {
        expect({ src, span: [s, e], got }).toEqual({ src, span: [s, e], got: want });
      }
    }
  }, 120_000);
});

// The HTML of the blocks put together, each code block as marked renders one
// (the window shows those as components): what renderMarkdown returns.
function joined(blocks: Block[]): string {
  return blocks.map((b) => (b.kind === "html" ? b.html : `[code ${b.lang}: ${b.code}]`)).join("");
}

describe("renderBlocks", () => {
  const docs = [
    "# Title\n\nA [ref] and *em*.\n\n- one\n- two\n  1. nested\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n> quote\n\n[ref]: https://a.example/",
    "para one\nline two\n\n***\n\npara three <b>raw</b> &amp; more",
    "1. first\n\n   still first\n2. second\n\nend",
  ];
  it("puts together to renderMarkdown's HTML, one block per top-level element", () => {
    for (const src of docs) {
      const blocks = renderBlocks(src);
      expect(joined(blocks), src).toBe(renderMarkdown(src));
      expect(blocks.length).toBeGreaterThan(1);
    }
    // A reference defined after its use (in a later block) still links.
    expect(joined(renderBlocks(docs[0]!))).toContain('<a href="https://a.example/">ref</a>');
  });

  it("carries drafted stretches across blocks exactly as the whole document does", () => {
    for (const src of docs) {
      for (let s = 0; s < src.length; s += 7) {
        for (const e of [s + 5, src.length]) {
          const spans: Span[] = [[s, Math.min(e, src.length)]];
          expect(joined(renderBlocks(src, spans)), `${src} ${JSON.stringify(spans)}`).toBe(renderMarkdown(src, spans));
        }
      }
    }
  }, 60_000);

  it("gives code blocks as text with their language and drafted stretches", () => {
    const src = "Run:\n\n```py\nprint('<b>hi</b>')\n```\n\nthen\n\n    indented <i>\n";
    const blocks = renderBlocks(src);
    expect(blocks.map((b) => b.kind)).toEqual(["html", "code", "html", "code"]);
    expect(blocks[1]).toEqual({ kind: "code", lang: "py", code: "print('<b>hi</b>')", drafted: [] });
    expect(blocks[3]).toEqual({ kind: "code", lang: "", code: "indented <i>", drafted: [] });
    // "print" through "then": the span opens in the code and ends after it.
    const from = src.indexOf("print");
    const to = src.indexOf("then") + 4;
    const marked = renderBlocks(src, [[from + 2, to]]);
    expect(marked[1]).toEqual({ kind: "code", lang: "py", code: "print('<b>hi</b>')", drafted: [[2, 18]] });
    expect(marked[2]).toEqual({ kind: "html", html: '<p><mark class="drafted">then</mark></p>\n' });
    // A span that starts before the fence covers the code, but for the
    // closing ")" at its edge (markSpans keeps syntax out of a span's ends).
    const all = renderBlocks(src, [[0, src.indexOf("then")]]);
    expect(all[1]).toMatchObject({ drafted: [[0, 17]] });
  });
});

// The markers markSpans put in, in order, and the text without them.
function markers(out: string): { text: string; alternate: boolean; count: number } {
  let open = false;
  let alternate = true;
  let count = 0;
  for (const ch of out) {
    if (ch !== "\uFDD0" && ch !== "\uFDD1") continue;
    if ((ch === "\uFDD0") === open) alternate = false;
    open = ch === "\uFDD0";
    count++;
  }
  return { text: out.replace(/[\uFDD0\uFDD1]/g, ""), alternate: alternate && !open, count };
}

// A reply of n UTF-16 units with every construct markSpans steps around
// (links, emphasis, code, list numbers, autolinks, entities, raw HTML).
function bigReply(n: number): string {
  const words = [
    "the",
    "model",
    "**bold**",
    "`code`",
    "[a](http://x.y)",
    "12.",
    "- item",
    "www.a.com",
    "a@b.co",
    "&amp;",
    "<b>",
    "x",
  ];
  let s = "";
  for (let i = 0; s.length < n; i++) s += (words[(i * 7) % words.length] ?? "") + (i % 13 === 0 ? "\n" : " ");
  return s.slice(0, n);
}

// Each time limit is 18 to 75 times what the work takes on a shared 2-core
// machine (27 to 110 ms); the code before took 4.7 s (the 200 KB reply),
// 23 s (the long word) and 25 s (the code block) on it.
describe("drafted highlighting at scale", () => {
  it("marks 20,000 spans in a 200 KB reply without searching the text again per span", () => {
    const src = bigReply(200_000);
    const spans: Span[] = [];
    for (let k = 0; k < 20_000; k++) spans.push([k * 10, k * 10 + 5]);
    const t0 = performance.now();
    const out = markSpans(src, spans);
    const ms = performance.now() - t0;
    const m = markers(out);
    expect(m.text).toBe(src);
    expect(m.alternate).toBe(true);
    expect(m.count).toBeGreaterThan(20_000); // most spans keep some text
    expect(ms).toBeLessThan(2000);
  });

  it("reads a long word, a long list number and a long line of tags in linear time", () => {
    const docs = [
      // A 200 KB base64-like word: the e-mail pattern was tried from each of its characters (20 s).
      "A".repeat(200_000) + "@x",
      // Spans ending in the digits of one long number on a list line.
      "- " + "1".repeat(100_000) + ".",
      // Many tags on one line: each looked for its line's start (the text before it).
      "<b>x</b> ".repeat(20_000),
    ];
    for (const src of docs) {
      const spans: Span[] = [];
      for (let k = 0; k + 2 <= src.length; k += 4) spans.push([k, k + 2]);
      const t0 = performance.now();
      const m = markers(markSpans(src, spans));
      expect(performance.now() - t0, src.slice(0, 20)).toBeLessThan(2000);
      expect(m.text).toBe(src);
      expect(m.alternate).toBe(true);
    }
  });

  it("cuts a code block's tokens at 50,000 drafted spans in one walk", () => {
    const pieces = Array.from({ length: 100_000 }, (_, i) => (i % 2 ? "ab" : "cde"));
    const spans: Span[] = [];
    for (let k = 0; k < 50_000; k++) spans.push([k * 5 + 1, k * 5 + 3]);
    const t0 = performance.now();
    const parts = splitDrafted(pieces, spans);
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(parts.map((p) => p.map((x) => x.text).join(""))).toEqual(pieces);
    expect(parts.flat().filter((x) => x.drafted).length).toBeGreaterThanOrEqual(50_000);
  });
});

describe("drafted spans that are garbage (from the database or a file)", () => {
  it("are cut to the text, whole, sorted and merged; the rest is dropped", () => {
    const bad = [[6, 11], [-5, 3], [20, 10], [2 ** 40, 2 ** 41], [NaN, 4], null, "x", [1.5, 3.9], [4, 2], [7, 9]];
    expect(cleanSpans(bad as unknown as Span[], 11)).toEqual([
      [0, 3],
      [6, 11],
    ]);
    // Touching spans stay apart; overlapping ones merge.
    expect(
      cleanSpans(
        [
          [0, 2],
          [2, 4],
          [3, 6],
        ],
        10,
      ),
    ).toEqual([
      [0, 2],
      [2, 6],
    ]);
    const html = renderMarkdown("hello world", bad as unknown as Span[]);
    expect(marked(html)).toEqual(["hel", "world"]);
  });

  it("100,000 reversed, negative and huge spans on a short reply mark nothing and cost little", () => {
    const spans: Span[] = [];
    for (let k = 0; k < 100_000; k++) spans.push(k % 3 ? [100_000 - k, 50_000 - k] : [-k, -1]);
    spans.push([2 ** 40, 2 ** 40 + 5]);
    const t0 = performance.now();
    expect(markSpans("a short reply", spans)).toBe("a short reply");
    expect(renderBlocks("a short reply", spans)).toEqual(renderBlocks("a short reply"));
    expect(performance.now() - t0).toBeLessThan(2000);
  });

  it("splits code pieces at spans that cross, touch and lie inside them", () => {
    const parts = splitDrafted(
      ["const", " x = ", "1;", ""],
      [
        [3, 7],
        [7, 8],
        [10, 11],
      ],
    );
    expect(parts).toEqual([
      [
        { text: "con", drafted: false },
        { text: "st", drafted: true },
      ],
      [
        { text: " x", drafted: true },
        { text: " ", drafted: true },
        { text: "= ", drafted: false },
      ],
      [
        { text: "1", drafted: true },
        { text: ";", drafted: false },
      ],
      [{ text: "", drafted: false }],
    ]);
  });
});
