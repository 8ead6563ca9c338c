import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import {
  branchRows,
  finalStats,
  liveStats,
  modelLabel,
  pieceSpans,
  progressLine,
  resumedNote,
  documentNames,
  documentNote,
  statsLine,
  widthChoices,
  widthLabel,
  parseWidth,
  type Row,
  type Stream,
} from "./logic";
import { Markdown } from "./Markdown";
import { ExportPanel } from "./Transfer";
import { withDocuments } from "./state/streaming";
import type { Attachment, Conversation, ConversationOptions, GenerateStats, GenerationSettings } from "./types";
import { useActions, useStore } from "./useStore";

/** One conversation: its header (title, model), its active branch, the composer and its settings. */
export function ChatPage() {
  const store = useActions();
  const thread = useStore((s) => s.conversations.thread);
  const current = useStore((s) => s.conversations.current);
  const stream = useStore((s) =>
    s.conversations.current === null ? null : (s.streams[s.conversations.current] ?? null),
  );
  const highlight = useStore((s) => s.settings.prefs?.highlightDrafted !== false);
  const focusMessage = useStore((s) => s.conversations.focusMessage);
  const bottom = useRef<HTMLDivElement>(null);
  const list = useRef<HTMLDivElement>(null);

  useEffect(() => {
    if (focusMessage) return; // a search hit is being shown
    scrollIntoView(bottom.current, "end");
  }, [thread, stream?.text, focusMessage]);
  useEffect(() => {
    if (!focusMessage || !thread) return;
    const el = list.current?.querySelector<HTMLElement>(`[data-message-id="${focusMessage}"]`);
    if (!el) return;
    scrollIntoView(el, "center");
    el.focus();
  }, [focusMessage, thread]);

  const [exporting, setExporting] = useState(false);
  if (!thread || thread.conversation.id !== current) return <div class="chat">Loading…</div>;
  const rows = branchRows(thread);
  const docsBefore = documentsBefore(rows);
  const running = stream?.running ?? false;
  return (
    <div class="chat" data-conversation-id={thread.conversation.id}>
      <ChatHeader
        conversation={thread.conversation}
        exporting={exporting}
        onExport={() => {
          setExporting(!exporting);
        }}
      />
      {exporting && (
        <ExportPanel
          title="Export the conversation"
          scope="chat"
          testid="chat-export"
          formats={[
            { label: "Markdown (the branch on screen)", make: () => store.conversations.exportAs("markdown") },
            { label: "JSON (every branch, for Import)", make: () => store.conversations.exportAs("json") },
          ]}
          onClose={() => {
            setExporting(false);
          }}
        />
      )}
      <div class="chat-body">
        <div class="messages" data-testid="messages" ref={list} aria-live="off">
          {rows.length === 0 && !stream && <p class="muted">No messages yet.</p>}
          {rows.map((r, i) => (
            <MessageView
              key={r.message.id}
              row={r}
              documents={docsBefore[i] ?? []}
              running={running}
              highlight={highlight}
              focused={r.message.id === focusMessage}
              greedy={thread.settings.temperature === 0}
            />
          ))}
          {stream && (stream.running || stream.error) && <Streaming stream={stream} highlight={highlight} />}
          <div ref={bottom} />
        </div>
        <ChatPanel
          conversation={thread.conversation}
          stream={stream}
          last={[...rows].reverse().find((r) => r.message.role === "assistant")?.message.stats}
        />
      </div>
      <div class="composer-wrap">
        <ReplySettings conversation={thread.conversation} settings={thread.settings} disabled={running} />
        <Composer key={thread.conversation.id} conversation={thread.conversation} running={running} />
      </div>
    </div>
  );
}

