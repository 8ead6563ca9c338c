import { useState } from "preact/hooks";
import { downloadLine, downloadStates, humanBytes, modelFacts, modelLabel } from "./logic";
import { HubSearch, ModelCatalog } from "./ModelCatalog";
import type { ModelLoad } from "./store";
import type { Download, ImportResult, Model, ScanResult } from "./types";
import { useActions, useStore } from "./useStore";

/**
 * The model manager: scan the models folder, import a file or folder (a
 * Core ML bundle too), download a model, choose the default, load one
 * ahead of the first reply, see what each model is.
 */
export function ModelsPage() {
  const store = useActions();
  const list = useStore((s) => s.models.list);
  const load = useStore((s) => s.models.load);
  const [scan, setScan] = useState<ScanResult | null>(null);
  const [path, setPath] = useState("");
  const [imported, setImported] = useState<ImportResult | null>(null);

  return (
    <div class="page models">
      <header class="page-head">
        <h2>Models</h2>
        <div class="spacer" />
        <button
          type="button"
          class="primary"
          data-testid="scan"
          onClick={() =>
            void store.models.scan().then((r) => {
              setScan(r ?? null);
            })
          }
        >
          Scan models folder
        </button>
      </header>
      {list && (
        <p class="muted" data-testid="models-dir">
          Put .gguf files or model directories in <code>{list.modelsDir}</code>, then scan.
        </p>
      )}
      {scan && (
        <div class="scan" data-testid="scan-result" role="status">
          Scan registered {scan.registered.length} model{scan.registered.length === 1 ? "" : "s"}.
          {scan.problems.map((pr) => (
            <div key={pr.path} class="error">
              {pr.path}: {pr.error}
            </div>
          ))}
        </div>
      )}
      <form
        class="row"
        aria-label="Import a model"
        onSubmit={(e) => {
          e.preventDefault();
          setImported(null);
          void store.models.importPath(path).then((r) => {
            if (!r) return;
            setImported(r);
            setPath("");
          });
        }}
      >
        <input
          class="grow"
          data-testid="model-path"
          aria-label="Model file or folder to import (a .gguf file, a model folder or a Core ML bundle)"
          placeholder="/path/to/model.gguf, a model folder or a Core ML bundle folder"
          value={path}
          onInput={(e) => {
            setPath(e.currentTarget.value);
          }}
        />
        <button
          type="button"
          data-testid="choose-folder"
          onClick={() =>
            void store.models.chooseFolder("Choose a model folder or Core ML bundle").then((p) => {
              if (p) setPath(p);
            })
          }
        >
          Choose folder…
        </button>
        <button type="submit" data-testid="model-import" disabled={!path.trim()}>
          Import
        </button>
      </form>
      {imported && (
        <p
          class={imported.runnable ? "scan" : "scan banner info"}
          role="status"
          data-testid="import-result"
          data-runnable={imported.runnable}
        >
          {imported.runnable ? (
            <>
              Imported <strong>{modelLabel(imported.model)}</strong>: it runs on the {imported.backend} backend.
            </>
          ) : (
            <span>
              Imported <strong>{modelLabel(imported.model)}</strong>, but it cannot run here: {imported.note}
            </span>
          )}
        </p>
      )}
      <div class="table-wrap">
        <table class="model-table" data-testid="model-table">
          <thead>
            <tr>
              <th scope="col">Default</th>
              <th scope="col">Name</th>
              <th scope="col">Architecture</th>
              <th scope="col">Quantisation</th>
              <th scope="col">Context</th>
              <th scope="col">Backend</th>
              <th scope="col">Size</th>
              <th scope="col">Path</th>
              <th scope="col">Loaded</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list?.models.length === 0 && (
              <tr>
                <td colSpan={10} class="muted">
                  No models registered.
                </td>
              </tr>
            )}
            {list?.models.map((m) => {
              const f = modelFacts(m);
              const name = modelLabel(m);
              return (
                <tr key={m.id} data-testid="model-row">
                  <td>
                    <input
                      type="radio"
                      name="default"
                      checked={list.defaultId === m.id}
                      onChange={() => void store.models.setDefault(m.id)}
                      aria-label={`make ${name} the default`}
                    />
                  </td>
                  <td data-testid="model-name">
                    {name}
                    {m.meta?.declaredName && m.meta.declaredName !== name && (
                      <div class="muted small">calls itself “{m.meta.declaredName}”</div>
                    )}
                  </td>
                  <td>{f.arch || m.kind}</td>
                  <td>{f.quant || "—"}</td>
                  <td>{f.context || "—"}</td>
                  <td data-testid="model-backend">{f.backend || "—"}</td>
                  <td>{humanBytes(m.sizeBytes)}</td>
                  <td class="path">{m.path}</td>
                  <td>
                    <LoadCell model={m} name={name} load={load} loaded={list.loadedId === m.id} />
                  </td>
                  <td>
                    <button
                      type="button"
                      class="danger"
                      aria-label={`Forget ${name}`}
                      onClick={() => void store.models.forget(m.id)}
                    >
                      Forget
                    </button>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      <ModelCatalog />
      <HubSearch />
      <Downloads />
    </div>
  );
}

/** A model's load: a button to load it now, its progress and Cancel while it loads, how the last load ended. */
function LoadCell({
  model: m,
  name,
  load,
  loaded,
}: {
  model: Model;
  name: string;
  load: ModelLoad | null;
  /** The model is in memory now (the list says so), however it got there. */
  loaded: boolean;
}) {
  const store = useActions();
  const mine = load?.modelId === m.id ? load : null;
  if (mine?.running)
    return (
      <span class="load" data-testid="model-loading">
        <progress max={mine.total || 1} value={mine.total ? mine.done : undefined} aria-label={`Loading ${name}`} />{" "}
        {mine.total ? `${mine.done}/${mine.total}` : ""}
        <button type="button" data-testid="cancel-load" onClick={() => void store.models.cancelLoad()}>
          Cancel
        </button>
      </span>
    );
  return (
    <span class="load">
      <button
        type="button"
        data-testid="load-model"
        aria-label={`Load ${name} now`}
        disabled={!!m.meta?.unsupported || load?.running === true}
        onClick={() => void store.models.load(m.id)}
      >
        Load now
      </button>
      {loaded && (
        <span class="chip state-done" data-testid="model-loaded">
          loaded
        </span>
      )}
      {mine && (
        <span class={mine.outcome?.kind === "loaded" ? "muted small" : "error small"} data-testid="load-outcome">
          {" "}
          {mine.outcome?.message ?? mine.error}
        </span>
      )}
    </span>
  );
}

/**
 * Model downloads: a form (URL, optional SHA-256) and each download with its
 * progress, speed and time left, and Pause, Resume, Cancel. A download is
 * written to a hidden folder and only becomes a model once complete and
 * checked.
 */
function Downloads() {
  const store = useActions();
  const downloads = useStore((s) => s.models.downloads);
  const [url, setUrl] = useState("");
  const [sha, setSha] = useState("");
  return (
    <section class="downloads" aria-labelledby="downloads-title" data-testid="downloads">
      <h3 id="downloads-title">Download a model</h3>
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          void store.models.startDownload({ url: url.trim(), sha256: sha.trim(), fileName: "", size: 0 }).then((ok) => {
            if (!ok) return;
            setUrl("");
            setSha("");
          });
        }}
      >
        <input
          class="grow"
          data-testid="dl-url"
          aria-label="Download URL (an https link to a .gguf file)"
          placeholder="https://huggingface.co/OWNER/REPO/resolve/main/FILE.gguf"
          value={url}
          onInput={(e) => {
            setUrl(e.currentTarget.value);
          }}
        />
        <input
          class="sha"
          data-testid="dl-sha"
          aria-label="SHA-256 of the file (optional: checked when the download ends)"
          placeholder="SHA-256 (optional)"
          value={sha}
          onInput={(e) => {
            setSha(e.currentTarget.value);
          }}
        />
        <button type="submit" class="primary" data-testid="dl-start" disabled={!url.trim()}>
          Download
        </button>
      </form>
      {downloads.length === 0 ? (
        <p class="muted small">
          No downloads. A model downloaded here appears in the table once it is complete and checked.
        </p>
      ) : (
        <ul class="download-list" aria-label="Downloads">
          {downloads.map((d) => (
            <DownloadRow key={d.name} d={d} />
          ))}
        </ul>
      )}
    </section>
  );
}

/** How a bundle file's state reads. */
const fileStates: Record<NonNullable<Download["files"]>[number]["state"], string> = {
  waiting: "waiting",
  running: "downloading",
  verifying: "checking",
  done: "checked",
  failed: "failed",
  interrupted: "connection lost: retrying",
};

/** A bundle's files: how many are checked, the one under way, and each file's progress. */
function BundleFiles({ d }: { d: Download }) {
  const files = d.files ?? [];
  const done = files.filter((f) => f.state === "done").length;
  const current = files.find((f) => f.state !== "done" && f.state !== "waiting");
  return (
    <details class="bundle-files" data-testid="dl-files" open={d.state === "running"}>
      <summary class="small">
        <span data-testid="dl-files-done">
          {done} of {files.length} files checked
        </span>
        {current && (
          <span data-testid="dl-file-current">
            {" "}
            · {current.path}: {humanBytes(current.received)} of {humanBytes(current.size)} ({fileStates[current.state]})
          </span>
        )}
      </summary>
      <ul class="file-list">
        {files.map((f) => (
          <li key={f.path} data-testid="dl-file" data-state={f.state} class="small">
            <progress
              max={f.size || 1}
              value={f.size ? f.received : f.state === "done" ? 1 : 0}
              aria-label={`${f.path}: downloaded`}
            />{" "}
            <span class="path">{f.path}</span>{" "}
            <span class="muted">
              {humanBytes(f.size)} · {fileStates[f.state]}
            </span>
          </li>
        ))}
      </ul>
    </details>
  );
}

function DownloadRow({ d }: { d: Download }) {
  const store = useActions();
  const finished = d.state === "done" || d.state === "failed" || d.state === "cancelled";
  return (
    <li class="download" data-testid="download" data-state={d.state}>
      <div class="row">
        <strong>{d.name}</strong>
        <span class={`chip state-${d.state}`} data-testid="dl-state">
          {downloadStates[d.state]}
        </span>
        <span class="spacer" />
        {d.state === "running" && (
          <button type="button" data-testid="dl-pause" onClick={() => void store.models.pauseDownload(d.name)}>
            Pause
          </button>
        )}
        {d.state === "paused" && (
          <button type="button" data-testid="dl-resume" onClick={() => void store.models.resumeDownload(d.name)}>
            Resume
          </button>
        )}
        {(d.state === "running" || d.state === "paused") && (
          <button
            type="button"
            class="danger"
            data-testid="dl-cancel"
            aria-label={`Cancel the download of ${d.name}`}
            onClick={() => void store.models.cancelDownload(d.name)}
          >
            Cancel
          </button>
        )}
        {finished && (
          <button
            type="button"
            data-testid="dl-dismiss"
            aria-label={`Remove ${d.name} from the list`}
            onClick={() => void store.models.dismissDownload(d.name)}
          >
            Dismiss
          </button>
        )}
      </div>
      {/* A bar while it runs, or for a pause with a known size (an unknown one would animate). */}
      {!finished && (d.state === "running" || d.total > 0) && (
        <progress
          class="dl-bar"
          max={d.total > 0 ? d.total : 1}
          value={d.total > 0 ? d.received : undefined}
          aria-label={`${d.name}: downloaded`}
        />
      )}
      <div class="muted small" data-testid="dl-line">
        {d.state === "done" && d.model
          ? `${humanBytes(d.received)} · registered as ${modelLabel(d.model)}`
          : downloadLine(d)}
      </div>
      {d.error && (
        <div class={d.state === "failed" ? "error small" : "small"} data-testid="dl-error">
          {d.error}
        </div>
      )}
      {d.files && <BundleFiles d={d} />}
      <div class="muted small path">{d.files ? `${d.source} · a folder of ${d.files.length} files` : d.url}</div>
    </li>
  );
}
