import { useCallback, useEffect, useMemo, useState } from "preact/hooks";
import { api, type Api } from "./api";
import type { Bridge } from "./bridge";
import { ChatPage } from "./ChatPage";
import { LibraryPage } from "./LibraryPage";
import {
  animationFrames, frameBatcher, streamCleared, streamDone, streamError, streamProgress, streamStarted, streamTokens,
  type Frames, type Streams,
} from "./logic";
import { ModelsPage } from "./ModelsPage";
import { SettingsPage } from "./SettingsPage";
import type { Conversation, SearchHit, SystemInfo, TokenEvent } from "./types";

type Page = "chat" | "library" | "models" | "settings";

/**
 * The whole window: sidebar (conversations, pages), the page, a status bar.
 * Streamed tokens are applied once per animation frame (frames; tests pass
 * their own), so a fast reply re-renders its Markdown once per frame, not
 * once per token.
 */
export function App({ bridge, frames = animationFrames }: { bridge: Bridge; frames?: Frames }) {
  const a: Api = useMemo(() => api(bridge), [bridge]);
  const [info, setInfo] = useState<SystemInfo | null>(null);
  const [fatal, setFatal] = useState<string | null>(null);
  const [page, setPage] = useState<Page>("chat");
  const [conversations, setConversations] = useState<Conversation[]>([]);
  const [current, setCurrent] = useState<number | null>(null);
  const [streams, setStreams] = useState<Streams>({});
  const [finished, setFinished] = useState(0); // bumps when the open thread must reload
  const [draft, setDraft] = useState("");
  const [query, setQuery] = useState("");
  const [hits, setHits] = useState<SearchHit[] | null>(null);

  useEffect(() => {
    if (!query.trim()) {
      setHits(null);
      return undefined;
    }
    const timer = setTimeout(() => {
      a.chat.search(query).then(setHits, (e: Error) => setFatal(e.message));
    }, 150);
    return () => clearTimeout(timer);
  }, [a, query]);

  const openHit = async (h: SearchHit) => {
    try {
      await a.chat.selectBranch(h.messageId); // show the branch holding the match
    } catch (e) {
      setFatal((e as Error).message);
    }
    setCurrent(h.conversationId);
    setFinished((n) => n + 1); // the open chat page reloads its thread
    setPage("chat");
    setQuery("");
  };

  const reloadConversations = useCallback(async () => {
    try {
      setConversations(await a.chat.list());
    } catch (e) {
      setFatal((e as Error).message);
    }
  }, [a]);

  useEffect(() => {
    a.system.info().then(setInfo, (e: Error) => setFatal(e.message));
    void reloadConversations();
    const tokens = frameBatcher<TokenEvent>(frames, (es) => setStreams((s) => streamTokens(s, es)));
    try {
      const offs = [
        a.events.onToken((e) => tokens.add(e)),
        // The end of a stream comes after its tokens: those still waiting for a frame go first.
        a.events.onDone((e) => {
          tokens.flushNow();
          setStreams((s) => streamDone(s, e));
          setFinished((n) => n + 1);
        }),
        a.events.onError((e) => {
          tokens.flushNow();
          setStreams((s) => streamError(s, e));
        }),
        a.events.onProgress((e) => setStreams((s) => streamProgress(s, e))),
      ];
      return () => {
        tokens.stop();
        offs.forEach((off) => off());
      };
    } catch (e) {
      setFatal((e as Error).message);
      return undefined;
    }
  }, [a, reloadConversations, frames]);

  const newChat = async (promptId = 0, body = "") => {
    try {
      const c = await a.chat.create({ promptId });
      await reloadConversations();
      setCurrent(c.id);
      setDraft(body);
      setPage("chat");
    } catch (e) {
      setFatal((e as Error).message);
    }
  };

  const storageError = info?.storageError || null;
  return (
    <div class="shell">
      <aside class="sidebar">
        <div class="brand">anechat</div>
        <button class="primary" data-testid="new-chat" onClick={() => newChat()} disabled={!!storageError}>
          New chat
        </button>
        <input type="search" class="search" data-testid="search" placeholder="Search messages" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
        {hits && (
          <ul class="hits" data-testid="hits">
            {hits.length === 0 && <li class="muted">No messages match.</li>}
            {hits.map((h) => (
              <li key={h.messageId}>
                <button class="hit" onClick={() => openHit(h)}>
                  <span class="hit-title">{h.conversationTitle}</span>
                  <span class="hit-snippet">
                    {h.segments.map((sg, i) => (sg.match ? <mark key={i}>{sg.text}</mark> : <span key={i}>{sg.text}</span>))}
                  </span>
                </button>
              </li>
            ))}
          </ul>
        )}
        <ul class="conversations" data-testid="conversations">
          {conversations.map((c) => (
            <li key={c.id}>
              <button
                class={page === "chat" && current === c.id ? "conv active" : "conv"}
                onClick={() => {
                  setCurrent(c.id);
                  setPage("chat");
                }}
              >
                {streams[c.id]?.running ? "● " : ""}
                {c.title}
              </button>
            </li>
          ))}
        </ul>
        <nav class="pages">
          {(["library", "models", "settings"] as const).map((p) => (
            <button key={p} class={page === p ? "nav active" : "nav"} data-testid={`nav-${p}`} onClick={() => setPage(p)}>
              {{ library: "Prompt library", models: "Models", settings: "Settings" }[p]}
            </button>
          ))}
        </nav>
      </aside>
      <main class="main">
        {storageError && (
          <div class="banner error" role="alert" data-testid="storage-error">
            <strong>Storage is unusable.</strong> {storageError}
          </div>
        )}
        {fatal && (
          <div class="banner error" role="alert" data-testid="fatal">
            {fatal} <button onClick={() => setFatal(null)}>dismiss</button>
          </div>
        )}
        {page === "chat" &&
          (current !== null ? (
            <ChatPage
              key={current}
              api={a}
              conversationId={current}
              stream={streams[current] ?? null}
              finished={finished}
              draft={draft}
              onDraftUsed={() => setDraft("")}
              onChanged={reloadConversations}
              onDeleted={() => {
                setCurrent(null);
                void reloadConversations();
              }}
              onStarted={(parentId) => setStreams((s) => streamStarted(s, current, parentId))}
              onClearStream={() => setStreams((s) => streamCleared(s, current))}
            />
          ) : (
            <div class="empty" data-testid="welcome">
              <h1>anechat</h1>
              <p>Start a new chat, or pick one on the left.</p>
              {info?.engineError && <p class="muted">{info.engineError}</p>}
            </div>
          ))}
        {page === "library" && <LibraryPage api={a} onStartChat={(p) => newChat(p.id, p.body)} />}
        {page === "models" && <ModelsPage api={a} />}
        {page === "settings" && <SettingsPage api={a} />}
      </main>
      <footer class="status" data-testid="status">
        {info
          ? `anechat ${info.version} · ${info.os}/${info.arch} · ${info.dataDir || "no data directory"}${info.schemaVersion ? ` · schema v${info.schemaVersion}` : ""}`
          : "connecting…"}
      </footer>
    </div>
  );
}