function ChatHeader({
  conversation: c,
  exporting,
  onExport,
}: {
  conversation: Conversation;
  exporting: boolean;
  onExport: () => void;
}) {
  const store = useActions();
  const models = useStore((s) => s.models.list);
  const titling = useStore((s) => s.conversations.titling[c.id] === true);
  const [title, setTitle] = useState<string | null>(null);
  const defaultModel = models?.models.find((m) => m.id === models.defaultId);
  return (
    <header class="chat-head">
      {title === null ? (
        <>
          {/* eslint-disable-next-line jsx-a11y/no-noninteractive-element-interactions -- a shortcut for the Rename button beside it */}
          <h2
            data-testid="chat-title"
            onDblClick={() => {
              setTitle(c.title);
            }}
          >
            {c.title}
          </h2>
          <button
            type="button"
            class="quiet"
            data-testid="rename"
            aria-label="Rename the conversation"
            onClick={() => {
              setTitle(c.title);
            }}
          >
            Rename
          </button>
          {titling && (
            <span class="muted small" role="status" data-testid="titling">
              The model is writing a title…{" "}
              <button type="button" class="link" onClick={() => void store.conversations.cancelTitle(c.id)}>
                Stop
              </button>
            </span>
          )}
        </>
      ) : (
        <form
          class="row"
          onSubmit={(e) => {
            e.preventDefault();
            void store.conversations.rename(title).then((ok) => {
              if (ok) setTitle(null);
            });
          }}
        >
          <input
            data-testid="title-input"
            aria-label="Conversation title"
            value={title}
            onInput={(e) => {
              setTitle(e.currentTarget.value);
            }}
            // eslint-disable-next-line jsx-a11y/no-autofocus -- the user asked to rename: the field is where they type next
            autoFocus
          />
          <button type="submit">Save title</button>
          <button
            type="button"
            onClick={() => {
              setTitle(null);
            }}
          >
            Cancel
          </button>
        </form>
      )}
      <div class="spacer" />
      <label class="model-pick">
        Model
        <select
          data-testid="model-picker"
          value={String(c.modelId)}
          onChange={(e) => void store.conversations.setModel(Number(e.currentTarget.value))}
        >
          <option value="0">
            {defaultModel ? `Default: ${modelLabel(defaultModel)}` : "Default model (none yet)"}
          </option>
          {models?.models.map((m) => (
            <option key={m.id} value={String(m.id)}>
              {modelLabel(m)}
            </option>
          ))}
          {c.modelId !== 0 && !models?.models.some((m) => m.id === c.modelId) && (
            <option value={String(c.modelId)}>model {c.modelId} (no longer registered)</option>
          )}
        </select>
      </label>
      <button
        type="button"
        data-testid="pin"
        aria-pressed={c.pinned}
        onClick={() => void store.conversations.setPinned(!c.pinned)}
      >
        {c.pinned ? "Pinned" : "Pin"}
      </button>
      <button type="button" data-testid="export-chat" aria-expanded={exporting} onClick={onExport}>
        Export
      </button>
      <button
        type="button"
        class="danger"
        data-testid="delete-chat"
        aria-label={`Delete “${c.title}” (Undo brings it back for a while)`}
        onClick={() => void store.conversations.remove()}
      >
        Delete
      </button>
    </header>
  );
}

