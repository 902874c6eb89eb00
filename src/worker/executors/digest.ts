/**
 * The working-tree digest: a sha256 over what the tree *contains*, not over
 * its status. It covers HEAD, the whole of `git diff HEAD` (streamed into the
 * hash, never truncated or buffered), the path and bytes of every untracked,
 * non-ignored file, and the bytes of the scope's `include` paths whatever git
 * says of them (so a `file` check on an ignored build output is covered).
 * Paths under the scope's `exclude` (the run store, if it sits in the
 * repository) are left out. Null outside a git repository.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, readlink } from 'node:fs/promises';
import { isAbsolute, join, relative, sep } from 'node:path';
import { execa } from 'execa';
import { simpleGit } from 'simple-git';
import type { DigestScope } from '../../protocol/ipc.js';

/** The id of git's empty tree: the diff base of a repository without commits. */
const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

export interface WorkspaceDigest {
  digest: string | null;
  head: string | null;
}

export async function workspaceDigest(cwd: string, scope: DigestScope = { include: [], exclude: [] }, signal?: AbortSignal): Promise<WorkspaceDigest> {
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
  const inside = (abs: string): string | undefined => {
    const rel = relative(top, abs);
    return rel === '' || rel.startsWith('..') || isAbsolute(rel) ? undefined : rel.split(sep).join('/');
  };
  const pathspec = ['.', ...scope.exclude.map(inside).filter((r): r is string => r !== undefined).map((r) => `:(exclude)${r}`)];
  const hash = createHash('sha256');
  hash.update(`head\0${head ?? '(none)'}\0`);
  hash.update('diff\0');
  const diff = execa('git', ['diff', '--binary', '--no-ext-diff', '--no-textconv', '--no-color', head ?? EMPTY_TREE, '--', ...pathspec], {
    cwd: top,
    buffer: false,
    stdin: 'ignore',
    stderr: 'ignore',
    ...(signal === undefined ? {} : { cancelSignal: signal }),
  });
  for await (const chunk of diff.stdout) hash.update(chunk as Buffer);
  await diff;
  const untracked = (await repo.raw(['ls-files', '--others', '--exclude-standard', '-z', '--', ...pathspec])).split('\0').filter((f) => f !== '').sort();
  for (const file of untracked) await hashFile(hash, top, file, 'untracked');
  const included = [...new Set(scope.include.map(inside).filter((r): r is string => r !== undefined))].sort();
  for (const file of included) await hashFile(hash, top, file, 'included');
  return { digest: hash.digest('hex'), head };
}

async function hashFile(hash: Hash, top: string, file: string, kind: 'untracked' | 'included'): Promise<void> {
  const path = join(top, file);
  hash.update(`${kind}\0${file}\0`);
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
