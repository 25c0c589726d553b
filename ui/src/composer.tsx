/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The composer: Enter sends, Shift+Enter starts a new line; "Attach files" adds files, each
 * uploaded (and kept by the daemon) when the message is sent, before it is queued. Beside it,
 * the last message's acknowledgement and later disposition.
 *
 * @module
 */

import type { JSX } from "preact";
import { useRef, useState } from "preact/hooks";
import { type InputAttachment, MAX_ATTACHMENTS } from "../../runtime/core/mod.ts";
import { FileWord } from "./attachment_list.tsx";
import { uploadAttachment } from "./attachments.ts";
import { byteSize } from "./format.ts";
import { inputMethodKey } from "./shortcuts.tsx";

/** Longest input the daemon accepts, in characters. */
export const MAX_INPUT_CHARS = 1_000_000;

/** Props of {@linkcode Composer}. */
export interface ComposerProps {
  /** Queues one message with the files already uploaded; returns its `client_msg_id`. */
  onSend: (text: string, attachments: InputAttachment[]) => string;
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
  const [files, setFiles] = useState<File[]>([]);
  const [uploading, setUploading] = useState(false);
  const area = useRef<HTMLTextAreaElement>(null);
  const picker = useRef<HTMLInputElement>(null);

  const send = async () => {
    if (uploading) return;
    const value = area.current?.value ?? text;
    if (value.trim() === "" && files.length === 0) {
      setProblem("Write something or attach a file first.");
      return;
    }
    if (value.length > MAX_INPUT_CHARS) {
      setProblem(`Too long: ${value.length} characters, at most ${MAX_INPUT_CHARS}.`);
      return;
    }
    let attachments: InputAttachment[] = [];
    if (files.length > 0) {
      // Uploaded first: the message is queued only once the daemon keeps every file it names.
      setUploading(true);
      setProblem(`Uploading ${files.length} file${files.length === 1 ? "" : "s"}…`);
      try {
        attachments = await Promise.all(files.map(uploadAttachment));
      } catch (error) {
        setProblem(`Not sent: ${error instanceof Error ? error.message : error}`);
        return;
      } finally {
        setUploading(false);
      }
    }
    setProblem(undefined);
    setLast(props.onSend(value, attachments));
    setFiles([]);
    // Only the sent text leaves the box: what was typed during an upload is the next message.
    const now = area.current?.value ?? value;
    const left = now.startsWith(value) ? now.slice(value.length) : now;
    setText(left);
    if (area.current) area.current.value = left;
  };

  const addFiles = (event: Event) => {
    const input = event.currentTarget as HTMLInputElement;
    const chosen = [...(input.files ?? [])];
    setFiles((held) => [...held, ...chosen].slice(0, MAX_ATTACHMENTS));
    setProblem(
      files.length + chosen.length > MAX_ATTACHMENTS
        ? `At most ${MAX_ATTACHMENTS} files a message.`
        : undefined,
    );
    input.value = "";
  };

  const onKeyDown = (event: KeyboardEvent) => {
    // While an input method composes, Enter confirms the composition, not the message.
    if (event.key === "Enter" && !event.shiftKey && !inputMethodKey(event)) {
      event.preventDefault();
      void send();
    }
  };

  const status = last === undefined ? undefined : props.statusOf(last);
  return (
    <form
      class="composer"
      onSubmit={(event) => {
        event.preventDefault();
        void send();
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
      {files.length > 0 && (
        <ul class="composer-files" aria-label="Files to send">
          {files.map((file, i) => (
            <li key={`${file.name}-${i}`}>
              <FileWord /> {file.name} · {byteSize(file.size)}
              <button
                type="button"
                class="link-button"
                aria-label={`Remove ${file.name}`}
                disabled={uploading}
                onClick={() => {
                  setFiles((held) => held.filter((_, j) => j !== i));
                  setProblem(undefined);
                }}
              >
                remove
              </button>
            </li>
          ))}
        </ul>
      )}
      <input
        ref={picker}
        id="composer-files"
        type="file"
        aria-label="Files to attach"
        multiple
        hidden
        onChange={addFiles}
      />
      <div class="composer-row">
        <span id="composer-hint" class="hint">
          Enter sends · Shift+Enter adds a line{props.online
            ? ""
            : " · offline: sends on reconnect"}
        </span>
        <span class="composer-buttons">
          <button type="button" onClick={() => picker.current?.click()} disabled={uploading}>
            Attach files
          </button>
          <button type="submit" class="primary" disabled={uploading}>Send</button>
        </span>
      </div>
      <p id="composer-status" class="composer-status" role="status" aria-live="polite">
        {problem ?? (status === undefined ? "" : `Last message: ${status}`)}
      </p>
    </form>
  );
}
