/**
 * One small real source file per language, with the symbols its outline must name, a symbol to
 * patch, a replacement that parses, one that does not, and an unrelated edit that shifts the
 * file.
 *
 * @module
 */

/** One language's fixture. */
export interface LanguageFixture {
  file: string;
  text: string;
  /** `<kind> <qualified name>` of every symbol, in source order. */
  symbols: string[];
  /** The qualified name of the symbol to patch (and its kind, when the name is shared). */
  target: { name: string; kind?: string };
  /** A replacement of the whole definition that parses. */
  good: string;
  /** A replacement that adds a syntax error; null where the grammar has none to add. */
  bad: string | null;
  /** Turns the text into a version shifted by an edit elsewhere in the file. */
  shift: (text: string) => string;
}

const prepend = (line: string) => (text: string) => line + text;

/** Every language's fixture, by id. */
export const FIXTURES: Record<string, LanguageFixture> = {
  python: {
    file: "geometry/shapes.py",
    text: [
      "import math",
      "",
      "",
      "class Shape:",
      '    """A shape."""',
      "",
      "    sides = 0",
      "",
      "    @property",
      "    def area(self):",
      "        return 0",
      "",
      "",
      "def circle_area(r):",
      "    return math.pi * r * r",
      "",
    ].join("\n"),
    symbols: ["class Shape", "field Shape.sides", "method Shape.area", "function circle_area"],
    target: { name: "circle_area" },
    good: "def circle_area(r):\n    return math.pi * r ** 2",
    bad: "def circle_area(r):\n    return math.pi * (r",
    shift: prepend("# geometry helpers\n"),
  },
  typescript: {
    file: "src/vec.ts",
    text: [
      "export interface Point {",
      "  x: number;",
      "  y: number;",
      "}",
      "",
      "export class Vec {",
      "  constructor(public p: Point) {}",
      "  length(): number {",
      "    return Math.hypot(this.p.x, this.p.y);",
      "  }",
      "}",
      "",
      "export function origin(): Point {",
      "  return { x: 0, y: 0 };",
      "}",
      "",
      "export type Pair = [Point, Point];",
      "",
    ].join("\n"),
    symbols: [
      "interface Point",
      "class Vec",
      "method Vec.constructor",
      "method Vec.length",
      "function origin",
      "type Pair",
    ],
    target: { name: "Vec.length" },
    good: "length(): number {\n    return Math.sqrt(this.p.x ** 2 + this.p.y ** 2);\n  }",
    bad: "length(): number {\n    return Math.sqrt(;\n  }",
    shift: prepend("// vectors\n"),
  },
  tsx: {
    file: "ui/hello.tsx",
    text: [
      "export function Hello({ name }: { name: string }) {",
      "  return <p>Hello {name}</p>;",
      "}",
      "",
      "export const Shout = (props: { text: string }) => <b>{props.text}</b>;",
      "",
    ].join("\n"),
    symbols: ["function Hello", "function Shout"],
    target: { name: "Hello" },
    good: "export function Hello({ name }: { name: string }) {\n  return <p>Hi {name}</p>;\n}",
    bad: "export function Hello({ name }: { name: string }) {\n  return <p>Hi {name</p>;\n}",
    shift: prepend("// greetings\n"),
  },
  javascript: {
    file: "lib/counter.js",
    text: [
      "class Counter {",
      "  constructor() {",
      "    this.n = 0;",
      "  }",
      "  increment() {",
      "    this.n += 1;",
      "    return this.n;",
      "  }",
      "}",
      "",
      "function makeCounter() {",
      "  return new Counter();",
      "}",
      "",
      "module.exports = { Counter, makeCounter };",
      "",
    ].join("\n"),
    symbols: [
      "class Counter",
      "method Counter.constructor",
      "method Counter.increment",
      "function makeCounter",
    ],
    target: { name: "makeCounter" },
    good:
      "function makeCounter(start = 0) {\n  const c = new Counter();\n  c.n = start;\n  return c;\n}",
    bad: "function makeCounter() {\n  return new Counter(;\n}",
    shift: prepend("// counters\n"),
  },
  rust: {
    file: "src/stack.rs",
    text: [
      "pub struct Stack {",
      "    items: Vec<i32>,",
      "}",
      "",
      "impl Stack {",
      "    pub fn new() -> Self {",
      "        Stack { items: Vec::new() }",
      "    }",
      "",
      "    pub fn push(&mut self, x: i32) {",
      "        self.items.push(x);",
      "    }",
      "}",
      "",
      "#[cfg(test)]",
      "mod tests {",
      "    #[test]",
      "    fn pushes() {}",
      "}",
      "",
    ].join("\n"),
    symbols: [
      "struct Stack",
      "impl Stack",
      "method Stack.new",
      "method Stack.push",
      "module tests",
      "function tests.pushes",
    ],
    target: { name: "Stack.push" },
    good: "pub fn push(&mut self, x: i32) {\n        self.items.insert(0, x);\n    }",
    bad: "pub fn push(&mut self, x: i32) {\n        self.items.push(x;\n    }",
    shift: prepend("// a stack\n"),
  },
  go: {
    file: "stack/stack.go",
    text: [
      "package stack",
      "",
      "type Stack struct {",
      "\titems []int",
      "}",
      "",
      "func (s *Stack) Push(x int) {",
      "\ts.items = append(s.items, x)",
      "}",
      "",
      "func New() *Stack {",
      "\treturn &Stack{}",
      "}",
      "",
    ].join("\n"),
    symbols: ["struct Stack", "method Stack.Push", "function New"],
    target: { name: "Stack.Push" },
    good: "func (s *Stack) Push(x int) {\n\ts.items = append([]int{x}, s.items...)\n}",
    bad: "func (s *Stack) Push(x int) {\n\ts.items = append(s.items, x\n}",
    shift: prepend("// Package stack is a stack.\n"),
  },
  json: {
    file: "config/package.json",
    text: [
      "{",
      '  "name": "demo",',
      '  "scripts": {',
      '    "test": "deno test",',
      '    "build": "deno bundle"',
      "  }",
      "}",
      "",
    ].join("\n"),
    symbols: ["key name", "key scripts", "key scripts.test", "key scripts.build"],
    target: { name: "scripts.test" },
    good: '"test": "deno test --allow-read"',
    bad: '"test": "deno test',
    shift: (text) => text.replace("{\n", '{\n  "version": 1,\n'),
  },
  markdown: {
    file: "docs/guide.md",
    text: [
      "# Guide",
      "",
      "Intro.",
      "",
      "## Install",
      "",
      "Run `deno task init`.",
      "",
      "## Usage",
      "",
      "Use it.",
      "",
    ].join("\n"),
    symbols: ["heading Guide", "heading Guide.Install", "heading Guide.Usage"],
    target: { name: "Guide.Install" },
    good: "## Install\n\nRun `deno task init`, then `deno task serve`.\n\n",
    // Markdown's grammar reads any text: there is no syntax error to introduce.
    bad: null,
    shift: prepend("Preface.\n\n"),
  },
};
