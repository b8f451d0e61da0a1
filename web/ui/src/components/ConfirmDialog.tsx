import { useEffect, useRef, type ReactNode } from "react";

/** A modal question with a confirm and a cancel button (the browser's <dialog>: focus kept inside, Escape cancels). */
export function ConfirmDialog(p: { title: string; children: ReactNode; confirm: string; onConfirm: () => void; onCancel: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
    return () => d?.close();
  }, []);
  return (
    <dialog ref={ref} className="dialog" aria-labelledby="confirm-title" onCancel={(e) => {
      e.preventDefault();
      p.onCancel();
    }}>
      <h2 id="confirm-title">{p.title}</h2>
      <div className="dialog-body">{p.children}</div>
      <div className="dialog-actions">
        <button type="button" onClick={p.onCancel} autoFocus>
          Cancel
        </button>
        <button type="button" className="danger" onClick={p.onConfirm}>
          {p.confirm}
        </button>
      </div>
    </dialog>
  );
}
