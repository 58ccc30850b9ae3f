// The plugin (or VM) configuration as a ByteSource: read from the host in windows with
// proxy_get_buffer_bytes(type, start, length), so a filter that streams its configuration
// never has the whole of it in linear memory. Envoy clamps the range to the buffer; each
// window arrives in a block the host allocates through our malloc, which is copied into the
// reader's window and freed at once.
import { ByteSource } from "../json/source";
import { proxy_get_buffer_bytes } from "./abi";
import { hostValuePtr, hostValueSize, outPtrSlot, outSizeSlot, releaseHostValue, resetOutSlots } from "./host_value";
import { BufferType, WasmResult } from "./types";

export class HostBufferSource extends ByteSource {
  constructor(
    private type: BufferType,
    private total: i32,
  ) {
    super();
  }

  size(): i32 {
    return this.total;
  }

  read(start: i32, length: i32, dest: usize): i32 {
    if (start < 0 || length <= 0 || start >= this.total) return 0;
    resetOutSlots();
    const status = proxy_get_buffer_bytes(<i32>this.type, <u32>start, <u32>length, outPtrSlot(), outSizeSlot());
    let got = 0;
    if (status == WasmResult.Ok && hostValuePtr() != 0) {
      got = min(<i32>hostValueSize(), length);
      memory.copy(dest, hostValuePtr(), <usize>got);
    }
    releaseHostValue();
    return got;
  }
}

/** The whole source in one buffer: for filters that do not stream their configuration. */
export function readWhole(source: ByteSource): ArrayBuffer {
  const size = source.size();
  if (size <= 0) return new ArrayBuffer(0);
  const bytes = new ArrayBuffer(size);
  const got = source.read(0, size, changetype<usize>(bytes));
  return got == size ? bytes : new ArrayBuffer(0);
}
