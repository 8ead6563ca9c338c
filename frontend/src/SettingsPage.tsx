import { useEffect, useState } from "preact/hooks";
import type { Api } from "./api";
import { bytesToGiB, gibToBytes, parseWidth, widthChoices } from "./logic";
import type { Preferences } from "./types";

/** Settings: speculation width, KV cache quota, reply length, temperature. */
export function SettingsPage({ api }: { api: Api }) {
  const [prefs, setPrefs] = useState<Preferences | null>(null);
  const [quota, setQuota] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);

  const show = (p: Preferences) => {
    setPrefs(p);
    setQuota(String(bytesToGiB(p.kvQuotaBytes)));
  };
  useEffect(() => {
    api.settings.get().then(show, (e: Error) => setError(e.message));
  }, []);

  if (!prefs) return <div class="page">{error ? <div class="banner error" role="alert">{error}</div> : "Loading…"}</div>;
  const save = async (e: Event) => {
    e.preventDefault();
    setSaved(false);
    try {
      show(await api.settings.update({ ...prefs, kvQuotaBytes: gibToBytes(Number(quota)) }));
      setError(null);
      setSaved(true);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <form class="page settings" onSubmit={save} data-testid="settings" noValidate>
      <header class="page-head"><h2>Settings</h2></header>
      <label>
        Speculation width (tokens verified per model call)
        <select data-testid="width" value={String(prefs.speculationWidth)} onChange={(e) => setPrefs({ ...prefs, speculationWidth: parseWidth(e.currentTarget.value) })}>
          {widthChoices.map((w) => (
            <option key={String(w)} value={String(w)}>{w === "auto" ? "auto" : w === 1 ? "1 (off)" : String(w)}</option>
          ))}
        </select>
      </label>
      <label>
        KV cache quota on disk (GiB)
        <input data-testid="quota" type="number" min="0" step="0.25" value={quota} onInput={(e) => setQuota(e.currentTarget.value)} />
      </label>
      <label>
        Maximum reply length (tokens)
        <input data-testid="max-tokens" type="number" min="1" value={prefs.maxTokens} onInput={(e) => setPrefs({ ...prefs, maxTokens: Math.trunc(Number(e.currentTarget.value)) })} />
      </label>
      <label>
        Temperature (0 = greedy)
        <input data-testid="temperature" type="number" min="0" max="2" step="0.05" value={prefs.temperature} onInput={(e) => setPrefs({ ...prefs, temperature: Number(e.currentTarget.value) })} />
      </label>
      <label class="check">
        <input data-testid="highlight-drafted" type="checkbox" checked={prefs.highlightDrafted} onChange={(e) => setPrefs({ ...prefs, highlightDrafted: e.currentTarget.checked })} />
        Highlight drafted tokens (reply text that speculation guessed and the model confirmed)
      </label>
      {error && <div class="banner error" role="alert" data-testid="settings-error">{error}</div>}
      <div class="row">
        <button type="submit" class="primary" data-testid="save-settings">Save</button>
        <button type="button" onClick={async () => { try { show(await api.settings.reset()); setSaved(true); } catch (err) { setError((err as Error).message); } }}>
          Reset to defaults
        </button>
        {saved && <span class="muted" data-testid="saved">Saved.</span>}
      </div>
    </form>
  );
}
