/**
 * The working-tree digest: a sha256 over what the tree *contains*, not over
 * its status. It covers HEAD, the whole of `git diff HEAD` (streamed into the
 * hash, never truncated or buffered), and the path and bytes of every
 * untracked, non-ignored file. Null outside a git repository.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { simpleGit } from 'simple-git';

/** The id of git's empty tree: the diff base of a repository without commits. */
const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

export interface WorkspaceDigest {
  digest: string | null;
  head: string | null;
}

export async function workspaceDigest(cwd: string, signal?: AbortSignal): Promise<WorkspaceDigest> {
  const git = simpleGit({ baseDir: cwd, ...(signal === undefined ? {} : { abort: signal }) });
  let top: string;
  try {
    top = (await git.revparse(['--show-toplevel'])).trim();
  } catch {
    return { digest: null, head: null };
  }
  const repo = simpleGit({ baseDir: top, ...(signal === undefined ? {} : { abort: signal }) });
  let head: string | null = null;
  try {
    head = (await repo.revparse(['--verify', '--quiet', 'HEAD'])).trim() || null;
  } catch {
    head = null;
  }
  const hash = createHash('sha256');
  hash.update(`head\0${head ?? '(none)'}\0`);
  hash.update('diff\0');
  const diff = execa('git', ['diff', '--binary', '--no-ext-diff', '--no-textconv', '--no-color', head ?? EMPTY_TREE, '--'], {
    cwd: top,
    buffer: false,
    stdin: 'ignore',
    stderr: 'ignore',
    ...(signal === undefined ? {} : { cancelSignal: signal }),
  });
  for await (const chunk of diff.stdout) hash.update(chunk as Buffer);
  await diff;
  const untracked = (await repo.raw(['ls-files', '--others', '--exclude-standard', '-z'])).split('\0').filter((f) => f !== '').sort();
  for (const file of untracked) await hashFile(hash, top, file);
  return { digest: hash.digest('hex'), head };
}

async function hashFile(hash: Hash, top: string, file: string): Promise<void> {
  const path = join(top, file);
  hash.update(`untracked\0${file}\0`);
  let info;
  try {
    info = await lstat(path);
  } catch {
    hash.update('missing\0');
    return;
  }
  if (info.isSymbolicLink()) {
    hash.update(`symlink\0${await readlink(path)}\0`);
    return;
  }
  if (!info.isFile()) {
    hash.update('other\0');
    return;
  }
  hash.update(`file\0${info.size}\0`);
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
}
