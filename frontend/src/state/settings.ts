// Settings: the stored preferences, the colour scheme, and what the Settings
// page shows beside them (the backends, Core ML, the KV cache, the local
// HTTP API).
import type {
  APIStatus,
  BackendInfo,
  CacheUsage,
  ClearCacheResult,
  CoreMLSettings,
  HubToken,
  Preferences,
  Theme,
} from "../types";
import type { Core } from "./core";

/** The settings' part of the state. */
export interface SettingsState {
  prefs: Preferences | null;
  /** The colour scheme the window shows (the sidebar's switch; stored as Preferences.theme). */
  theme: Theme;
  /** What the Settings page shows of the backends and the KV cache. */
  backend: BackendInfo | null;
  coreml: CoreMLSettings | null;
  cache: CacheUsage | null;
  /** The local OpenAI-compatible HTTP API (API service): on or off, where, its token. */
  apiServer: APIStatus | null;
  /** Whether a Hugging Face access token is stored (masked), and where. */
  hubToken: HubToken | null;
}

/**
 * The theme the page was drawn with: the Go side answers theme.js (see
 * index.html) with the stored one before the page's code runs.
 */
export function themeOnPage(doc: Document = document): Theme {
  const t = doc.documentElement.dataset["theme"];
  return t === "light" || t === "dark" ? t : "system";
}

/** The settings' part before anything is loaded, drawn with theme. */
export function initialSettings(theme: Theme): SettingsState {
  return { prefs: null, theme, backend: null, coreml: null, cache: null, apiServer: null, hubToken: null };
}

/** The settings' actions. */
export class Settings {
  constructor(private readonly core: Core) {}

  private update(patch: Partial<SettingsState> | ((s: SettingsState) => Partial<SettingsState>)) {
    this.core.update("settings", patch);
  }

  async reload() {
    const p = await this.core.attempt("settings", () => this.core.api.settings.get(), true);
    if (p) this.update({ prefs: p, theme: p.theme });
  }

  /** Saves p (with the theme the window shows: the sidebar's switch owns it); the stored preferences, or undefined if refused. */
  async save(p: Preferences) {
    const theme = this.core.state.settings.theme;
    const saved = await this.core.attempt("settings", () => this.core.api.settings.update({ ...p, theme }));
    if (saved) this.update({ prefs: saved });
    return saved;
  }

  async reset() {
    const p = await this.core.attempt("settings", () => this.core.api.settings.reset());
    if (p) this.update({ prefs: p, theme: p.theme });
    return p;
  }

  /** Shows theme at once and stores it (Preferences.theme), so the next start draws with it. */
  async setTheme(theme: Theme) {
    this.update({ theme });
    const { settings } = this.core.api;
    const saved = await this.core.attempt("app", async () => settings.update({ ...(await settings.get()), theme }));
    if (saved) this.update({ prefs: saved });
  }

  /** What the Settings page shows beside the preferences: the backends, Core ML and the KV cache. */
  async reloadFacts() {
    const { api } = this.core;
    const [backend, coreml, cache, apiServer, hubToken] = await Promise.all([
      this.core.attempt("settings", () => api.system.backend(), true),
      this.core.attempt("settings", () => api.coreml.settings(), true),
      this.core.attempt("settings", () => api.settings.cache(), true),
      this.core.attempt("settings", () => api.apiServer.status(), true),
      this.core.attempt("settings", () => api.settings.hubToken(), true),
    ]);
    this.update((s) => ({
      backend: backend ?? s.backend,
      coreml: coreml ?? s.coreml,
      cache: cache ?? s.cache,
      apiServer: apiServer ?? s.apiServer,
      hubToken: hubToken ?? s.hubToken,
    }));
  }

  /** Stores the Hugging Face token pasted; false if refused (the notice says why, never repeating it). */
  async setHubToken(token: string): Promise<boolean> {
    const t = await this.core.attempt("settings", () => this.core.api.settings.setHubToken(token));
    if (t) this.update({ hubToken: t });
    return t !== undefined;
  }

  /** Removes the stored Hugging Face token. */
  async clearHubToken(): Promise<boolean> {
    const t = await this.core.attempt("settings", () => this.core.api.settings.clearHubToken());
    if (t) this.update({ hubToken: t });
    return t !== undefined;
  }

  /**
   * Turns the local HTTP API on (on the port given, 0 for the stored or
   * default one) or off; the choice is stored, so the API starts with the app.
   */
  async setAPIServer(on: boolean, port: number) {
    const { apiServer } = this.core.api;
    const st = await this.core.attempt("settings", () => (on ? apiServer.start(port) : apiServer.stop()));
    if (st) this.update({ apiServer: st });
  }

  /** Sets where Core ML runs models (neural-engine, gpu, cpu, all), from the next load. */
  async setComputeUnits(units: string) {
    const c = await this.core.attempt("settings", () => this.core.api.coreml.setComputeUnits(units));
    if (c) this.update({ coreml: c });
  }

  /** Removes the KV snapshots (the prepared prompts' too when asked). */
  async clearCache(includePinned: boolean): Promise<ClearCacheResult | undefined> {
    const r = await this.core.attempt("settings", () => this.core.api.settings.clearCache(includePinned));
    if (r) this.update({ cache: r.usage });
    return r;
  }

  /** Shows the data directory in the desktop's file manager. */
  openDataDir() {
    return this.core.attempt("settings", () => this.core.api.system.openDataDir());
  }
}
