/**
 * One client connection of the v2 lane protocol, independent of the WebSocket carrying it.
 *
 * After its hello the connection delivers records through its feed (`_record_feed.ts`): from a
 * cursor, the last durable sequence number it delivered, each record exactly once and in order,
 * so a reconnect with `since=<seq>` resumes without gaps. Token animation (`token`,
 * `cell.output`) is pushed directly and may be lost.
 *
 * @module
 */

import {
  assert,
  type ClientMessage,
  type ClientRole,
  createLogger,
  KlbrError,
  type LaneSignal,
  type Logger,
  parseClientMessage,
} from "../core/mod.ts";
import { type ErrorReply, errorReply } from "./_replies.ts";
import type { AdmitOutcome, InputMessage, LaneConnectionOptions, LaneHost } from "./_lane_types.ts";
import { earlierPage } from "./_record_pages.ts";
import { RecordFeed } from "./_record_feed.ts";

/**
 * Refusals of a hello after which the socket is closed at once, with these codes: the same
 * hello would be refused again, so there is nothing to wait for.
 */
const CLOSES_AT_ONCE: Partial<Record<string, number>> = {
  since_beyond_head: 4409,
  too_many_connections: 1013,
};

export type {
  AdmitOutcome,
  InputMessage,
  LaneAuth,
  LaneConnectionOptions,
  LaneHost,
  OperatorMessage,
} from "./_lane_types.ts";

/**
 * The protocol state machine of one `/v2` connection.
 *
 * @example
 * ```ts
 * const conn = new LaneConnection(host, { auth, send, close });
 * await conn.receive(text);
 * ```
 */
export class LaneConnection {
  #host: LaneHost;
  #options: LaneConnectionOptions;
  #session: string | undefined;
  #role: ClientRole = "viewer";
  #clientId = "anonymous";
  /** The records sent after the hello. */
  #feed: RecordFeed | undefined;
  #unsubscribe: (() => void) | undefined;
  #closed = false;
  #refusedHead: number | undefined;
  #log: Logger;
  /** Settles once every reply so far has been sent; replies leave in message order. */
  #answered: Promise<void> = Promise.resolve();
  /** Inputs handed to admission whose answer has not been sent yet. */
  #unacked = 0;

  /** Creates a connection that has not said hello yet. */
  constructor(host: LaneHost, options: LaneConnectionOptions) {
    this.#host = host;
    this.#options = options;
    this.#log = options.log ?? createLogger();
  }

  /** The last sequence number delivered to this client. */
  get cursor(): number {
    return this.#feed?.cursor ?? 0;
  }

  /** Inputs received and handed to admission whose `ack` (or error) has not been sent yet. */
  get unacked(): number {
    return this.#unacked;
  }

  /** The role granted at hello, or undefined before the client is let in. */
  get role(): ClientRole | undefined {
    return this.#session === undefined ? undefined : this.#role;
  }

  /**
   * Handles one text message from the client and resolves once it is answered; every error is
   * answered, never thrown.
   */
  receive(text: string): Promise<void> {
    return this.receiveAll([text]);
  }

  /** Handles messages that arrived together, in order; resolves once each is answered. */
  async receiveAll(texts: string[]): Promise<void> {
    await this.accept(texts);
    await this.#answered;
  }

