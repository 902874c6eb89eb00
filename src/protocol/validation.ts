/** Turning zod's issues into runwarden's: dotted field paths, one issue per unknown field. */
import { z } from 'zod';
import type { ValidationIssue } from './errors.js';

/** Format a zod path as `nodes[2].routes[0].to`. */
export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out === '' ? String(segment) : `.${String(segment)}`;
  }
  return out;
}

/** Convert zod issues to runwarden validation issues, expanding unknown keys into one issue each. */
export function zodIssues(error: z.ZodError, prefix = ''): ValidationIssue[] {
  const join = (p: string): string => (prefix === '' ? p : p === '' ? prefix : p.startsWith('[') ? `${prefix}${p}` : `${prefix}.${p}`);
  // `.int()` adds its own safe-integer bound; when a field also has a bound of its own, report that one only.
  const bounded = new Set(error.issues.filter((i) => i.code === 'too_big' && i.maximum !== Number.MAX_SAFE_INTEGER).map((i) => formatPath(i.path)));
  const issues = error.issues.filter((i) => !(i.code === 'too_big' && i.maximum === Number.MAX_SAFE_INTEGER && bounded.has(formatPath(i.path))));
  return issues.flatMap((issue): ValidationIssue[] => {
    const path = formatPath(issue.path);
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ path: join(path === '' ? key : `${path}.${key}`), message: 'unknown field' }));
    }
    if (issue.code === 'invalid_union' && issue.errors.length > 0 && !('discriminator' in issue)) {
      // A union of alternatives (e.g. subflow workflow: path | spec): report the deepest alternative's issues.
      const nested = issue.errors
        .map((alt) => alt.map((i) => ({ ...i, path: [...issue.path, ...i.path] })))
        .sort((a, b) => Math.max(...b.map((i) => i.path.length)) - Math.max(...a.map((i) => i.path.length)))[0];
      if (nested !== undefined && nested.some((i) => i.path.length > issue.path.length)) {
        return zodIssues(new z.ZodError(nested as z.core.$ZodIssue[]), prefix);
      }
    }
    return [{ path: join(path), message: issue.message }];
  });
}
