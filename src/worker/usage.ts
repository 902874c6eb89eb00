/** Usage a script or engine reports, as clean numbers: a script may pass anything. */
export function usageReport(u: { tokensIn?: unknown; tokensOut?: unknown; costUsd?: unknown; model?: unknown }): { tokensIn: number; tokensOut: number; costUsd: number; model?: string } {
  // Each report is clamped (tokens ≤ 1e9, cost ≤ $1e6) so that no sum of reports can overflow to Infinity.
  const num = (x: unknown, max: number): number => (typeof x === 'number' && Number.isFinite(x) && x > 0 ? Math.min(x, max) : 0);
  const report: { tokensIn: number; tokensOut: number; costUsd: number; model?: string } = { tokensIn: num(u.tokensIn, 1e9), tokensOut: num(u.tokensOut, 1e9), costUsd: num(u.costUsd, 1e6) };
  if (typeof u.model === 'string' && u.model !== '') report.model = u.model.slice(0, 200);
  return report;
}

/** Usage reports of one execution, cleaned and summed. */
export class UsageTally {
  tokensIn = 0;
  tokensOut = 0;
  costUsd = 0;

  /** Clean one report, add it, and return it (to send on to the host). */
  add(u: Parameters<typeof usageReport>[0]): ReturnType<typeof usageReport> {
    const report = usageReport(u);
    this.tokensIn += report.tokensIn;
    this.tokensOut += report.tokensOut;
    this.costUsd += report.costUsd;
    return report;
  }

  totals(): { tokensIn: number; tokensOut: number; costUsd: number } {
    return { tokensIn: this.tokensIn, tokensOut: this.tokensOut, costUsd: this.costUsd };
  }
}
