import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { Api } from "./api";
import { branchRows, pieceSpans, progressLine, statsLine, type Row, type Stream } from "./logic";
import { Markdown } from "./Markdown";
import type { Thread, Turn } from "./types";

interface Props {
  api: Api;
  conversationId: number;
  stream: Stream | null;
  finished: number;
  draft: string;
  onDraftUsed(): void;
  onChanged(): void;
  onDeleted(): void;
  onStarted(parentId: number): void;
  onClearStream(): void;
}

/** One conversation: its active branch, branch switching, edit, regenerate, composer. */
export function ChatPage(p: Props) {
  const [thread, setThread] = useState<Thread | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [text, setText] = useState(p.draft);
  const [editing, setEditing] = useState<{ id: number; text: string } | null>(null);
  const [title, setTitle] = useState<string | null>(null);
  const [system, setSystem] = useState<string | null>(null);
  const bottom = useRef<HTMLDivElement>(null);
  // Shade drafted text unless the setting says not to (read once per visit).
  const [highlight, setHighlight] = useState(true);
  useEffect(() => {
    p.api.settings.get().then((s) => setHighlight(s.highlightDrafted !== false), () => {});
  }, []);

  const load = async () => {
    try {
      setThread(await p.api.chat.thread(p.conversationId));
    } catch (e) {
      setError((e as Error).message);
    }
  };
  useEffect(() => {
    if (p.draft) p.onDraftUsed();
  }, []);
  useEffect(() => {
    void load();
  }, [p.conversationId, p.finished]);
  useEffect(() => {
    bottom.current?.scrollIntoView?.({ block: "end" });
  }, [thread, p.stream?.text]);

  const run = async (f: () => Promise<Turn>) => {
    setError(null);
    p.onClearStream();
    try {
      const turn = await f();
      p.onStarted(turn.user.id);
      await load();
      p.onChanged();
      return true;
    } catch (e) {
      setError((e as Error).message);
      return false;
    }
  };
  const send = async () => {
    if (!text.trim()) return;
    if (await run(() => p.api.chat.send(p.conversationId, text))) setText("");
  };
  const switchTo = async (id: number) => {
    try {
      setThread(await p.api.chat.selectBranch(id));
    } catch (e) {
      setError((e as Error).message);
    }
  };

  // The streamed reply's drafted spans change when its pieces do (once per frame).
  const streamPieces = p.stream?.pieces;
  const streamDrafted = p.stream?.drafted;
  const streamSpans = useMemo(() => pieceSpans(streamPieces ?? [], streamDrafted ?? []), [streamPieces, streamDrafted]);

  if (!thread) return <div class="chat">{error ? <div class="banner error">{error}</div> : "Loading…"}</div>;
  const rows = branchRows(thread);
  const running = p.stream?.running ?? false;
  const c = thread.conversation;

  const versions = (r: Row) =>
    r.siblings.length > 1 && (
      <span class="versions" data-testid="versions">
        <button disabled={running || r.index === 0} onClick={() => switchTo(r.siblings[r.index - 1]!)} aria-label="previous version">‹</button>
        {r.index + 1}/{r.siblings.length}
        <button disabled={running || r.index === r.siblings.length - 1} onClick={() => switchTo(r.siblings[r.index + 1]!)} aria-label="next version">›</button>
      </span>
    );

  return (
    <div class="chat">
      <header class="chat-head">
        {title === null ? (
          <h2 data-testid="chat-title" onDblClick={() => setTitle(c.title)} title="double-click to rename">{c.title}</h2>
        ) : (
          <form
            onSubmit={async (e) => {
              e.preventDefault();
              try {
                await p.api.chat.rename(c.id, title);
                setTitle(null);
                await load();
                p.onChanged();
              } catch (err) {
                setError((err as Error).message);
              }
            }}
          >
            <input data-testid="title-input" value={title} onInput={(e) => setTitle(e.currentTarget.value)} autoFocus />
            <button type="submit">Rename</button>
            <button type="button" onClick={() => setTitle(null)}>Cancel</button>
          </form>
        )}
        <div class="spacer" />
        <button onClick={() => setSystem(system === null ? c.systemPrompt : null)}>System prompt</button>
        <button
          class="danger"
          data-testid="delete-chat"
          onClick={async () => {
            if (!confirm(`Delete "${c.title}" and all its messages?`)) return;
            try {
              await p.api.chat.remove(c.id);
              p.onDeleted();
            } catch (e) {
              setError((e as Error).message);
            }
          }}
        >
          Delete
        </button>
      </header>
      {system !== null && (
        <form
          class="system"
          onSubmit={async (e) => {
            e.preventDefault();
            try {
              await p.api.chat.setSystemPrompt(c.id, system);
              setSystem(null);
              await load();
            } catch (err) {
              setError((err as Error).message);
            }
          }}
        >
          <textarea rows={3} value={system} onInput={(e) => setSystem(e.currentTarget.value)} placeholder="System prompt for later replies" />
          <button type="submit">Save system prompt</button>
        </form>
      )}
      <div class="messages" data-testid="messages">
        {rows.length === 0 && !p.stream && <p class="muted">No messages yet.</p>}
        {rows.map((r) => (
          <div key={r.message.id} class={`msg ${r.message.role}`} data-testid={`msg-${r.message.role}`}>
            {editing?.id === r.message.id ? (
              <form
                onSubmit={async (e) => {
                  e.preventDefault();
                  if (await run(() => p.api.chat.edit(editing.id, editing.text))) setEditing(null);
                }}
              >
                <textarea rows={3} value={editing.text} onInput={(e) => setEditing({ id: editing.id, text: e.currentTarget.value })} />
                <button type="submit" class="primary">Send edit</button>
                <button type="button" onClick={() => setEditing(null)}>Cancel</button>
              </form>
            ) : r.message.role === "assistant" ? (
              <Markdown text={r.message.content} spans={highlight ? r.message.stats?.draftedSpans : undefined} />
            ) : (
              <div class="plain">{r.message.content}</div>
            )}
            <div class="msg-foot">
              {versions(r)}
              {r.message.role === "assistant" && <span class="muted" data-testid="msg-stats">{statsLine(r.message.stats)}</span>}
              <span class="spacer" />
              {r.message.role === "user" && !editing && (
                <button disabled={running} onClick={() => setEditing({ id: r.message.id, text: r.message.content })}>Edit</button>
              )}
              {r.message.role === "assistant" && (
                <button disabled={running} onClick={() => run(() => p.api.chat.regenerate(r.message.id))}>Regenerate</button>
              )}
            </div>
          </div>
        ))}
        {p.stream && (p.stream.running || p.stream.error) && (
          <div class="msg assistant streaming" data-testid="streaming">
            <Markdown
              text={p.stream.text || (p.stream.running ? "…" : "")}
              spans={highlight && p.stream.text ? streamSpans : undefined}
            />
            {p.stream.running && !p.stream.text && progressLine(p.stream.progress) && (
              <div class="muted" data-testid="progress">
                <progress max={p.stream.progress!.total} value={p.stream.progress!.done} /> {progressLine(p.stream.progress)}
              </div>
            )}
            {p.stream.error && <div class="error" data-testid="stream-error">{p.stream.error}</div>}
          </div>
        )}
        <div ref={bottom} />
      </div>
      {error && (
        <div class="banner error" role="alert" data-testid="chat-error">
          {error}
        </div>
      )}
      <form
        class="composer"
        onSubmit={(e) => {
          e.preventDefault();
          void send();
        }}
      >
        <textarea
          data-testid="composer"
          rows={3}
          value={text}
          placeholder="Message (Enter sends, Shift+Enter for a new line)"
          onInput={(e) => setText(e.currentTarget.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey) {
              e.preventDefault();
              void send();
            }
          }}
        />
        {running ? (
          <button type="button" class="danger" data-testid="stop" onClick={() => p.api.chat.cancel(c.id)}>
            Stop
          </button>
        ) : (
          <button type="submit" class="primary" data-testid="send" disabled={!text.trim()}>
            Send
          </button>
        )}
      </form>
    </div>
  );
}