function MessageView({
  row: r,
  running,
  highlight,
  focused,
  greedy,
  documents,
}: {
  row: Row;
  /** The documents earlier user messages of the branch carry (documentNames). */
  documents: string[];
  running: boolean;
  highlight: boolean;
  focused: boolean;
  /** The next reply runs at temperature 0: regenerating gives the same text. */
  greedy: boolean;
}) {
  const store = useActions();
  const [editing, setEditing] = useState<string | null>(null);
  const [copied, setCopied] = useState(false);
  const m = r.message;
  const who = m.role === "user" ? "You" : m.role === "assistant" ? "Assistant" : "System";
  return (
    <article
      class={`msg ${m.role}${focused ? " focused" : ""}`}
      data-testid={`msg-${m.role}`}
      data-message-id={m.id}
      tabIndex={-1}
      aria-label={`${who} message`}
    >
      {editing !== null ? (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void store.streaming.edit(m.id, editing).then((ok) => {
              if (ok) setEditing(null);
            });
          }}
        >
          <textarea
            rows={3}
            aria-label="Edited message"
            value={editing}
            onInput={(e) => {
              setEditing(e.currentTarget.value);
            }}
          />
          <div class="row">
            <button type="submit" class="primary">
              Send edit
            </button>
            <button
              type="button"
              onClick={() => {
                setEditing(null);
              }}
            >
              Cancel
            </button>
          </div>
        </form>
      ) : m.role === "assistant" ? (
        <>
          {resumedNote(m.stats) && (
            <p class="resumed-note" data-testid="resumed-note">
              {resumedNote(m.stats)}
            </p>
          )}
          {documentNote(m.stats, documents) && (
            <p class="resumed-note" data-testid="document-note">
              {documentNote(m.stats, documents)}
            </p>
          )}
          <Markdown text={m.content} spans={highlight ? m.stats?.draftedSpans : undefined} />
        </>
      ) : (
        <div class="plain">{m.content}</div>
      )}
      {m.role === "assistant" && (
        <div class="muted msg-stats" data-testid="msg-stats">
          {statsLine(m.stats)}
        </div>
      )}
      <div class="msg-foot">
        {r.siblings.length > 1 && (
          <span class="versions" data-testid="versions">
            <button
              type="button"
              disabled={running || r.index === 0}
              onClick={() => void store.conversations.selectBranch(r.siblings[r.index - 1] ?? m.id)}
              aria-label="previous version"
            >
              ‹
            </button>
            {r.index + 1}/{r.siblings.length}
            <button
              type="button"
              disabled={running || r.index === r.siblings.length - 1}
              onClick={() => void store.conversations.selectBranch(r.siblings[r.index + 1] ?? m.id)}
              aria-label="next version"
            >
              ›
            </button>
          </span>
        )}
        <span class="spacer" />
        <button
          type="button"
          data-testid="copy-message"
          aria-label={`Copy this ${who === "You" ? "message" : "reply"}`}
          onClick={() =>
            void store.copy(m.content).then((ok) => {
              setCopied(ok);
            })
          }
        >
          {copied ? "Copied" : "Copy"}
        </button>
        {m.role === "user" && editing === null && (
          <button
            type="button"
            disabled={running}
            onClick={() => {
              setEditing(m.content);
            }}
          >
            Edit
          </button>
        )}
        {m.role === "assistant" && (
          <button
            type="button"
            disabled={running}
            aria-describedby={greedy ? `regen-hint-${m.id}` : undefined}
            onClick={() => void store.streaming.regenerate(m.id)}
          >
            Regenerate
          </button>
        )}
        {m.role === "assistant" && greedy && (
          // Greedy decoding is deterministic: a regenerated answer is the
          // same text. Say so where the user clicks, and lead to the field
          // that changes it.
          <button
            type="button"
            class="link small"
            id={`regen-hint-${m.id}`}
            data-testid="regenerate-hint"
            onClick={() => document.querySelector<HTMLInputElement>('[data-testid="opt-temperature"]')?.focus()}
          >
            same reply at temperature 0: raise it below
          </button>
        )}
      </div>
    </article>
  );
}

function Streaming({ stream, highlight }: { stream: Stream; highlight: boolean }) {
  // The streamed reply's drafted spans change when its pieces do (once per frame).
  const spans = useMemo(() => pieceSpans(stream.pieces, stream.drafted), [stream.pieces, stream.drafted]);
  const progress = progressLine(stream.progress);
  return (
    <article
      class="msg assistant streaming"
      data-testid="streaming"
      aria-label="Reply in progress"
      aria-busy={stream.running}
    >
      <Markdown
        text={stream.text || (stream.running ? "…" : "")}
        spans={highlight && stream.text ? spans : undefined}
      />
      {stream.running && !stream.text && progress && stream.progress && (
        <div class="muted" data-testid="progress">
          <progress max={stream.progress.total} value={stream.progress.done} aria-label="Reading the prompt" />{" "}
          {progress}
        </div>
      )}
      {stream.error && (
        <div class="error" data-testid="stream-error">
          {stream.error}
        </div>
      )}
    </article>
  );
}

/**
 * Beside the messages: the conversation's system prompt, the figures of the
 * reply in progress (τ and the share of drafted tokens), and what the
 * drafted shading means.
 */
