// Which disclosures (tool cards) are open, by key, outside the components:
// a virtualized list unmounts the rows scrolled away, and a card opened by
// the reader must be open again when it comes back.

import { useCallback, useSyncExternalStore } from "react";

const open = new Set<string>();
const listeners = new Map<string, Set<() => void>>();

function subscribe(key: string, l: () => void): () => void {
  let set = listeners.get(key);
  if (!set) listeners.set(key, (set = new Set()));
  set.add(l);
  return () => {
    set.delete(l);
    if (set.size === 0) listeners.delete(key);
  };
}

/** Whether the disclosure `key` is open, and the function that opens or closes it. */
export function useOpen(key: string): [boolean, (v: boolean) => void] {
  const isOpen = useSyncExternalStore(
    useCallback((l: () => void) => subscribe(key, l), [key]),
    () => open.has(key),
  );
  const set = useCallback(
    (v: boolean) => {
      if (v) open.add(key);
      else open.delete(key);
      for (const l of [...(listeners.get(key) ?? [])]) l();
    },
    [key],
  );
  return [isOpen, set];
}
