/**
 * The host log: pino JSON lines appended to `<home>/logs/runwarden.log`.
 * Humans read run events through the CLI; this log is for operators.
 *
 * Logging never takes the host down: a log that cannot be opened or written
 * (a read-only home, a full disk) is switched off, and the host goes on —
 * the run's own state lives in the store, which reports its faults itself.
 */
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger } from 'pino';

/** An append-only log file that turns itself off on the first write error. */
class LogFile {
  #stream: WriteStream | undefined;
  /** Writes handed to the stream and not yet done, and who waits for them all. */
  #pending = 0;
  #flushed: Array<() => void> = [];

  constructor(path: string) {
    this.#stream = createWriteStream(path, { flags: 'a', highWaterMark: 1 << 20 });
    this.#stream.on('error', () => this.#disable());
  }

  write(line: string): void {
    if (this.#stream === undefined || this.#stream.writableNeedDrain) return; // a stuck disk must not grow memory without bound
    this.#pending += 1;
    this.#stream.write(line, () => this.#settle(1));
  }

  /** Calls `done` once every write so far is done (or the file was switched off). */
  flush(done: (err?: Error) => void): void {
    if (this.#pending === 0) done();
    else this.#flushed.push(() => done());
  }

  #settle(writes: number): void {
    this.#pending = Math.max(0, this.#pending - writes);
    if (this.#pending > 0) return;
    for (const done of this.#flushed.splice(0)) done();
  }

  /** Finish pending writes and close the file. */
  end(): Promise<void> {
    const stream = this.#stream;
    this.#stream = undefined;
    if (stream === undefined) return Promise.resolve();
    return new Promise((resolve) => {
      stream.once('error', () => resolve());
      stream.end(() => resolve());
    });
  }

  #disable(): void {
    const stream = this.#stream;
    this.#stream = undefined;
    stream?.destroy();
    this.#settle(this.#pending);
  }
}

/**
 * A pino logger writing JSON to the store's log file (or nothing, when the
 * file cannot be opened) and, with `pretty`, human-readable lines to stderr
 * (pino-pretty); `close` ends the file.
 */
export function createHostLogger(home: string, level: string, options: { pretty?: boolean } = {}): { logger: Logger; close(): Promise<void> } {
  if (level === 'silent') return { logger: silentLogger(), close: () => Promise.resolve() };
  const dir = join(home, 'logs');
  const streams: pino.StreamEntry[] = [];
  let file: LogFile | undefined;
  try {
    mkdirSync(dir, { recursive: true });
    file = new LogFile(join(dir, 'runwarden.log'));
    streams.push({ level: level as pino.Level, stream: file });
  } catch {
    // no file log: the terminal (if any) still gets one
  }
  if (options.pretty === true) streams.push({ level: level as pino.Level, stream: pretty({ destination: 2, colorize: process.stderr.isTTY, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', sync: true }) });
  if (streams.length === 0) return { logger: silentLogger(), close: () => Promise.resolve() };
  const logger = pino({ level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, pino.multistream(streams));
  return { logger, close: () => file?.end() ?? Promise.resolve() };
}

/** A logger that writes nothing. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
