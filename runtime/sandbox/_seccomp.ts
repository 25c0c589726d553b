/**
 * The seccomp filter every confined process runs under: a classic BPF program, built here
 * byte by byte and handed to bubblewrap (`--seccomp FD`), that refuses the system calls a
 * process in a sandbox has no business making — file handles (`open_by_handle_at`, the way out
 * of a bind mount), the kernel keyring, `ptrace`, `bpf`, mounts and namespaces, modules,
 * `kexec`, `perf_event_open`, `userfaultfd`, cross-process memory access, swap, reboot,
 * accounting, quotas and port I/O — with `EPERM`, and `clone3` and `openat2` with `ENOSYS`
 * (their flags and mode sit in memory a filter cannot read; glibc falls back to `clone` and
 * `openat`, whose arguments are checked).
 *
 * Some calls are refused by their arguments: `clone` with a namespace flag, and — as systemd's
 * `RestrictSUIDSGID=` does — every call that sets a mode (`chmod`, `fchmod`, `fchmodat`,
 * `fchmodat2`, `mkdir`, `mkdirat`, `mknod`, `mknodat`, `creat`, and `open`/`openat` when they
 * create) with `S_ISUID` or `S_ISGID` in it: as root, uid 1000 inside is uid 0 outside, so a
 * setuid file a cell made in the workspace would be a setuid-root program for anyone outside.
 *
 * A foreign architecture (32-bit calls on a 64-bit kernel) and the x32 numbers are refused
 * outright: their tables differ, so a filter written for one table would let the other through.
 *
 * @module
 */

import { assert } from "../core/mod.ts";

/** `struct sock_filter` opcodes (linux/filter.h). */
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JSET_K = 0x45;
const RET_K = 0x06;

/** `struct seccomp_data` offsets: nr, arch, and args[i]'s low 32 bits (little-endian). */
const NR = 0;
const ARCH = 4;
const argLow = (i: number) => 16 + 8 * i;

/** Seccomp return values (linux/seccomp.h). */
const RET_ALLOW = 0x7fff0000;
const RET_ERRNO = 0x00050000;
const RET_KILL_PROCESS = 0x80000000;
const EPERM = 1;
const ENOSYS = 38;

/** `CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET`. */
export const CLONE_NAMESPACE_FLAGS = 0x7e020000;

/** `S_ISUID | S_ISGID`. */
export const SETID_MODE_BITS = 0o6000;

/** `O_CREAT | __O_TMPFILE`, the open flags that make a file with the given mode (alike on x86-64 and aarch64). */
export const CREATE_FLAGS = 0o100 | 0o20000000;

/** The system calls refused with `EPERM`, by name. */
export const DENIED_SYSCALLS = [
  "open_by_handle_at",
  "name_to_handle_at",
  "keyctl",
  "add_key",
  "request_key",
  "ptrace",
  "bpf",
  "mount",
  "umount2",
  "pivot_root",
  "setns",
  "unshare",
  "fsopen",
  "fsconfig",
  "fsmount",
  "move_mount",
  "open_tree",
  "open_tree_attr",
  "fspick",
  "mount_setattr",
  "kexec_load",
  "kexec_file_load",
  "init_module",
  "finit_module",
  "delete_module",
  "perf_event_open",
  "userfaultfd",
  "process_vm_readv",
  "process_vm_writev",
  "swapon",
  "swapoff",
  "reboot",
  "acct",
  "quotactl",
  "quotactl_fd",
  "iopl",
  "ioperm",
  // A ring's operations are calls this filter never sees; containerd and Docker refuse io_uring
  // by default for the container escapes found in it (moby/moby#46762, containerd#9048).
  "io_uring_setup",
  "io_uring_enter",
  "io_uring_register",
] as const;

/** The system calls refused with `ENOSYS`, so that libc falls back to a call the filter can check. */
export const ENOSYS_SYSCALLS = ["clone3", "openat2"] as const;

/** A call refused with `EPERM` when argument `arg` has any of `bits` (and `onlyIf`'s argument any of its bits). */
interface ArgumentRule {
  /** The call's name in {@linkcode SYSCALL_TABLES}; an architecture without it skips the rule. */
  call: string;
  /** The argument's index; its low 32 bits are checked. */
  arg: number;
  /** Any of these set refuses the call. */
  bits: number;
  /** Another argument that must have any of its bits for the rule to apply (`open`'s flags). */
  onlyIf?: { arg: number; bits: number };
}

