/**
 * Built-in workflow templates: ordinary specs built from arguments, validated
 * like any other spec. `POST /runs { template, args }` and the CLI build runs
 * from them.
 */
import { RunwardenError } from '../protocol/errors.js';

/** A template: builds a spec (validated afterwards, like any other) from its arguments. */
export interface Template {
  description: string;
  build(args: Record<string, unknown>): unknown;
}

/** The registry. */
export const TEMPLATES: ReadonlyMap<string, Template> = new Map();

/**
 * The spec a template builds.
 * @throws {RunwardenError} `TEMPLATE_NOT_FOUND` (field `template`), listing the templates there are.
 */
export function buildTemplate(name: string, args: Record<string, unknown>): unknown {
  const template = TEMPLATES.get(name);
  if (template === undefined) {
    const known = [...TEMPLATES.keys()];
    throw new RunwardenError('TEMPLATE_NOT_FOUND', `no template named ${name}; ${known.length === 0 ? 'this version has none yet: send a spec' : `known: ${known.join(', ')}`}`, { field: 'template' });
  }
  return template.build(args);
}
