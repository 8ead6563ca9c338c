import { memo } from "preact/compat";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { highlightCode, knownLang } from "./highlight";
import { allowedUrl, renderBlocks, splitDrafted, type Part, type Span } from "./markdown";
import { useActions } from "./useStore";

/**
 * Untrusted Markdown (model output), rendered and sanitized; spans are
 * highlighted (drafted text). It is shown block by block, so that while a
 * reply streams only the blocks that changed reach the DOM again. A click on
 * a link never navigates the window: an http(s) or mailto link opens in the
 * system's browser.
 */
export function Markdown({ text, spans }: { text: string; spans?: readonly Span[] | undefined }) {
  const blocks = useMemo(() => renderBlocks(text, spans ?? []), [text, spans]);
  const box = useRef<HTMLDivElement>(null);
  const store = useActions();
  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const guard = (e: MouseEvent) => {
      const a = e.target instanceof Element ? e.target.closest("a[href]") : null;
      if (!a || !el.contains(a)) return;
      const href = a.getAttribute("href") ?? "";
      if (/^\s*#/.test(href)) return; // a footnote: stays on the page
      e.preventDefault();
      if (e.type === "click" && allowedUrl(href)) store.openURL(href.trim());
    };
    el.addEventListener("click", guard);
    el.addEventListener("auxclick", guard);
    return () => {
      el.removeEventListener("click", guard);
      el.removeEventListener("auxclick", guard);
    };
  }, [store]);
  return (
    <div class="markdown" ref={box}>
      {blocks.map((b, i) =>
        b.kind === "html" ? (
          <HtmlBlock key={i} html={b.html} />
        ) : (
          <CodeBlock key={i} lang={b.lang} code={b.code} drafted={b.drafted} />
        ),
      )}
    </div>
  );
}

// renderBlocks sanitized the HTML: it is safe to insert. Memoized, so a block
// that did not change is not even compared again.
const HtmlBlock = memo(function HtmlBlock({ html }: { html: string }) {
  return <div class="md-block" dangerouslySetInnerHTML={{ __html: html }} />;
});

/** A code block: its text highlighted (as text, never HTML), its drafted stretches marked, a copy button. */
export const CodeBlock = memo(function CodeBlock({
  lang,
  code,
  drafted,
}: {
  lang: string;
  code: string;
  drafted: readonly Span[];
}) {
  const store = useActions();
  const [copied, setCopied] = useState(false);
  const pieces = useMemo(() => highlightCode(code, lang), [code, lang]);
  const parts = useMemo(
    () =>
      splitDrafted(
        pieces.map((p) => p.text),
        drafted,
      ),
    [pieces, drafted],
  );
  const name = knownLang(lang) ? lang : lang || "code";
  return (
    <div class="code-block" data-testid="code-block">
      <div class="code-head">
        <span class="code-lang">{name}</span>
        <button
          type="button"
          class="code-copy"
          data-testid="copy-code"
          aria-label={`Copy ${name} code`}
          onClick={() => {
            void store.copy(code).then((ok) => {
              setCopied(ok);
            });
          }}
        >
          {copied ? "Copied" : "Copy"}
        </button>
      </div>
      <pre>
        <code class={lang ? `language-${lang}` : undefined}>
          {pieces.map((p, i) => {
            const body = markDrafted(parts[i] ?? []);
            return p.kind ? (
              <span key={i} class={`tok-${p.kind}`}>
                {body}
              </span>
            ) : (
              body
            );
          })}
        </code>
      </pre>
    </div>
  );
});

// A piece's parts, its drafted ones in <mark>.
function markDrafted(parts: readonly Part[]) {
  const only = parts[0];
  if (parts.length === 1 && only && !only.drafted) return only.text;
  return parts.map((p, i) =>
    p.drafted ? (
      <mark key={i} class="drafted">
        {p.text}
      </mark>
    ) : (
      p.text
    ),
  );
}
