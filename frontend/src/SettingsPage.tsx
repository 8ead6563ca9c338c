import { useEffect, useState } from "preact/hooks";
import { bytesToGiB, gibToBytes, humanBytes, modelLabel, parseWidth, widthChoices, widthLabel } from "./logic";
import type { ClearCacheResult, Preferences } from "./types";
import { useActions, useStore } from "./useStore";

/**
 * Settings: the preferences (default model and system prompt, speculation
 * width, KV cache quota, reply length, temperature, drafted shading,
 * model-written titles), then what runs the models (backend, Core ML
 * compute units), the KV cache on disk, the local HTTP API, the Hugging
 * Face token, and where the data is.
 */
export function SettingsPage() {
  const store = useActions();
  const stored = useStore((s) => s.settings.prefs);
  const models = useStore((s) => s.models.list);
  const [prefs, setPrefs] = useState<Preferences | null>(stored);
  const [quota, setQuota] = useState(stored ? String(bytesToGiB(stored.kvQuotaBytes)) : "");
  const [saved, setSaved] = useState(false);
  useEffect(() => {
    if (!stored) return;
    setPrefs(stored);
    setQuota(String(bytesToGiB(stored.kvQuotaBytes)));
  }, [stored]);

  const save = async (e: Event) => {
    e.preventDefault();
    if (!prefs) return;
    setSaved(false);
    let bytes: number;
    try {
      bytes = gibToBytes(Number(quota));
    } catch (err) {
      store.refuse("settings", (err as Error).message);
      return;
    }
    if (await store.settings.save({ ...prefs, kvQuotaBytes: bytes })) {
      setSaved(true);
      void store.settings.reloadFacts(); // the quota shows in the cache's usage
    }
  };
  return (
    <div class="page">
      <header class="page-head">
        <h2>Settings</h2>
      </header>
      {!prefs ? (
        <p>Loading…</p>
      ) : (
        <form class="settings" onSubmit={(e) => void save(e)} data-testid="settings" noValidate>
          <label>
            Default model (new conversations answer with it)
            <select
              data-testid="default-model"
              value={String(models?.defaultId ?? 0)}
              disabled={!models?.models.length}
              onChange={(e) => void store.models.setDefault(Number(e.currentTarget.value))}
            >
              {!models?.models.length && <option value="0">no model registered</option>}
              {models?.models.map((m) => (
                <option key={m.id} value={String(m.id)}>
                  {modelLabel(m)}
                </option>
              ))}
            </select>
          </label>
          <label>
            Default system prompt (of new conversations not started from the prompt library)
            <textarea
              data-testid="default-system-prompt"
              rows={3}
              placeholder="None"
              value={prefs.defaultSystemPrompt}
              onInput={(e) => {
                setPrefs({ ...prefs, defaultSystemPrompt: e.currentTarget.value });
              }}
            />
          </label>
          <label>
            Speculation width (tokens verified per model call)
            <select
              data-testid="width"
              value={String(prefs.speculationWidth)}
              onChange={(e) => {
                setPrefs({ ...prefs, speculationWidth: parseWidth(e.currentTarget.value) });
              }}
            >
              {widthChoices.map((w) => (
                <option key={String(w)} value={String(w)}>
                  {widthLabel(w)}
                </option>
              ))}
            </select>
          </label>
          <label>
            KV cache quota on disk (GiB)
            <input
              data-testid="quota"
              type="number"
              min="0"
              step="0.25"
              value={quota}
              onInput={(e) => {
                setQuota(e.currentTarget.value);
              }}
            />
          </label>
          <label>
            Maximum reply length (tokens)
            <input
              data-testid="max-tokens"
              type="number"
              min="1"
              value={prefs.maxTokens}
              onInput={(e) => {
                setPrefs({ ...prefs, maxTokens: Math.trunc(Number(e.currentTarget.value)) });
              }}
            />
          </label>
          <label>
            Temperature (0 = greedy)
            <input
              data-testid="temperature"
              type="number"
              min="0"
              max="2"
              step="0.05"
              value={prefs.temperature}
              onInput={(e) => {
                setPrefs({ ...prefs, temperature: Number(e.currentTarget.value) });
              }}
            />
          </label>
          <label class="check">
            <input
              data-testid="highlight-drafted"
              type="checkbox"
              checked={prefs.highlightDrafted}
              onChange={(e) => {
                setPrefs({ ...prefs, highlightDrafted: e.currentTarget.checked });
              }}
            />
            Highlight drafted tokens (reply text that speculation guessed and the model confirmed)
          </label>
          <label class="check">
            <input
              data-testid="model-titles"
              type="checkbox"
              checked={prefs.modelTitles}
              onChange={(e) => {
                setPrefs({ ...prefs, modelTitles: e.currentTarget.checked });
              }}
            />
            The model writes each conversation's title after its first reply (in the background, never delaying a reply)
          </label>
          <p class="muted small">
            A conversation can have its own temperature, reply length and width: beside its message box.
          </p>
          <div class="row">
            <button type="submit" class="primary" data-testid="save-settings">
              Save
            </button>
            <button
              type="button"
              data-testid="reset-settings"
              onClick={() =>
                void store.settings.reset().then((p) => {
                  if (!p) return;
                  setPrefs(p);
                  setQuota(String(bytesToGiB(p.kvQuotaBytes)));
                  setSaved(true);
                })
              }
            >
              Reset to defaults
            </button>
            {saved && (
              <span class="muted" data-testid="saved" role="status">
                Saved.
              </span>
            )}
          </div>
        </form>
      )}
      <BackendSection />
      <CacheSection />
      <APISection />
      <HubTokenSection />
      <DataSection />
    </div>
  );
}

