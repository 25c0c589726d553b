import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AFTER_TOOLS,
  MISSING_RESULT,
  nineCharId,
  objectArguments,
  shapeMessages,
  TEXT_RESULT_HEADER,
  toolArguments,
} from "../../../runtime/context/mod.ts";

const NATIVE = { toolMode: "native", strictRoles: false, reasoning: "echo" } as const;
const call = (id: string, args: string) => ({
  id,
  type: "function",
  function: { name: "python", arguments: args },
});
const result = (id: string, content: string) => ({ role: "tool", tool_call_id: id, content });

Deno.test("`objectArguments()` keeps a JSON object and sends `{}` for anything else", () => {
  assert.equal(objectArguments('{"code":"1"}'), '{"code":"1"}');
  assert.equal(objectArguments('{"code":"1'), "{}");
  assert.equal(objectArguments("[1]"), "{}");
  assert.equal(objectArguments("null"), "{}");
  assert.equal(objectArguments("print(1)"), "{}");
  assert.equal(objectArguments(undefined), "{}");
  // Raw newlines in its strings (a small model's code): the object, re-encoded.
  assert.equal(objectArguments('{"code": "a = 1\nprint(a)"}'), '{"code":"a = 1\\nprint(a)"}');
});

Deno.test("`toolArguments()` reads arguments whose strings hold raw control characters, and only those", () => {
  // Raw newline and tab inside the string; newlines between tokens stay whitespace.
  assert.deepEqual(toolArguments('{\n  "code": "for i in x:\n\tprint(\\"a\\")"\n}'), {
    code: 'for i in x:\n\tprint("a")',
  });
  // An escaped quote does not end the string; an escaped backslash before a quote does.
  assert.deepEqual(toolArguments('{"code": "s = \\"a\nb\\""}'), { code: 's = "a\nb"' });
  assert.deepEqual(toolArguments('{"code": "p = \\\\", "n": "x\ny"}'), {
    code: "p = \\",
    n: "x\ny",
  });
  assert.equal(toolArguments('{"code": "unterminated\n'), undefined);
  assert.equal(toolArguments("print(1)"), undefined);
});

Deno.test("`shapeMessages()` answers every call once, in order, right after its message", () => {
  const shaped = shapeMessages([
    { role: "system", content: "s" },
    result("orphan", "no call before it"),
    { role: "user", content: "go" },
    {
      role: "assistant",
      content: null,
      tool_calls: [call("a", '{"code":"1'), call("b", '{"code":"2"}'), call("a", "{}")],
    },
    result("b", "two"),
    result("b", "two again"),
    { role: "user", content: "next" },
    // Recovery closed `a` at the end of the sequence.
    result("a", "[interrupted]"),
  ], NATIVE);
  assert.deepEqual(shaped, [
    { role: "system", content: "s" },
    { role: "user", content: "go" },
    { role: "assistant", content: null, tool_calls: [call("a", "{}"), call("b", '{"code":"2"}')] },
    result("a", "[interrupted]"),
    result("b", "two"),
    { role: "user", content: "next" },
  ]);
  const missing = shapeMessages([
    { role: "assistant", content: "x", tool_calls: [call("c", "{}")] },
    { role: "assistant", content: null },
  ], NATIVE);
  assert.deepEqual(missing, [
    { role: "assistant", content: "x", tool_calls: [call("c", "{}")] },
    result("c", MISSING_RESULT),
    { role: "assistant", content: "" },
  ]);
});

Deno.test("`shapeMessages()` on a strict route puts an assistant message between tool and user, joins users and shortens ids", () => {
  const shaped = shapeMessages([
    { role: "user", content: "one" },
    { role: "user", content: "two" },
    { role: "assistant", content: null, tool_calls: [call("call_01JX", '{"code":"1"}')] },
    result("call_01JX", "1"),
    { role: "user", content: "three" },
  ], { ...NATIVE, strictRoles: true });
  const id = nineCharId("call_01JX");
  assert.match(id, /^[A-Za-z0-9]{9}$/);
  assert.deepEqual(shaped, [
    { role: "user", content: "one\n\ntwo" },
    { role: "assistant", content: null, tool_calls: [call(id, '{"code":"1"}')] },
    result(id, "1"),
    { role: "assistant", content: AFTER_TOOLS },
    { role: "user", content: "three" },
  ]);
});

Deno.test("`nineCharId()` is stable, nine letters and digits, and does not collide on a sample", () => {
  fc.assert(fc.property(fc.string({ minLength: 1, maxLength: 40 }), (id) => {
    const short = nineCharId(id);
    return /^[A-Za-z0-9]{9}$/.test(short) && nineCharId(id) === short;
  }));
  const ids = Array.from({ length: 20_000 }, (_, i) => nineCharId(`call_${i}`));
  assert.equal(new Set(ids).size, ids.length);
});

Deno.test("`shapeMessages()` in text mode turns calls into fences and results into runtime user messages", () => {
  const shaped = shapeMessages([
    { role: "user", content: "go" },
    // A text-mode reply: its text already holds the cell.
    {
      role: "assistant",
      content: "Looking.\n```python\nprint(1)\n```",
      tool_calls: [call("a", '{"code":"print(1)"}')],
    },
    result("a", "stdout: 1"),
    // A native call from before the route moved to text mode.
    { role: "assistant", content: null, tool_calls: [call("b", '{"code":"x = 2"}')] },
    result("b", "ok"),
  ], { ...NATIVE, toolMode: "text" });
  assert.deepEqual(shaped, [
    { role: "user", content: "go" },
    { role: "assistant", content: "Looking.\n```python\nprint(1)\n```" },
    { role: "user", content: `${TEXT_RESULT_HEADER}:\nstdout: 1` },
    { role: "assistant", content: "```python\nx = 2\n```" },
    { role: "user", content: `${TEXT_RESULT_HEADER}:\nok` },
  ]);
});

Deno.test('`shapeMessages()` drops reasoning on a `reasoning "drop"` route and keeps it otherwise', () => {
  const messages = [{
    role: "assistant",
    content: null,
    reasoning_content: "think",
    tool_calls: [call("a", "{}")],
  }, result("a", "ok")];
  assert.equal(shapeMessages(messages, NATIVE)[0].reasoning_content, "think");
  assert.equal(
    "reasoning_content" in shapeMessages(messages, { ...NATIVE, reasoning: "drop" })[0],
    false,
  );
});