function ChatPanel({
  conversation: c,
  stream,
  last,
}: {
  conversation: Conversation;
  stream: Stream | null;
  last: GenerateStats | undefined;
}) {
  const store = useActions();
  const highlight = useStore((s) => s.settings.prefs?.highlightDrafted !== false);
  const [system, setSystem] = useState(c.systemPrompt);
  const [saved, setSaved] = useState(false);
  useEffect(() => {
    setSystem(c.systemPrompt);
  }, [c.systemPrompt]);
  const live = stream?.running ? liveStats(stream) : null;
  const done = !live && last ? finalStats(last) : null;
  const shown = live ?? done;
  return (
    <aside class="chat-panel" aria-label="Conversation settings" data-testid="chat-panel">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void store.conversations.setSystemPrompt(system).then(setSaved);
        }}
      >
        <label>
          System prompt
          <textarea
            data-testid="system-prompt"
            rows={4}
            value={system}
            placeholder="How the assistant should answer"
            onInput={(e) => {
              setSystem(e.currentTarget.value);
              setSaved(false);
            }}
          />
        </label>
        <div class="row">
          <button type="submit" disabled={system === c.systemPrompt}>
            Save system prompt
          </button>
          {saved && system === c.systemPrompt && <span class="muted">Saved.</span>}
        </div>
      </form>
      <section class="live" aria-label="Speculation" data-testid="live-stats">
        <h3>{live ? "This reply" : "Last reply"}</h3>
        {shown ? (
          <p>
            <span data-testid="live-tau">τ {shown.tau === null ? "–" : shown.tau.toFixed(2)}</span> tokens per model
            call · <span data-testid="live-share">{Math.round(shown.share * 100)}%</span> of {shown.tokens} tokens came
            from accepted drafts
          </p>
        ) : (
          <p class="muted">
            τ (tokens per model call) and the share of tokens from accepted drafts show while a reply is written.
          </p>
        )}
      </section>
      {highlight && (
        <p class="legend" data-testid="legend">
          <mark class="drafted">shaded text</mark> was guessed by speculative drafting and confirmed by the model: the
          same words, written in fewer model calls.
        </p>
      )}
    </aside>
  );
}

/**
 * What the next reply runs with, beside the composer: the conversation's own
 * temperature, reply length and speculation width (Chat.SetOptions), or the
 * Settings page's where it has none. A change applies when the field is
 * left or Enter is pressed.
 */
