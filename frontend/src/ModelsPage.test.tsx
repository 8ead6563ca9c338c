import { act } from "preact/test-utils";
import { afterEach, describe, expect, it } from "vitest";
import type { Bridge } from "./bridge";
import { all, click, flush, mountApp, root, testid, type, unmount } from "./testing/dom";
import { fakeBridge } from "./testing/fake";
import type { CatalogEntry, CatalogList, Download, Fit, Model, ModelList, RepoFiles } from "./types";

// Issue 24 in the window: the catalog, the Hugging Face search, bundle
// downloads, and the Models page's fixes (the loaded row, whole names in
// Settings).

const info = {
  version: "1.0",
  os: "linux",
  arch: "amd64",
  go: "go1",
  dataDir: "/d",
  database: "/d/anechat.db",
  schemaVersion: 1,
  storageError: "",
  engineError: "",
};
const model = (id: number, name: string): Model => ({
  id,
  path: `/d/models/${name}.gguf`,
  kind: "gguf",
  name,
  fingerprint: "f",
  sizeBytes: 1 << 20,
  meta: { arch: "llama", quant: "Q4_1", contextLen: 512, backend: "cpu", declaredName: "" },
  addedAt: "",
  lastUsedAt: "",
});
const fit = (f: Partial<Fit>): Fit => ({
  verdict: "fits",
  size: 1185376,
  need: 1185376 + 118537 + 512 * 1024 ** 2,
  ram: 16 * 1024 ** 3,
  neuralEngine: false,
  note: "needs about 650 MiB of 16 GiB",
  ...f,
});
const entry = (e: Partial<CatalogEntry>): CatalogEntry => ({
  name: "smollm2-135m-instruct",
  title: "SmolLM2 135M Instruct",
  repo: "bartowski/SmolLM2-135M-Instruct-GGUF",
  format: "gguf",
  backend: "cpu",
  context: 8192,
  licence: "Apache 2.0",
  licenceURL: "https://www.apache.org/licenses/LICENSE-2.0",
  acceptOnHub: false,
  link: "http://hub/bartowski/SmolLM2-135M-Instruct-GGUF",
  fit: fit({}),
  sizeExact: true,
  recommended: false,
  download: "SmolLM2-135M-Instruct-Q8_0.gguf",
  modelId: 0,
  error: "",
  ...e,
});
const catalogOf = (entries: CatalogEntry[]): CatalogList => ({
  entries,
  ram: 16 * 1024 ** 3,
  neuralEngine: false,
  hub: "http://hub",
});
const download = (d: Partial<Download>): Download => ({
  name: "tiny-coreml",
  url: "",
  source: "anechat-test/tiny-coreml@e396a424107a06579c08f3d9badbde450ee9b5b1",
  sha256: "",
  state: "running",
  received: 150000,
  total: 792143,
  bytesPerSec: 1024 * 1024,
  etaSeconds: 1,
  stalledSeconds: 0,
  error: "",
  model: null,
  ...d,
});

const basics = (over: Record<string, (...a: unknown[]) => unknown> = {}) => ({
  "System.Info": () => info,
  "Chat.ListConversations": () => [],
  "Settings.Get": () => ({
    speculationWidth: 4,
    kvQuotaBytes: 0,
    defaultModelId: 5,
    maxTokens: 10,
    temperature: 0,
    highlightDrafted: true,
    defaultSystemPrompt: "",
    theme: "system",
    modelTitles: false,
  }),
  "Models.List": (): ModelList => ({ models: [], defaultId: 0, loadedId: 0, modelsDir: "/d/models" }),
  "Downloads.List": () => [],
  "Catalog.List": () => catalogOf([]),
  "Catalog.Sizes": () => catalogOf([]),
  ...over,
});

afterEach(unmount);
const mount = (bridge: Bridge) => mountApp(bridge);

