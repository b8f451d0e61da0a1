// A backup of the server's whole store, as it streams in.

/** A copy of the server's whole store (`GET /v1/admin/backup`): an SQLite database file, as it was at one moment. */
export interface Backup {
  /**
   * The file, chunk by chunk as it arrives (read it once). It is pulled as
   * it is read, so a large store never sits in memory; it fails if the
   * copy is cut short of `size`.
   */
  body: ReadableStream<Uint8Array>;
  /** Its size in bytes, as the server announced it; null if it did not. */
  size: number | null;
  /** The name the server gives the file: `parley-<time>.db`. */
  filename: string;
}

/** The backup an answer of `GET /v1/admin/backup` (a 200) carries. */
export function backupOf(res: Response): Backup {
  const length = res.headers.get("Content-Length");
  const size = length === null ? null : Number(length);
  const filename = /filename="([^"]+)"/.exec(res.headers.get("Content-Disposition") ?? "")?.[1] ?? "parley-backup.db";
  let got = 0;
  const counted = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, out) {
      got += chunk.byteLength;
      out.enqueue(chunk);
    },
    flush(out) {
      if (size !== null && got !== size) out.error(new Error(`the backup ended after ${got} of ${size} bytes`));
    },
  });
  const body = res.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
  return { body: body.pipeThrough(counted), size, filename };
}
