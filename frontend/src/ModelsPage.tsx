import { useState } from "preact/hooks";
import { humanBytes, modelFacts, modelLabel } from "./logic";
import type { ScanResult } from "./types";
import { useActions, useStore } from "./useStore";

/** The model manager: scan the models folder, register a path, choose the default, see what each model is. */
export function ModelsPage() {
  const store = useActions();
  const list = useStore((s) => s.models);
  const [scan, setScan] = useState<ScanResult | null>(null);
  const [path, setPath] = useState("");

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
            void store.scanModels().then((r) => {
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
        onSubmit={(e) => {
          e.preventDefault();
          void store.registerModel(path).then((m) => {
            if (m) setPath("");
          });
        }}
      >
        <input
          class="grow"
          data-testid="model-path"
          aria-label="Model file or directory to register"
          placeholder="/path/to/model.gguf or a model directory"
          value={path}
          onInput={(e) => {
            setPath(e.currentTarget.value);
          }}
        />
        <button type="submit" disabled={!path.trim()}>
          Register
        </button>
      </form>
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
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list?.models.length === 0 && (
              <tr>
                <td colSpan={9} class="muted">
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
                      onChange={() => void store.setDefaultModel(m.id)}
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
                    <button
                      type="button"
                      class="danger"
                      aria-label={`Forget ${name}`}
                      onClick={() => void store.forgetModel(m.id)}
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
    </div>
  );
}
