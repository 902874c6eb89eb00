/**
 * Reading `events.jsonl`: whole lines only. A last line without its newline is
 * a torn write (the writer died mid-append, or a disk lost its tail) and is
 * never returned; {@link repairTornTail} cuts it off under the run lock.
 */
import { open } from 'node:fs/promises';
import { RunEventSchema, type RunEvent } from '../../protocol/events.js';
import { isErrno } from './fsx.js';

/** Complete lines of an events file from byte `offset`, and the byte length they cover. */
export async function readEventLines(path: string, offset = 0): Promise<{ lines: string[]; endOffset: number; fileBytes: number } | undefined> {
  let fh;
  try {
    fh = await open(path, 'r');
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw err;
  }
  try {
    const { size } = await fh.stat();
    if (offset >= size) return { lines: [], endOffset: Math.min(offset, size), fileBytes: size };
    const buf = Buffer.allocUnsafe(size - offset);
    const { bytesRead } = await fh.read(buf, 0, buf.length, offset);
    const text = buf.subarray(0, bytesRead);
    const lastNewline = text.lastIndexOf(0x0a);
    if (lastNewline < 0) return { lines: [], endOffset: offset, fileBytes: size };
    const whole = text.subarray(0, lastNewline).toString('utf8');
    return { lines: whole === '' ? [''] : whole.split('\n'), endOffset: offset + lastNewline + 1, fileBytes: size };
  } finally {
    await fh.close();
  }
}

/** Thrown when a whole line of the log is not a valid event. */
export class BadEventLineError extends Error {
  constructor(readonly lineNo: number, detail: string) {
    super(`events.jsonl line ${lineNo}: ${detail}`);
    this.name = 'BadEventLineError';
  }
}

/** Parse and validate event lines. */
export function parseEventLines(lines: readonly string[], firstLineNo = 1): RunEvent[] {
  return lines.map((line, i) => {
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch {
      throw new BadEventLineError(firstLineNo + i, 'not JSON');
    }
    const parsed = RunEventSchema.safeParse(json);
    if (!parsed.success) throw new BadEventLineError(firstLineNo + i, parsed.error.issues[0]?.message ?? 'invalid event');
    return parsed.data;
  });
}

/** Serialize events as JSONL (one line each, newline-terminated). */
export function eventLines(events: readonly RunEvent[]): string {
  return events.map((e) => `${JSON.stringify(e)}\n`).join('');
}

/**
 * Cut a torn last line off the events file. Call only under the run lock.
 * @returns the number of bytes removed.
 */
export async function repairTornTail(path: string): Promise<number> {
  let fh;
  try {
    fh = await open(path, 'r+');
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return 0;
    throw err;
  }
  try {
    const { size } = await fh.stat();
    if (size === 0) return 0;
    const tail = Buffer.alloc(1);
    await fh.read(tail, 0, 1, size - 1);
    if (tail[0] === 0x0a) return 0;
    // Scan back for the last newline, 64 KiB at a time.
    let end = size;
    let keep = 0;
    const chunk = Buffer.allocUnsafe(65_536);
    while (end > 0) {
      const start = Math.max(0, end - chunk.length);
      const { bytesRead } = await fh.read(chunk, 0, end - start, start);
      const i = chunk.subarray(0, bytesRead).lastIndexOf(0x0a);
      if (i >= 0) {
        keep = start + i + 1;
        break;
      }
      end = start;
    }
    await fh.truncate(keep);
    await fh.sync();
    return size - keep;
  } finally {
    await fh.close();
  }
}
