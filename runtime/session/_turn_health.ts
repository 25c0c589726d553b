/**
 * What a turn tells the daemon's health report as it goes: each model call (its progress and
 * how it ended) and each artifact write. The daemon's `/health` is built from these reports,
 * so it says `degraded` from the first failed or stalled call, not after retries run out.
 *
 * @module
 */

/** One model call in progress, as the health report hears of it. */
export interface ModelCallReport {
  /** Bytes of the reply arrived. */
  progress(): void;
  /** The call ended: `null` when it succeeded, else why it failed. An aborted call says nothing. */
  done(error: string | null): void;
}

/** Where a turn reports what the health report needs. */
export interface TurnHealth {
  /** A model request starts on `route`. */
  modelCall(route: string): ModelCallReport;
  /** An artifact write ended: `null` when it succeeded, else why it failed. */
  artifactWrite(error: string | null): void;
}

/** A report that nobody reads, for turns run outside a daemon. */
export const NO_TURN_HEALTH: TurnHealth = {
  modelCall: () => ({ progress() {}, done() {} }),
  artifactWrite() {},
};