/** The calls refused by their arguments: `clone` with a namespace flag, and any mode with a setid bit. */
export const ARGUMENT_RULES = [
  { call: "clone", arg: 0, bits: CLONE_NAMESPACE_FLAGS },
  { call: "chmod", arg: 1, bits: SETID_MODE_BITS },
  { call: "fchmod", arg: 1, bits: SETID_MODE_BITS },
  { call: "fchmodat", arg: 2, bits: SETID_MODE_BITS },
  { call: "fchmodat2", arg: 2, bits: SETID_MODE_BITS },
  { call: "mkdir", arg: 1, bits: SETID_MODE_BITS },
  { call: "mkdirat", arg: 2, bits: SETID_MODE_BITS },
  { call: "mknod", arg: 1, bits: SETID_MODE_BITS },
  { call: "mknodat", arg: 2, bits: SETID_MODE_BITS },
  { call: "creat", arg: 1, bits: SETID_MODE_BITS },
  // The mode counts only when the call creates; O_TMPFILE creates too (systemd checks O_CREAT only).
  { call: "open", arg: 2, bits: SETID_MODE_BITS, onlyIf: { arg: 1, bits: CREATE_FLAGS } },
  { call: "openat", arg: 3, bits: SETID_MODE_BITS, onlyIf: { arg: 2, bits: CREATE_FLAGS } },
] as const satisfies readonly ArgumentRule[];

/** Every call the filter names. */
type CallName =
  | typeof DENIED_SYSCALLS[number]
  | typeof ENOSYS_SYSCALLS[number]
  | typeof ARGUMENT_RULES[number]["call"];

/** One architecture's audit id and system call numbers (a call it lacks is absent). */
export interface SyscallTable {
  /** `AUDIT_ARCH_*`. */
  audit: number;
  /** Numbers at or above this are another ABI on the same architecture (x32); refused. */
  abiLimit?: number;
  numbers: Partial<Record<CallName, number>>;
}

/** The calls numbered alike on every architecture since Linux 5.1 (the unified table). */
const UNIFIED = {
  fsopen: 430,
  fsconfig: 431,
  fsmount: 432,
  move_mount: 429,
  open_tree: 428,
  open_tree_attr: 467,
  fspick: 433,
  mount_setattr: 442,
  quotactl_fd: 443,
  io_uring_setup: 425,
  io_uring_enter: 426,
  io_uring_register: 427,
  clone3: 435,
  openat2: 437,
  fchmodat2: 452,
};

/** x86-64 (`asm/unistd_64.h`) and aarch64 (`asm-generic/unistd.h`). */
export const SYSCALL_TABLES: Record<"x86_64" | "aarch64", SyscallTable> = {
  x86_64: {
    audit: 0xc000003e,
    abiLimit: 0x40000000,
    numbers: {
      ...UNIFIED,
      open_by_handle_at: 304,
      name_to_handle_at: 303,
      keyctl: 250,
      add_key: 248,
      request_key: 249,
      ptrace: 101,
      bpf: 321,
      mount: 165,
      umount2: 166,
      pivot_root: 155,
      setns: 308,
      unshare: 272,
      kexec_load: 246,
      kexec_file_load: 320,
      init_module: 175,
      finit_module: 313,
      delete_module: 176,
      perf_event_open: 298,
      userfaultfd: 323,
      process_vm_readv: 310,
      process_vm_writev: 311,
      swapon: 167,
      swapoff: 168,
      reboot: 169,
      acct: 163,
      quotactl: 179,
      iopl: 172,
      ioperm: 173,
      clone: 56,
      open: 2,
      openat: 257,
      creat: 85,
      chmod: 90,
      fchmod: 91,
      fchmodat: 268,
      mkdir: 83,
      mkdirat: 258,
      mknod: 133,
      mknodat: 259,
    },
  },
  aarch64: {
    audit: 0xc00000b7,
    numbers: {
      ...UNIFIED,
      open_by_handle_at: 265,
      name_to_handle_at: 264,
      keyctl: 219,
      add_key: 217,
      request_key: 218,
      ptrace: 117,
      bpf: 280,
      mount: 40,
      umount2: 39,
      pivot_root: 41,
      setns: 268,
      unshare: 97,
      kexec_load: 104,
      kexec_file_load: 294,
      init_module: 105,
      finit_module: 273,
      delete_module: 106,
      perf_event_open: 241,
      userfaultfd: 282,
      process_vm_readv: 270,
      process_vm_writev: 271,
      swapon: 224,
      swapoff: 225,
      reboot: 142,
      acct: 89,
      quotactl: 60,
      clone: 220,
      openat: 56,
      fchmod: 52,
      fchmodat: 53,
      mkdirat: 34,
      mknodat: 33,
    },
  },
};

