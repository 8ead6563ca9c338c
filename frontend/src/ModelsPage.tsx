import { useEffect, useState } from "preact/hooks";
import type { Api } from "./api";
import { humanBytes } from "./logic";
import type { ModelList, ScanResult } from "./types";

/** The model manager: scan the models folder, register a path, choose the default. */
export function ModelsPage({ api }: { api: Api }) {
  const [list, setList] = useState<ModelList | null>(null);
  const [scan, setScan] = useState<ScanResult | null>(null);
  const [path, setPath] = useState("");
  const [error, setError] = useState<string | null>(null);

  const act = async (f: () => Promise<unknown>) => {
    setError(null);
    try {
      await f();
      setList(await api.models.list());
    } catch (e) {
      setError((e as Error).message);
    }
  };
  useEffect(() => {
    void act(async () => undefined);
  }, []);

  return (
    <div class="page models">
      <header class="page-head">
        <h2>Models</h2>
        <div class="spacer" />
        <button class="primary" data-testid="scan" onClick={() => act(async () => setScan(await api.models.scan()))}>Scan models folder</button>
      </header>
      {list && (
        <p class="muted" data-testid="models-dir">
          Put .gguf files or model directories in <code>{list.modelsDir}</code>, then scan.
        </p>
      )}
      {error && <div class="banner error" role="alert" data-testid="models-error">{error}</div>}
      {scan && (
        <div class="scan" data-testid="scan-result">
          Scan registered {scan.registered.length} model{scan.registered.length === 1 ? "" : "s"}.
          {scan.problems.map((pr) => (
            <div key={pr.path} class="error">{pr.path}: {pr.error}</div>
          ))}
        </div>
      )}
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          void act(async () => {
            await api.models.register(path);
            setPath("");
          });
        }}
      >
        <input class="grow" placeholder="/path/to/model.gguf or a model directory" value={path} onInput={(e) => setPath(e.currentTarget.value)} />
        <button type="submit" disabled={!path.trim()}>Register</button>
      </form>
      <table class="model-table" data-testid="model-table">
        <thead>
          <tr><th>Default</th><th>Name</th><th>Kind</th><th>Size</th><th>Path</th><th /></tr>
        </thead>
        <tbody>
          {list?.models.length === 0 && (
            <tr><td colSpan={6} class="muted">No models registered.</td></tr>
          )}
          {list?.models.map((m) => (
            <tr key={m.id}>
              <td>
                <input type="radio" name="default" checked={list.defaultId === m.id} onChange={() => act(() => api.models.setDefault(m.id))} aria-label={`make ${m.name} the default`} />
              </td>
              <td>{m.name}</td>
              <td>{m.kind}{m.meta?.arch ? ` (${m.meta.arch})` : ""}</td>
              <td>{humanBytes(m.sizeBytes)}</td>
              <td class="path" title={m.fingerprint}>{m.path}</td>
              <td><button class="danger" onClick={() => act(() => api.models.remove(m.id))}>Forget</button></td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
