import { useState } from "preact/hooks";
import { humanBytes } from "./logic";
import type { CatalogEntry, Download, Fit, HubModel, RepoFiles } from "./types";
import { useActions, useStore } from "./useStore";

/** How a fit reads on a chip. */
export const verdictWords: Record<Fit["verdict"], string> = {
  fits: "Fits this machine",
  tight: "Tight fit",
  "too-large": "Too large for this machine",
  elsewhere: "Needs an Apple silicon Mac",
  unknown: "Fit not known yet",
};

/** A download of this name is under way (running, paused or being checked). */
function active(downloads: readonly Download[], name: string): Download | undefined {
  return downloads.find(
    (d) => d.name === name && (d.state === "running" || d.state === "paused" || d.state === "verifying"),
  );
}

/** A link that opens in the system's browser, never in the app's window. */
function OutLink({ href, children, testid }: { href: string; children: preact.ComponentChildren; testid?: string }) {
  const store = useActions();
  return (
    <a
      href={href}
      data-testid={testid}
      onClick={(e) => {
        e.preventDefault();
        store.openURL(href);
      }}
    >
      {children}
    </a>
  );
}

/**
 * The curated catalog: each model's size on disk, the memory it needs and
 * whether it fits this machine, the one recommended here marked, its
 * licence (and, when the repository is gated, where to accept it first);
 * one click downloads, checks and registers it (the default model when
 * there is none).
 */
export function ModelCatalog() {
  const store = useActions();
  const cat = useStore((s) => s.models.catalog);
  const downloads = useStore((s) => s.models.downloads);
  if (!cat) return null;
  const pick = cat.entries.find((e) => e.recommended);
  // An error several entries share (offline, rate limited) is the Hub's,
  // not theirs: said once above the list instead of under every entry.
  const seen = new Map<string, number>();
  for (const e of cat.entries) if (e.error) seen.set(e.error, (seen.get(e.error) ?? 0) + 1);
  const shared = new Set([...seen].filter(([, n]) => n > 1).map(([err]) => err));
  return (
    <section class="catalog" aria-labelledby="catalog-title" data-testid="catalog">
      <h3 id="catalog-title">Catalog</h3>
      <p class="muted small" data-testid="catalog-machine">
        This machine: {cat.ram > 0 ? `${humanBytes(cat.ram)} of memory` : "memory not known"};{" "}
        {cat.neuralEngine
          ? "the Neural Engine runs Core ML bundles here."
          : "Core ML bundles (the Neural Engine) need an Apple silicon Mac."}
      </p>
      <p class="small" data-testid="catalog-pick">
        {pick ? (
          <>
            Recommended here: <strong>{pick.title}</strong> ({pick.fit.note}).
          </>
        ) : (
          "No model is known to fit this machine yet: the sizes come from Hugging Face."
        )}
      </p>
      {[...shared].map((err) => (
        <p key={err} class="muted small" data-testid="catalog-hub-error">
          Sizes from Hugging Face: {err}
        </p>
      ))}
      <ul class="catalog-list" aria-label="Catalog models">
        {cat.entries.map((e) => (
          <CatalogRow
            key={e.name}
            e={shared.has(e.error) ? { ...e, error: "" } : e}
            dl={active(downloads, e.download)}
            onPull={() => store.models.pull({ entry: e.name, repo: "", file: "" })}
          />
        ))}
      </ul>
    </section>
  );
}

function CatalogRow({ e, dl, onPull }: { e: CatalogEntry; dl: Download | undefined; onPull: () => Promise<boolean> }) {
  const size =
    e.fit.size > 0 ? `${e.sizeExact ? "" : "about "}${humanBytes(e.fit.size)} on disk` : "size on disk not known yet";
  return (
    <li
      class={e.recommended ? "catalog-entry recommended" : "catalog-entry"}
      data-testid="catalog-entry"
      data-name={e.name}
      data-verdict={e.fit.verdict}
    >
      <div class="row">
        <strong>{e.title}</strong>
        {e.recommended && (
          <span class="chip ready" data-testid="catalog-recommended">
            Recommended for this machine
          </span>
        )}
        <span class={`chip verdict-${e.fit.verdict}`} data-testid="catalog-fit" title={e.fit.note}>
          {verdictWords[e.fit.verdict]}
        </span>
        <span class="spacer" />
        {e.modelId ? (
          <span class="chip state-done" data-testid="catalog-installed">
            Installed
          </span>
        ) : (
          <button
            type="button"
            class="primary"
            data-testid="catalog-pull"
            disabled={!!dl}
            aria-label={`Download ${e.title}`}
            onClick={() => void onPull()}
          >
            {dl ? "Downloading…" : "Download"}
          </button>
        )}
      </div>
      <div class="muted small" data-testid="catalog-facts">
        <span data-testid="catalog-size">{size}</span>
        {e.fit.need > 0 && <span> · needs about {humanBytes(e.fit.need)} of memory</span>}
        <span> · {e.context.toLocaleString("en")}-token context</span>
        <span> · {e.format === "coreml" ? "Core ML bundle (Neural Engine)" : "GGUF (CPU)"}</span>
        <span> · {e.repo}</span>
      </div>
      {/* "Fits" and "unknown" say no more than the facts above. */}
      {e.fit.note && e.fit.verdict !== "fits" && e.fit.verdict !== "unknown" && (
        <div class="muted small" data-testid="catalog-note">
          {e.fit.note}
        </div>
      )}
      <div class="small" data-testid="catalog-licence">
        Licence: <OutLink href={e.licenceURL}>{e.licence}</OutLink>
        {e.acceptOnHub && (
          <span data-testid="catalog-gated">
            {" "}
            — accept the licence on Hugging Face first: <OutLink href={e.link}>{e.link}</OutLink>, then paste a token of
            that account in Settings
          </span>
        )}
      </div>
      {e.error && (
        <div class="muted small" data-testid="catalog-error">
          {e.error}
        </div>
      )}
    </li>
  );
}

