/**
 * The seccomp filter: its bytes as bubblewrap reads them, its decision for each system call
 * (run through a small classic-BPF interpreter here), and the real thing — a process confined
 * with it has seccomp mode 2, is refused file handles, and still runs subprocesses, threads,
 * file I/O and git.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { resolvePython } from "../../../runtime/kernel/mod.ts";
import {
  type BpfInstruction,
  CLONE_NAMESPACE_FLAGS,
  confinedCommand,
  DENIED_SYSCALLS,
  seccompBytes,
  seccompProgram,
  SYSCALL_TABLES,
} from "../../../runtime/sandbox/mod.ts";

const ALLOW = 0x7fff0000;
const EPERM = 0x00050001;
const ENOSYS = 0x00050026;
const KILL = 0x80000000;

/** Runs a classic BPF program on `struct seccomp_data` (nr, arch, args[0]). */
function run(program: BpfInstruction[], data: { nr: number; arch: number; arg0?: number }) {
  const word = (offset: number) =>
    offset === 0 ? data.nr : offset === 4 ? data.arch : offset === 16 ? (data.arg0 ?? 0) : NaN;
  let acc = 0;
  for (let pc = 0, steps = 0; pc < program.length && steps < 1000; steps++) {
    const { code, jt, jf, k } = program[pc];
    if (code === 0x20) acc = word(k);
    else if (code === 0x06) return k >>> 0;
    else if (code === 0x15) pc += acc === k ? jt : jf;
    else if (code === 0x35) pc += acc >>> 0 >= k >>> 0 ? jt : jf;
    else if (code === 0x45) pc += (acc & k) !== 0 ? jt : jf;
    else throw new Error(`unknown opcode ${code}`);
    pc++;
  }
  throw new Error("the program ran off its end");
}

Deno.test("`seccompBytes()` lays each instruction out as bubblewrap reads it: u16 code, u8 jt, u8 jf, u32 k, little-endian", () => {
  const program = seccompProgram();
  const bytes = seccompBytes(program);
  assert.equal(bytes.length, program.length * 8);
  // ld [4] (the arch), then jeq AUDIT_ARCH_X86_64.
  assert.deepEqual([...bytes.subarray(0, 8)], [0x20, 0, 0, 0, 4, 0, 0, 0]);
  // x86-64's block starts right after the aarch64 test and the kill: 2 ahead.
  assert.deepEqual([...bytes.subarray(8, 16)], [0x15, 0, 2, 0, 0x3e, 0, 0, 0xc0]);
  assert.deepEqual([...bytes.subarray(16, 24)], [0x15, 0, program[2].jt, 0, 0xb7, 0, 0, 0xc0]);
  // x86-64's block: load nr, the x32 test, a test per call, clone, clone3, three returns and
  // clone's flags check; aarch64's starts after it with its own load of nr.
  const x86Block = 2 + DENIED_SYSCALLS.length + 2 + 3 + 4;
  assert.equal(program[2].jt, 1 + x86Block);
  assert.deepEqual(program[4 + x86Block], { code: 0x20, jt: 0, jf: 0, k: 0 });
  // A foreign architecture falls to the kill.
  assert.deepEqual([...bytes.subarray(24, 32)], [0x06, 0, 0, 0, 0, 0, 0, 0x80]);
  const view = new DataView(bytes.buffer);
  program.forEach((ins, i) => {
    assert.equal(view.getUint16(i * 8, true), ins.code);
    assert.equal(view.getUint32(i * 8 + 4, true), ins.k >>> 0);
  });
});

