/**
 * The host log: pino JSON lines appended to `<home>/logs/runwarden.log`.
 * Humans read run events through the CLI; this log is for operators.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

/** A pino logger writing to the store's log file. */
export function createHostLogger(home: string, level: string): Logger {
  const dir = join(home, 'logs');
  mkdirSync(dir, { recursive: true });
  const destination = pino.destination({ dest: join(dir, 'runwarden.log'), append: true, sync: false, mkdir: true });
  return pino({ level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, destination);
}

/** A logger that writes nothing. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
