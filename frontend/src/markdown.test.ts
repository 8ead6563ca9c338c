import { describe, expect, it } from "vitest";
import { renderMarkdown } from "./markdown";

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
    const html = renderMarkdown('<iframe src="https://example.invalid"></iframe><form><input></form><p style="color:red">t</p>');
    expect(html).not.toMatch(/<iframe|<form|<input|style=/i);
    expect(html).toContain("<p>t</p>");
  });
});
