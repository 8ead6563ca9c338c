import { useMemo } from "preact/hooks";
import { renderMarkdown, type Span } from "./markdown";

/** Untrusted Markdown (model output), rendered and sanitized; spans are highlighted (drafted text). */
export function Markdown({ text, spans }: { text: string; spans?: readonly Span[] }) {
  const html = useMemo(() => renderMarkdown(text, spans ?? []), [text, spans]);
  // renderMarkdown runs DOMPurify: the HTML is safe to insert.
  return <div class="markdown" dangerouslySetInnerHTML={{ __html: html }} />;
}
