import { describe, expect, it } from "vitest";
import { allowedUrl, renderBlocks, renderMarkdown, type Block, type Span } from "./markdown";
import { unsafeDom } from "./testing/unsafeDom";
import corpus from "../testdata/hostile-markdown.json";

// Model output is untrusted, and drafted highlighting (on by default) must not
// open a way around the sanitizer: these tests render hostile Markdown with a
// drafted span at every (start, end) and look at the DOM the HTML parses to.
// The corpus is shared with the end-to-end test (e2e/hostile.spec.ts).

function dom(html: string): DocumentFragment {
  const t = document.createElement("template");
  t.innerHTML = html;
  return t.content;
}

describe("the safety check itself", () => {
  it("flags what it is meant to flag, and passes what is allowed", () => {
    const bad = [
      '<a href="javascript:x">a</a>',
      '<a href=" JAVA&#9;SCRIPT:x">a</a>',
      '<img src="data:image/png;base64,AA">',
      '<a href="data:text/html,x">a</a>',
      '<a href="relative/path">a</a>',
      '<a href="//evil.example/">a</a>',
      '<img src="x" onerror="y">',
      "<script>x</script>",
      '<template><a href="vbscript:x">t</a></template>',
      '<img srcset="https://a.b/x 1x">',
    ];
    for (const h of bad) expect(unsafeDom(dom(h)), h).not.toEqual([]);
    const good =
      '<a href="https://a.b/">a</a><a href="HTTP://a.b">b</a><a href="mailto:a@b.c">c</a><a href="#f">d</a><img src="https://a.b/i.png" alt="i"><ol start="3"><li>x</li></ol>';
    expect(unsafeDom(dom(good))).toEqual([]);
  });
});

describe("URLs that survive rendering", () => {
  it("are fragments or absolute http, https and mailto URLs only", () => {
    expect(allowedUrl("https://a.b/c")).toBe(true);
    expect(allowedUrl("  http://a.b")).toBe(true);
    expect(allowedUrl("mailto:a@b.c")).toBe(true);
    expect(allowedUrl("#note")).toBe(true);
    for (const v of [
      "javascript:x",
      "java\tscript:x",
      "\u0001javascript:x",
      "data:text/html,x",
      "data:image/png,x",
      "vbscript:x",
      "file:///etc/passwd",
      "relative",
      "/abs/path",
      "//host/x",
      "ftp://a.b",
      "",
    ]) {
      expect(allowedUrl(v), JSON.stringify(v)).toBe(false);
    }
  });

  it("drop the attribute and keep the rest, including ordered list starts and table alignment", () => {
    const html = renderMarkdown(
      "![i](data:image/png;base64,AA) [r](rel/x) [f](#f) [m](mailto:a@b.c)\n\n3. three\n\n| a |\n|:-:|\n| b |",
    );
    const d = dom(html);
    expect(d.querySelector("img")?.hasAttribute("src")).toBe(false);
    expect(d.querySelector("img")?.getAttribute("alt")).toBe("i");
    expect([...d.querySelectorAll("a")].map((a) => a.getAttribute("href"))).toEqual([null, "#f", "mailto:a@b.c"]);
    expect(d.querySelector("ol")?.getAttribute("start")).toBe("3");
    expect(d.querySelector("th")?.getAttribute("align")).toBe("center");
  });
});

// The elements (with their attributes) and text of a parsed render, marks left out.
function shape(d: DocumentFragment): string {
  const tags = Array.from(d.querySelectorAll("*"))
    .filter((e) => e.tagName !== "MARK")
    .map(
      (e) =>
        `${e.tagName}${Array.from(e.attributes)
          .map((a) => ` ${a.name}=${JSON.stringify(a.value)}`)
          .join("")}`,
    );
  return `${tags.join()}|${d.textContent ?? ""}`;
}

describe("hostile Markdown, every drafted span", () => {
  it("renders no script, no event handler and no URL but http, https, mailto or a fragment, and the plain document's elements, attributes and text", () => {
    const failures: { src: string; spans: Span[]; unsafe: string[] }[] = [];
    const changed: { src: string; spans: Span[]; got: string; want: string }[] = [];
    let renders = 0;
    for (const src of corpus.docs) {
      const plain = dom(renderMarkdown(src));
      const want = shape(plain);
      const check = (spans: Span[], d: DocumentFragment) => {
        renders++;
        const unsafe = unsafeDom(d);
        if (unsafe.length > 0) failures.push({ src, spans, unsafe });
        const got = shape(d);
        if (got !== want) changed.push({ src, spans, got, want });
      };
      check([], plain);
      for (let s = 0; s < src.length; s++)
        for (let e = s + 1; e <= src.length; e++) check([[s, e]], dom(renderMarkdown(src, [[s, e]])));
    }
    expect(renders).toBe(corpus.docs.reduce((n, d) => n + 1 + (d.length * (d.length + 1)) / 2, 0));
    expect({ count: failures.length, first: failures.slice(0, 3) }).toEqual({ count: 0, first: [] });
    expect({ count: changed.length, first: changed.slice(0, 3) }).toEqual({ count: 0, first: [] });
  }, 180_000);
});

describe("markup that changes meaning when parsed twice", () => {
  it("stays inert with drafted spans anywhere in it", () => {
    // The classic mutation-XSS shapes: text that a second parse reads as tags.
    const docs = [
      '<noscript><p title="</noscript><img src=x onerror=a()>">',
      "<svg><style><img src=x onerror=a()>",
      "<math><mtext><table><mglyph><style><img src=x onerror=a()>",
    ];
    for (const src of docs) {
      for (let s = 0; s < src.length; s += 4) {
        for (const e of [s + 1, s + 7, src.length]) {
          const html = renderMarkdown(src, [[s, Math.min(e, src.length)]]);
          expect(unsafeDom(dom(html)), `${src} [${s},${e}]: ${html}`).toEqual([]);
        }
      }
    }
  }, 60_000);
});

// The window shows renderBlocks' output: each HTML block through innerHTML,
// each code block as text. Its shape: every HTML block parsed on its own (as
// the browser does, one element per block), marks left out, and the code.
function blocksShape(blocks: Block[]): string {
  return blocks.map((b) => (b.kind === "html" ? shape(dom(b.html)) : `[code ${b.lang}|${b.code}]`)).join("\n");
}

describe("hostile Markdown as blocks, drafted spans from every start", () => {
  it("gives HTML blocks with no script, handler or unsafe URL, and the plain document's shape", () => {
    const failures: { src: string; spans: Span[]; unsafe: string[] }[] = [];
    const changed: { src: string; spans: Span[]; got: string; want: string }[] = [];
    for (const src of corpus.docs) {
      const want = blocksShape(renderBlocks(src));
      for (let s = 0; s < src.length; s++) {
        for (const e of [s + 1, s + 6, src.length]) {
          const spans: Span[] = [[s, Math.min(e, src.length)]];
          const blocks = renderBlocks(src, spans);
          const unsafe = blocks.flatMap((b) => (b.kind === "html" ? unsafeDom(dom(b.html)) : []));
          if (unsafe.length > 0) failures.push({ src, spans, unsafe });
          const got = blocksShape(blocks);
          if (got !== want) changed.push({ src, spans, got, want });
        }
      }
    }
    expect({ count: failures.length, first: failures.slice(0, 3) }).toEqual({ count: 0, first: [] });
    expect({ count: changed.length, first: changed.slice(0, 3) }).toEqual({ count: 0, first: [] });
  }, 180_000);
});
