// The bridge to the Go services bound by Wails. Wails injects window.go (one
// object per bound Go struct, one async function per exported method) and
// window.runtime (events). Everything the UI does goes through a Bridge, so
// tests can substitute a fake one.

/** A way to call the Go services and hear their events. */
export interface Bridge {
  /** Calls Go method `service.method(...args)` of package app. */
  call<T>(service: string, method: string, ...args: unknown[]): Promise<T>;
  /** Subscribes to a Go event; returns the unsubscribe function. */
  on(event: string, cb: (data: unknown) => void): () => void;
  /** Opens url in the system's browser, never in the app's window. */
  openURL(url: string): void;
  /** Puts text on the clipboard. */
  copyText(text: string): Promise<void>;
}

type GoMethod = (...args: unknown[]) => Promise<unknown>;

interface WailsWindow {
  go?: Record<string, Record<string, Record<string, GoMethod>>>;
  runtime?: {
    EventsOnMultiple(name: string, cb: (...data: unknown[]) => void, max: number): () => void;
    BrowserOpenURL(url: string): void;
    ClipboardSetText(text: string): Promise<boolean>;
  };
  navigator?: { clipboard?: { writeText(text: string): Promise<void> } };
}

/** Thrown when the page runs outside the app (no bindings injected). */
export class NoBackendError extends Error {
  constructor(what: string) {
    super(`anechat backend not reachable: ${what} is missing (open the page through the app or \`wails dev\`)`);
    this.name = "NoBackendError";
  }
}

/** The bridge over the bindings Wails injects into the page. */
export function wailsBridge(w: WailsWindow = window): Bridge {
  return {
    async call<T>(service: string, method: string, ...args: unknown[]): Promise<T> {
      const fn = w.go?.["app"]?.[service]?.[method];
      if (!fn) throw new NoBackendError(`app.${service}.${method}`);
      try {
        return (await fn(...args)) as T;
      } catch (e) {
        // Go errors arrive as plain strings; make them Errors with the message.
        throw e instanceof Error ? e : new Error(String(e));
      }
    },
    on(event, cb) {
      if (!w.runtime) throw new NoBackendError("window.runtime");
      return w.runtime.EventsOnMultiple(
        event,
        (...data) => {
          cb(data[0]);
        },
        -1,
      );
    },
    openURL(url) {
      if (!w.runtime) throw new NoBackendError("window.runtime");
      w.runtime.BrowserOpenURL(url);
    },
    async copyText(text) {
      // The page's clipboard where the webview grants it, else the system's through Go.
      try {
        if (w.navigator?.clipboard) {
          await w.navigator.clipboard.writeText(text);
          return;
        }
      } catch {
        // Not allowed here (WebKitGTK without a user gesture): Go does it.
      }
      if (!w.runtime) throw new NoBackendError("window.runtime");
      if (!(await w.runtime.ClipboardSetText(text))) throw new Error("the clipboard refused the text");
    },
  };
}
