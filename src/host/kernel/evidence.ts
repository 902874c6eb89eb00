/**
 * Evidence bundles: what a verifier attempt proves, written as artifacts of
 * the same commit that records its verdict — so a bundle exists exactly when
 * the run record points at it.
 *
 * ```
 * evidence/<node>-v<visit>-a<attempt>/bundle.json
 * evidence/<node>-v<visit>-a<attempt>/checks/<checkId>.log   (output tail)
 * ```
 */
import type { VerifyData } from '../../protocol/ipc.js';
import type { Artifact } from '../../store/run-store.js';

export interface EvidenceBundle {
  evidenceId: string;
  runId: string;
  node: string;
  visit: number;
  attempt: number;
  contractId?: string;
  createdAt: string;
  cwd: string;
  passed: boolean;
  head: string | null;
  /** The working-tree digest the checks ran against (sha256 of HEAD, the full diff and untracked files). */
  digest: string | null;
  results: Array<Omit<VerifyData['results'][number], 'outputTail'> & { log?: string }>;
}

export function evidenceId(node: string, visit: number, attempt: number): string {
  return `${node}-v${String(visit).padStart(2, '0')}-a${String(attempt).padStart(2, '0')}`;
}

/** The artifacts of one evidence bundle. */
export function evidenceArtifacts(bundle: Omit<EvidenceBundle, 'results'>, verify: VerifyData): { bundle: EvidenceBundle; artifacts: Artifact[] } {
  const base = `evidence/${bundle.evidenceId}`;
  const artifacts: Artifact[] = [];
  const results = verify.results.map(({ outputTail, ...rest }) => {
    if (outputTail === undefined) return rest;
    const log = `checks/${rest.id}.log`;
    artifacts.push({ key: `${base}/${log}`, data: outputTail });
    return { ...rest, log };
  });
  const full: EvidenceBundle = { ...bundle, results };
  artifacts.unshift({ key: `${base}/bundle.json`, data: `${JSON.stringify(full, null, 2)}\n` });
  return { bundle: full, artifacts };
}
