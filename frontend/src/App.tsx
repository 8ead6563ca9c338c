import { useEffect, useState } from "preact/hooks";
import type { Bridge } from "./bridge";

interface SystemInfo {
  version: string;
  os: string;
  arch: string;
  go: string;
}

/** The whole window. */
export function App({ bridge }: { bridge: Bridge }) {
  const [info, setInfo] = useState<SystemInfo | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    bridge.call<SystemInfo>("System", "Info").then(setInfo, (e: Error) => setError(e.message));
  }, [bridge]);
  return (
    <div class="shell">
      <main class="main">
        <h1>anechat</h1>
      </main>
      <footer class="status" data-testid="status">
        {error ? <span class="error">{error}</span> : info ? `anechat ${info.version} · ${info.os}/${info.arch}` : "connecting…"}
      </footer>
    </div>
  );
}
