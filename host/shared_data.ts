// proxy_get_shared_data / proxy_set_shared_data: a key-value store shared by every VM with the
// same vm_id, with compare-and-swap tokens (cpp-host SharedData).
import { WasmResult } from "./abi.js";

interface Entry {
  value: Uint8Array;
  cas: number;
}

export class SharedData {
  private readonly entries = new Map<string, Entry>();
  private nextCas = 1;

  get(key: string): { status: number; value?: Uint8Array; cas?: number } {
    const entry = this.entries.get(key);
    if (entry === undefined) return { status: WasmResult.NotFound };
    return { status: WasmResult.Ok, value: entry.value, cas: entry.cas };
  }

  /** cas 0 writes unconditionally; any other cas must match the key's current one. */
  set(key: string, value: Uint8Array, cas: number): number {
    const entry = this.entries.get(key);
    if (cas !== 0 && entry !== undefined && entry.cas !== cas) return WasmResult.CasMismatch;
    this.entries.set(key, { value, cas: this.nextCas++ });
    return WasmResult.Ok;
  }
}