function ReplySettings({
  conversation: c,
  settings,
  disabled,
}: {
  conversation: Conversation;
  settings: GenerationSettings;
  disabled: boolean;
}) {
  const store = useActions();
  const own: ConversationOptions = c.options ?? {};
  const [temp, setTemp] = useState(String(settings.temperature));
  const [max, setMax] = useState(String(settings.maxTokens));
  useEffect(() => {
    setTemp(String(settings.temperature));
    setMax(String(settings.maxTokens));
  }, [settings.temperature, settings.maxTokens]);
  const save = (o: ConversationOptions) => void store.conversations.setOptions(o);
  // Applies the fields typed that differ from what the next reply runs
  // with, in one SetOptions (a field left as it is stays unset). The values
  // come from the fields themselves: a blur can come before a re-render.
  const commit = (rawTemp: string, rawMax: string) => {
    const o: ConversationOptions = { ...own };
    if (rawTemp !== String(settings.temperature)) {
      const v = Number(rawTemp);
      if (rawTemp.trim() === "" || !Number.isFinite(v)) {
        store.refuse("chat", `temperature "${rawTemp}": want a number from 0 (greedy) to 2`);
        return;
      }
      o.temperature = v;
    }
    if (rawMax !== String(settings.maxTokens)) {
      const v = Number(rawMax);
      if (rawMax.trim() === "" || !Number.isInteger(v) || v < 1) {
        store.refuse("chat", `max tokens "${rawMax}": want a whole number, 1 or more`);
        return;
      }
      o.maxTokens = v;
    }
    if (o.temperature !== own.temperature || o.maxTokens !== own.maxTokens) save(o);
  };
  const mark = (set: boolean) => set && <span class="own">this chat</span>;
  const anyOwn = own.temperature !== undefined || own.maxTokens !== undefined || own.speculationWidth !== undefined;
  return (
    <form
      class="reply-settings"
      data-testid="reply-settings"
      aria-label="Settings of the next reply"
      onSubmit={(e) => {
        e.preventDefault();
        commit(temp, max);
      }}
    >
      {/* Enter in a field applies it: implicit submission needs a submit button with several fields. */}
      <button type="submit" hidden>
        Apply
      </button>
      <span class="muted">Next reply:</span>
      <label>
        Temperature{mark(own.temperature !== undefined)}
        <input
          data-testid="opt-temperature"
          type="number"
          min="0"
          max="2"
          step="0.05"
          value={temp}
          disabled={disabled}
          onInput={(e) => {
            setTemp(e.currentTarget.value);
          }}
          onBlur={(e) => {
            commit(e.currentTarget.value, max);
          }}
        />
      </label>
      <label>
        Max tokens{mark(own.maxTokens !== undefined)}
        <input
          data-testid="opt-max-tokens"
          type="number"
          min="1"
          value={max}
          disabled={disabled}
          onInput={(e) => {
            setMax(e.currentTarget.value);
          }}
          onBlur={(e) => {
            commit(temp, e.currentTarget.value);
          }}
        />
      </label>
      <label>
        Speculation width{mark(own.speculationWidth !== undefined)}
        <select
          data-testid="opt-width"
          value={String(settings.speculationWidth)}
          disabled={disabled}
          onChange={(e) => {
            save({ ...own, speculationWidth: parseWidth(e.currentTarget.value) });
          }}
        >
          {widthChoices.map((w) => (
            <option key={String(w)} value={String(w)}>
              {widthLabel(w)}
            </option>
          ))}
        </select>
      </label>
      {anyOwn ? (
        <button
          type="button"
          class="quiet"
          data-testid="opt-reset"
          disabled={disabled}
          onClick={() => {
            save({});
          }}
        >
          Use the Settings page's
        </button>
      ) : (
        <span class="muted small" data-testid="opt-source">
          from the Settings page
        </span>
      )}
    </form>
  );
}

/**
 * The message box of conversation c (keyed by it: another conversation
 * gets its own). What is typed is c's draft, stored as typing pauses, so
 * it is still there after opening another conversation or a restart; a
 * draft set from elsewhere (an example of the start page) shows at once.
 */
