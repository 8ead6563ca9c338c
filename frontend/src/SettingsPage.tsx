import { useEffect, useState } from "preact/hooks";
import { bytesToGiB, gibToBytes, modelLabel, parseWidth, widthChoices } from "./logic";
import type { Preferences } from "./types";
import { useActions, useStore } from "./useStore";

/** Settings: default model, speculation width, KV cache quota, reply length, temperature, where the data is. */
export function SettingsPage() {
  const store = useActions();
  const stored = useStore((s) => s.prefs);
  const models = useStore((s) => s.models);
  const info = useStore((s) => s.info);
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
    if (await store.savePrefs({ ...prefs, kvQuotaBytes: bytes })) setSaved(true);
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
              onChange={(e) => void store.setDefaultModel(Number(e.currentTarget.value))}
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
                  {w === "auto" ? "auto" : w === 1 ? "1 (off)" : String(w)}
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
          <div class="row">
            <button type="submit" class="primary" data-testid="save-settings">
              Save
            </button>
            <button
              type="button"
              data-testid="reset-settings"
              onClick={() =>
                void store.resetPrefs().then((p) => {
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
      <section class="settings facts" aria-label="Where anechat keeps its data">
        <h3>Data</h3>
        <p>
          Data directory: <code data-testid="data-dir">{info?.dataDir || "none"}</code>
        </p>
        {info?.database && (
          <p class="muted">
            Database <code>{info.database}</code>
            {info.schemaVersion ? `, schema v${info.schemaVersion}` : ""}
          </p>
        )}
      </section>
    </div>
  );
}
