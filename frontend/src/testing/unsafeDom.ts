/**
 * The parts of a rendered DOM that could run script or navigate the app to a
 * scheme other than http, https or mailto, each described in a line ("" if
 * none): an element that runs or embeds code (script, iframe, object, ...),
 * an on* attribute, or a URL attribute whose value, read as the browser's URL
 * parser reads it, is neither a fragment nor an absolute http, https or mailto
 * URL (a relative one resolves against the app's own scheme). Template
 * contents are searched too.
 *
 * The unit tests (jsdom) and the end-to-end tests (Chromium, through
 * page.evaluate, which sends the function's source) share it, so it is one
 * self-contained function: no imports, no helpers outside it.
 */
export function unsafeDom(root: ParentNode): string[] {
  const badTags = new Set([
    "script",
    "iframe",
    "frame",
    "object",
    "embed",
    "base",
    "meta",
    "link",
    "form",
    "style",
    "portal",
  ]);
  const urlAttrs = new Set([
    "href",
    "src",
    "srcset",
    "action",
    "formaction",
    "poster",
    "background",
    "cite",
    "xlink:href",
    "data",
    "ping",
    "longdesc",
    "lowsrc",
    "dynsrc",
    "codebase",
    "manifest",
    "usemap",
    "srcdoc",
  ]);
  const schemes = new Set(["http:", "https:", "mailto:"]);
  const urlOK = (v: string) => {
    // eslint-disable-next-line no-control-regex -- the controls the URL parser skips
    if (/^[\u0000-\u0020]*#/.test(v)) return true;
    try {
      return schemes.has(new URL(v).protocol);
    } catch {
      return false; // relative, or no URL at all
    }
  };
  const found: string[] = [];
  const walk = (r: ParentNode) => {
    for (const el of Array.from(r.querySelectorAll("*"))) {
      const tag = el.localName.toLowerCase();
      if (badTags.has(tag)) found.push(`<${tag}> element`);
      for (const a of Array.from(el.attributes)) {
        const name = a.name.toLowerCase();
        if (name.startsWith("on")) found.push(`<${tag} ${a.name}="${a.value}">: event handler`);
        else if (name === "srcset" || name === "srcdoc")
          found.push(`<${tag} ${a.name}="${a.value}">: not allowed at all`);
        else if (urlAttrs.has(name) && !urlOK(a.value))
          found.push(`<${tag} ${a.name}="${a.value}">: not http, https, mailto or a fragment`);
      }
      if (tag === "template") walk((el as HTMLTemplateElement).content);
    }
  };
  walk(root);
  return found;
}
