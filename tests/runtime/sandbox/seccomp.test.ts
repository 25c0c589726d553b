/**
 * The seccomp filter: its bytes as bubblewrap reads them, its decision for each system call
 * (run through a small classic-BPF interpreter here), and the real thing — a process confined
 * with it has seccomp mode 2, is refused file handles and setuid or setgid modes, and still runs
 * subprocesses, threads, file I/O and git.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { resolvePython } from "../../../runtime/kernel/mod.ts";
import {
  ARGUMENT_RULES,
  type BpfInstruction,
  CLONE_NAMESPACE_FLAGS,
  confinedCommand,
  CREATE_FLAGS,
  DENIED_SYSCALLS,
  ENOSYS_SYSCALLS,
  seccompBytes,
  seccompProgram,
  SETID_MODE_BITS,
  SYSCALL_TABLES,
} from "../../../runtime/sandbox/mod.ts";

const ALLOW = 0x7fff0000;
const EPERM = 0x00050001;
const ENOSYS = 0x00050026;
const KILL = 0x80000000;

/** Runs a classic BPF program on `struct seccomp_data` (nr, arch, the low words of args[0..5]). */
function run(program: BpfInstruction[], data: { nr: number; arch: number; args?: number[] }) {
  const word = (offset: number) =>
    offset === 0
      ? data.nr
      : offset === 4
      ? data.arch
      : offset >= 16 && offset < 64 && offset % 8 === 0
      ? (data.args?.[(offset - 16) / 8] ?? 0)
      : NaN;
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
  // x86-64's block: load nr, the x32 test, a test per denied, ENOSYS and argument-checked call,
  // three returns, then each argument check (4 instructions, 6 with a flag condition: open and
  // openat); aarch64's starts after it with its own load of nr.
  const rules = ARGUMENT_RULES.length;
  const x86Block = 2 + DENIED_SYSCALLS.length + ENOSYS_SYSCALLS.length + rules + 3 + 4 * rules +
    2 * 2;
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
    assert.equal(run(program, { nr: clone, arch: table.audit, args: [0x01200011] }), ALLOW, "fork");
    for (const flag of [0x00020000, 0x10000000, 0x20000000, 0x40000000]) {
      assert.equal(run(program, { nr: clone, arch: table.audit, args: [flag | 0x11] }), EPERM);
    }
    assert.equal(run(program, { nr: table.numbers.clone3!, arch: table.audit }), ENOSYS);
    assert.equal(run(program, { nr: table.numbers.openat2!, arch: table.audit }), ENOSYS);
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

Deno.test("`seccompProgram()` refuses a setuid or setgid mode to chmod, mkdir, mknod and creating opens on x86-64 and aarch64, and allows plain modes", () => {
  const program = seccompProgram();
  const x86 = SYSCALL_TABLES.x86_64.numbers;
  const arm = SYSCALL_TABLES.aarch64.numbers;
  // aarch64 has only the *at forms; the legacy calls are x86-64's.
  assert.deepEqual(
    [arm.open, arm.creat, arm.chmod, arm.mkdir, arm.mknod],
    [undefined, undefined, undefined, undefined, undefined],
  );
  // [call, index of the mode argument] on each architecture (numbers from the kernel's tables).
  const modeCalls: Array<[keyof typeof x86, number, number | undefined, number | undefined]> = [
    ["chmod", 1, 90, undefined],
    ["fchmod", 1, 91, 52],
    ["fchmodat", 2, 268, 53],
    ["fchmodat2", 2, 452, 452],
    ["mkdir", 1, 83, undefined],
    ["mkdirat", 2, 258, 34],
    ["mknod", 1, 133, undefined],
    ["mknodat", 2, 259, 33],
    ["creat", 1, 85, undefined],
  ];
  const S_IFREG = 0o100000;
  for (const [name, modeArg, x86Nr, armNr] of modeCalls) {
    assert.equal(x86[name], x86Nr, name);
    assert.equal(arm[name], armNr, name);
    for (const table of [SYSCALL_TABLES.x86_64, SYSCALL_TABLES.aarch64]) {
      const nr = table.numbers[name];
      if (nr === undefined) continue;
      const call = (mode: number) => {
        const args = [3, 0x1000, 0, 0];
        args[modeArg] = mode;
        return run(program, { nr, arch: table.audit, args });
      };
      for (const mode of [0o4755, 0o2755, 0o6755, 0o4000, S_IFREG | 0o2644]) {
        assert.equal(call(mode), EPERM, `${name} ${mode.toString(8)}`);
      }
      for (const mode of [0o755, 0o644, 0o1777, S_IFREG | 0o600]) {
        assert.equal(call(mode), ALLOW, `${name} ${mode.toString(8)}`);
      }
    }
  }
  // open and openat: the mode counts only with O_CREAT or O_TMPFILE (0o20200000 on both).
  const O_CREAT = 0o100, O_TMPFILE = 0o20200000, O_WRONLY = 1;
  assert.equal(CREATE_FLAGS, O_CREAT | 0o20000000);
  assert.equal(SETID_MODE_BITS, 0o6000);
  assert.deepEqual([x86.open, x86.openat, arm.openat], [2, 257, 56]);
  assert.deepEqual([x86.openat2, arm.openat2], [437, 437]);
  const opens: Array<[number, number, (flags: number, mode: number) => number[]]> = [
    [SYSCALL_TABLES.x86_64.audit, x86.open!, (flags, mode) => [0x1000, flags, mode]],
    [SYSCALL_TABLES.x86_64.audit, x86.openat!, (flags, mode) => [-100, 0x1000, flags, mode]],
    [SYSCALL_TABLES.aarch64.audit, arm.openat!, (flags, mode) => [-100, 0x1000, flags, mode]],
  ];
  for (const [arch, nr, args] of opens) {
    for (const flags of [O_CREAT | O_WRONLY, O_TMPFILE | O_WRONLY, O_CREAT | 0o1000]) {
      assert.equal(run(program, { nr, arch, args: args(flags, 0o4755) }), EPERM, `${nr} ${flags}`);
      assert.equal(run(program, { nr, arch, args: args(flags, 0o2700) }), EPERM, `${nr} ${flags}`);
      assert.equal(run(program, { nr, arch, args: args(flags, 0o644) }), ALLOW, `${nr} ${flags}`);
    }
    // Without a create flag the kernel ignores the mode: a stray setid bit there is harmless.
    assert.equal(run(program, { nr, arch, args: args(0, 0o4755) }), ALLOW, `${nr} read`);
    assert.equal(run(program, { nr, arch, args: args(0o2000000, 0o6755) }), ALLOW, `${nr} cloexec`);
  }
});

/**
 * Runs `fn` with `run(script)`, which runs a Python script confined by bwrap with the filter (as
 * the workbench runs, in the work directory `work`) and returns the JSON it printed.
 */
async function withFilteredPython(
  fn: (run: (script: string) => Promise<unknown>, work: string) => Promise<void>,
): Promise<void> {
  const python = await resolvePython("python3");
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "klbr-seccomp-" }));
  try {
    const filter = join(dir, "seccomp.bpf");
    await Deno.writeFile(filter, seccompBytes());
    const work = join(dir, "work");
    await Deno.mkdir(work);
    const run = async (script: string) => {
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
      assert.ok(output.success, new TextDecoder().decode(output.stderr));
      return JSON.parse(new TextDecoder().decode(output.stdout));
    };
    await fn(run, work);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("a process under the filter has seccomp mode 2, is refused file handles, namespaces and io_uring, and still runs subprocesses, threads, files and git", async () => {
  await withFilteredPython(async (run) => {
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
    const output = await run(script);
    assert.deepEqual(output, {
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
  });
});

Deno.test("a process under the filter cannot make a setuid or setgid file: chmod, open, mkdir and mknod with S_ISUID or S_ISGID are EPERM, plain modes still work", async () => {
  // As root, uid 1000 inside is uid 0 outside: before the fix a cell copied /bin/sh into the
  // workspace and chmod'ed it 0o4755, leaving a setuid-root shell for any local user who can
  // reach the workspace (no_new_privs only holds the cell itself back).
  await withFilteredPython(async (run, work) => {
    const script = [
      "import ctypes, errno, json, os, platform, shutil, stat",
      "libc = ctypes.CDLL(None, use_errno=True)",
      "out = {}",
      "def probe(name, act, path=None):",
      "    try:",
      "        r = act()",
      "        if isinstance(r, int) and r < 0: raise OSError(ctypes.get_errno(), '')",
      "        st = os.fstat(r) if path is None else os.stat(path)",
      "        out[name] = oct(stat.S_IMODE(st.st_mode))",
      "    except OSError as e:",
      "        out[name] = errno.errorcode.get(e.errno)",
      "shutil.copy('/bin/sh', 'x'); shutil.copy('/bin/sh', 'y'); shutil.copy('/bin/sh', 'z')",
      "probe('chmod 4755', lambda: os.chmod('x', 0o4755), 'x')",
      "probe('chmod 2755', lambda: os.chmod('y', 0o2755), 'y')",
      "fd = os.open('z', os.O_RDONLY)",
      "probe('fchmod 6755', lambda: os.fchmod(fd, 0o6755), 'z')",
      "probe('open O_CREAT 4755', lambda: os.open('c', os.O_CREAT | os.O_WRONLY, 0o4755), 'c')",
      "probe('O_TMPFILE 4755', lambda: os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o4755))",
      "probe('mkdir 2755', lambda: os.mkdir('d', 0o2755), 'd')",
      "probe('mknod 4755', lambda: os.mknod('n', stat.S_IFREG | 0o4755), 'n')",
      // The legacy calls x86-64 still has (aarch64 has only the *at forms).
      "if platform.machine() == 'x86_64':",
      "    probe('chmod(2) 4755', lambda: libc.syscall(90, b'x', 0o4755), 'x')",
      "    probe('creat(2) 4755', lambda: libc.syscall(85, b'k', 0o4755), 'k')",
      "    probe('open(2) 4755', lambda: libc.syscall(2, b'o', os.O_CREAT | os.O_WRONLY, 0o4755), 'o')",
      "    probe('mkdir(2) 2755', lambda: libc.syscall(83, b'e', 0o2755), 'e')",
      "probe('chmod 755', lambda: os.chmod('x', 0o755), 'x')",
      "probe('open O_CREAT 644', lambda: os.open('p', os.O_CREAT | os.O_WRONLY, 0o644), 'p')",
      "probe('mkdir 755', lambda: os.mkdir('q', 0o755), 'q')",
      "probe('open 4755 without O_CREAT', lambda: os.open('p', os.O_RDONLY, 0o4755))",
      "print(json.dumps(out))",
    ].join("\n");
    const output = await run(script);
    const legacy = Deno.build.arch === "x86_64"
      ? {
        "chmod(2) 4755": "EPERM",
        "creat(2) 4755": "EPERM",
        "open(2) 4755": "EPERM",
        "mkdir(2) 2755": "EPERM",
      }
      : {};
    assert.deepEqual(output, {
      "chmod 4755": "EPERM",
      "chmod 2755": "EPERM",
      "fchmod 6755": "EPERM",
      "open O_CREAT 4755": "EPERM",
      "O_TMPFILE 4755": "EPERM",
      "mkdir 2755": "EPERM",
      "mknod 4755": "EPERM",
      ...legacy,
      "chmod 755": "0o755",
      "open O_CREAT 644": "0o644",
      "mkdir 755": "0o755",
      "open 4755 without O_CREAT": "0o644",
    });
    // Seen from outside: no file in the work directory carries a setuid or setgid bit.
    for await (const entry of Deno.readDir(work)) {
      const { mode } = await Deno.lstat(join(work, entry.name));
      assert.equal(mode! & 0o6000, 0, `${entry.name} is ${mode!.toString(8)}`);
    }
  });
});