/** Which backend runs the default model and why, and the Core ML compute units. */
function BackendSection() {
  const store = useActions();
  const backend = useStore((s) => s.settings.backend);
  const coreml = useStore((s) => s.settings.coreml);
  return (
    <section class="settings facts" aria-labelledby="backend-title" data-testid="backend">
      <h3 id="backend-title">Backend</h3>
      {backend ? (
        <>
          <p data-testid="backend-why">
            {backend.backend ? (
              <>
                <strong>{backend.backend}</strong> runs the default model{backend.model ? ` (${backend.model})` : ""}
                :{" "}
              </>
            ) : null}
            {backend.why}
          </p>
          <p class="muted small" data-testid="backend-build">
            This build has: {backend.available.join(", ") || "no backend"}.
            {/* The Core ML part below says where Core ML runs; without it, say it here. */}
            {coreml ? null : ` Core ML: ${backend.coreML}`}
          </p>
        </>
      ) : (
        <p class="muted">Loading…</p>
      )}
      {coreml && (
        <>
          <label>
            Core ML compute units (where a Core ML bundle runs; applies from the next load)
            <select
              data-testid="compute-units"
              value={coreml.computeUnits}
              onChange={(e) => void store.settings.setComputeUnits(e.currentTarget.value)}
            >
              {coreml.computeUnitChoices.map((c) => (
                <option key={c} value={c}>
                  {computeUnitLabels[c] ?? c}
                </option>
              ))}
            </select>
          </label>
          <p class="muted small" data-testid="coreml-detail">
            {/* The detail says why when it does not run ("the Neural Engine is not available: …"). */}
            {coreml.available ? "Core ML runs here: " : "Core ML: "}
            {coreml.detail}
          </p>
          <p data-testid="running">
            {coreml.running ? (
              <>
                Loaded now: <code>{coreml.model.split(/[\\/]/).pop()}</code> on {coreml.running}: {coreml.executor}
              </>
            ) : (
              <span class="muted">
                No model is loaded yet: the first reply loads it (or Load now on the Models page).
              </span>
            )}
          </p>
        </>
      )}
    </section>
  );
}

/** What the compute-units values mean. */
const computeUnitLabels: Record<string, string> = {
  "neural-engine": "Neural Engine (and CPU)",
  gpu: "GPU (and CPU)",
  cpu: "CPU only",
  all: "All: Neural Engine, GPU and CPU",
};

