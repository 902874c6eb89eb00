/** Usage a script or engine reports, as clean numbers: a script may pass anything. */
export function usageReport(u: { tokensIn?: unknown; tokensOut?: unknown; costUsd?: unknown; model?: unknown }): { tokensIn: number; tokensOut: number; costUsd: number; model?: string } {
  const num = (x: unknown): number => (typeof x === 'number' && Number.isFinite(x) && x > 0 ? x : 0);
  const report: { tokensIn: number; tokensOut: number; costUsd: number; model?: string } = { tokensIn: num(u.tokensIn), tokensOut: num(u.tokensOut), costUsd: num(u.costUsd) };
  if (typeof u.model === 'string' && u.model !== '') report.model = u.model.slice(0, 200);
  return report;
}