describe("the Models page's fixes", () => {
  it("marks the loaded model's row, though Load now was never clicked there", async () => {
    const fb = fakeBridge(
      basics({
        "Models.List": (): ModelList => ({
          models: [model(5, "stories"), model(6, "other")],
          defaultId: 5,
          loadedId: 6,
          modelsDir: "/d/models",
        }),
      }),
    );
    await mount(fb.bridge);
    await click(testid("nav-models"));
    const rows = all("model-row");
    expect(rows).toHaveLength(2);
    expect(rows[0]!.querySelector('[data-testid="model-loaded"]')).toBeNull();
    expect(rows[1]!.querySelector('[data-testid="model-loaded"]')?.textContent).toBe("loaded");
  });
});

describe("the catalog", () => {
  it("shows size, memory, fit, the recommended entry and the licence to accept first; one click pulls", async () => {
    const gemma = entry({
      name: "gemma-4-e2b-ane",
      title: "Gemma 4 E2B for the Neural Engine",
      format: "coreml",
      backend: "coreml",
      fit: fit({ verdict: "elsewhere", size: 3980000000, need: 0, note: "a Core ML bundle runs on the Neural Engine" }),
      sizeExact: false,
      download: "gemma-4-e2b-ane",
    });
    const gated = entry({
      name: "gated-one",
      title: "A gated model",
      acceptOnHub: true,
      link: "http://hub/owner/gated",
      download: "gated.gguf",
      error: "owner/gated is a gated repository",
    });
    const smol = entry({ recommended: true });
    const fb = fakeBridge(
      basics({
        "Catalog.List": () =>
          catalogOf([gemma, { ...smol, fit: fit({ size: 0, verdict: "unknown" }), sizeExact: false }, gated]),
        "Catalog.Sizes": () => catalogOf([gemma, smol, gated]),
        "Catalog.Pull": () => download({ name: "SmolLM2-135M-Instruct-Q8_0.gguf", source: "", files: undefined }),
      }),
    );
    await mount(fb.bridge);
    await click(testid("nav-models"));
    expect(fb.calls).toContain("Catalog.List");
    expect(fb.calls).toContain("Catalog.Sizes");
    const rows = all("catalog-entry");
    expect(rows.map((r) => r.dataset.name)).toEqual(["gemma-4-e2b-ane", "smollm2-135m-instruct", "gated-one"]);
    expect(testid("catalog-machine")?.textContent).toContain("16.0 GiB of memory");
    // Sizes replaced what List knew: the exact size and the fit.
    expect(rows[1]!.querySelector('[data-testid="catalog-size"]')?.textContent).toBe("1.1 MiB on disk");
    expect(rows[1]!.querySelector('[data-testid="catalog-facts"]')?.textContent).toContain(
      "needs about 513.2 MiB of memory",
    );
    expect(rows[1]!.querySelector('[data-testid="catalog-fit"]')?.textContent).toBe("Fits this machine");
    expect(rows[1]!.querySelector('[data-testid="catalog-recommended"]')).toBeTruthy();
    expect(all("catalog-recommended")).toHaveLength(1);
    expect(rows[0]!.querySelector('[data-testid="catalog-size"]')?.textContent).toBe("about 3.7 GiB on disk");
    expect(rows[0]!.querySelector('[data-testid="catalog-fit"]')?.textContent).toBe("Needs an Apple silicon Mac");
    const g = rows[2]!.querySelector<HTMLElement>('[data-testid="catalog-gated"]');
    expect(g?.textContent).toContain("accept the licence on Hugging Face first");
    await click(g?.querySelector("a"));
    expect(fb.opened).toEqual(["http://hub/owner/gated"]);
    expect(rows[2]!.querySelector('[data-testid="catalog-error"]')?.textContent).toContain("gated repository");
    expect(rows[0]!.querySelector('[data-testid="catalog-gated"]')).toBeNull();

    await click(rows[1]!.querySelector('[data-testid="catalog-pull"]'));
    expect(fb.args["Catalog.Pull"]).toEqual([[{ entry: "smollm2-135m-instruct", repo: "", file: "" }]]);
    // Its download is under way: the button says so and is not pressed twice.
    const again = all("catalog-entry")[1]!.querySelector<HTMLButtonElement>('[data-testid="catalog-pull"]');
    expect(again?.disabled).toBe(true);
    expect(again?.textContent).toBe("Downloading…");
  });

  it("says an error every entry shares once, above the list, and an entry's own error under it", async () => {
    const offline = "the Hub at huggingface.co could not be reached (are you offline?)";
    const list = () =>
      catalogOf([
        entry({ name: "a", error: offline }),
        entry({ name: "b", error: offline }),
        entry({ name: "c", error: "c was not found on the Hub" }),
      ]);
    const fb = fakeBridge(basics({ "Catalog.List": list, "Catalog.Sizes": list }));
    await mount(fb.bridge);
    await click(testid("nav-models"));
    const hubErrors = [...root.querySelectorAll('[data-testid="catalog-hub-error"]')].map((p) => p.textContent);
    expect(hubErrors).toEqual([`Sizes from Hugging Face: ${offline}`]);
    const own = [...root.querySelectorAll('[data-testid="catalog-error"]')].map((p) => p.textContent);
    expect(own).toEqual(["c was not found on the Hub"]);
  });

  it("says an installed entry is installed", async () => {
    const installed = () => catalogOf([entry({ modelId: 7 })]);
    const fb = fakeBridge(basics({ "Catalog.List": installed, "Catalog.Sizes": installed }));
    await mount(fb.bridge);
    await click(testid("nav-models"));
    expect(testid("catalog-installed")?.textContent).toBe("Installed");
    expect(testid("catalog-pull")).toBeNull();
  });
});

