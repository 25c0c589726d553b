/**
 * A native lane client's credentials for connection tests without a daemon: no cookie, the token
 * checked at hello against {@linkcode TOKEN}.
 *
 * @module
 */

import { type LaneAuth, OperatorAuth } from "../../../runtime/lanes/mod.ts";

/** The operator token the tests' `hello` carries. */
export const TOKEN = "a".repeat(64);

/** No cookie; the token is checked at hello; rotation does nothing. */
export const AUTH: LaneAuth = {
  cookie: "absent",
  viewWithoutToken: false,
  checkToken: (token) =>
    new OperatorAuth({ stateDir: "/nonexistent", token: TOKEN, sessionKey: TOKEN }).checkToken(
      token,
    ),
  rotate: () => Promise.resolve(),
};
