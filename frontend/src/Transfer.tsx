// Export and import panels, shared by conversations and the prompt library.
// The web view cannot download a file itself: an export is saved through the
// window's save dialog (System.SaveFile writes it), or copied.
import { useEffect, useRef, useState } from "preact/hooks";
import type { Scope } from "./store";
import type { ExportFile } from "./types";
import { useActions } from "./useStore";

/** One way to export: its label and how to make the file. */
export interface ExportFormat {
  label: string;
  make: () => Promise<ExportFile | undefined>;
}

/** Shows an export file (of one of formats), with Save… (the save dialog) and Copy. */
export function ExportPanel({
  title,
  scope,
  formats,
  onClose,
  testid,
}: {
  title: string;
  scope: Scope;
  formats: ExportFormat[];
  onClose: () => void;
  testid: string;
}) {
  const store = useActions();
  const [format, setFormat] = useState(0);
  const [file, setFile] = useState<ExportFile | null>(null);
  const [done, setDone] = useState("");
  // The file is made when the panel opens and when the format changes (the
  // callers' format list is new on every render).
  const list = useRef(formats);
  list.current = formats;
  useEffect(() => {
    const make = list.current[format]?.make;
    if (!make) return;
    let live = true;
    setFile(null);
    setDone("");
    void make().then((f) => {
      if (live) setFile(f ?? null);
    });
    return () => {
      live = false;
    };
  }, [format]);
  return (
    <section class="editor" data-testid={testid} aria-label={title}>
      <strong>{title}</strong>
      {formats.length > 1 && (
        <div class="row" role="radiogroup" aria-label="Format">
          {formats.map((f, i) => (
            <label key={f.label} class="inline">
              <input
                type="radio"
                name={`${testid}-format`}
                checked={i === format}
                onChange={() => {
                  setFormat(i);
                }}
              />
              {f.label}
            </label>
          ))}
        </div>
      )}
      <label>
        {file ? (
          <span>
            <code data-testid="export-name">{file.fileName}</code> ({file.mimeType})
          </span>
        ) : (
          "Preparing the file…"
        )}
        <textarea data-testid="export-text" rows={8} readOnly value={file?.text ?? ""} />
      </label>
      <div class="row">
        <button
          type="button"
          class="primary"
          data-testid="export-save"
          disabled={!file}
          onClick={() => {
            if (!file) return;
            void store.saveFile(scope, title, file).then((path) => {
              if (path) setDone(`Saved to ${path}.`);
              else if (path === "") setDone("Not saved: the dialog was cancelled.");
            });
          }}
        >
          Save…
        </button>
        <button
          type="button"
          data-testid="export-copy"
          disabled={!file}
          onClick={() => {
            if (!file) return;
            void store.copy(file.text).then((ok) => {
              if (ok) setDone("Copied to the clipboard.");
            });
          }}
        >
          Copy
        </button>
        <button type="button" onClick={onClose}>
          Close
        </button>
        {done && (
          <span class="muted" role="status" data-testid="export-done">
            {done}
          </span>
        )}
      </div>
    </section>
  );
}

/**
 * Reads an export file, pasted or chosen, and hands its text to run, which
 * returns what to say once done (undefined: refused, the notice says why).
 */
export function ImportPanel({
  title,
  label,
  run,
  onClose,
  testid,
}: {
  title: string;
  label: string;
  run: (text: string) => Promise<string | undefined>;
  onClose: () => void;
  testid: string;
}) {
  const [text, setText] = useState("");
  const [done, setDone] = useState<string | null>(null);
  return (
    <form
      class="editor"
      data-testid={testid}
      aria-label={title}
      onSubmit={(e) => {
        e.preventDefault();
        void run(text).then((msg) => {
          if (msg === undefined) return;
          setDone(msg);
          setText("");
        });
      }}
    >
      <strong>{title}</strong>
      <label>
        {label}
        <textarea
          data-testid="import-json"
          rows={6}
          value={text}
          onInput={(e) => {
            setText(e.currentTarget.value);
            setDone(null);
          }}
        />
      </label>
      <label>
        or choose the file
        <input
          type="file"
          accept="application/json,.json"
          data-testid="import-file"
          onChange={(e) => {
            const f = e.currentTarget.files?.[0];
            if (f)
              void f.text().then((t) => {
                setText(t);
              });
          }}
        />
      </label>
      <div class="row">
        <button type="submit" class="primary" data-testid="import-start" disabled={!text.trim()}>
          Import
        </button>
        <button type="button" onClick={onClose}>
          Close
        </button>
        {done && (
          <span class="muted" role="status" data-testid="import-done">
            {done}
          </span>
        )}
      </div>
    </form>
  );
}
