import type { Page, Theme } from "./store";
import { useActions, useStore } from "./useStore";

const PAGES: { page: Exclude<Page, "chat">; label: string }[] = [
  { page: "library", label: "Prompt library" },
  { page: "models", label: "Models" },
  { page: "settings", label: "Settings" },
];

const THEMES: { theme: Theme; label: string }[] = [
  { theme: "system", label: "System" },
  { theme: "light", label: "Light" },
  { theme: "dark", label: "Dark" },
];

/** Conversations, message search, the pages, the colour scheme switch. */
export function Sidebar() {
  const store = useActions();
  const storageError = useStore((s) => s.window.info?.storageError ?? "");
  const conversations = useStore((s) => s.conversations.list);
  const current = useStore((s) => s.conversations.current);
  const page = useStore((s) => s.window.page);
  const streams = useStore((s) => s.streams);
  const query = useStore((s) => s.conversations.query);
  const hits = useStore((s) => s.conversations.hits);
  const theme = useStore((s) => s.settings.theme);
  const titling = useStore((s) => s.conversations.titling);
  return (
    <aside class="sidebar" aria-label="Conversations and pages">
      <a class="skip" href="#main">
        Skip to the page
      </a>
      <button
        type="button"
        class="brand"
        onClick={() => {
          store.conversations.close();
        }}
        aria-label="anechat: start page"
      >
        anechat
      </button>
      <div class="row nowrap">
        <button
          type="button"
          class="primary grow"
          data-testid="new-chat"
          onClick={() => void store.conversations.create()}
          disabled={!!storageError}
        >
          New chat
        </button>
        <button
          type="button"
          data-testid="import-chat"
          aria-label="Import a conversation (JSON)"
          onClick={() => {
            store.conversations.setImporting(true);
          }}
          disabled={!!storageError}
        >
          Import
        </button>
      </div>
      <input
        type="search"
        class="search"
        data-testid="search"
        aria-label="Search messages"
        placeholder="Search messages"
        value={query}
        onInput={(e) => {
          store.conversations.search(e.currentTarget.value);
        }}
        onKeyDown={(e) => {
          if (e.key === "Escape" && query) {
            e.preventDefault();
            store.conversations.search("");
          }
        }}
      />
      {hits && (
        <ul class="hits" data-testid="hits" aria-label="Search results">
          {hits.length === 0 && <li class="muted">No messages match.</li>}
          {hits.map((h) => (
            <li key={h.messageId}>
              <button type="button" class="hit" onClick={() => void store.conversations.openHit(h)}>
                <span class="hit-title">{h.conversationTitle}</span>
                <span class="hit-snippet">
                  {h.segments.map((sg, i) =>
                    sg.match ? <mark key={i}>{sg.text}</mark> : <span key={i}>{sg.text}</span>,
                  )}
                </span>
              </button>
            </li>
          ))}
        </ul>
      )}
      <ul class="conversations" data-testid="conversations" aria-label="Conversations">
        {conversations.map((c) => (
          <li key={c.id}>
            <button
              type="button"
              class={page === "chat" && current === c.id ? "conv active" : "conv"}
              aria-current={page === "chat" && current === c.id ? "page" : undefined}
              onClick={() => void store.conversations.open(c.id)}
            >
              {c.pinned && (
                <span class="pin" aria-label="pinned" data-testid="pinned">
                  📌{" "}
                </span>
              )}
              {streams[c.id]?.running ? <span aria-label="replying">● </span> : ""}
              {c.title}
              {titling[c.id] && (
                <span class="muted small" aria-label="the model is writing its title">
                  {" "}
                  ✎
                </span>
              )}
            </button>
          </li>
        ))}
      </ul>
      <nav class="pages" aria-label="Pages">
        {PAGES.map((p) => (
          <button
            type="button"
            key={p.page}
            class={page === p.page ? "nav active" : "nav"}
            aria-current={page === p.page ? "page" : undefined}
            data-testid={`nav-${p.page}`}
            onClick={() => {
              store.go(p.page);
            }}
          >
            {p.label}
          </button>
        ))}
      </nav>
      <fieldset class="theme-switch" data-testid="theme">
        <legend>Appearance</legend>
        {THEMES.map((t) => (
          <label key={t.theme}>
            <input
              type="radio"
              name="theme"
              value={t.theme}
              checked={theme === t.theme}
              onChange={() => {
                void store.settings.setTheme(t.theme);
              }}
            />
            {t.label}
          </label>
        ))}
      </fieldset>
    </aside>
  );
}
