import { useEffect, useRef } from 'preact/hooks';

/**
 * A modal question with its own buttons ("Kill sandbox" / "Cancel"): a native <dialog>, so focus
 * is trapped and Escape cancels as browsers do it.
 */
export function ConfirmDialog(props: { open: boolean; title: string; text: string; confirmLabel: string; onConfirm: () => void; onCancel: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog ref={ref} aria-labelledby="confirm-title" onCancel={(e) => { e.preventDefault(); props.onCancel(); }}>
      <h2 id="confirm-title">{props.title}</h2>
      <p>{props.text}</p>
      <div class="actions">
        <button type="button" class="danger" onClick={props.onConfirm}>{props.confirmLabel}</button>
        <button type="button" onClick={props.onCancel}>Cancel</button>
      </div>
    </dialog>
  );
}
