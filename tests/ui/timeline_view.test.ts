/**
 * The timeline's derivation: each conversation's messages in order, each turn's work under
 * the last message it took up, and no record lost or shown twice in a conversation, for any
 * mix of records.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import { deriveLanes } from "../../ui/src/lane_view.ts";
import {
  deriveTimeline,
  heldRows,
  type TimelineRow,
  type TurnBlock,
  turnSummary,
} from "../../ui/src/timeline_view.ts";
import { searchLanes } from "../../ui/src/search.ts";
import { deriveTurns } from "../../ui/src/turn_view.ts";
import { rec } from "./_record_data.ts";

function records(...items: [string, Record<string, unknown>][]): LaneRecord[] {
  return items.map(([type, data], i) => ({
    kind: "record",
    session: "default",
    seq: i + 1,
    at: 1_736_933_400_000 + i * 1000,
    type,
    data,
  }));
}

function timeline(list: LaneRecord[]) {
  return deriveTimeline(list, deriveLanes(list), deriveTurns(list));
}

function turnSeqs(turn: TurnBlock): number[] {
  return [
    ...turn.drafts.map((draft) => draft.seq),
    ...turn.cells.flatMap((cell) =>
      cell.finishedSeq === undefined ? [cell.seq] : [cell.seq, cell.finishedSeq]
    ),
  ];
}

/** Every seq one conversation's rows render. */
function rowSeqs(rows: readonly TimelineRow[]): number[] {
  return rows.flatMap((row) => {
    switch (row.kind) {
      case "input":
        return [row.seq, ...row.turns.flatMap(turnSeqs)];
      case "send":
        return [row.seq, ...(row.item.delivery?.steps.map((step) => step.seq) ?? [])];
      case "turn":
        return turnSeqs(row.turn);
      case "draft":
        return []; // a copy of a draft's text, rendered without its seq
    }
  });
}

const ADMITTED = (id: string, conversation = "local:default") =>
  rec("input.admitted", {
    input_id: id,
    source_kind: conversation.startsWith("discord") ? "discord" : "local",
    dedupe_key: `local:web-1:m-${id}`,
    conversation_id: conversation,
    author: "owner",
    body: `text of ${id}`,
    client_msg_id: `m-${id}`,
  });

Deno.test("`deriveTimeline()` puts a turn's drafts and cells under the last message it took up, folded once done", () => {
  const list = records(
    ADMITTED("in_a"),
    ADMITTED("in_b"),
    rec("frame.accepted", { frame_id: "fr_1", number: 1, input_ids: ["in_a", "in_b"] }),
    rec("reasoning", { frame_id: "fr_1", text: "thinking" }),
    rec("scratchpad", { frame_id: "fr_1", text: "I will look", partial: false }),
    rec("cell.started", { frame_id: "fr_1", cell_id: "cell_1", code: "1" }),
    rec("cell.finished", { frame_id: "fr_1", cell_id: "cell_1" }),
    rec("send", { frame_id: "fr_1", send_id: "snd_1", conversation: "local:default", text: "hi" }),
    rec("frame.finished", { frame_id: "fr_1", number: 1, input_ids: ["in_a", "in_b"] }),
    ADMITTED("in_c", "discord:42"),
  );
  const view = timeline(list);
  const local = view.rows.get("local:default")!;
  assert.deepEqual(local.map((row) => row.kind), ["input", "input", "send"]);
  assert.equal(local[0].kind === "input" && local[0].turns.length, 0);
  const turn = local[1].kind === "input" ? local[1].turns[0] : undefined;
  assert.ok(turn !== undefined);
  assert.equal(turn.state, "done");
  assert.deepEqual(turnSeqs(turn), [4, 5, 6, 7]);
  assert.equal(turn.endedAt! - turn.startedAt!, 6000);
  assert.equal(turnSummary(turn, 0), "worked 6.0 s · 1 cell");
  assert.deepEqual(view.conversations.map((c) => [c.id, c.messages]), [
    ["local:default", 3],
    ["discord:42", 1],
  ]);
});

Deno.test("`deriveTimeline()` shows a turn no message woke, and work outside any turn, as rows of their own", () => {
  const list = records(
    rec("frame.accepted", { frame_id: "fr_9", number: 9, input_ids: [] }),
    rec("cell.started", { frame_id: "fr_9", cell_id: "cell_9", code: "1" }),
    rec("cell.started", { frame_id: null, cell_id: "cell_x", code: "2" }),
  );
  const rows = timeline(list).rows.get("local:default")!;
  assert.deepEqual(rows.map((row) => row.kind), ["turn", "turn"]);
  assert.equal(rows[0].kind === "turn" && rows[0].turn.state, "running");
  assert.deepEqual(rowSeqs(rows), [2, 3]);
});

Deno.test("`deriveTimeline()` shows no row for a turn whose inputs the page does not hold", () => {
  // Brought along by another conversation's page, or begun before the oldest record held.
  const list = records(
    rec("frame.accepted", { frame_id: "fr_7", number: 7, input_ids: ["in_gone"] }),
    rec("cell.started", { frame_id: "fr_7", cell_id: "cell_7", code: "1" }),
  );
  assert.equal(timeline(list).rows.get("local:default"), undefined);
});

