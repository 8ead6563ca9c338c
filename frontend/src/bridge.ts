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
}

type GoMethod = (...args: unknown[]) => Promise<unknown>;

interface WailsWindow {
  go?: Record<string, Record<string, Record<string, GoMethod>>>;
  runtime?: {
    EventsOnMultiple(name: string, cb: (...data: unknown[]) => void, max: number): () => void;
  };
}

/** Thrown when the page runs outside the app (no bindings injected). */
export class NoBackendError extends Error {
  constructor(what: string) {
    super(`anechat backend not reachable: ${what} is missing (open the page through the app or \`wails dev\`)`);
    this.name = "NoBackendError";
  }
}

/** The bridge over the bindings Wails injects into the page. */
export function wailsBridge(w: WailsWindow = window as unknown as WailsWindow): Bridge {
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
      return w.runtime.EventsOnMultiple(event, (...data) => cb(data[0]), -1);
    },
  };
}
