/**
 * The process side of a workbench: frames in and out of its stdio, its stderr ring, its exit,
 * and the kill of its process group.
 *
 * @module
 */

import { encodeFrame, FrameDecoder } from "./_frame_codec.ts";
import {
  faultPoint,
  type HostFrame,
  KlbrError,
  parseWorkerFrame,
  settlesWithin,
  type WorkerFrame,
} from "../core/mod.ts";
import { killProcessGroup } from "../sandbox/mod.ts";
import { ByteRing } from "./_parts.ts";

const STDERR_RING = 64 * 1024;

/** What the channel reports to its handle. */
export interface ChannelEvents {
  /** One valid worker frame, in order. */
  frame(frame: WorkerFrame): void;
  /** The channel is unusable: a framing failure, a failed write, an exit or end of file. */
  broken(cause: KlbrError): void;
}

/** Frames over one child's stdio; stderr is kept apart in a bounded ring. */
export class WorkerChannel {
  /** The child's pid, which is also its process group id. */
  readonly pid: number;
  readonly #child: Deno.ChildProcess;
  readonly #maxFrameBytes: number;
  readonly #graceMs: number;
  readonly #events: ChannelEvents;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #stderr = new ByteRing(STDERR_RING);
  readonly #stderrReader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #stderrDone: Promise<void>;
  #writes: Promise<void> = Promise.resolve();
  #status: Deno.CommandStatus | null = null;
  #lastWord: string | null = null;
  #expectingExit = false;
  #terminated = false;
  #exitTimer: ReturnType<typeof setTimeout> | undefined;

  /** Starts reading the child's frames and stderr. */
  constructor(
    child: Deno.ChildProcess,
    options: { maxFrameBytes: number; graceMs: number },
    events: ChannelEvents,
  ) {
    this.#child = child;
    this.pid = child.pid;
    this.#maxFrameBytes = options.maxFrameBytes;
    this.#graceMs = options.graceMs;
    this.#events = events;
    this.#writer = child.stdin.getWriter();
    this.#stderrReader = child.stderr.getReader();
    this.#stderrDone = this.#readStderr();
    this.#readFrames();
    child.status.then((status) => this.#onStatus(status));
  }

  /** The exit status, once the child has been reaped. */
  get status(): Deno.CommandStatus | null {
    return this.#status;
  }

  /** The last bytes the child wrote to stderr. */
  stderrTail(): string {
    return this.#stderr.text();
  }

  /**
   * Queues one frame; writes keep their order.
   * @throws {KlbrError} `frame_oversize` when the frame is over the cap (nothing is sent).
   */
  send(frame: HostFrame): void {
    let bytes = encodeFrame(frame, this.#maxFrameBytes);
    let cut: unknown;
    if (frame.kind === "execute") {
      try {
        faultPoint("frame-write");
      } catch (error) {
        // The injected failure writes half the frame, as a write cut off by a dying pipe does.
        cut = error;
        bytes = bytes.subarray(0, bytes.length >> 1);
      }
    }
    this.#writes = this.#writes.then(async () => {
      await this.#writer.write(bytes);
      if (cut !== undefined) throw cut;
    }).catch((cause) => {
      this.#events.broken(
        new KlbrError("worker_failed", `cannot write to workbench: ${String(cause)}`, { cause }),
      );
    });
  }

  /** From now on an exit is expected (`shutdown`) and not reported as broken. */
  expectExit(): void {
    this.#expectingExit = true;
  }

  /** Resolves whether the child exited within `ms`. */
  exitedWithin(ms: number): Promise<boolean> {
    return settlesWithin(this.#child.status, ms);
  }

  /**
   * Kills the process group, reaps the leader, kills what is left in the group, and closes
   * the pipes. On return no process of the group is alive (unless it could not be killed).
   */
  async terminate(): Promise<void> {
    this.#terminated = true;
    clearTimeout(this.#exitTimer);
    await killProcessGroup(this.pid).catch(() => {});
    // Children a cell started stay in the group after the leader (even after a clean exit),
    // so the group is killed again once the leader is reaped: none may outlive the worker.
    if (await settlesWithin(this.#child.status, this.#graceMs)) {
      await killProcessGroup(this.pid).catch(() => {});
    }
    this.#writer.close().catch(() => {});
    if (!(await settlesWithin(this.#stderrDone, this.#graceMs))) {
      this.#stderrReader.cancel().catch(() => {});
    }
  }

  async #readFrames(): Promise<void> {
    // Read chunk by chunk and decoded in place: a stream transform between them cost a
    // one-step turn about half a millisecond of the main thread.
    const reader = this.#child.stdout.getReader();
    const decoder = new FrameDecoder({ maxFrameBytes: this.#maxFrameBytes });
    const onFrame = this.#onFrame.bind(this);
    try {
      // Ends at the worker's end of file or at the first bad frame.
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          decoder.end();
          break;
        }
        if (this.#terminated) {
          reader.cancel().catch(() => {});
          break;
        }
        decoder.push(value, onFrame);
      }
    } catch (error) {
      this.#events.broken(
        error instanceof KlbrError
          ? error
          : new KlbrError("worker_failed", `cannot read workbench frames: ${String(error)}`, {
            cause: error,
          }),
      );
      return;
    }
    if (this.#terminated) return;
    const exited = await this.exitedWithin(this.#graceMs);
    if (this.#expectingExit || this.#terminated) return;
    this.#events.broken(this.#exitError(exited ? this.#status : null));
  }

  /** One decoded frame from the worker. */
  #onFrame(value: unknown): void {
    if (this.#terminated) return;
    const frame = parseWorkerFrame(value);
    if (frame.kind === "error" && frame.id === "") {
      // An error without a request is the worker's last word before it exits.
      this.#lastWord = `${frame.code}: ${frame.message}`.slice(0, 2000);
      return;
    }
    this.#events.frame(frame);
  }

  async #readStderr(): Promise<void> {
    try {
      // Ends at end of file; terminate() cancels the reader after the grace.
      while (true) {
        const { done, value } = await this.#stderrReader.read();
        if (done) return;
        this.#stderr.push(value);
      }
    } catch {
      // Cancelled: the tail so far stands.
    }
  }

  #onStatus(status: Deno.CommandStatus): void {
    this.#status = status;
    if (this.#expectingExit || this.#terminated) return;
    // Frames written before the exit are still read first; the reader gets the grace.
    this.#exitTimer = setTimeout(() => {
      if (!this.#expectingExit && !this.#terminated) this.#events.broken(this.#exitError(status));
    }, this.#graceMs);
  }

  #exitError(status: Deno.CommandStatus | null): KlbrError {
    const how = status === null
      ? "closed its frame channel"
      : `exited with ${status.signal ? `signal ${status.signal}` : `code ${status.code}`}`;
    const said = this.#lastWord === null ? "" : ` after reporting ${this.#lastWord}`;
    return new KlbrError("worker_failed", `cannot use workbench: the worker ${how}${said}`);
  }
}
