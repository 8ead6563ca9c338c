import DOMPurify from "dompurify";
import { Marked } from "marked";

// Model output and prompt text are untrusted: they are rendered as Markdown and
// the resulting HTML always goes through DOMPurify before it reaches the DOM.
const marked = new Marked({ gfm: true, breaks: true, async: false });

/** Renders Markdown to HTML that is safe to assign to innerHTML. */
export function renderMarkdown(src: string): string {
  const html = marked.parse(src, { async: false });
  return DOMPurify.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe"],
    FORBID_ATTR: ["style"],
  });
}
