// Test doubles shared by the component tests: a Go backend answering from a
// table, and animation frames run by hand.
import type { Bridge } from "../bridge";
import type { Frames } from "../logic";

/** A fake backend: answers calls from a table and lets the test fire events. */
export function fakeBridge(answers: Record<string, (...a: unknown[]) => unknown>) {
  const listeners = new Map<string, ((d: unknown) => void)[]>();
  const calls: string[] = [];
  const args: Record<string, unknown[][]> = {};
  const opened: string[] = [];
  const copied: string[] = [];
  const bridge: Bridge = {
    async call<T>(service: string, method: string, ...a: unknown[]) {
      const key = `${service}.${method}`;
      calls.push(key);
      (args[key] ??= []).push(a);
      const f = answers[key];
      if (!f) throw new Error(`unexpected call ${key}`);
      return f(...a) as T;
    },
    on(event, cb) {
      listeners.set(event, [...(listeners.get(event) ?? []), cb]);
      return () =>
        listeners.set(
          event,
          (listeners.get(event) ?? []).filter((x) => x !== cb),
        );
    },
    openURL(url) {
      opened.push(url);
    },
    async copyText(text) {
      copied.push(text);
    },
  };
  const fire = (event: string, data: unknown) => {
    (listeners.get(event) ?? []).forEach((cb) => {
      cb(data);
    });
  };
  return { bridge, calls, args, fire, opened, copied };
}

/** Animation frames the test runs by hand: tick() runs the callbacks waiting. */
export function manualFrames() {
  const waiting = new Map<number, () => void>();
  let next = 1;
  const frames: Frames = {
    request: (cb) => {
      waiting.set(next, cb);
      return next++;
    },
    cancel: (id) => void waiting.delete(id),
  };
  const tick = () => {
    const cbs = [...waiting.values()];
    waiting.clear();
    cbs.forEach((cb) => {
      cb();
    });
  };
  return { frames, tick, waiting: () => waiting.size };
}