/** The KV snapshot cache on disk against its quota, and Clear cache. */
function CacheSection() {
  const store = useActions();
  const cache = useStore((s) => s.settings.cache);
  const [pinned, setPinned] = useState(false);
  const [result, setResult] = useState<ClearCacheResult | null>(null);
  return (
    <section class="settings facts" aria-labelledby="cache-title" data-testid="cache">
      <h3 id="cache-title">KV cache</h3>
      {cache ? (
        <>
          <progress
            class="usage"
            max={Math.max(cache.quotaBytes, cache.usedBytes, 1)}
            value={cache.usedBytes}
            aria-label="KV cache used of its quota"
          />
          <p data-testid="cache-usage">
            {humanBytes(cache.usedBytes)} of {humanBytes(cache.quotaBytes)} in {cache.snapshots} snapshot
            {cache.snapshots === 1 ? "" : "s"}
            {cache.pinned > 0
              ? `; ${humanBytes(cache.pinnedBytes)} in ${cache.pinned} of them kept for prepared prompts`
              : ""}
          </p>
          <p class="muted small">
            Conversations resume from these files instead of reading their history again; beyond the quota the least
            recently used go first. In <code>{cache.dir}</code>
          </p>
        </>
      ) : (
        <p class="muted">Loading…</p>
      )}
      <div class="row">
        <button
          type="button"
          data-testid="clear-cache"
          onClick={() =>
            void store.settings.clearCache(pinned).then((r) => {
              setResult(r ?? null);
            })
          }
        >
          Clear cache
        </button>
        <label class="check">
          <input
            type="checkbox"
            data-testid="clear-pinned"
            checked={pinned}
            onChange={(e) => {
              setPinned(e.currentTarget.checked);
            }}
          />
          also the prepared prompts'
        </label>
      </div>
      {result && (
        <p role="status" data-testid="clear-result">
          Removed {result.removed} snapshot{result.removed === 1 ? "" : "s"}, {humanBytes(result.freedBytes)} freed.
          {result.problems.map((p) => (
            <span key={p.path} class="error">
              {" "}
              {p.path}: {p.error}
            </span>
          ))}
        </p>
      )}
    </section>
  );
}

/**
 * The local OpenAI- and Ollama-compatible HTTP API: a switch (stored, off
 * by default), the port, and what a client needs (base URL, bearer token,
 * model name, and the address Ollama's clients take).
 */
function APISection() {
  const store = useActions();
  const st = useStore((s) => s.settings.apiServer);
  const [port, setPort] = useState("");
  useEffect(() => {
    if (st?.port) setPort(String(st.port));
  }, [st?.port]);
  const toggle = (on: boolean) => {
    const p = port.trim() === "" ? 0 : Number(port);
    if (on && (!Number.isInteger(p) || p < 0 || p > 65535)) {
      store.refuse("settings", `API port: ${port} is not a port number (1 to 65535)`);
      return;
    }
    void store.settings.setAPIServer(on, p);
  };
  return (
    <section class="settings facts" aria-labelledby="api-title" data-testid="api">
      <h3 id="api-title">Local API</h3>
      <p class="muted small">
        An OpenAI- and Ollama-compatible HTTP API on this computer only (127.0.0.1), answered by the default model, for
        editors, scripts and agents that speak either protocol.
      </p>
      <div class="row">
        <label class="check">
          <input
            type="checkbox"
            data-testid="api-enabled"
            checked={st?.enabled ?? false}
            disabled={!st}
            onChange={(e) => {
              toggle(e.currentTarget.checked);
            }}
          />
          Serve the API
        </label>
        <label>
          Port
          <input
            data-testid="api-port"
            inputMode="numeric"
            size={6}
            value={port}
            disabled={!st || st.running}
            onInput={(e) => {
              setPort(e.currentTarget.value);
            }}
          />
        </label>
      </div>
      {st?.running && (
        <dl class="facts-list" data-testid="api-facts">
          <dt>Base URL</dt>
          <dd>
            <code data-testid="api-url">{st.url}</code>
          </dd>
          <dt>Bearer token</dt>
          <dd>
            <code data-testid="api-token">{st.token}</code> <span class="muted small">(kept in {st.tokenFile})</span>
          </dd>
          <dt>Model</dt>
          <dd>
            <code data-testid="api-model">{st.model || "no default model yet"}</code>
          </dd>
          <dt>Ollama clients</dt>
          <dd>
            <code data-testid="api-ollama">OLLAMA_HOST={st.ollamaHost}</code>{" "}
            <span class="muted small">(and the token as OLLAMA_API_KEY, or a bearer header)</span>
          </dd>
        </dl>
      )}
      {st?.error && (
        <p class="error" role="alert" data-testid="api-error">
          {st.error}
        </p>
      )}
    </section>
  );
}