Deno.test("`deriveTimeline()` over a search shows no row for a turn or an unsent draft that does not match, even a turn that set a timer", () => {
  const list = records(
    ADMITTED("in_a"),
    rec("frame.accepted", { frame_id: "fr_1", number: 1, input_ids: ["in_a"] }),
    rec("scratchpad", { frame_id: "fr_1", text: "setting a reminder", partial: false }),
    rec("timer.set", { frame_id: "fr_1", timer_id: "tm_1", note: "tomorrow" }),
    rec("frame.finished", { frame_id: "fr_1", state: "done" }),
  );
  // As the page filters the lanes by its search box.
  const searched = (query: string) => {
    const lanes = deriveLanes(list);
    const found = searchLanes(lanes, query);
    return deriveTimeline(list, {
      ...lanes,
      conversation: found.conversation,
      scratchpad: found.scratchpad,
      cells: found.cells,
    }, deriveTurns(list)).rows.get("local:default") ?? [];
  };
  assert.deepEqual(searched("no such words").map((row) => row.kind), []);
  // Its draft matches: the turn is shown on a row of its own, with what it set, and the draft
  // it ended with unsent.
  const rows = searched("reminder");
  assert.deepEqual(rows.map((row) => row.kind), ["turn", "draft"]);
  assert.deepEqual(rows[0].kind === "turn" && rows[0].turn.set.map((item) => item.id), ["tm_1"]);
  // Its message matches: the turn sits under it.
  assert.deepEqual(searched("text of in_a").map((row) => row.kind), ["input"]);
});

Deno.test("`heldRows()` shows a conversation from where it is held whole, and no turn begun before the page's records", () => {
  // The page opened in the middle of turn fr_8: its cell is held, its start is not.
  const middle = records(
    rec("cell.started", { frame_id: "fr_8", cell_id: "cell_8", code: "1" }),
    rec("cell.started", { frame_id: null, cell_id: "cell_x", code: "2" }),
  );
  const rows = timeline(middle).rows.get("local:default");
  assert.deepEqual(rows?.map((row) => row.kind), ["turn", "turn"]);
  // Held from the session's start, such a turn is shown as it is (a log that lacks its start).
  assert.equal(heldRows(rows, { conversation: 1, session: 1 }).length, 2);
  // The session held from seq 40 on (the conversation's own page reached its start): the
  // turn began before what the page holds; work outside any turn is still shown.
  const held = heldRows(rows, { conversation: 1, session: 40 });
  assert.deepEqual(held.map((row) => row.kind === "turn" && row.turn.frameId), ["loose:2"]);
  assert.deepEqual(heldRows(rows, { conversation: 3, session: 1 }), [], "rows below its reach");
});

Deno.test("`deriveTimeline()` shows every record in its conversation or the events, once in each conversation, for any mix", () => {
  const type = fc.constantFrom(
    "input.admitted",
    "send",
    "scratchpad",
    "reasoning",
    "cell.started",
    "cell.finished",
    "frame.accepted",
    "frame.finished",
    "frame.abandoned",
    "timer.set",
    "job.state",
    "outbox.pending",
    "outbox.confirmed",
    "something.new",
  );
  const value = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null));
  const data = fc.record({
    cell_id: fc.constantFrom("cell_a", "cell_b"),
    input_id: fc.constantFrom("in_a", "in_b", "in_c"),
    input_ids: fc.array(fc.constantFrom("in_a", "in_b", "in_x")),
    frame_id: fc.constantFrom("fr_1", "fr_2", null),
    conversation_id: fc.constantFrom("local:default", "discord:1"),
    conversation: fc.constantFrom("local:default", "discord:1"),
    send_id: fc.constantFrom("snd_1", "snd_2"),
    outbox_id: fc.constantFrom("ob_1", "ob_2"),
    state: fc.constantFrom("done", "failed", "pending"),
    text: value,
    code: value,
  }, { requiredKeys: [] });
  fc.assert(
    fc.property(fc.array(fc.tuple(type, data), { maxLength: 50 }), (items) => {
      const list = records(...items);
      const lanes = deriveLanes(list);
      const view = deriveTimeline(list, lanes, deriveTurns(list));
      const shown = new Set(lanes.events.map((event) => event.seq));
      for (const rows of view.rows.values()) {
        const seqs = rowSeqs(rows);
        assert.equal(new Set(seqs).size, seqs.length, `twice in a conversation: ${seqs}`);
        for (const seq of seqs) shown.add(seq);
        // Rows are in seq order.
        const order = rows.map((row) => row.seq);
        assert.deepEqual(order, [...order].sort((a, b) => a - b));
      }
      assert.deepEqual([...shown].sort((a, b) => a - b), list.map((r) => r.seq));
    }),
    { numRuns: 300 },
  );
});
