/**
 * Keeps the last `limitBytes` of a stream's output, and forwards chunks to a
 * progress callback in batches (at most one message per `flushMs`).
 */
export class OutputCapture {
  readonly #limit: number;
  #chunks: Buffer[] = [];
  #bytes = 0;
  #totalBytes = 0;

  constructor(limitBytes: number) {
    this.#limit = limitBytes;
  }

  push(chunk: Buffer | string): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.#chunks.push(buf);
    this.#bytes += buf.length;
    this.#totalBytes += buf.length;
    while (this.#bytes - (this.#chunks[0]?.length ?? 0) >= this.#limit && this.#chunks.length > 1) {
      this.#bytes -= this.#chunks.shift()!.length;
    }
  }

  /** Bytes seen in all. */
  get totalBytes(): number {
    return this.#totalBytes;
  }

  /** Whether older output was dropped. */
  get truncated(): boolean {
    return this.#totalBytes > this.#limit;
  }

  /** The kept text: the last `limitBytes` bytes (cut at a UTF-8 boundary). */
  text(): string {
    let buf = Buffer.concat(this.#chunks);
    if (buf.length > this.#limit) buf = buf.subarray(buf.length - this.#limit);
    // Skip UTF-8 continuation bytes left by the cut.
    let start = 0;
    while (start < buf.length && start < 4 && (buf[start]! & 0xc0) === 0x80) start++;
    return buf.subarray(start).toString('utf8');
  }

  /** The last `lines` lines of {@link text}. */
  tail(lines: number): string {
    const all = this.text().split('\n');
    return all.slice(Math.max(0, all.length - lines - 1)).join('\n');
  }
}

/** Batches progress text per stream and sends it at most every `flushMs`. */
export class ProgressBatcher {
  readonly #send: (stream: 'stdout' | 'stderr' | 'log', text: string) => void;
  readonly #pending = new Map<'stdout' | 'stderr' | 'log', string>();
  #timer: NodeJS.Timeout | undefined;

  constructor(send: (stream: 'stdout' | 'stderr' | 'log', text: string) => void, readonly flushMs = 250) {
    this.#send = send;
  }

  push(stream: 'stdout' | 'stderr' | 'log', text: string): void {
    const joined = (this.#pending.get(stream) ?? '') + text;
    this.#pending.set(stream, joined.length > 32_768 ? joined.slice(-32_768) : joined);
    this.#timer ??= setTimeout(() => this.flush(), this.flushMs);
  }

  flush(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const [stream, text] of this.#pending) if (text !== '') this.#send(stream, text);
    this.#pending.clear();
  }
}