/**
 * The Hugging Face access token for gated models: pasted into a password
 * field (never shown again: only its last four characters), kept where the
 * Go side says (the macOS keychain, or a file only this user can read),
 * cleared with one button. The field empties once it is stored, so the
 * token does not stay in the page.
 */
function HubTokenSection() {
  const store = useActions();
  const st = useStore((s) => s.settings.hubToken);
  const [text, setText] = useState("");
  const changed = () => {
    store.models.tokenChanged();
  };
  const save = async (e: Event) => {
    e.preventDefault();
    if (!text.trim()) return;
    if (await store.settings.setHubToken(text)) {
      setText("");
      changed();
    }
  };
  return (
    <section class="settings facts" aria-labelledby="hf-title" data-testid="hf-token">
      <h3 id="hf-title">Hugging Face token</h3>
      <p class="muted small">
        Gated models (whose licence must be accepted on Hugging Face first) download with an access token of the account
        that accepted it: make one with read access at{" "}
        <a
          href={st?.tokensURL ?? "https://huggingface.co/settings/tokens"}
          data-testid="hf-token-link"
          onClick={(e) => {
            e.preventDefault();
            store.openURL(st?.tokensURL ?? "https://huggingface.co/settings/tokens");
          }}
        >
          huggingface.co/settings/tokens
        </a>{" "}
        and paste it here. It is sent to Hugging Face only (not to the servers its files come from), never shown again
        {st ? (
          <>
            , and kept in <span data-testid="hf-token-where">{st.where}</span>.
          </>
        ) : (
          "."
        )}{" "}
        The command line uses <code>HF_TOKEN</code> when it is set, else this one.
      </p>
      <p data-testid="hf-token-state">
        {st?.set ? (
          <>
            A token is stored: <code data-testid="hf-token-masked">{st.masked}</code>
            {st.account && (
              <span data-testid="hf-token-account">
                {" "}
                — Hugging Face knows it as a token of <strong>{st.account}</strong>
              </span>
            )}
          </>
        ) : (
          <span class="muted">No token is stored: gated models are refused, with the link to their licence.</span>
        )}
      </p>
      {st?.error && (
        <p class="error" role="alert" data-testid="hf-token-error">
          {st.error}
        </p>
      )}
      {st?.note && (
        <p class="muted small" role="status" data-testid="hf-token-note">
          {st.note}
        </p>
      )}
      <form class="row" onSubmit={(e) => void save(e)} noValidate>
        <input
          class="grow"
          type="password"
          autoComplete="off"
          spellcheck={false}
          data-testid="hf-token-input"
          aria-label="Hugging Face access token"
          placeholder={st?.set ? "Paste a new token to replace it" : "hf_…"}
          value={text}
          onInput={(e) => {
            setText(e.currentTarget.value);
          }}
        />
        <button type="submit" data-testid="hf-token-save" disabled={!text.trim()}>
          Save token
        </button>
        {(st?.set || st?.error) && (
          <button
            type="button"
            data-testid="hf-token-clear"
            onClick={() =>
              void store.settings.clearHubToken().then((ok) => {
                if (ok) changed();
              })
            }
          >
            Clear
          </button>
        )}
      </form>
    </section>
  );
}

/** Where the data is, with a button that opens it. */
function DataSection() {
  const store = useActions();
  const info = useStore((s) => s.window.info);
  return (
    <section class="settings facts" aria-labelledby="data-title">
      <h3 id="data-title">Data</h3>
      <p class="row">
        <span>
          Data directory: <code data-testid="data-dir">{info?.dataDir || "none"}</code>
        </span>
        <button
          type="button"
          data-testid="open-data-dir"
          disabled={!info?.dataDir}
          onClick={() => void store.settings.openDataDir()}
        >
          Open
        </button>
      </p>
      {info?.database && (
        <p class="muted">
          Database <code>{info.database}</code>
          {info.schemaVersion ? `, schema v${info.schemaVersion}` : ""}
        </p>
      )}
    </section>
  );
}
