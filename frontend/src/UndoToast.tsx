import { useEffect, useRef, useState } from "preact/hooks";
import { secondsUntil } from "./logic";
import { useActions, useStore } from "./useStore";

/**
 * "Deleted “title”. Undo": shown while Chat.UndoDelete can still bring the
 * conversation back, with the seconds left. Its Undo button takes the focus
 * (the Delete button pressed is gone with its page), so Enter undoes at once.
 */
export function UndoToast() {
  const store = useActions();
  const undo = useStore((s) => s.conversations.undo);
  const [left, setLeft] = useState(0);
  const button = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (!undo) return;
    const tick = () => {
      const n = secondsUntil(undo.undoUntil);
      setLeft(n);
      if (n <= 0) store.conversations.dropUndo();
    };
    tick();
    const timer = setInterval(tick, 1000);
    return () => {
      clearInterval(timer);
    };
  }, [undo, store]);
  useEffect(() => {
    if (undo) button.current?.focus();
  }, [undo]);
  if (!undo) return null;
  return (
    <div class="toast" role="status" data-testid="undo-toast">
      <span class="grow">
        Deleted “{undo.title}”.{" "}
        <span class="muted" data-testid="undo-left">
          {left > 0 ? `${left} s to undo` : ""}
        </span>
      </span>
      <button
        type="button"
        class="primary"
        ref={button}
        data-testid="undo"
        onClick={() => void store.conversations.undoRemove()}
      >
        Undo
      </button>
      <button
        type="button"
        class="quiet"
        aria-label="Close: keep it deleted"
        onClick={() => {
          store.conversations.dropUndo();
        }}
      >
        ✕
      </button>
    </div>
  );
}
