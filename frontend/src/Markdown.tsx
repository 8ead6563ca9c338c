import { useMemo } from "preact/hooks";
import { renderMarkdown } from "./markdown";

/** Untrusted Markdown (model output), rendered and sanitized. */
export function Markdown({ text }: { text: string }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  // renderMarkdown runs DOMPurify: the HTML is safe to insert.
  return <div class="markdown" dangerouslySetInnerHTML={{ __html: html }} />;
}
