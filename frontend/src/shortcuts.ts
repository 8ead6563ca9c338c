// The window's keyboard shortcuts: one table, read by the key handler and by
// the help overlay, so that the overlay lists exactly what works.
import type { Store } from "./store";

/** A shortcut: its keys ("Mod" is Cmd on macOS, Ctrl elsewhere) and what it does. */
export interface Shortcut {
  keys: string[];
  what: string;
  /** Whether it also works while typing in a text field. */
  inFields: boolean;
  run(store: Store): boolean | undefined | Promise<boolean | undefined>;
  match(e: KeyboardEvent, mac: boolean): boolean;
}

/** Whether this is a Mac (Cmd is the shortcut modifier there). */
export function isMac(nav: { platform?: string; userAgent?: string } = navigator): boolean {
  return /Mac|iPhone|iPad/.test(nav.platform ?? "") || /Mac OS X/.test(nav.userAgent ?? "");
}

// The modifier of the platform held, and no other (Shift aside).
const mod = (e: KeyboardEvent, mac: boolean) => (mac ? e.metaKey && !e.ctrlKey : e.ctrlKey && !e.metaKey) && !e.altKey;

const focus = (testid: string) => {
  const el = document.querySelector<HTMLElement>(`[data-testid="${testid}"]`);
  if (!el) return false;
  el.focus();
  if (el instanceof HTMLInputElement) el.select();
  return true;
};

/** Every shortcut of the window. */
export const shortcuts: Shortcut[] = [
  {
    keys: ["Mod", "N"],
    what: "New chat",
    inFields: true,
    match: (e, mac) => mod(e, mac) && !e.shiftKey && e.key.toLowerCase() === "n",
    run: async (s) => {
      await s.conversations.create();
      return true;
    },
  },
  {
    keys: ["Mod", "K"],
    what: "Search messages",
    inFields: true,
    match: (e, mac) => mod(e, mac) && !e.shiftKey && e.key.toLowerCase() === "k",
    run: () => focus("search"),
  },
  {
    keys: ["Mod", "L"],
    what: "Focus the message box",
    inFields: true,
    match: (e, mac) => mod(e, mac) && !e.shiftKey && e.key.toLowerCase() === "l",
    run: (s) => {
      if (s.state.window.page !== "chat") s.go("chat");
      return focus("composer") || undefined;
    },
  },
  {
    keys: ["Esc"],
    what: "Stop the reply (or close this help)",
    inFields: true,
    match: (e) => e.key === "Escape" && !e.ctrlKey && !e.metaKey && !e.altKey && !e.shiftKey,
    run: (s) => {
      if (s.state.window.help) {
        s.setHelp(false);
        return true;
      }
      return s.streaming.stop();
    },
  },
  {
    keys: ["Mod", "/"],
    what: "Show the keyboard shortcuts",
    inFields: true,
    match: (e, mac) => mod(e, mac) && (e.key === "/" || e.key === "?"),
    run: (s) => {
      s.setHelp(!s.state.window.help);
      return true;
    },
  },
  {
    keys: ["?"],
    what: "Show the keyboard shortcuts (outside text fields)",
    inFields: false,
    match: (e) => e.key === "?" && !e.ctrlKey && !e.metaKey && !e.altKey,
    run: (s) => {
      s.setHelp(true);
      return true;
    },
  },
  {
    keys: ["Mod", ","],
    what: "Settings",
    inFields: true,
    match: (e, mac) => mod(e, mac) && e.key === ",",
    run: (s) => {
      s.go("settings");
      return true;
    },
  },
];

function typing(t: EventTarget | null): boolean {
  return (
    t instanceof HTMLElement &&
    (t.isContentEditable ||
      t instanceof HTMLInputElement ||
      t instanceof HTMLTextAreaElement ||
      t instanceof HTMLSelectElement)
  );
}

/**
 * Listens for the shortcuts on target (the document); returns the function
 * that stops. A shortcut that acted keeps the key from the page and the
 * webview (Ctrl+N opens no window, Esc closes no dialog behind it).
 */
export function listenShortcuts(store: Store, target: Document = document, mac = isMac()): () => void {
  const onKey = (e: KeyboardEvent) => {
    if (e.defaultPrevented || e.isComposing) return;
    for (const s of shortcuts) {
      if (!s.match(e, mac) || (!s.inFields && typing(e.target))) continue;
      const r = s.run(store);
      if (r instanceof Promise) {
        e.preventDefault();
        void r;
      } else if (r) e.preventDefault();
      return;
    }
  };
  target.addEventListener("keydown", onKey);
  return () => {
    target.removeEventListener("keydown", onKey);
  };
}

/** A shortcut's keys as this platform writes them. */
export function keyLabel(keys: readonly string[], mac = isMac()): string[] {
  return keys.map((k) => (k === "Mod" ? (mac ? "⌘" : "Ctrl") : k));
}