  /**
   * Takes messages that arrived together, in order, and resolves once each has been handled
   * as far as admission: consecutive inputs go to the host as one group, and the next messages
   * are taken without waiting for its commit, so they can join the next one (group commit).
   * Each input's `ack` still leaves only after the commit that holds it, and every reply
   * leaves in the order of the messages: a message that is not an input is handled once every
   * reply before it has been sent. Every message is answered even when another one failed.
   */
  async accept(texts: string[]): Promise<void> {
    let batch: InputMessage[] = [];
    for (const text of texts) {
      if (this.#closed) return;
      const { message, request, error } = this.#parse(text);
      if (message?.kind === "input" && this.#session !== undefined) {
        batch.push(message);
        continue;
      }
      this.#admit(batch);
      batch = [];
      await this.#answered;
      try {
        if (error !== undefined) throw error;
        await this.#dispatch(message!);
      } catch (caught) {
        this.#answer(caught, request);
      }
    }
    this.#admit(batch);
  }

  /** Hands `inputs` to admission and chains their answers after every earlier reply. */
  #admit(inputs: InputMessage[]): void {
    if (inputs.length === 0) return;
    let outcomes: Promise<AdmitOutcome[]>;
    try {
      outcomes = Promise.resolve(this.#host.admitMany(this.#session!, this.#clientId, inputs));
    } catch (error) {
      outcomes = Promise.reject(error);
    }
    const answer = (result: AdmitOutcome[]) =>
      result.forEach((outcome, i) => {
        const request = inputs[i].request;
        if ("ack" in outcome) this.#options.send({ kind: "ack", request, ...outcome.ack });
        else this.#answer(outcome.error, request);
      });
    const refuse = (error: unknown) => {
      // Nothing of the group was acknowledged: each input hears why; the log hears it once.
      const reply = errorReply(error, this.#log);
      for (const input of inputs) this.#reply(reply, input.request);
    };
    this.#unacked += inputs.length;
    const settled = () => {
      this.#unacked -= inputs.length;
      this.#options.acked?.();
    };
    this.#answered = this.#answered.then(() =>
      outcomes.then(answer, refuse).catch((error) =>
        this.#log.error("lane.internal", `cannot answer inputs: ${error?.stack ?? error}`)
      ).finally(settled)
    );
  }

  #parse(text: string): { message?: ClientMessage; request?: string; error?: unknown } {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (cause) {
      return {
        error: new KlbrError(
          "invalid_input",
          `cannot accept client message: not JSON (got ${JSON.stringify(text.slice(0, 40))})`,
          { cause },
        ),
      };
    }
    let request: string | undefined;
    if (typeof value === "object" && value !== null && "request" in value) {
      const r = (value as { request: unknown }).request;
      if (typeof r === "string") request = r;
    }
    const kind = typeof value === "object" && value !== null && "kind" in value
      ? (value as { kind: unknown }).kind
      : undefined;
    if (this.#session === undefined && kind !== "hello" && typeof kind === "string") {
      // Nothing but hello is read before the client is let in: not even its fields.
      return {
        request,
        error: new KlbrError(
          "invalid_input",
          `cannot accept ${kind.slice(0, 40)}: say hello first`,
        ),
      };
    }
    try {
      return { message: parseClientMessage(value, this.#role), request };
    } catch (error) {
      return { request, error };
    }
  }

  #answer(error: unknown, request: string | undefined): void {
    this.#reply(errorReply(error, this.#log), request);
  }

