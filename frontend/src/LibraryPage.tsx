import { useEffect, useRef, useState } from "preact/hooks";
import type { Api } from "./api";
import { parseTags } from "./logic";
import { Markdown } from "./Markdown";
import type { Prompt, TagCount } from "./types";

interface Editing {
  id: number; // 0 for a new prompt
  title: string;
  systemPrompt: string;
  body: string;
  tags: string;
}

const blank: Editing = { id: 0, title: "", systemPrompt: "", body: "", tags: "" };

/** The prompt library: search, filter by tag, edit, start a chat from a prompt. */
export function LibraryPage({ api, onStartChat }: { api: Api; onStartChat(p: Prompt): void }) {
  const [prompts, setPrompts] = useState<Prompt[]>([]);
  const [tags, setTags] = useState<TagCount[]>([]);
  const [tag, setTag] = useState("");
  const [query, setQuery] = useState("");
  const [editing, setEditing] = useState<Editing | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [preparing, setPreparing] = useState<number | null>(null);

  // Answers can arrive out of order (typing fires a list per keystroke): only
  // the latest request's answer is shown.
  const latest = useRef(0);
  const load = async () => {
    const n = ++latest.current;
    try {
      const [ps, ts] = await Promise.all([api.library.list(tag, query), api.library.tags()]);
      if (n !== latest.current) return;
      setPrompts(ps);
      setTags(ts);
    } catch (e) {
      setError((e as Error).message);
    }
  };
  useEffect(() => {
    void load();
  }, [tag, query]);

  const save = async (e: Event) => {
    e.preventDefault();
    if (!editing) return;
    const input = { title: editing.title, systemPrompt: editing.systemPrompt, body: editing.body, tags: parseTags(editing.tags) };
    try {
      if (editing.id) await api.library.update(editing.id, input);
      else await api.library.create(input);
      setEditing(null);
      setError(null);
      await load();
    } catch (err) {
      setError((err as Error).message);
    }
  };

  return (
    <div class="page library">
      <header class="page-head">
        <h2>Prompt library</h2>
        <div class="spacer" />
        <button class="primary" data-testid="new-prompt" onClick={() => setEditing({ ...blank })}>New prompt</button>
      </header>
      <div class="filters">
        <input type="search" data-testid="prompt-search" placeholder="Search prompts" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
        <div class="tags">
          <button class={tag === "" ? "tag active" : "tag"} onClick={() => setTag("")}>all</button>
          {tags.map((t) => (
            <button key={t.tag} class={tag === t.tag ? "tag active" : "tag"} onClick={() => setTag(t.tag)}>
              {t.tag} ({t.prompts})
            </button>
          ))}
        </div>
      </div>
      {error && <div class="banner error" role="alert" data-testid="library-error">{error}</div>}
      {editing && (
        <form class="editor" onSubmit={save} data-testid="prompt-editor">
          <label>Title <input data-testid="prompt-title" value={editing.title} onInput={(e) => setEditing({ ...editing, title: e.currentTarget.value })} /></label>
          <label>System prompt <textarea rows={3} data-testid="prompt-system" value={editing.systemPrompt} onInput={(e) => setEditing({ ...editing, systemPrompt: e.currentTarget.value })} /></label>
          <label>Body (the first message) <textarea rows={4} data-testid="prompt-body" value={editing.body} onInput={(e) => setEditing({ ...editing, body: e.currentTarget.value })} /></label>
          <label>Tags (comma separated) <input data-testid="prompt-tags" value={editing.tags} onInput={(e) => setEditing({ ...editing, tags: e.currentTarget.value })} /></label>
          <div class="row">
            <button type="submit" class="primary" data-testid="prompt-save">Save</button>
            <button type="button" onClick={() => setEditing(null)}>Cancel</button>
          </div>
        </form>
      )}
      <ul class="prompt-list" data-testid="prompt-list">
        {prompts.length === 0 && <li class="muted">No prompts{query || tag ? " match" : " yet"}.</li>}
        {prompts.map((p) => (
          <li key={p.id} class="prompt" data-testid="prompt">
            <div class="prompt-head">
              <strong>{p.title}</strong>
              {p.tags.map((t) => <span key={t} class="chip">{t}</span>)}
              {p.pinnedSnapshotId !== 0 && (
                <span class="chip ready" data-testid="prompt-ready" title="Its KV cache is stored and pinned: a chat from it skips the prefill">
                  ready to resume
                </span>
              )}
              <span class="spacer" />
              {p.pinnedSnapshotId === 0 && (
                <button
                  data-testid="prompt-prepare"
                  disabled={preparing !== null}
                  title="Run the prompt through the model once and keep its KV cache, so chats from it start instantly"
                  onClick={async () => {
                    setPreparing(p.id);
                    try {
                      await api.library.prepare(p.id);
                      setError(null);
                      await load();
                    } catch (e) {
                      setError((e as Error).message);
                    } finally {
                      setPreparing(null);
                    }
                  }}
                >
                  {preparing === p.id ? "Preparing…" : "Prepare"}
                </button>
              )}
              <button onClick={() => onStartChat(p)} data-testid="prompt-start">Start chat</button>
              <button onClick={() => setEditing({ id: p.id, title: p.title, systemPrompt: p.systemPrompt, body: p.body, tags: p.tags.join(", ") })}>Edit</button>
              <button
                class="danger"
                onClick={async () => {
                  if (!confirm(`Delete the prompt "${p.title}"?`)) return;
                  try {
                    await api.library.remove(p.id);
                    await load();
                  } catch (e) {
                    setError((e as Error).message);
                  }
                }}
              >
                Delete
              </button>
            </div>
            {p.systemPrompt && <div class="muted">System: {p.systemPrompt}</div>}
            {p.body && <Markdown text={p.body} />}
          </li>
        ))}
      </ul>
    </div>
  );
}
