import assert from "node:assert/strict";
import { fencedCells, leakedCall } from "../../../runtime/session/mod.ts";

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

Deno.test("`fencedCells()` takes the opening fence's indentation off each line of a fence in a list item, as CommonMark does", () => {
  // Models put a cell under a numbered step; kept indented, the code would not compile.
  const reply = "Plan:\n1. Count:\n   ```python\n   n = 1\n   if n:\n       print(n)\n\n   ```\n";
  assert.deepEqual(fencedCells(reply), {
    code: "n = 1\nif n:\n    print(n)\n",
    ignored: 0,
    unclosed: false,
  });
  // At most the fence's own indentation comes off; a line indented less loses what it has.
  assert.equal(fencedCells("  ```py\n x\n    y\nz\n  ```").code, "x\n  y\nz");
});

Deno.test("`leakedCall()` reads a python call a server's tool parser left in the text, in each format servers leak", () => {
  const code = 'await local.send("hi")\nwait()';
  const json = JSON.stringify({ name: "python", arguments: { code } });
  // Hermes / Qwen 2.5: a <tool_call> block around the JSON call (vllm-project/vllm#17161).
  assert.equal(leakedCall(`Let me answer.\n<tool_call>\n${json}\n</tool_call>`), code);
  // Arguments as a JSON string, as the OpenAI wire has them.
  const stringArgs = JSON.stringify({ name: "python", arguments: JSON.stringify({ code }) });
  assert.equal(leakedCall(`<tool_call>${stringArgs}</tool_call>`), code);
  // Qwen3-Coder's XML (vllm-project/vllm#21571).
  assert.equal(
    leakedCall(
      `<tool_call>\n<function=python>\n<parameter=code>\n${code}\n</parameter>\n</function>\n</tool_call>`,
    ),
    code,
  );
  // A reply that is only the call, in Llama 3.2's shape (vllm-project/vllm#11786).
  const llama = { type: "function", function: { name: "python", parameters: { code } } };
  assert.equal(leakedCall(` ${JSON.stringify(llama)}\n`), code);
  // The leaked JSON with the code's newlines raw, as small models write it.
  assert.equal(
    leakedCall(
      '<tool_call>{"name": "python", "arguments": {"code": "a = 1\nprint(a)"}}</tool_call>',
    ),
    "a = 1\nprint(a)",
  );
  // Not calls of the python tool, or not calls at all: text.
  assert.equal(leakedCall(JSON.stringify({ name: "search", arguments: { q: "x" } })), null);
  assert.equal(leakedCall('The answer is {"name": "python"} as JSON.'), null);
  assert.equal(leakedCall("<tool_call>not json</tool_call>"), null);
  assert.equal(leakedCall("plain words"), null);
});

Deno.test("a cell drafted in `<think>` tags left in the text does not run; the one after the thinking does", () => {
  const drafted =
    "<think>\nI could run\n```python\nimport shutil; shutil.rmtree('/')\n```\nno.\n</think>";
  assert.deepEqual(fencedCells(`${drafted}\n\`\`\`python\nprint(1)\n\`\`\``), {
    code: "print(1)",
    ignored: 0,
    unclosed: false,
  });
  // A DeepSeek-R1 distill: the opening tag was in the prompt; only the closing one comes.
  assert.equal(fencedCells("```python\nx = 1\n```\n</think>\nThe answer.").code, null);
  // Still thinking (cut by the token limit): nothing runs.
  assert.equal(fencedCells("<think>\n```python\nx = 1\n```\n").code, null);
  // A leaked call inside the thinking does not run either.
  const call = JSON.stringify({ name: "python", arguments: { code: "x = 1" } });
  assert.equal(leakedCall(`<think><tool_call>${call}</tool_call></think>done`), null);
  // Tags the model writes about, inside its answer, change nothing.
  assert.equal(fencedCells("Use <think> tags.\n```python\nx = 2\n```").code, "x = 2");
});
