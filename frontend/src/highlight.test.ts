import { describe, expect, it } from "vitest";
import { highlightCode, knownLang } from "./highlight";

const langs = ["js", "ts", "python", "go", "rust", "c", "java", "sh", "sql", "json", "unknown", ""];

describe("highlightCode", () => {
  it("keeps every character, in order, for any text in any language", () => {
    // Pseudo-random code-like strings: quotes, comment starts, escapes, digits, newlines.
    const alphabet = ['"', "'", "`", "/", "*", "#", "-", "\\", "\n", " ", "a", "if", "0x1F", "1.5e3", "_x", "{", "'''"];
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 400; round++) {
      let code = "";
      const len = rand(40);
      for (let i = 0; i < len; i++) code += alphabet[rand(alphabet.length)] ?? "";
      for (const l of langs) {
        const toks = highlightCode(code, l);
        expect(toks.map((t) => t.text).join(""), `${l}: ${JSON.stringify(code)}`).toBe(code);
        expect(toks.every((t) => t.text !== "")).toBe(true);
      }
    }
  });

  it("classes keywords, strings, comments, numbers and literals", () => {
    const kinds = (code: string, lang: string) =>
      highlightCode(code, lang)
        .filter((t) => t.kind)
        .map((t) => `${t.kind}:${t.text}`);
    expect(kinds('const s = "a\\"b"; // done', "ts")).toEqual(["keyword:const", 'string:"a\\"b"', "comment:// done"]);
    expect(kinds("def f(x):\n    return None  # no\n'''doc\nstring'''", "py")).toEqual([
      "keyword:def",
      "keyword:return",
      "literal:None",
      "comment:# no",
      "string:'''doc\nstring'''",
    ]);
    expect(kinds("func main() { x := 0x1F /* hex */ }", "go")).toEqual([
      "keyword:func",
      "number:0x1F",
      "comment:/* hex */",
    ]);
    expect(kinds("SELECT id FROM t -- all", "sql")).toEqual(["keyword:SELECT", "keyword:FROM", "comment:-- all"]);
    expect(kinds('{"a": [1.5, true, null]}', "json")).toEqual([
      'string:"a"',
      "number:1.5",
      "literal:true",
      "literal:null",
    ]);
    // A word inside a string or comment is not a keyword.
    expect(kinds("x = 'if' # while", "python")).toEqual(["string:'if'", "comment:# while"]);
  });

  it("leaves a language it does not know as plain text", () => {
    expect(highlightCode("if (x) { y }", "brainfuck")).toEqual([{ kind: "", text: "if (x) { y }" }]);
    expect(knownLang("TypeScript")).toBe("js");
    expect(knownLang("")).toBe("");
  });
});
