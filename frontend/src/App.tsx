import { useEffect, useMemo } from "preact/hooks";
import { api } from "./api";
import type { Bridge } from "./bridge";
import { ChatPage } from "./ChatPage";
import { HelpOverlay } from "./HelpOverlay";
import { LibraryPage } from "./LibraryPage";
import { animationFrames, type Frames } from "./logic";
import { ModelsPage } from "./ModelsPage";
import { SettingsPage } from "./SettingsPage";
import { listenShortcuts } from "./shortcuts";
import { Sidebar } from "./Sidebar";
import { Store, themeOnPage, type Theme } from "./store";
import { UndoToast } from "./UndoToast";
import { StoreContext, useActions, useStore } from "./useStore";
import { Welcome } from "./Welcome";

/**
 * The whole window: the store that owns its state (tests pass their own
 * animation frames and the theme the page starts with), the sidebar, the
 * page, a status bar.
 */
export function App({ bridge, frames = animationFrames, theme }: { bridge: Bridge; frames?: Frames; theme?: Theme }) {
  const store = useMemo(() => new Store(api(bridge), bridge, frames, theme ?? themeOnPage()), [bridge, frames, theme]);
  useEffect(() => store.start(), [store]);
  useEffect(() => listenShortcuts(store), [store]);
  return (
    <StoreContext.Provider value={store}>
      <Shell />
    </StoreContext.Provider>
  );
}

function Shell() {
  const theme = useStore((s) => s.settings.theme);
  const page = useStore((s) => s.window.page);
  const current = useStore((s) => s.conversations.current);
  const help = useStore((s) => s.window.help);
  useEffect(() => {
    // "system" follows prefers-color-scheme (style.css); the others force one.
    if (theme === "system") delete document.documentElement.dataset["theme"];
    else document.documentElement.dataset["theme"] = theme;
  }, [theme]);
  return (
    <div class="shell">
      <Sidebar />
      <main class="main" id="main">
        <Banners />
        {page === "chat" && (current !== null ? <ChatPage key={current} /> : <Welcome />)}
        {page === "library" && <LibraryPage />}
        {page === "models" && <ModelsPage />}
        {page === "settings" && <SettingsPage />}
      </main>
      <StatusBar />
      <UndoToast />
      {help && <HelpOverlay />}
    </div>
  );
}

/** The storage failure, and the one notice of the window (an error or a fact). */
function Banners() {
  const store = useActions();
  const storageError = useStore((s) => s.window.info?.storageError ?? "");
  const notice = useStore((s) => s.window.notice);
  return (
    <>
      {storageError && (
        <div class="banner error" role="alert" data-testid="storage-error">
          <strong>Storage is unusable.</strong> {storageError}
        </div>
      )}
      {notice && (
        <div
          class={`banner ${notice.kind}`}
          role={notice.kind === "error" ? "alert" : "status"}
          data-testid="notice"
          data-kind={notice.kind}
        >
          <span class="grow">{notice.text}</span>
          <button
            type="button"
            onClick={() => {
              store.dismiss();
            }}
          >
            Dismiss
          </button>
        </div>
      )}
    </>
  );
}

function StatusBar() {
  const info = useStore((s) => s.window.info);
  return (
    <footer class="status" data-testid="status">
      {info
        ? `anechat ${info.version} · ${info.os}/${info.arch} · ${info.dataDir || "no data directory"}${info.schemaVersion ? ` · schema v${info.schemaVersion}` : ""}`
        : "connecting…"}
      <span class="spacer" />
      <span class="muted">Ctrl/⌘ + / for shortcuts</span>
    </footer>
  );
}
