// The backups the daemon takes by itself, on a real daemon: with `backup { every keep }` one at
// start (the newest is older than `every`), verified, and the scheduled ones beyond `keep`
// removed. In-process: a store of an older schema is backed up before it migrates, and the log
// names the backup. The `backup` node's own errors are checked on the parser.

import assert from "node:assert/strict";
import { join } from "node:path";
import { parseConfig } from "../../../runtime/config/mod.ts";
import {
  backupBeforeMigration,
  restoreState,
  startBackupSchedule,
} from "../../../runtime/backup/mod.ts";
import { createLogger } from "../../../runtime/core/mod.ts";
import { schemaVersionOnDisk } from "../../../store/maintenance/backup.ts";
import { DatabaseSync } from "node:sqlite";
import { LATEST_VERSION, MIGRATIONS } from "../../../store/schema/migrations.ts";
import { openStore } from "../../../store/store.ts";
import { startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { tempDir } from "../../_helpers/temp.ts";

/** Resolves with the log's first line matching `pattern`, looking for 30 s at most. */
async function logLine(daemon: TestDaemon, pattern: RegExp): Promise<string> {
  for (let i = 0; i < 1500; i++) {
    const line = daemon.logs().split("\n").find((l) => pattern.test(l));
    if (line !== undefined) return line;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`no log line matches ${pattern}:\n${daemon.logs()}`);
}

async function names(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(dir)) out.push(entry.name);
  return out.sort();
}

Deno.test("a daemon with backup { every keep } takes a verified backup at start and keeps the newest keep", async () => {
  const state = join(await tempDir(), "state");
  const dir = join(state, "backups");
  // Three scheduled backups of long ago, and one taken before a migration (never pruned).
  const old = ["klbr-20200101T000000Z", "klbr-20200102T000000Z", "klbr-20200103T000000Z"];
  for (const name of [...old, "klbr-20200101T000000Z-before-schema-3"]) {
    await Deno.mkdir(join(dir, name), { recursive: true });
  }
  const daemon = await startTestDaemon({
    stateDir: state,
    extraConfig: `backup { every "24h"; keep 2; }\n`,
  });
  try {
    assert.match(
      await logLine(daemon, / backup\.schedule /),
      new RegExp(
        `INFO {2}backup\\.schedule backups every 24h into ${dir}, keeping 2; the next at `,
      ),
    );
    const done = await logLine(daemon, / backup\.done /);
    const path = /backed up and verified into (\S+):/.exec(done)?.[1];
    assert.ok(path?.startsWith(`${dir}/klbr-`), done);
    assert.match(
      await logLine(daemon, / backup\.pruned /),
      new RegExp(`removed 2 old backup\\(s\\) of ${dir}, keeping the newest 2 `),
    );
    assert.deepEqual(
      await names(dir),
      [
        "klbr-20200101T000000Z-before-schema-3",
        "klbr-20200103T000000Z",
        path!.slice(dir.length + 1),
      ].sort(),
    );
    // It is a whole backup: a restore verifies it again and lays it out.
    const restored = join(await tempDir(), "restored");
    const report = await restoreState(path!, restored);
    assert.equal(report.manifest.format, "klbr-backup");
  } finally {
    await daemon.stop();
  }
});

Deno.test("a schedule of every 30d takes no backup before the 30 days are up (past the 24.8 days one host timer holds)", async () => {
  const state = join(await tempDir(), "state");
  openStore(state).close();
  const dir = join(state, "backups");
  // The newest scheduled backup was taken this second: the next is due in 30 days.
  const stamp = new Date().toISOString().replace(/\.\d{3}Z$/, "Z").replaceAll(/[-:]/g, "");
  await Deno.mkdir(join(dir, `klbr-${stamp}`), { recursive: true });
  const { config } = parseConfig(`backup { every "30d"; keep 2; }`, { file: "x.kdl" });
  const lines: string[] = [];
  let scheduled: () => void = () => {};
  const armed = new Promise<void>((resolve) => scheduled = resolve);
  const log = createLogger({
    write: (line: string) => {
      lines.push(line);
      if (/ backup\.schedule /.test(line)) scheduled();
    },
  });
  const schedule = startBackupSchedule({ stateDir: state, config: config.backup, log });
  try {
    await armed;
    // Nothing announces a backup that is not taken: give a wrongly armed timer (setTimeout
    // fires a delay past 2^31-1 ms at once) time to start one.
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(lines.filter((l) => !/ backup\.schedule /.test(l)), []);
    assert.deepEqual(await names(dir), [`klbr-${stamp}`]);
  } finally {
    await schedule?.stop();
  }
});

