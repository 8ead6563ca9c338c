// A small syntax highlighter for code blocks in replies: comments, strings,
// numbers and keywords of the languages models write most. It only splits
// the text into classed pieces; the window shows each piece as text (never
// as HTML), so it needs no escaping and cannot open a way around the
// sanitizer.

/** A piece of code and what it is ("" for plain text). */
export interface CodeToken {
  kind: "" | "keyword" | "string" | "comment" | "number" | "literal";
  text: string;
}

interface Lang {
  keywords: string[];
  literals: string[];
  /** Line comment starts, and whether /* *\/ comments exist. */
  line: string[];
  block: boolean;
  /** String quotes; a backquote string may span lines. */
  quotes: string[];
  /** Python's triple-quoted strings. */
  triple?: boolean;
}

const cLike = {
  line: ["//"],
  block: true,
  quotes: ['"', "'"],
};

const LANGS: Record<string, Lang> = {
  js: {
    ...cLike,
    quotes: ['"', "'", "`"],
    keywords:
      "async await break case catch class const continue debugger default delete do else export extends finally for from function if import in instanceof let new of return static super switch this throw try typeof var void while with yield interface type enum implements declare readonly as keyof satisfies namespace abstract private protected public".split(
        " ",
      ),
    literals: "true false null undefined NaN Infinity".split(" "),
  },
  python: {
    keywords:
      "and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case self".split(
        " ",
      ),
    literals: "True False None".split(" "),
    line: ["#"],
    block: false,
    quotes: ['"', "'"],
    triple: true,
  },
  go: {
    ...cLike,
    quotes: ['"', "'", "`"],
    keywords:
      "break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var".split(
        " ",
      ),
    literals: "true false nil iota".split(" "),
  },
  rust: {
    ...cLike,
    keywords:
      "as async await break const continue crate dyn else enum extern fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait type unsafe use where while".split(
        " ",
      ),
    literals: "true false None Some Ok Err".split(" "),
  },
  c: {
    ...cLike,
    keywords:
      "auto break case char class const constexpr continue default delete do double else enum extern final float for goto if inline int long namespace new operator override private protected public register return short signed sizeof static struct switch template this throw try typedef typename union unsigned using virtual void volatile while boolean byte extends implements import instanceof interface package super synchronized throws var val fun let func guard protocol".split(
        " ",
      ),
    literals: "true false null nullptr NULL nil".split(" "),
  },
  sh: {
    keywords:
      "if then else elif fi for while until do done case esac function in return local export readonly set unset echo exit source".split(
        " ",
      ),
    literals: [],
    line: ["#"],
    block: false,
    quotes: ['"', "'"],
  },
  sql: {
    keywords:
      "select from where and or not insert into values update set delete create table index view drop alter join left right inner outer on as group by order having limit offset union distinct primary key foreign references default begin commit rollback with case when then else end is in like between exists".split(
        " ",
      ),
    literals: "null true false".split(" "),
    line: ["--"],
    block: true,
    quotes: ["'", '"'],
  },
  json: { keywords: [], literals: "true false null".split(" "), line: [], block: false, quotes: ['"'] },
};

const ALIASES: Record<string, string> = {
  javascript: "js",
  jsx: "js",
  ts: "js",
  tsx: "js",
  typescript: "js",
  mjs: "js",
  py: "python",
  python3: "python",
  golang: "go",
  rs: "rust",
  h: "c",
  cpp: "c",
  "c++": "c",
  cc: "c",
  hpp: "c",
  java: "c",
  cs: "c",
  csharp: "c",
  kotlin: "c",
  kt: "c",
  swift: "c",
  bash: "sh",
  shell: "sh",
  zsh: "sh",
  console: "sh",
  postgres: "sql",
  sqlite: "sql",
  mysql: "sql",
  jsonc: "json",
};

/** The language a code block's info string names, or "" when it is not one this highlights. */
export function knownLang(lang: string): string {
  const l = lang.toLowerCase();
  const name = ALIASES[l] ?? l;
  return name in LANGS ? name : "";
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

const compiled = new Map<string, RegExp>();

// One regular expression per language, an alternative per kind of token,
// tried left to right at each position.
function pattern(name: string, l: Lang): RegExp {
  let re = compiled.get(name);
  if (re) return re;
  const comments = [...l.line.map((c) => `${escapeRe(c)}[^\\n]*`), ...(l.block ? ["/\\*[\\s\\S]*?(?:\\*/|$)"] : [])];
  const strings = [
    ...(l.triple ? ['"""[\\s\\S]*?(?:"""|$)', "'''[\\s\\S]*?(?:'''|$)"] : []),
    ...l.quotes.map((q) =>
      q === "`" ? "`(?:[^`\\\\]|\\\\[\\s\\S])*(?:`|$)" : `${q}(?:[^${q}\\\\\\n]|\\\\.)*(?:${q}|$)`,
    ),
  ];
  const parts = [
    comments.length ? `(?<comment>${comments.join("|")})` : "",
    strings.length ? `(?<string>${strings.join("|")})` : "",
    "(?<number>\\b(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|\\d[\\d_]*(?:\\.\\d[\\d_]*)?(?:[eE][+-]?\\d+)?)\\b)",
    "(?<word>[A-Za-z_$][\\w$]*)",
  ].filter((p) => p !== "");
  re = new RegExp(parts.join("|"), "g");
  compiled.set(name, re);
  return re;
}

/** Splits code into highlighted pieces; their texts joined are the code. */
export function highlightCode(code: string, lang: string): CodeToken[] {
  const name = knownLang(lang);
  const l = LANGS[name];
  if (!l) return code ? [{ kind: "", text: code }] : [];
  const keywords = new Set(l.keywords);
  const literals = new Set(l.literals);
  const caseless = name === "sql";
  const out: CodeToken[] = [];
  const push = (kind: CodeToken["kind"], text: string) => {
    const last = out[out.length - 1];
    if (last && last.kind === kind) last.text += text;
    else out.push({ kind, text });
  };
  const re = pattern(name, l);
  re.lastIndex = 0;
  let at = 0;
  for (let m = re.exec(code); m; m = re.exec(code)) {
    if (m[0] === "") {
      re.lastIndex++; // an unclosed comment or string at the very end matched nothing
      continue;
    }
    if (m.index > at) push("", code.slice(at, m.index));
    const g = m.groups ?? {};
    const word = caseless ? m[0].toLowerCase() : m[0];
    let kind: CodeToken["kind"] = "";
    if (g["comment"] !== undefined) kind = "comment";
    else if (g["string"] !== undefined) kind = "string";
    else if (g["number"] !== undefined) kind = "number";
    else if (keywords.has(word)) kind = "keyword";
    else if (literals.has(word)) kind = "literal";
    push(kind, m[0]);
    at = m.index + m[0].length;
  }
  if (at < code.length) push("", code.slice(at));
  return out;
}
