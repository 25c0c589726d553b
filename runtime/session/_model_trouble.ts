/**
 * What a session records about a model that does not answer: each failed model request as
 * `model.failing` (the route's URL, which attempt of how many, when the next one is due, the
 * configuration file to edit), and `model.recovered` once a turn gets through again — the
 * records a conversation shows under the message that waits, and clears.
 *
 * @module
 */

import { lastEventOfKinds } from "../../store/tables/events.ts";
import type { FrameRecord } from "../../store/tables/frames.ts";
import type { Store } from "../../store/store.ts";
import type { RecordInput, RecordType } from "../core/mod.ts";
import { answered } from "./_attention.ts";
import type { TurnResult } from "./_turn_types.ts";

type Record = <T extends RecordType>(type: T, body: RecordInput<T>) => void;

/** A run of failed model requests not yet followed by a recovery. */
export interface FailedRun {
  route: string;
  url: string;
  count: number;
}

/** A failure waiting for its attempt number and retry delay. */
interface Failure {
  frame_id: string;
  input_ids: string[];
  route: string;
  url: string;
  model: string;
  error: string;
  config_path: string | null;
}

/** One session's model trouble: the failure not yet reported, and the run of failures. */
export class ModelTrouble {
  #record: Record;
  #configPath: string | null;
  #pending: Failure | undefined;
  #failed: FailedRun | undefined;

  #seed: (() => FailedRun | undefined) | undefined;

  /**
   * Records through `record`; `configPath` is what the records name as the file to edit.
   * `seed` tells, once, whether the session's last word on the model (before this process)
   * was a failure, so a restart with the model fixed still records the recovery.
   */
  constructor(record: Record, configPath: string | null, seed?: () => FailedRun | undefined) {
    this.#record = record;
    this.#configPath = configPath;
    this.#seed = seed;
  }

  /**
   * A turn ended: a model failure is kept until the retry is scheduled ({@linkcode retrying});
   * a finished turn after failures records `model.recovered`.
   */
  ended(frame: FrameRecord, result: TurnResult): void {
    const model = result.model;
    if (model !== undefined) {
      this.#pending = {
        frame_id: frame.id,
        input_ids: answered(frame),
        route: model.route,
        url: model.url,
        model: model.model,
        error: model.error.slice(0, 1000),
        config_path: this.#configPath,
      };
      return;
    }
    if (result.ok && this.#seed !== undefined) {
      this.#failed ??= this.#seed();
      this.#seed = undefined;
    }
    if (result.ok && this.#failed !== undefined) {
      const { route, url, count } = this.#failed;
      this.#record("model.recovered", { frame_id: frame.id, route, url, failed_attempts: count });
      this.#failed = undefined;
    }
  }

  /**
   * The loop scheduled the next attempt in `nextMs` (`null`: it stalled and will not retry by
   * itself): records the failure kept by {@linkcode ended}, if there is one.
   */
  retrying(attempt: number, of: number, nextMs: number | null): void {
    const failure = this.#pending;
    if (failure === undefined) return;
    this.#pending = undefined;
    this.#record("model.failing", { ...failure, attempt, of, next_retry_ms: nextMs });
    this.#seed = undefined;
    this.#failed = {
      route: failure.route,
      url: failure.url,
      count: (this.#failed?.count ?? 0) + 1,
    };
  }
}

/** The failure a session's records end with, if its last word on the model was one. */
export function lastFailure(store: Store, session: string): FailedRun | undefined {
  const last = lastEventOfKinds(store, session, ["model.failing", "model.recovered"]);
  if (last?.kind !== "model.failing") return undefined;
  const body = last.body as { route: string; url: string; attempt: number };
  return { route: body.route, url: body.url, count: body.attempt };
}

/**
 * A URL fit for a record: without user name and password.
 *
 * @example
 * ```ts
 * shownUrl("http://u:p@host:8080/v1"); // "http://host:8080/v1"
 * ```
 */
export function shownUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = "";
    parsed.password = "";
    return parsed.toString().replace(/\/$/, url.endsWith("/") ? "/" : "");
  } catch {
    return url;
  }
}
