import { useEffect, useRef } from "preact/hooks";
import { modelLabel } from "./logic";
import { ImportPanel } from "./Transfer";
import { useActions, useStore } from "./useStore";

/** Prompts a new user can try with one click (any small model can answer them). */
export const EXAMPLES = [
  "Write a short story about a robot who learns to paint.",
  "Explain what a hash map is, with a small example in Python.",
  "Give me three ideas for a rainy Sunday afternoon.",
];

/** The start page: which model answers, three prompts to try, how to begin. */
export function Welcome() {
  const store = useActions();
  const models = useStore((s) => s.models.list);
  const engineError = useStore((s) => s.window.info?.engineError ?? "");
  const storageError = useStore((s) => s.window.info?.storageError ?? "");
  const importing = useStore((s) => s.conversations.importing);
  const model = models?.models.find((m) => m.id === models.defaultId);
  const panel = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (importing) panel.current?.querySelector("textarea")?.focus();
  }, [importing]);
  return (
    <div class="welcome" data-testid="welcome">
      <h1>anechat</h1>
      {importing && (
        <div ref={panel}>
          <ImportPanel
            title="Import a conversation"
            label="Paste a conversation exported as JSON (Export → JSON keeps every branch)"
            testid="chat-import"
            run={async (text) => ((await store.conversations.importJSON(text)) ? "Imported." : undefined)}
            onClose={() => {
              store.conversations.setImporting(false);
            }}
          />
        </div>
      )}
      <p data-testid="welcome-model">
        {model ? (
          <>
            Replies come from <strong>{modelLabel(model)}</strong>
            {model.meta?.backend ? ` on the ${model.meta.backend} backend` : ""}, on this machine.
          </>
        ) : models ? (
          <>
            No model yet: add one on the{" "}
            <button
              type="button"
              class="link"
              onClick={() => {
                store.go("models");
              }}
            >
              Models page
            </button>
            .
          </>
        ) : (
          "Loading models…"
        )}
      </p>
      {engineError && <p class="muted">{engineError}</p>}
      <h2>Try one</h2>
      <ul class="examples" data-testid="examples">
        {EXAMPLES.map((e) => (
          <li key={e}>
            <button
              type="button"
              class="example"
              disabled={!!storageError}
              onClick={() =>
                void (async () => {
                  await store.conversations.create();
                  if (model) await store.streaming.send(e);
                  else store.conversations.fillComposer(e);
                })()
              }
            >
              {e}
            </button>
          </li>
        ))}
      </ul>
      <p class="muted">Or start a new chat, or pick one on the left. Press Ctrl/⌘ + / for the keyboard shortcuts.</p>
    </div>
  );
}
