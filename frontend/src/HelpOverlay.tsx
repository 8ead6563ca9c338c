import { useEffect, useRef } from "preact/hooks";
import { isMac, keyLabel, shortcuts } from "./shortcuts";
import { useActions } from "./useStore";

/** The list of keyboard shortcuts, as a modal dialog (Esc or the button closes it). */
export function HelpOverlay() {
  const store = useActions();
  const close = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    const before = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    close.current?.focus();
    // Focus stays in the dialog: its one control is the close button.
    const trap = (e: KeyboardEvent) => {
      if (e.key !== "Tab") return;
      e.preventDefault();
      close.current?.focus();
    };
    document.addEventListener("keydown", trap);
    return () => {
      document.removeEventListener("keydown", trap);
      before?.focus();
    };
  }, []);
  const mac = isMac();
  return (
    <div class="overlay" data-testid="help">
      <div class="dialog" role="dialog" aria-modal="true" aria-labelledby="help-title">
        <h2 id="help-title">Keyboard shortcuts</h2>
        <table class="keys">
          <tbody>
            {shortcuts.map((s) => (
              <tr key={s.what}>
                <td>
                  {keyLabel(s.keys, mac).map((k, i) => (
                    <span key={k}>
                      {i > 0 && " + "}
                      <kbd>{k}</kbd>
                    </span>
                  ))}
                </td>
                <td>{s.what}</td>
              </tr>
            ))}
            <tr>
              <td>
                <kbd>Enter</kbd> / <kbd>Shift</kbd> + <kbd>Enter</kbd>
              </td>
              <td>Send the message / a new line</td>
            </tr>
            <tr>
              <td>
                <kbd>Tab</kbd>
              </td>
              <td>Move between controls (every action has one)</td>
            </tr>
          </tbody>
        </table>
        <button
          type="button"
          ref={close}
          class="primary"
          data-testid="help-close"
          onClick={() => {
            store.setHelp(false);
          }}
        >
          Close
        </button>
      </div>
    </div>
  );
}