/**
 * The Hugging Face search: GGUF and Core ML repositories by name, a
 * repository's quantisations (or its size as a bundle), and the download of
 * the one picked. Errors are the Hub client's plain words.
 */
export function HubSearch() {
  const store = useActions();
  const search = useStore((s) => s.models.search);
  const [text, setText] = useState(search.text);
  return (
    <section class="hub-search" aria-labelledby="hub-title" data-testid="hub">
      <h3 id="hub-title">Search Hugging Face</h3>
      <form
        class="row"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          if (text.trim()) void store.models.searchHub(text.trim());
        }}
      >
        <input
          class="grow"
          data-testid="hub-search"
          aria-label="Search Hugging Face for GGUF and Core ML models by name"
          placeholder="gemma, qwen3, SmolLM2, OWNER/NAME…"
          value={text}
          onInput={(e) => {
            setText(e.currentTarget.value);
          }}
        />
        <button type="submit" data-testid="hub-search-go" disabled={!text.trim() || search.busy}>
          {search.busy ? "Searching…" : "Search"}
        </button>
      </form>
      {search.error && (
        <p class="error small" role="alert" data-testid="hub-error">
          {search.error}
        </p>
      )}
      {search.results && search.results.length === 0 && (
        <p class="muted small" data-testid="hub-none">
          No GGUF or Core ML model on the Hub matches “{search.text}”.
        </p>
      )}
      {search.results && search.results.length > 0 && (
        <ul class="hub-results" aria-label="Search results">
          {search.results.map((m) => (
            <HubResult
              key={m.id}
              m={m}
              open={search.repo?.repo === m.id ? search.repo : null}
              opening={search.opening === m.id}
            />
          ))}
        </ul>
      )}
    </section>
  );
}

function HubResult({ m, open, opening }: { m: HubModel; open: RepoFiles | null; opening: boolean }) {
  const store = useActions();
  return (
    <li class="hub-result" data-testid="hub-result" data-repo={m.id}>
      <div class="row">
        <strong>{m.id}</strong>
        <span class="chip">{m.format === "coreml" ? "Core ML" : "GGUF"}</span>
        <span class="muted small">
          {m.downloads.toLocaleString("en")} downloads · {m.likes.toLocaleString("en")} likes
        </span>
        <span class="spacer" />
        <button
          type="button"
          data-testid="hub-open"
          aria-label={`Show the files of ${m.id}`}
          disabled={opening}
          onClick={() => void store.models.openRepo(m.id)}
        >
          {opening ? "Reading…" : "Files"}
        </button>
      </div>
      {m.gated && (
        <div class="small" data-testid="hub-gated">
          Gated: accept its licence on Hugging Face first: <OutLink href={m.link}>{m.link}</OutLink>, then paste a token
          of that account in Settings (Hugging Face token)
        </div>
      )}
      {open && <RepoFilesView r={open} />}
    </li>
  );
}

function RepoFilesView({ r }: { r: RepoFiles }) {
  const store = useActions();
  // Gated and nothing listed: no token is stored (with one, the files are
  // listed and the download asks the Hub with it).
  if (r.gated && !r.bundle && r.quantisations.length === 0)
    return (
      <p class="small" data-testid="repo-files">
        {r.repo} is gated: accept its licence at <OutLink href={r.link}>{r.link}</OutLink>, then paste an access token
        of that account in Settings (Hugging Face token) and download it (anechat never asks for your password).
      </p>
    );
  if (r.bundle)
    return (
      <div class="repo-files" data-testid="repo-files">
        <div class="row">
          <span data-testid="repo-bundle">
            No GGUF file: the whole repository downloads as one folder — {r.files} files, {humanBytes(r.size)}.
          </span>
          <span class={`chip verdict-${r.fit.verdict}`} title={r.fit.note}>
            {verdictWords[r.fit.verdict]}
          </span>
          <span class="spacer" />
          <button
            type="button"
            class="primary"
            data-testid="repo-pull"
            onClick={() => void store.models.pull({ entry: "", repo: r.repo, file: "" })}
          >
            Download the whole repository
          </button>
        </div>
      </div>
    );
  return (
    <table class="repo-files" data-testid="repo-files">
      <thead>
        <tr>
          <th scope="col">Quantisation (file)</th>
          <th scope="col">Size</th>
          <th scope="col">This machine</th>
          <th scope="col">
            <span class="sr-only">Download</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {r.quantisations.map((f) => (
          <tr key={f.path} data-testid="repo-file">
            <td>{f.path}</td>
            <td>{humanBytes(f.size)}</td>
            <td title={f.fit.note}>{verdictWords[f.fit.verdict]}</td>
            <td>
              <button
                type="button"
                data-testid="repo-pull"
                aria-label={`Download ${f.path}`}
                onClick={() => void store.models.pull({ entry: "", repo: r.repo, file: f.path })}
              >
                Download
              </button>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
