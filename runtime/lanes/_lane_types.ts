/**
 * The types of a lane connection: what it needs from the daemon (`LaneHost`), what it knows
 * of its credentials (`LaneAuth`) and how it is carried (`LaneConnectionOptions`).
 *
 * @module
 */

import type {
  ClientMessage,
  ClientRole,
  KlbrError,
  LaneRecord,
  LaneSignal,
  Logger,
  ServerMessage,
} from "../core/mod.ts";
import type { CookieState } from "./_auth.ts";
import type { StoredRecord } from "./_record_batches.ts";

/** A client's `input` message. */
export type InputMessage = Extract<ClientMessage, { kind: "input" }>;

/** The operator commands the daemon runs (`op.token_rotate` is the lane server's own). */
export type OperatorMessage = Exclude<
  Extract<ClientMessage, { kind: `op.${string}` }>,
  { kind: "op.token_rotate" }
>;

/** What admission did with one input. */
export type AdmitOutcome =
  | { ack: { input_id: string; seq: number; duplicate: boolean } }
  | { error: KlbrError };

/** What a connection needs from the daemon. */
export interface LaneHost {
  /** The daemon's version string, sent in `welcome`. */
  readonly version: string;
  /** The last durable sequence number of a session (0 when empty). */
  headSeq(session: string): number;
  /** Up to `limit` durable records of a session with `seq > since`, in order. */
  readRecords(session: string, since: number, limit: number): LaneRecord[];
  /**
   * The same records as {@linkcode LaneHost.readRecords}, each body left as its stored JSON
   * text, for a transport that sends encoded text; absent, the records are encoded from
   * `readRecords`.
   */
  readStoredRecords?(session: string, since: number, limit: number): StoredRecord[];
  /**
   * The spans of seqs that hold one conversation's newest inputs before `before` and the
   * frames that took them up (`store/tables/conversation_pages.ts`); absent, a `page` that
   * names a conversation is answered as one that does not.
   */
  conversationRanges?(
    session: string,
    options: { conversation: string; before: number; limit: number },
  ): { ranges: [number, number][]; from: number; more: boolean };
  /** Subscribes to a session's signals; returns the unsubscribe function. */
  subscribe(session: string, listener: (signal: LaneSignal) => void): () => void;
  /**
   * Admits inputs durably, in order, in one commit; settles after it, one outcome per input.
   * A refused input is an `error` outcome and does not stop the others; a commit that failed
   * throws or rejects, and then none of them was admitted.
   */
  admitMany(
    session: string,
    clientId: string,
    inputs: InputMessage[],
  ): AdmitOutcome[] | Promise<AdmitOutcome[]>;
  /**
   * Runs an operator command; never needs the model or a hook. `from` is the connection's
   * session and the client id its hello gave (`cli` for the command line), for the log.
   */
  operate(
    message: OperatorMessage,
    from: { session: string; client: string },
  ): Promise<Record<string, unknown>>;
  /**
   * Whether the daemon is shutting down (a signal's drain): `op.token_rotate` is refused then,
   * like every operator command that changes something. Absent, it never is.
   */
  shuttingDown?(): boolean;
}

/** What a connection knows about its credentials and how to check and rotate the token. */
export interface LaneAuth {
  /** The session cookie the upgrade request carried. */
  cookie: CookieState;
  /** Whether a connection without credentials may watch, read-only. */
  viewWithoutToken: boolean;
  /** Checks a `hello.token`. @throws {KlbrError} `token_missing`, `token_malformed`, `token_wrong`. */
  checkToken(token: string | undefined): void;
  /**
   * Replaces the operator token (`op.token_rotate`); resolves once the new one is in force.
   * `announce`, when given, is called as soon as it is in force, before the connections made
   * with the old one are closed; a rotation that fails never calls it.
   */
  rotate(options?: { announce?: () => void }): Promise<void>;
  /** Notes a refused authorisation, its code and message (a bounded log); absent, not logged. */
  refused?(code: string, reason: string): void;
}

/** Options for {@linkcode LaneConnection}. */
export interface LaneConnectionOptions {
  /** The credentials of the connection and the token check. */
  auth: LaneAuth;
  /** Sends one message to the client. */
  send: (message: ServerMessage) => void;
  /** Sends lossy animation (`token`, `cell.output`), which the transport may drop. @default send */
  sendLossy?: (message: ServerMessage) => void;
  /**
   * Sends one message already encoded as JSON (a `records` batch, encoded once); absent, the
   * batch goes through `send`.
   */
  sendText?: (text: string) => void;
  /** Closes the transport with a code and reason. */
  close: (code: number, reason: string) => void;
  /**
   * Called at hello once the client is authorised, just before `welcome`: the transport makes
   * the connection a lane.
   * @throws {KlbrError} `too_many_connections` to refuse it (the socket is then closed, 1013).
   */
  admit?: (role: ClientRole) => void;
  /** Records read per store query while catching up. @default {1000} */
  pageSize?: number;
  /** Resolves when the transport can take another page; absent means always. */
  writable?: () => Promise<void>;
  /** Called each time inputs were answered (acknowledged or refused): `unacked` fell. */
  acked?: () => void;
  /** Where an unexpected error is logged before it is answered `internal`. @default {stderr} */
  log?: Logger;
}