describe("the Hugging Face search", () => {
  const stories: RepoFiles = {
    repo: "anechat-test/stories260K-GGUF",
    commit: "9f7e2d5958d9db72486f2ecf69658de19529b9e8",
    gated: false,
    link: "http://hub/anechat-test/stories260K-GGUF",
    quantisations: [
      { path: "stories260K-Q8_0.gguf", size: 40000, fit: fit({ size: 40000 }) },
      { path: "stories260K.gguf", size: 1185376, fit: fit({}) },
    ],
    bundle: false,
    files: 0,
    size: 0,
    fit: fit({ verdict: "unknown", size: 0 }),
  };
  it("lists results, a repository's quantisations with sizes, and downloads the one picked", async () => {
    const fb = fakeBridge(
      basics({
        "Catalog.Search": () => [
          { id: "anechat-test/stories260K-GGUF", format: "gguf", downloads: 1200, likes: 3, gated: false, link: "" },
          {
            id: "anechat-test/gated-GGUF",
            format: "gguf",
            downloads: 500,
            likes: 0,
            gated: true,
            link: "http://hub/anechat-test/gated-GGUF",
          },
        ],
        "Catalog.Files": () => stories,
        "Catalog.Pull": () => download({ name: "stories260K.gguf", files: undefined, source: "" }),
      }),
    );
    await mount(fb.bridge);
    await click(testid("nav-models"));
    await type(testid<HTMLInputElement>("hub-search"), "stories");
    await click(testid("hub-search-go"));
    expect(fb.args["Catalog.Search"]).toEqual([["stories"]]);
    const results = all("hub-result");
    expect(results.map((r) => r.dataset.repo)).toEqual(["anechat-test/stories260K-GGUF", "anechat-test/gated-GGUF"]);
    expect(results[0]!.textContent).toContain("1,200 downloads");
    expect(results[1]!.querySelector('[data-testid="hub-gated"]')?.textContent).toContain(
      "accept its licence on Hugging Face first",
    );
    await click(results[0]!.querySelector('[data-testid="hub-open"]'));
    const files = all("repo-file");
    expect(files.map((f) => f.textContent)).toEqual([
      expect.stringContaining("stories260K-Q8_0.gguf39.1 KiB"),
      expect.stringContaining("stories260K.gguf1.1 MiB"),
    ]);
    await click(files[1]!.querySelector('[data-testid="repo-pull"]'));
    expect(fb.args["Catalog.Pull"]).toEqual([
      [{ entry: "", repo: "anechat-test/stories260K-GGUF", file: "stories260K.gguf" }],
    ]);
    expect(all("download").map((d) => d.dataset.state)).toEqual(["running"]);
  });

  it("says the Hub's error in words beside the box", async () => {
    const fb = fakeBridge(
      basics({
        "Catalog.Search": () => {
          throw new Error("the Hub is limiting requests (HTTP 429): try again in 7s");
        },
      }),
    );
    await mount(fb.bridge);
    await click(testid("nav-models"));
    await type(testid<HTMLInputElement>("hub-search"), "gemma");
    await click(testid("hub-search-go"));
    expect(testid("hub-error")?.textContent).toBe("the Hub is limiting requests (HTTP 429): try again in 7s");
    expect(testid("hub-result")).toBeNull();
  });

  it("offers a repository with no GGUF file as one folder", async () => {
    const fb = fakeBridge(
      basics({
        "Catalog.Search": () => [
          { id: "anechat-test/tiny-coreml", format: "coreml", downloads: 800, likes: 5, gated: false, link: "" },
        ],
        "Catalog.Files": () => ({
          ...stories,
          repo: "anechat-test/tiny-coreml",
          quantisations: [],
          bundle: true,
          files: 13,
          size: 792270,
        }),
        "Catalog.Pull": () => download({}),
      }),
    );
    await mount(fb.bridge);
    await click(testid("nav-models"));
    await type(testid<HTMLInputElement>("hub-search"), "tiny");
    await click(testid("hub-search-go"));
    await click(testid("hub-open"));
    expect(testid("repo-bundle")?.textContent).toContain("13 files, 773.7 KiB");
    await click(testid("repo-pull"));
    expect(fb.args["Catalog.Pull"]).toEqual([[{ entry: "", repo: "anechat-test/tiny-coreml", file: "" }]]);
  });
});