  #reply({ code, message, retriable }: ErrorReply, request: string | undefined): void {
    const head = code === "since_beyond_head" ? this.#refusedHead : undefined;
    this.#options.send({
      kind: "error",
      request,
      code,
      message,
      ...(retriable ? { retriable } : {}),
      ...(head === undefined ? {} : { head }),
    });
    const closing = code.startsWith("token_") ? 4401 : CLOSES_AT_ONCE[code];
    if (closing === undefined) return;
    if (closing === 4401) this.#options.auth.refused?.(code, message);
    this.#options.close(closing, code);
    this.dispose();
  }

  /** Resolves once every reply to a message taken so far has been sent. */
  async settled(): Promise<void> {
    let answered: Promise<void> | undefined;
    while (answered !== this.#answered) {
      answered = this.#answered;
      await answered;
    }
  }

  /** Releases the subscription; later signals are ignored. */
  dispose(): void {
    this.#closed = true;
    this.#feed?.stop();
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
  }

  async #dispatch(message: ClientMessage): Promise<void> {
    if (message.kind === "hello") return this.#hello(message);
    const session = this.#session;
    if (session === undefined) {
      throw new KlbrError("invalid_input", `cannot accept ${message.kind}: say hello first`);
    }
    switch (message.kind) {
      case "ping":
        this.#options.send({ kind: "pong", request: message.request });
        return;
      case "page":
        // Read apart from the live cursor, which it never moves.
        return this.#options.send(earlierPage(this.#host, session, message));
      case "input":
        // accept() batches every input of a connection that said hello.
        return assert(false, "an input reached #dispatch past accept()");
      case "op.token_rotate": {
        if (this.#host.shuttingDown?.()) {
          // The restart reads the token file; a rotation mid-drain is refused like `op.stop`.
          throw new KlbrError(
            "shutting_down",
            "cannot token_rotate the operator token: the daemon is shutting down; run it again after it restarts",
            { status: 503 },
          );
        }
        // Answered once the new token is in force and before the rotation closes every
        // connection made with the old one; a rotation that failed is answered by its error.
        let answered = false;
        const announce = () => {
          if (answered) return;
          answered = true;
          this.#options.send({
            kind: "op.result",
            request: message.request,
            op: message.kind,
            result: {
              rotated: true,
              message: "the operator token was replaced; old tokens and cookies are refused",
            },
          });
        };
        await this.#options.auth.rotate({ announce });
        return announce();
      }
      default: {
        const result = await this.#host.operate(message, { session, client: this.#clientId });
        this.#options.send({
          kind: "op.result",
          request: message.request,
          op: message.kind,
          result,
        });
      }
    }
  }

  async #hello(message: Extract<ClientMessage, { kind: "hello" }>): Promise<void> {
    if (this.#session !== undefined) {
      throw new KlbrError("invalid_input", "cannot accept hello: this connection already said it");
    }
    this.#role = this.#authorise(message.token);
    const head = this.#host.headSeq(message.session);
    if (message.page !== undefined && message.since !== "head") {
      throw new KlbrError(
        "invalid_input",
        `cannot say hello: page needs since "head" (got since ${message.since})`,
      );
    }
    // Seqs are dense from 1, so the newest `page` records are those after `head - page`.
    const since = message.since === "head"
      ? Math.max(0, head - (message.page ?? 0))
      : message.since;
    if (since > head) {
      // A client ahead of the log holds another store's records; it must start over.
      this.#refusedHead = head;
      throw new KlbrError(
        "since_beyond_head",
        `cannot say hello: since is beyond the head of session ${message.session} (got since ${since}, head ${head})`,
      );
    }
    this.#options.admit?.(this.#role);
    this.#session = message.session;
    this.#clientId = message.client ?? "anonymous";
    const feed = new RecordFeed(this.#host, this.#options, {
      session: message.session,
      cursor: since,
      batch: message.batch === true,
    });
    this.#feed = feed;
    this.#options.send({
      kind: "welcome",
      session: message.session,
      role: this.#role,
      head,
      server: { version: this.#host.version },
    });
    this.#unsubscribe = this.#host.subscribe(message.session, (signal) => this.#signal(signal));
    try {
      await feed.catchUp();
    } catch (error) {
      return this.#feedFailed(error);
    }
    if (this.#closed) return;
    this.#options.send({ kind: "replayed", session: message.session, head: feed.cursor });
  }

  /**
   * Grants a role: a token, when given, must be right; else a valid session cookie makes an
   * operator; else, where the configuration allows it, a read-only viewer.
   *
   * @throws {KlbrError} `token_*` saying what is missing or wrong and how to get a token.
   */
  #authorise(token: string | undefined): ClientRole {
    const auth = this.#options.auth;
    if (token !== undefined) {
      auth.checkToken(token);
      return "operator";
    }
    if (auth.cookie === "valid") return "operator";
    if (auth.cookie === "stale") {
      throw new KlbrError(
        "token_revoked",
        "cannot authorise: the session cookie is no longer valid (the token was rotated, or it expired); open the address `deno task klbr url` prints",
        { status: 401 },
      );
    }
    if (auth.viewWithoutToken) return "viewer";
    throw new KlbrError(
      "token_missing",
      "cannot authorise: this lane needs the operator token (hello.token) or a session cookie; run `deno task klbr url` and open the address it prints",
      { status: 401 },
    );
  }

  #signal(signal: LaneSignal): void {
    if (this.#closed) return;
    if (signal.kind !== "wake") return (this.#options.sendLossy ?? this.#options.send)(signal);
    this.#feed?.wake(signal.records).catch((error) => this.#feedFailed(error));
  }

  /**
   * The store could not be read (a damaged page, an I/O error): the client hears why and the
   * connection closes, so it reconnects from its cursor later. The daemon goes on.
   */
  #feedFailed(error: unknown): void {
    if (this.#closed) return;
    this.#answer(error, undefined);
    this.#options.close(1011, "records cannot be read now");
    this.dispose();
  }
}
