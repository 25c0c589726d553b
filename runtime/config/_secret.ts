/**
 * A secret value (an API key, the Discord bot token) that no printed form shows.
 *
 * @module
 */

/**
 * A secret (an API key from the configuration file, the Discord bot token), kept out of every
 * printed form.
 *
 * `JSON.stringify`, `String()` and `Deno.inspect` all show `[redacted]`; only
 * {@linkcode Secret.reveal} returns the value, and only the provider and the Discord transport
 * call it.
 */
export class Secret {
  readonly #value: string;
  /** Wraps a secret string. */
  constructor(value: string) {
    this.#value = value;
  }
  /** Returns the secret itself; never log the result. */
  reveal(): string {
    return this.#value;
  }
  /** Returns `[redacted]`, so serialising a config never writes the key. */
  toJSON(): string {
    return "[redacted]";
  }
  /** Returns `[redacted]`. */
  toString(): string {
    return "[redacted]";
  }
  /** Shows `[redacted]` in `console.log` and `Deno.inspect`. */
  [Symbol.for("Deno.customInspect")](): string {
    return "[redacted]";
  }
}