function Composer({ conversation: c, running }: { conversation: Conversation; running: boolean }) {
  const store = useActions();
  const [text, setText] = useState(c.draft);
  const [docs, setDocs] = useState<Attachment[]>([]);
  const [reading, setReading] = useState(0);
  const fileInput = useRef<HTMLInputElement>(null);
  // Only a draft that changes after the box opened replaces what it holds:
  // the effect runs a frame after mounting, and text typed in that frame
  // (by a quick user, or a test under load) must not be wiped by the draft
  // the box started with.
  const shownDraft = useRef(c.draft);
  useEffect(() => {
    if (c.draft === shownDraft.current) return;
    shownDraft.current = c.draft;
    setText(c.draft);
  }, [c.draft]);
  const attach = async (files: Iterable<File>) => {
    for (const file of files) {
      setReading((n) => n + 1);
      const a = await store.streaming.attach(file);
      setReading((n) => n - 1);
      if (a) setDocs((d) => [...d, a]);
    }
  };
  const total = docs.reduce((n, d) => n + d.tokens, 0);
  const context = docs[0]?.contextTokens ?? 0;
  // Each document fits alone (the Go side checked); together they may not.
  const over = docs.length > 1 && total >= context;
  const ready = (text.trim() !== "" || docs.length > 0) && reading === 0 && !over;
  const send = async () => {
    if (!ready) return;
    const message = docs.length
      ? withDocuments(
          docs.map((d) => d.block),
          text,
        )
      : text;
    const title = text.trim() || docs[0]?.name || "";
    if (await store.streaming.send(message, title)) {
      setText("");
      setDocs([]);
    }
  };
  return (
    // Dropping a file is a shortcut; the Attach button is the keyboard's way.
    // eslint-disable-next-line jsx-a11y/no-noninteractive-element-interactions
    <form
      class="composer"
      data-testid="composer-form"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
      onDragOver={(e) => {
        if (e.dataTransfer?.types.includes("Files")) e.preventDefault(); // allows the drop
      }}
      onDrop={(e) => {
        const files = e.dataTransfer?.files;
        if (files?.length) {
          e.preventDefault();
          void attach(Array.from(files));
        }
      }}
    >
      {docs.length > 0 || reading > 0 ? (
        <ul class="attachments" data-testid="attachments">
          {docs.map((d, i) => (
            <li key={`${i}-${d.name}`} data-testid="attachment">
              <span>{d.name}</span>{" "}
              <span class="muted small" data-testid="attachment-tokens">
                {d.tokens.toLocaleString("en-US")} tokens
              </span>{" "}
              <button
                type="button"
                class="quiet"
                aria-label={`Remove ${d.name}`}
                onClick={() => setDocs((ds) => ds.filter((_, j) => j !== i))}
              >
                ×
              </button>
            </li>
          ))}
          {reading > 0 ? <li class="muted small">Reading…</li> : null}
          {docs.length > 0 ? (
            <li class={over ? "error small" : "muted small"} data-testid="attachments-total">
              {total.toLocaleString("en-US")} of {context.toLocaleString("en-US")} context tokens
              {over ? ": together they do not fit; remove one" : ""}
            </li>
          ) : null}
        </ul>
      ) : null}
      <textarea
        data-testid="composer"
        rows={3}
        value={text}
        aria-label="Message"
        placeholder="Message (Enter sends, Shift+Enter for a new line)"
        onInput={(e) => {
          setText(e.currentTarget.value);
          store.conversations.setDraft(e.currentTarget.value);
        }}
        onPaste={(e) => {
          const files = e.clipboardData?.files;
          if (files?.length) {
            e.preventDefault(); // a pasted file is attached, not its name typed
            void attach(Array.from(files));
          }
        }}
        onKeyDown={(e) => {
          if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            void send();
          }
        }}
      />
      <input
        ref={fileInput}
        type="file"
        multiple
        hidden
        data-testid="attach-input"
        accept=".txt,.md,.markdown,.pdf,.json,.csv,.go,.py,.js,.ts,.tsx,.rs,.c,.h,.cpp,.java,.sh,.yaml,.yml,.toml,.html,.css,.sql,text/*,application/pdf"
        onChange={(e) => {
          const files = e.currentTarget.files;
          if (files?.length) void attach(Array.from(files));
          e.currentTarget.value = ""; // the same file can be attached again
        }}
      />
      {/* A bordered button like Send, not a quiet one: as muted text beside
          Send it was easy to miss, in dark mode above all. */}
      <button
        type="button"
        data-testid="attach"
        title="Attach a text file, Markdown, source code or a PDF (or drop or paste it here)"
        onClick={() => fileInput.current?.click()}
      >
        Attach
      </button>
      {running ? (
        <button
          type="button"
          class="danger"
          data-testid="stop"
          aria-keyshortcuts="Escape"
          onClick={() => void store.streaming.stop()}
        >
          Stop
        </button>
      ) : (
        <button type="submit" class="primary" data-testid="send" disabled={!ready}>
          Send
        </button>
      )}
    </form>
  );
}

/** For each row, the documents the user messages before it carry, oldest first. */
function documentsBefore(rows: Row[]): string[][] {
  let seen: string[] = [];
  return rows.map((r) => {
    const before = seen;
    if (r.message.role === "user") seen = [...seen, ...documentNames(r.message.content)];
    return before;
  });
}

// Element.scrollIntoView, where the DOM has it (jsdom does not).
function scrollIntoView(el: Element | null, block: ScrollLogicalPosition) {
  if (el && "scrollIntoView" in el) el.scrollIntoView({ block });
}
