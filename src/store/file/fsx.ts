/**
 * File-system helpers for durability. A rename is atomic but not durable: the
 * directory holding it must be fsynced too. Staged data is fsynced before the
 * rename that publishes it.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readFile, rename, rm, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/** True when `err` is a Node error with one of the given codes. */
export function isErrno(err: unknown, ...codes: string[]): boolean {
  return typeof err === 'object' && err !== null && codes.includes((err as NodeJS.ErrnoException).code ?? '');
}

/** Write a file and fsync it before returning. Creates or truncates. */
export async function writeFileDurable(path: string, data: string | Uint8Array): Promise<void> {
  const fh = await open(path, 'w');
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Write all of `data` at `position`. write(2) may write less than asked (a
 * filling disk) without failing; this goes on until every byte is written or
 * a write fails.
 */
export async function writeAll(fh: FileHandle, data: Uint8Array, position: number): Promise<void> {
  let written = 0;
  while (written < data.length) {
    const { bytesWritten } = await fh.write(data, written, data.length - written, position + written);
    if (bytesWritten <= 0) throw Object.assign(new Error(`write made no progress at byte ${position + written}`), { code: 'EIO' });
    written += bytesWritten;
  }
}

/** fsync a directory so the entries created, renamed or removed in it survive power loss. */
export async function fsyncDir(path: string): Promise<void> {
  const fh = await open(path, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Replace a file atomically: write a temporary sibling, optionally fsync it,
 * rename it over the target, and (when `durable`) fsync the directory.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, options: { durable: boolean }): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    if (options.durable) await writeFileDurable(tmp, data);
    else {
      const fh = await open(tmp, 'w');
      try {
        await fh.writeFile(data);
      } finally {
        await fh.close();
      }
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  if (options.durable) await fsyncDir(dirname(path));
}

/** Read a file, or undefined when it does not exist. */
export async function readIfExists(path: string): Promise<Buffer | undefined> {
  try {
    return await readFile(path);
  } catch (err) {
    if (isErrno(err, 'ENOENT', 'ENOTDIR')) return undefined;
    throw err;
  }
}

/** Read and parse JSON, or undefined when missing or unparseable (a torn file). */
export async function readJsonLoose<T>(path: string): Promise<T | undefined> {
  const data = await readIfExists(path);
  if (data === undefined) return undefined;
  try {
    return JSON.parse(data.toString('utf8')) as T;
  } catch {
    return undefined;
  }
}

/** Remove a directory tree by first renaming it aside, so a half-finished removal never leaves a half-tree under the old name. */
export async function removeTree(path: string): Promise<void> {
  const aside = join(dirname(path), `.rm-${randomBytes(6).toString('hex')}`);
  try {
    await rename(path, aside);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return;
    throw err;
  }
  await rm(aside, { recursive: true, force: true });
}

/** `mkdir -p`. */
export async function ensureDir(path: string): Promise<void> {
  await mkdir(path, { recursive: true });
}
