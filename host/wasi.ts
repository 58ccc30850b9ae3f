// The WASI subset Envoy links (under both `wasi_snapshot_preview1` and `wasi_unstable`), with
// cpp-host's behaviour: stdout/stderr become log lines (info/error), clocks and random work,
// files do not exist, proc_exit stops the VM.
import { randomFillSync } from "node:crypto";
import type { LogSink } from "./logs.js";
import type { WasmVm } from "./vm.js";
import { GuestTrap } from "./vm.js";

const ESUCCESS = 0;
const EBADF = 8;
const EINVAL = 28;
const ENOSYS = 52;
const MAX_RANDOM_BYTES = 64 * 1024;

export interface WasiOptions {
  readonly logs: LogSink;
  /** Environment variables (Envoy: the VM's `environment_variables`). */
  readonly environment: Readonly<Record<string, string>>;
  readonly clock: () => bigint;
}

type WasiFn = (...args: never[]) => number | void;

const utf8 = new TextEncoder();

export function wasiFunctions(vm: WasmVm, options: WasiOptions): Record<string, WasiFn> {
  const mem = () => vm.memory;
  const environ = Object.entries(options.environment).map(([k, v]) => utf8.encode(`${k}=${v}\0`));

  return {
    fd_write(fd: number, iovs: number, iovsLength: number, writtenPtr: number) {
      if (fd !== 1 && fd !== 2) return EBADF;
      const parts: Uint8Array[] = [];
      let total = 0;
      for (let i = 0; i < iovsLength; i++) {
        const ptr = mem().readU32(iovs + i * 8);
        const length = mem().readU32(iovs + i * 8 + 4);
        parts.push(mem().read(ptr, length));
        total += length;
      }
      const text = new TextDecoder().decode(Buffer.concat(parts));
      options.logs.add({
        level: fd === 1 ? "info" : "error",
        message: text.replace(/\n$/, ""),
        contextId: vm.context().id,
        vm: vm.kind,
        source: fd === 1 ? "stdout" : "stderr",
      });
      mem().writeU32(writtenPtr, total);
      return ESUCCESS;
    },
    fd_read() {
      return ENOSYS;
    },
    fd_seek() {
      return ESUCCESS;
    },
    fd_close() {
      return ESUCCESS;
    },
    fd_fdstat_get(fd: number, statPtr: number) {
      if (fd !== 1 && fd !== 2) return EBADF;
      // 24-byte fdstat: zero except fs_rights_base = FD_WRITE (64), as cpp-host writes it.
      const stat = new Uint8Array(24);
      stat[8] = 64;
      mem().write(statPtr, stat);
      return ESUCCESS;
    },
    environ_sizes_get(countPtr: number, bufferSizePtr: number) {
      mem().writeU32(countPtr, environ.length);
      mem().writeU32(bufferSizePtr, environ.reduce((n, e) => n + e.length, 0));
      return ESUCCESS;
    },
    environ_get(pointersPtr: number, bufferPtr: number) {
      let at = bufferPtr;
      environ.forEach((entry, i) => {
        mem().writeU32(pointersPtr + i * 4, at);
        mem().write(at, entry);
        at += entry.length;
      });
      return ESUCCESS;
    },
    args_sizes_get(countPtr: number, bufferSizePtr: number) {
      mem().writeU32(countPtr, 0);
      mem().writeU32(bufferSizePtr, 0);
      return ESUCCESS;
    },
    args_get() {
      return ESUCCESS;
    },
    clock_time_get(id: number, _precision: bigint, resultPtr: number) {
      if (id === 0) mem().writeU64(resultPtr, options.clock());
      else if (id === 1) mem().writeU64(resultPtr, process.hrtime.bigint());
      else return EINVAL;
      return ESUCCESS;
    },
    random_get(ptr: number, length: number) {
      if (length > MAX_RANDOM_BYTES) return EINVAL;
      mem().write(ptr, randomFillSync(new Uint8Array(length)));
      return ESUCCESS;
    },
    proc_exit(code: number) {
      throw new GuestTrap(`proc_exit(${code})`);
    },
    // No preopened directories: every file operation fails.
    path_open() {
      return EBADF;
    },
    fd_prestat_get() {
      return EBADF;
    },
    fd_prestat_dir_name() {
      return EBADF;
    },
  };
}
