/**
 * Where a turn's two steps put what they make and read back what they sent. The request step
 * and the tool-call step are one engine for the root agent and for its child agents (jobs of
 * kind `agent`): code parsing (tool calls and fenced text-mode cells), the route's mode and
 * shaping, result rendering with the effects a cell committed, and output spooling to
 * artifacts are the same code. A sink is what differs: the root turn's writes the session's
 * durable sequence (provider items, the `cells` table, `model.reply` and scratchpad records);
 * a child agent's keeps its provider sequence in memory and records each cell as `job.cell`.
 * What a child may call is its workbench's (its role's RPCs), not the engine's.
 *
 * @module
 */

import type { ArtifactRef } from "../../store/tables/artifacts.ts";
import type { EffectRecord } from "../../store/tables/effects.ts";
import type { Store } from "../../store/store.ts";
import type { CellDisplay, EventBus } from "../core/mod.ts";
import type { CellResult } from "../kernel/mod.ts";
import type { ChatMessage, Provider, ProviderTurn } from "../model/mod.ts";
import type { RouteMode } from "./_route_mode.ts";
import type { TurnHealth } from "./_turn_health.ts";

/** One tool call of an assistant reply, with its host-minted id. */
export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as the model wrote them (kept raw in the store). */
  arguments: string;
  /** When set, the call is not run and this is its result. */
  refusal?: string;
  /** Lines the runtime adds after the call's result (the step limit, fences left unrun). */
  notes?: string[];
  /** True for a text-mode cell: the first python fence of a reply without tool calls. */
  textCell?: boolean;
}

/**
 * A cell's sink could not record the cell because its workbench cannot start (the generation
 * it would run in is unknown): the call is answered "not run" with this message.
 */
export class WorkbenchUnavailable extends Error {
  /** Says why the workbench cannot start; `cause` is its failure. */
  constructor(cause: unknown) {
    const why = cause instanceof Error ? cause.message : String(cause);
    super(`the workbench could not start: ${why}`, { cause });
    this.name = "WorkbenchUnavailable";
  }
}

/** The session's kernel as the loop uses it. */
export interface TurnKernel {
  /** The running generation; cells are recorded against it. */
  generation(): Promise<number>;
  /** Runs one cell; resolves with its outcome, never rejects for what the cell did. */
  execute(
    cellId: string,
    code: string,
    options: {
      signal: AbortSignal;
      timeoutMs: number;
      onStream: (name: "stdout" | "stderr", text: string) => void;
    },
  ): Promise<CellResult>;
}

/** What the tool-call step needs. */
export interface ToolCallDeps {
  store: Store;
  bus: EventBus;
  kernel: TurnKernel;
  /** How long one cell may run before it is cancelled (then killed). */
  cellTimeoutMs: number;
  /** The artifacts directory's size limit (the `artifact_disk_mb` budget). @default 256 MiB */
  artifactBytes?: number;
  /** Where artifact writes are reported for `/health`. */
  health: TurnHealth;
  /**
   * Where cells and tool results are recorded: a child agent's own sequence. The session's
   * (`cells` rows, provider items of the turn's frame) when absent.
   */
  cells?: CellSink;
}

/** One stream of a cell's output as it is kept: the text or its excerpt, and its artifact. */
export interface SpooledText {
  text: string;
  artifact?: ArtifactRef;
  /** Why the whole text could not be kept (a full disk): the excerpt says so too. */
  artifactError?: string;
}

/** A cell that ran: its result as the kernel gave it, and its two streams as they are kept. */
export interface FinishedCell {
  result: CellResult;
  stdout: SpooledText;
  stderr: SpooledText;
  /** What the cell showed with `display()`, each kept as an artifact. */
  displays: CellDisplay[];
}

/** The tool result of the call a cell ran. */
export interface CellAnswer {
  call: ToolCall;
  content: string;
}

/** Where the tool-call step records a reply's cells and gives each call its one result. */
export interface CellSink {
  /** Appends the one tool result of a `call` that ran no cell to the sequence. */
  answer(call: ToolCall, content: string): void;
  /**
   * Records a cell before it runs; resolves with its id. Rejects with
   * {@linkcode WorkbenchUnavailable} when the workbench cannot start, the cell unrecorded.
   */
  startCell(cell: { toolCallId: string; code: string }): Promise<string>;
  /** Shows a running cell's output (lossy animation; the result carries the whole capture). */
  stream(cellId: string, name: "stdout" | "stderr", text: string): void;
  /**
   * Records the outcome of a cell (its long output already spooled) and the one tool result of
   * the call it ran, together.
   */
  finishCell(cellId: string, finished: FinishedCell, answer: CellAnswer): void;
  /** What the cell committed, for its result. */
  effects(cellId: string): readonly EffectRecord[];
}

/** A request step's route: its name, and the provider that serves it. */
export interface RouteChoice {
  route: string;
  provider: Provider;
}

/** A request ready to send, with its raw estimate for calibration. */
export interface PreparedRequest {
  messages: ChatMessage[];
  rawTokens: number;
}

/** A reply as the request step hands it to its sink to be made durable. */
export interface ReplyToCommit {
  route: string;
  provider: Provider;
  request: PreparedRequest;
  turn: ProviderTurn;
  calls: ToolCall[];
}

/** Where the request step gets its route and context, and where its reply goes. */
export interface RequestSink extends CellSink {
  /**
   * The route of the next request, and the opening it sends (the sink may prefix a note to
   * it, or append one to the sequence).
   */
  begin(
    opening: Record<string, unknown> | null,
  ): Promise<RouteChoice & { opening: Record<string, unknown> | null }>;
  /** The request's messages for `route` under `mode`, shaped for its server. */
  context(
    opening: Record<string, unknown> | null,
    request: { route: string; mode: RouteMode; signal: AbortSignal },
  ): Promise<PreparedRequest>;
  /** Makes the reply (after the opening) part of the sequence, before any of its cells runs. */
  commitReply(opening: Record<string, unknown> | null, reply: ReplyToCommit): Promise<void>;
  /** Rewrites a history the server refused, once; true when the request may be made again. */
  repair(failure: { error: unknown; message: string }): Promise<boolean>;
  /** Records what a failed request streamed before it failed (its partial text). */
  partial(partial: Partial<ProviderTurn>): Promise<void>;
  /**
   * Whether this sequence's previous reply on `route` was a fenced cell with no tool call: the
   * second such reply in a row moves an `auto` route to text mode.
   */
  lastReplyFenced(route: string): boolean;
}