/** One instruction: `{code, jt, jf, k}`. */
export interface BpfInstruction {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

const op = (code: number, k: number, jt = 0, jf = 0): BpfInstruction => ({ code, jt, jf, k });

/** The block of one architecture: entered with the arch checked, ends in a return. */
function archBlock(table: SyscallTable): BpfInstruction[] {
  const numbers = (names: readonly CallName[]) =>
    names.map((name) => table.numbers[name]).filter((nr): nr is number => nr !== undefined);
  const denied = numbers(DENIED_SYSCALLS);
  const enosys = numbers(ENOSYS_SYSCALLS);
  const rules: readonly ArgumentRule[] = ARGUMENT_RULES.filter((r) => r.call in table.numbers);
  // Layout: load nr, [abi test], one test per denied, ENOSYS and argument-checked call, then the
  // returns allow, eperm, enosys, then each argument check (it ends in its own returns: a jump
  // only goes forward). A jump counts from the instruction after it.
  const out: BpfInstruction[] = [op(LD_W_ABS, NR)];
  const allow = 1 + (table.abiLimit === undefined ? 0 : 1) + denied.length + enosys.length +
    rules.length;
  const to = (target: number) => target - out.length - 1;
  if (table.abiLimit !== undefined) out.push(op(JGE_K, table.abiLimit, to(allow + 1)));
  for (const nr of denied) out.push(op(JEQ_K, nr, to(allow + 1)));
  for (const nr of enosys) out.push(op(JEQ_K, nr, to(allow + 2)));
  const checks = rules.map(argumentCheck);
  let check = allow + 3;
  for (const [i, rule] of rules.entries()) {
    out.push(op(JEQ_K, table.numbers[rule.call as CallName]!, to(check)));
    check += checks[i].length;
  }
  out.push(op(RET_K, RET_ALLOW));
  out.push(op(RET_K, RET_ERRNO | EPERM));
  out.push(op(RET_K, RET_ERRNO | ENOSYS));
  for (const block of checks) out.push(...block);
  return out;
}

/** One rule's check: `EPERM` when its argument has any of its bits (and `onlyIf` holds), else allow. */
function argumentCheck(rule: ArgumentRule): BpfInstruction[] {
  const test = [op(LD_W_ABS, argLow(rule.arg)), op(JSET_K, rule.bits, 1, 0)];
  const returns = [op(RET_K, RET_ALLOW), op(RET_K, RET_ERRNO | EPERM)];
  if (rule.onlyIf === undefined) return [...test, ...returns];
  // Without the flag the call is allowed: skip the test, straight to allow.
  const only = [op(LD_W_ABS, argLow(rule.onlyIf.arg)), op(JSET_K, rule.onlyIf.bits, 0, 2)];
  return [...only, ...test, ...returns];
}

/**
 * The filter as instructions: the architecture checked first (a foreign one kills the
 * process), then each architecture's block.
 *
 * @example
 * ```ts
 * const program = seccompProgram(); // starts with `ld [4]` (the arch)
 * ```
 */
export function seccompProgram(
  tables: SyscallTable[] = [SYSCALL_TABLES.x86_64, SYSCALL_TABLES.aarch64],
): BpfInstruction[] {
  const blocks = tables.map(archBlock);
  const out: BpfInstruction[] = [op(LD_W_ABS, ARCH)];
  // The blocks start after the arch tests and the kill.
  let start = 1 + tables.length + 1;
  for (const [i, table] of tables.entries()) {
    out.push(op(JEQ_K, table.audit, start - out.length - 1));
    start += blocks[i].length;
  }
  out.push(op(RET_K, RET_KILL_PROCESS));
  for (const block of blocks) out.push(...block);
  for (const ins of out) {
    assert(ins.jt <= 255 && ins.jf <= 255, "a seccomp jump fits in a byte");
  }
  return out;
}

/**
 * The filter as the bytes bubblewrap reads: each `struct sock_filter` little-endian
 * (`u16 code, u8 jt, u8 jf, u32 k`), 8 bytes an instruction.
 *
 * @example
 * ```ts
 * await Deno.writeFile(path, seccompBytes());
 * ```
 */
export function seccompBytes(program: BpfInstruction[] = seccompProgram()): Uint8Array {
  const bytes = new Uint8Array(program.length * 8);
  const view = new DataView(bytes.buffer);
  program.forEach((ins, i) => {
    view.setUint16(i * 8, ins.code, true);
    view.setUint8(i * 8 + 2, ins.jt);
    view.setUint8(i * 8 + 3, ins.jf);
    view.setUint32(i * 8 + 4, ins.k >>> 0, true);
  });
  return bytes;
}