describe("bundle downloads", () => {
  it("shows the set's progress and each file's, with Pause and Cancel", async () => {
    const d = download({
      files: [
        { path: "README.md", received: 85, size: 85, state: "done" },
        { path: "embed_tokens_q8.bin", received: 50000, size: 150000, state: "running" },
        { path: "model_config.json", received: 0, size: 160, state: "waiting" },
      ],
    });
    let now = d;
    const fb = fakeBridge(
      basics({
        "Downloads.List": () => [now],
        "Downloads.Pause": () => (now = { ...d, state: "paused" }),
      }),
    );
    await mount(fb.bridge);
    await click(testid("nav-models"));
    expect(testid("dl-files-done")?.textContent).toBe("1 of 3 files checked");
    expect(testid("dl-file-current")?.textContent).toContain(
      "embed_tokens_q8.bin: 48.8 KiB of 146.5 KiB (downloading)",
    );
    expect(all("dl-file").map((f) => f.dataset.state)).toEqual(["done", "running", "waiting"]);
    expect(testid("download")?.textContent).toContain(
      "anechat-test/tiny-coreml@e396a424107a06579c08f3d9badbde450ee9b5b1 · a folder of 3 files",
    );
    // A progress event moves the current file on.
    await act(() => {
      fb.fire("download:update", {
        ...d,
        received: 150085,
        files: [d.files![0], { ...d.files![1], received: 150000, state: "done" }, { ...d.files![2], state: "running" }],
      });
    });
    await flush();
    expect(testid("dl-files-done")?.textContent).toBe("2 of 3 files checked");
    await click(testid("dl-pause"));
    expect(fb.args["Downloads.Pause"]).toEqual([["tiny-coreml"]]);
    expect(testid("download")?.dataset.state).toBe("paused");
  });
});
