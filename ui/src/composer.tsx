/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The composer: Enter sends, Shift+Enter starts a new line. Beside it, the last message's
 * acknowledgement and later disposition.
 *
 * @module
 */

import type { JSX } from "preact";
import { useRef, useState } from "preact/hooks";

/** Longest input the daemon accepts, in characters. */
export const MAX_INPUT_CHARS = 1_000_000;

/** Props of {@linkcode Composer}. */
export interface ComposerProps {
  /** Queues one message; returns its `client_msg_id`. */
  onSend: (text: string) => string;
  /** Words for where a message this page sent stands. */
  statusOf: (clientMsgId: string) => string;
  /** Whether the socket is open now (messages wait in the outbox otherwise). */
  online: boolean;
}

/** The message box of the conversation lane. */
export function Composer(props: ComposerProps): JSX.Element {
  const [text, setText] = useState("");
  const [last, setLast] = useState<string | undefined>(undefined);
  const [problem, setProblem] = useState<string | undefined>(undefined);
  const area = useRef<HTMLTextAreaElement>(null);

  const send = () => {
    const value = area.current?.value ?? text;
    if (value.trim() === "") {
      setProblem("Write something first.");
      return;
    }
    if (value.length > MAX_INPUT_CHARS) {
      setProblem(`Too long: ${value.length} characters, at most ${MAX_INPUT_CHARS}.`);
      return;
    }
    setProblem(undefined);
    setLast(props.onSend(value));
    setText("");
    if (area.current) area.current.value = "";
  };

  const onKeyDown = (event: KeyboardEvent) => {
    // While an input method composes, Enter confirms the composition, not the message.
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  };

  const status = last === undefined ? undefined : props.statusOf(last);
  return (
    <form
      class="composer"
      onSubmit={(event) => {
        event.preventDefault();
        send();
      }}
    >
      <label for="composer-input">Message to the agent</label>
      <textarea
        id="composer-input"
        ref={area}
        rows={3}
        value={text}
        onInput={(event) => setText((event.currentTarget as HTMLTextAreaElement).value)}
        onKeyDown={onKeyDown}
        aria-describedby="composer-hint composer-status"
        aria-invalid={problem !== undefined}
        placeholder="Write a message…"
      />
      <div class="composer-row">
        <span id="composer-hint" class="hint">
          Enter sends · Shift+Enter adds a line{props.online
            ? ""
            : " · offline: sends on reconnect"}
        </span>
        <button type="submit" class="primary">Send</button>
      </div>
      <p id="composer-status" class="composer-status" role="status" aria-live="polite">
        {problem ?? (status === undefined ? "" : `Last message: ${status}`)}
      </p>
    </form>
  );
}
