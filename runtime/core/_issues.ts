/**
 * Schema helpers shared by the envelopes: zod issues rendered as "field: problem", and the
 * well-formed string every identifier is.
 *
 * @module
 */

import * as z from "zod";

/** Renders zod issues as "field: problem; field: problem". */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((issue) => describeIssue(issue, [])).join("; ");
}

/**
 * One issue as "field: problem". A failed union names the problems of its last branch, by
 * convention the main one (`since` is `"head"` or a number: a bad number says what is wrong
 * with it, not merely "Invalid input").
 */
function describeIssue(issue: z.core.$ZodIssue, prefix: PropertyKey[]): string {
  const path = [...prefix, ...issue.path];
  if (issue.code === "invalid_union" && (issue.errors.at(-1)?.length ?? 0) > 0) {
    return issue.errors.at(-1)!.map((inner) => describeIssue(inner, path)).join("; ");
  }
  return `${path.length ? path.map(String).join(".") : "(root)"}: ${issue.message}`;
}

/**
 * A string that is well-formed Unicode: a lone surrogate (`"\ud800"`) would be replaced by
 * U+FFFD on its way into SQLite, so two different identifiers could become one key.
 */
export function wellFormed(min: number, max: number) {
  return z.string().min(min).max(max).refine(
    (value) => value.isWellFormed(),
    "expected well-formed Unicode (a lone surrogate is not)",
  );
}
