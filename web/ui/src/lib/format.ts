// Small formatting helpers.

/** A time as hours and minutes (with the date when not today); "" for none. */
export function shortTime(iso: string | null | undefined, now: Date = new Date()): string {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  timeFormat ??= new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  dateFormat ??= new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric" });
  const hm = timeFormat.format(d);
  if (d.toDateString() === now.toDateString()) return hm;
  return dateFormat.format(d) + " " + hm;
}

let timeFormat: Intl.DateTimeFormat | undefined;
let dateFormat: Intl.DateTimeFormat | undefined;

/** How long ago a time was, in words ("3 min ago"); "" for none. */
export function ago(iso: string | null | undefined, now: number = Date.now()): string {
  if (!iso) return "";
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return "";
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 10) return "just now";
  if (s < 60) return `${s} s ago`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min ago`;
  const h = Math.round(m / 60);
  if (h < 48) return `${h} h ago`;
  return `${Math.round(h / 24)} days ago`;
}

/** A size in bytes, for people. */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** A JSON value as indented text (a string as it is). */
export function pretty(v: unknown): string {
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v, null, 2) ?? String(v);
  } catch {
    return String(v);
  }
}

/** The first line of a text, at most n characters. */
export function firstLine(text: string, n = 80): string {
  const line = text.trim().split("\n", 1)[0] ?? "";
  return line.length > n ? line.slice(0, n - 1) + "…" : line;
}

/** The message of an error, for people. */
export function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