Deno.test("`seccompProgram()` refuses each listed call with EPERM on x86-64 and aarch64, and lets the rest through", () => {
  const program = seccompProgram();
  for (const table of [SYSCALL_TABLES.x86_64, SYSCALL_TABLES.aarch64]) {
    for (const name of DENIED_SYSCALLS) {
      const nr = table.numbers[name];
      if (nr === undefined) continue; // iopl and ioperm exist on x86-64 only
      assert.equal(run(program, { nr, arch: table.audit }), EPERM, `${name} (${nr})`);
    }
    const clone = table.numbers.clone!;
    assert.equal(run(program, { nr: clone, arch: table.audit, arg0: 0x01200011 }), ALLOW, "fork");
    for (const flag of [0x00020000, 0x10000000, 0x20000000, 0x40000000]) {
      assert.equal(run(program, { nr: clone, arch: table.audit, arg0: flag | 0x11 }), EPERM);
    }
    assert.equal(run(program, { nr: table.numbers.clone3!, arch: table.audit }), ENOSYS);
  }
  const x86 = SYSCALL_TABLES.x86_64.audit;
  for (const nr of [0, 1, 2, 57, 59, 61, 257]) {
    assert.equal(run(program, { nr, arch: x86 }), ALLOW, `x86-64 call ${nr}`);
  }
  // x32's numbers and a foreign architecture (i386) are refused outright.
  assert.equal(run(program, { nr: 0x40000000 + 304, arch: x86 }), EPERM);
  assert.equal(run(program, { nr: 3, arch: 0x40000003 }), KILL);
  assert.equal(CLONE_NAMESPACE_FLAGS, 0x7e020000);
});

Deno.test("a process under the filter has seccomp mode 2, is refused file handles, namespaces and io_uring, and still runs subprocesses, threads, files and git", async () => {
  const python = await resolvePython("python3");
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "klbr-seccomp-" }));
  try {
    const filter = join(dir, "seccomp.bpf");
    await Deno.writeFile(filter, seccompBytes());
    const work = join(dir, "work");
    await Deno.mkdir(work);
    const script = [
      "import ctypes, errno, json, os, subprocess, threading",
      "libc = ctypes.CDLL(None, use_errno=True)",
      "out = {'seccomp': [l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp:')][0]}",
      "buf = ctypes.create_string_buffer(8 + 128); ctypes.c_uint.from_buffer(buf).value = 128",
      "mid = ctypes.c_int()",
      "r = libc.name_to_handle_at(-100, b'.', buf, ctypes.byref(mid), 0)",
      "out['name_to_handle_at'] = errno.errorcode.get(ctypes.get_errno()) if r else 'allowed'",
      "r = libc.open_by_handle_at(os.open('.', os.O_RDONLY), buf, 0)",
      "out['open_by_handle_at'] = errno.errorcode.get(ctypes.get_errno()) if r < 0 else 'allowed'",
      "r = libc.unshare(0x00020000)",
      "out['unshare'] = errno.errorcode.get(ctypes.get_errno()) if r else 'allowed'",
      // io_uring_setup(8, params): a ring's operations are calls the filter never sees.
      "params = ctypes.create_string_buffer(120)",
      "r = libc.syscall(425, 8, params)",
      "out['io_uring_setup'] = errno.errorcode.get(ctypes.get_errno()) if r < 0 else 'allowed'",
      "out['subprocess'] = subprocess.run(['echo', 'sub'], capture_output=True, text=True).stdout",
      "seen = []; t = threading.Thread(target=lambda: seen.append(1)); t.start(); t.join()",
      "out['thread'] = seen",
      "open('f.txt', 'w').write('data'); out['file'] = open('f.txt').read()",
      "g = subprocess.run(['git', 'init', '-q', 'repo'], capture_output=True, text=True)",
      "out['git'] = g.returncode if g.returncode else os.path.isdir('repo/.git')",
      "print(json.dumps(out))",
    ].join("\n");
    const { program, args } = confinedCommand({
      bwrap: "bwrap",
      network: false,
      readOnly: [python.home],
      stateDir: join(dir, "state"),
      userns: true,
      seccomp: filter,
      protect: [],
      limits: null,
    }, {
      command: python.executable,
      args: ["-c", script],
      cwd: work,
      readWrite: [work],
      readOnly: [],
    });
    const output = await new Deno.Command(program, {
      args,
      clearEnv: true,
      env: { PATH: "/usr/bin:/bin", HOME: work },
    }).output();
    const stderr = new TextDecoder().decode(output.stderr);
    assert.ok(output.success, stderr);
    assert.deepEqual(JSON.parse(new TextDecoder().decode(output.stdout)), {
      seccomp: "2",
      name_to_handle_at: "EPERM",
      open_by_handle_at: "EPERM",
      unshare: "EPERM",
      io_uring_setup: "EPERM",
      subprocess: "sub\n",
      thread: [1],
      file: "data",
      git: true,
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
