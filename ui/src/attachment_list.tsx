/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The files a message carries, under its text: each a button that opens the kept file in the
 * artifact viewer; one Discord did not let klbr keep is named with the reason.
 *
 * @module
 */

import type { JSX } from "preact";
import type { ArtifactTarget } from "./artifact_viewer.tsx";
import { byteSize } from "./format.ts";

/** Props of {@linkcode AttachmentList}. */
export interface AttachmentListProps {
  files: readonly {
    filename: string;
    size?: number | undefined;
    artifact?: string | null;
    skipped?: string | null;
  }[];
  /** Opens a kept file in the viewer; without it the names are shown alone (a message not yet recorded). */
  onOpen?: (target: ArtifactTarget) => void;
}

/** The list of a message's files; nothing when it has none. */
export function AttachmentList({ files, onOpen }: AttachmentListProps): JSX.Element | null {
  if (files.length === 0) return null;
  return (
    <ul class="attachments" aria-label="Attached files">
      {files.map((file, i) => (
        <AttachmentItem key={file.artifact ?? i} file={file} onOpen={onOpen} />
      ))}
    </ul>
  );
}

/** What marks a file in a message: a word, since an emoji needs a font the system may lack. */
export function FileWord(): JSX.Element {
  return <span class="file-word">file</span>;
}

function AttachmentItem(
  { file, onOpen }: {
    file: AttachmentListProps["files"][number];
    onOpen: AttachmentListProps["onOpen"];
  },
): JSX.Element {
  const size = file.size === undefined ? "" : ` · ${byteSize(file.size)}`;
  const artifact = file.artifact;
  if (artifact === null || artifact === undefined) {
    return (
      <li class="attachment">
        <FileWord /> {file.filename}
        {file.skipped ? <span class="note">· not kept: {file.skipped}</span> : size}
      </li>
    );
  }
  if (onOpen === undefined) {
    return (
      <li class="attachment" title={artifact}>
        <FileWord /> {file.filename}
        {size}
      </li>
    );
  }
  return (
    <li class="attachment">
      <FileWord />{" "}
      <button
        type="button"
        class="link-button"
        title={`artifact ${artifact}`}
        onClick={() =>
          onOpen({ id: artifact, bytes: file.size, label: `attachment ${file.filename}` })}
      >
        {file.filename}
      </button>
      {size}
    </li>
  );
}