/** A state directory whose store a build of schema version 1 wrote (migration 1 only). */
async function versionOneState(): Promise<string> {
  const state = join(await tempDir(), "state");
  await Deno.mkdir(state);
  const db = new DatabaseSync(join(state, "runtime.sqlite"));
  db.exec("PRAGMA journal_mode = WAL");
  db.exec(MIGRATIONS[0].sql);
  db.exec("PRAGMA user_version = 1");
  db.close();
  return state;
}

Deno.test("a store of an older schema is backed up, verified and named in the log before it migrates", async () => {
  const state = await versionOneState();
  assert.equal(schemaVersionOnDisk(join(state, "runtime.sqlite")), 1);
  const outside = join(await tempDir(), "backups");
  const config = parseConfig(`backup { dir "${outside}"; }`, { file: "x.kdl" }).config.backup;
  const lines: string[] = [];
  const log = createLogger({ write: (line: string) => lines.push(line) });
  const clock = () => Date.UTC(2026, 11, 3, 12, 0, 0);

  const path = await backupBeforeMigration({ stateDir: state, config, log, clock });
  assert.equal(path, join(outside, `klbr-20261203T120000Z-before-schema-${LATEST_VERSION}`));
  assert.equal(lines.length, 1);
  assert.match(
    lines[0],
    new RegExp(
      `INFO {2}store\\.backup_before_migration store schema 1 is older than ${LATEST_VERSION}: backed up and verified into ${path}; migrating now \\(from=1 to=${LATEST_VERSION} `,
    ),
  );
  // The backup holds the store as it was, and is whole: a restore verifies it again.
  assert.equal(schemaVersionOnDisk(join(path!, "runtime.sqlite")), 1);
  const report = await restoreState(path!, join(await tempDir(), "restored"));
  assert.equal(report.manifest.format, "klbr-backup");

  // Once migrated, the store is at this build's schema: nothing to migrate, no backup.
  openStore(state).close();
  assert.equal(schemaVersionOnDisk(join(state, "runtime.sqlite")), LATEST_VERSION);
  assert.equal(await backupBeforeMigration({ stateDir: state, config, log, clock }), undefined);
  assert.deepEqual(await names(outside), [`klbr-20261203T120000Z-before-schema-${LATEST_VERSION}`]);
});

Deno.test("the backup node refuses a bad duration, keep or dir, naming the line", () => {
  const cases: [string, RegExp][] = [
    [`backup { every "2w"; }`, /x\.kdl:1: backup every: expected a duration from "1m" to "365d"/],
    [`backup { every "0h"; }`, /backup every: expected a duration from "1m" to "365d"/],
    [`backup { keep 0; }`, /x\.kdl:1: backup keep: expected at least 1 \(got 0\)/],
    [`backup { dir "backups"; }`, /backup dir: expected an absolute path \(got "backups"\)/],
    [
      `backup {\n  often 1\n}`,
      /x\.kdl:2: backup often: unknown field, expected one of every, keep, dir/,
    ],
  ];
  for (const [text, pattern] of cases) {
    assert.throws(() => parseConfig(text, { file: "x.kdl" }), pattern);
  }
  assert.deepEqual(parseConfig(`backup { every "30m"; }`, { file: "x.kdl" }).config.backup, {
    every: 1_800_000,
    keep: 7,
  });
  assert.deepEqual(parseConfig("", { file: "x.kdl" }).config.backup, { keep: 7 });
});
