import { render } from "preact";
import { act } from "preact/test-utils";
import { afterEach, describe, expect, it } from "vitest";
import { api } from "./api";
import type { Bridge } from "./bridge";
import { LibraryPage } from "./LibraryPage";
import type { Prompt } from "./types";

const prompt = (id: number, pinnedSnapshotId: number): Prompt => ({
  id, title: `P${id}`, systemPrompt: "sys", body: "body", tags: [], pinnedSnapshotId, createdAt: "", updatedAt: "",
  variables: [], snapshot: null,
});

let root: HTMLElement;
afterEach(() => { render(null, root); root.remove(); });
const flush = () => act(async () => { for (let i = 0; i < 5; i++) await Promise.resolve(); });

describe("LibraryPage", () => {
  it("shows which prompts are ready to resume and prepares the others", async () => {
    let prompts = [prompt(1, 7), prompt(2, 0)];
    const calls: string[] = [];
    const bridge: Bridge = {
      async call<T>(service: string, method: string, ...args: unknown[]) {
        calls.push(`${service}.${method}(${args.join(",")})`);
        if (method === "List") return prompts as T;
        if (method === "Tags") return [] as T;
        if (method === "Prepare") {
          prompts = prompts.map((p) => (p.id === args[0] ? { ...p, pinnedSnapshotId: 9 } : p));
          return prompts.find((p) => p.id === args[0]) as T;
        }
        throw new Error(`unexpected ${service}.${method}`);
      },
      on: () => () => {},
    };
    root = document.createElement("div");
    document.body.append(root);
    await act(() => render(<LibraryPage api={api(bridge)} onStartChat={() => {}} />, root));
    await flush();
    const items = () => [...root.querySelectorAll("[data-testid=prompt]")];
    expect(items().map((li) => li.querySelector("[data-testid=prompt-ready]") !== null)).toEqual([true, false]);
    expect(items().map((li) => li.querySelector("[data-testid=prompt-prepare]") !== null)).toEqual([false, true]);
    await act(() => items()[1]!.querySelector<HTMLButtonElement>("[data-testid=prompt-prepare]")!.click());
    await flush();
    expect(calls).toContain("Library.Prepare(2)");
    expect(items().map((li) => li.querySelector("[data-testid=prompt-ready]")?.textContent?.trim())).toEqual(["ready to resume", "ready to resume"]);
  });
});

describe("LibraryPage search", () => {
  it("shows the answer to the latest query even when an older one arrives last", async () => {
    const answers: Record<string, (v: Prompt[]) => void> = {};
    const bridge: Bridge = {
      call<T>(_s: string, method: string, ...args: unknown[]) {
        if (method === "Tags") return Promise.resolve([] as T);
        return new Promise<T>((resolve) => { answers[String(args[1])] = resolve as (v: Prompt[]) => void; });
      },
      on: () => () => {},
    };
    root = document.createElement("div");
    document.body.append(root);
    await act(() => render(<LibraryPage api={api(bridge)} onStartChat={() => {}} />, root));
    const search = root.querySelector<HTMLInputElement>("[data-testid=prompt-search]")!;
    await act(() => { search.value = "sql"; search.dispatchEvent(new Event("input", { bubbles: true })); });
    await act(() => answers["sql"]!([prompt(2, 0)]));
    await act(() => answers[""]!([prompt(1, 0), prompt(2, 0)])); // the first list, late
    await flush();
    expect([...root.querySelectorAll("[data-testid=prompt] strong")].map((e) => e.textContent)).toEqual(["P2"]);
  });
});
