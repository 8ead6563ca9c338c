import { useState } from "preact/hooks";
import { humanBytes, parseTags, promptVariables } from "./logic";
import { Markdown } from "./Markdown";
import { ExportPanel, ImportPanel } from "./Transfer";
import type { Prompt } from "./types";
import { useActions, useStore } from "./useStore";

interface Editing {
  id: number; // 0 for a new prompt
  title: string;
  systemPrompt: string;
  body: string;
  tags: string;
}

const blank: Editing = { id: 0, title: "", systemPrompt: "", body: "", tags: "" };

/** The prompt library: search, filter by tag, edit, prepare, import and export, start a chat (asking for its variables). */
export function LibraryPage() {
  const store = useActions();
  const view = useStore((s) => s.library);
  const starting = useStore((s) => s.conversations.starting);
  const [editing, setEditing] = useState<Editing | null>(null);
  const [asking, setAsking] = useState<Prompt | null>(null);
  const [transfer, setTransfer] = useState<"import" | "export" | null>(null);

  const save = async (e: Event) => {
    e.preventDefault();
    if (!editing) return;
    const input = {
      title: editing.title,
      systemPrompt: editing.systemPrompt,
      body: editing.body,
      tags: parseTags(editing.tags),
    };
    if (await store.library.save(editing.id, input)) setEditing(null);
  };
  const start = (p: Prompt) => {
    if (promptVariables(p.body, p.systemPrompt).length > 0) setAsking(p);
    else void store.conversations.startFromPrompt(p);
  };

  return (
    <div class="page library">
      <header class="page-head">
        <h2>Prompt library</h2>
        <div class="spacer" />
        <button
          type="button"
          data-testid="import-prompts"
          onClick={() => {
            setTransfer(transfer === "import" ? null : "import");
          }}
        >
          Import
        </button>
        <button
          type="button"
          data-testid="export-prompts"
          onClick={() => {
            setTransfer(transfer === "export" ? null : "export");
          }}
        >
          Export
        </button>
        <button
          type="button"
          class="primary"
          data-testid="new-prompt"
          onClick={() => {
            setEditing({ ...blank });
          }}
        >
          New prompt
        </button>
      </header>
      {transfer === "export" && (
        <ExportPanel
          title="Export the prompt library"
          scope="library"
          testid="export-panel"
          formats={[{ label: "JSON", make: () => store.library.exportAll() }]}
          onClose={() => {
            setTransfer(null);
          }}
        />
      )}
      {transfer === "import" && (
        <ImportPanel
          title="Import prompts"
          label="Paste a prompt library file (JSON, as Export writes it)"
          testid="import-panel"
          run={async (text) => {
            const r = await store.library.importJSON(text);
            if (!r) return undefined;
            const n = r.created.length;
            const skipped = r.skipped.length
              ? `; ${r.skipped.length} already in the library: ${r.skipped.join(", ")}`
              : "";
            return `Imported ${n} prompt${n === 1 ? "" : "s"}${skipped}.`;
          }}
          onClose={() => {
            setTransfer(null);
          }}
        />
      )}
      <div class="filters">
        <input
          type="search"
          data-testid="prompt-search"
          aria-label="Search prompts"
          placeholder="Search prompts"
          value={view.query}
          onInput={(e) => {
            store.library.filter({ query: e.currentTarget.value });
          }}
        />
        <div class="tags" role="group" aria-label="Filter by tag">
          <button
            type="button"
            class={view.tag === "" ? "tag active" : "tag"}
            aria-pressed={view.tag === ""}
            onClick={() => {
              store.library.filter({ tag: "" });
            }}
          >
            all
          </button>
          {view.tags.map((t) => (
            <button
              type="button"
              key={t.tag}
              class={view.tag === t.tag ? "tag active" : "tag"}
              aria-pressed={view.tag === t.tag}
              onClick={() => {
                store.library.filter({ tag: t.tag });
              }}
            >
              {t.tag} ({t.prompts})
            </button>
          ))}
        </div>
      </div>
      {editing && (
        <form class="editor" onSubmit={(e) => void save(e)} data-testid="prompt-editor">
          <label>
            Title
            <input
              data-testid="prompt-title"
              value={editing.title}
              onInput={(e) => {
                setEditing({ ...editing, title: e.currentTarget.value });
              }}
            />
          </label>
          <label>
            System prompt
            <textarea
              rows={3}
              data-testid="prompt-system"
              value={editing.systemPrompt}
              onInput={(e) => {
                setEditing({ ...editing, systemPrompt: e.currentTarget.value });
              }}
            />
          </label>
          <label>
            Body (the first message; {"{{name}}"} marks a variable asked for when a chat starts)
            <textarea
              rows={4}
              data-testid="prompt-body"
              value={editing.body}
              onInput={(e) => {
                setEditing({ ...editing, body: e.currentTarget.value });
              }}
            />
          </label>
          <label>
            Tags (comma separated)
            <input
              data-testid="prompt-tags"
              value={editing.tags}
              onInput={(e) => {
                setEditing({ ...editing, tags: e.currentTarget.value });
              }}
            />
          </label>
          <div class="row">
            <button type="submit" class="primary" data-testid="prompt-save">
              Save
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
      )}
      {asking && (
        <VariablesForm
          prompt={asking}
          onDone={() => {
            setAsking(null);
          }}
        />
      )}
      <p class="muted small" id="prepare-help">
        Prepare reads a prompt through the model once and keeps its KV cache, so that chats from it start at once
        (&ldquo;ready to resume&rdquo;). Unprepare deletes that cache and frees its disk space. Start chat sends the
        prompt&rsquo;s message in a new chat.
      </p>
      <ul class="prompt-list" data-testid="prompt-list">
        {view.prompts.length === 0 && <li class="muted">No prompts{view.query || view.tag ? " match" : " yet"}.</li>}
        {view.prompts.map((p) => (
          <li key={p.id} class="prompt" data-testid="prompt">
            <div class="prompt-head">
              <strong>{p.title}</strong>
              {p.tags.map((t) => (
                <span key={t} class="chip">
                  {t}
                </span>
              ))}
              {p.snapshot?.ready && (
                <span class="chip ready" data-testid="prompt-ready">
                  ready to resume{p.snapshot.modelName ? ` with ${p.snapshot.modelName}` : ""}
                </span>
              )}
              {p.snapshot && !p.snapshot.ready && (
                <span class="chip" data-testid="prompt-not-ready">
                  prepared, not ready
                </span>
              )}
              {p.snapshot && (
                <span class="chip size" data-testid="prompt-snapshot-size">
                  KV cache {humanBytes(p.snapshot.bytes)} ({p.snapshot.tokens} tokens)
                </span>
              )}
              <span class="spacer" />
              {!p.snapshot?.ready && (
                <button
                  type="button"
                  data-testid="prompt-prepare"
                  disabled={view.preparing !== 0}
                  aria-describedby="prepare-help"
                  onClick={() => void store.library.prepare(p.id)}
                >
                  {view.preparing === p.id ? "Preparing…" : "Prepare"}
                </button>
              )}
              {p.snapshot && (
                <button
                  type="button"
                  data-testid="prompt-unprepare"
                  aria-describedby="prepare-help"
                  disabled={view.preparing !== 0}
                  onClick={() => void store.library.unprepare(p.id)}
                >
                  Unprepare
                </button>
              )}
              <button
                type="button"
                onClick={() => start(p)}
                data-testid="prompt-start"
                disabled={starting !== 0}
                aria-describedby="prepare-help"
              >
                {starting === p.id ? "Starting…" : "Start chat"}
              </button>
              <button
                type="button"
                onClick={() => {
                  setEditing({
                    id: p.id,
                    title: p.title,
                    systemPrompt: p.systemPrompt,
                    body: p.body,
                    tags: p.tags.join(", "),
                  });
                }}
              >
                Edit
              </button>
              <button
                type="button"
                class="danger"
                onClick={() => {
                  if (confirm(`Delete the prompt "${p.title}"?`)) void store.library.remove(p.id);
                }}
              >
                Delete
              </button>
            </div>

            {p.snapshot && !p.snapshot.ready && (
              <div class="muted small" data-testid="prompt-reason">
                {p.snapshot.reason}
              </div>
            )}
            {p.systemPrompt && <div class="muted">System: {p.systemPrompt}</div>}
            {p.body && <Markdown text={p.body} />}
          </li>
        ))}
      </ul>
    </div>
  );
}

/** Asks for the values of a prompt's {{name}} placeholders, then starts the chat. */
function VariablesForm({ prompt: p, onDone }: { prompt: Prompt; onDone: () => void }) {
  const store = useActions();
  const names = promptVariables(p.body, p.systemPrompt);
  const [values, setValues] = useState<Record<string, string>>({});
  return (
    <form
      class="editor"
      data-testid="variables"
      aria-label={`Variables of ${p.title}`}
      onSubmit={(e) => {
        e.preventDefault();
        onDone();
        void store.conversations.startFromPrompt(p, values);
      }}
    >
      <strong>{p.title}: fill in its variables</strong>
      {names.map((n, i) => (
        <label key={n}>
          {n}
          <input
            data-testid={`variable-${n}`}
            value={values[n] ?? ""}
            // eslint-disable-next-line jsx-a11y/no-autofocus -- the form opened to ask for these
            autoFocus={i === 0}
            onInput={(e) => {
              setValues({ ...values, [n]: e.currentTarget.value });
            }}
          />
        </label>
      ))}
      <div class="row">
        <button type="submit" class="primary" data-testid="variables-start">
          Start chat
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}
