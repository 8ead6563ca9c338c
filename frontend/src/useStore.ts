import { createContext } from "preact";
import { useContext, useEffect, useReducer, useRef } from "preact/hooks";
import type { AppState, Store } from "./store";

/** The window's store, provided by App. */
export const StoreContext = createContext<Store | null>(null);

/** The store (its actions and its state). */
export function useActions(): Store {
  const s = useContext(StoreContext);
  if (!s) throw new Error("useActions: no StoreContext.Provider above this component");
  return s;
}

/**
 * The part of the state select picks; the component renders again when it
 * changes (compared with Object.is), not on every change of the store.
 */
export function useStore<T>(select: (s: AppState) => T): T {
  const store = useActions();
  const [, bump] = useReducer((n: number) => n + 1, 0);
  const value = select(store.state);
  const last = useRef(value);
  const pick = useRef(select);
  last.current = value;
  pick.current = select;
  useEffect(() => {
    const changed = () => {
      if (!Object.is(pick.current(store.state), last.current)) bump(0);
    };
    const off = store.subscribe(changed);
    changed(); // a change between the render and this effect
    return off;
  }, [store]);
  return value;
}
