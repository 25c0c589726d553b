import assert from "node:assert/strict";
import { fencedCells } from "../../../runtime/session/mod.ts";

Deno.test("`fencedCells()` runs the first complete python fence and counts the rest", () => {
  assert.deepEqual(fencedCells("Let me look.\n```python\nprint(1)\n```\nthen\n```py\nx\n```"), {
    code: "print(1)",
    ignored: 1,
    unclosed: false,
  });
  assert.deepEqual(fencedCells("~~~~ Python3 title\na\n```\nb\n~~~~\n"), {
    code: "a\n```\nb",
    ignored: 0,
    unclosed: false,
  });
});

Deno.test("`fencedCells()` leaves other languages, untagged and unclosed fences unrun", () => {
  assert.deepEqual(fencedCells("```\nprint(1)\n```\n```sh\nls\n```"), {
    code: null,
    ignored: 0,
    unclosed: false,
  });
  assert.deepEqual(fencedCells("```python\nprint(1)\n"), {
    code: null,
    ignored: 0,
    unclosed: true,
  });
  assert.deepEqual(fencedCells("no code at all"), { code: null, ignored: 0, unclosed: false });
  // A python fence inside a longer fence of another language is that fence's text.
  assert.deepEqual(fencedCells("````md\n```python\nx\n```\n````"), {
    code: null,
    ignored: 0,
    unclosed: false,
  });
});
