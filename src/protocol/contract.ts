/**
 * Acceptance contracts: the checks the runtime runs itself. `command` runs a
 * program (argv, never a shell string); `file` inspects a file inside the run
 * cwd.
 */
import { z } from 'zod';
import { DEFAULT_CHECK_TIMEOUT_MS, durationMs, envMap, nodeId, nonEmpty, relativePath } from './fields.js';

/** A contract check that runs a program (argv, never a shell string). */
export const CommandCheckSchema = z.strictObject({
  type: z.literal('command'),
  id: nodeId.optional(),
  cmd: nonEmpty,
  args: z.array(z.string()).default([]),
  cwd: z.string().optional(),
  env: envMap.optional(),
  /** @default 0 */
  expectExit: z.number().int().min(0).max(255).default(0),
  /** @default 600000 (10 minutes) */
  timeoutMs: durationMs.default(DEFAULT_CHECK_TIMEOUT_MS),
  /** @default true */
  required: z.boolean().default(true),
});

/** A contract check on a file inside the run cwd: exists (or not), optionally matching a regex. */
export const FileCheckSchema = z.strictObject({
  type: z.literal('file'),
  id: nodeId.optional(),
  path: relativePath,
  /** @default true */
  exists: z.boolean().default(true),
  matches: z
    .string()
    .max(1000, 'must be at most 1000 characters')
    .refine((s) => {
      try {
        new RegExp(s);
        return true;
      } catch {
        return false;
      }
    }, 'must be a valid regular expression')
    .optional(),
  /** @default true */
  required: z.boolean().default(true),
});

export const CheckSchema = z.discriminatedUnion('type', [CommandCheckSchema, FileCheckSchema], {
  error: (issue) => (issue.code === 'invalid_union' ? "unknown check type; expected 'command' or 'file'" : undefined),
});

/** An acceptance contract: checks the runtime runs itself. */
export const ContractSchema = z.strictObject({
  id: z.string().min(1).max(200).optional(),
  checks: z.array(CheckSchema).min(1, 'a contract needs at least one check'),
});

export type Contract = z.infer<typeof ContractSchema>;
export type Check = z.infer<typeof CheckSchema>;
