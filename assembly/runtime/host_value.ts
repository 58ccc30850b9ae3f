// Values the host hands back (property values, buffer bytes, foreign-function results).
//
// Envoy allocates each returned value through the guest's exported `malloc` with exactly the
// value's size and never frees it. `malloc` therefore hands out raw (non-GC) heap blocks: a GC
// cycle between the host's write and our read cannot reclaim them, and we release each block as
// soon as it has been read. Empty values come back as 0/0 or not at all, so out-params are
// zeroed before every call.

/** Guest allocator called by the host. Raw heap memory, released with releaseHostValue(). */
export function malloc(size: usize): usize {
  return heap.alloc(size == 0 ? 1 : size);
}

// Out-params for the host: a pointer slot and a size slot, allocated once per VM.
const outSlots: usize = heap.alloc(8);

/** Address of the pointer out-param; call resetOutSlots() before each host call. */
// @ts-ignore: decorator
@inline export function outPtrSlot(): usize {
  return outSlots;
}

/** Address of the size out-param. */
// @ts-ignore: decorator
@inline export function outSizeSlot(): usize {
  return outSlots + 4;
}

// @ts-ignore: decorator
@inline export function resetOutSlots(): void {
  store<u64>(outSlots, 0);
}

/** Pointer the host wrote into the out-param (0 for an empty value). */
// @ts-ignore: decorator
@inline export function hostValuePtr(): usize {
  return load<u32>(outSlots);
}

/** Size the host wrote into the out-param (0 for an empty value). */
// @ts-ignore: decorator
@inline export function hostValueSize(): usize {
  return load<u32>(outSlots + 4);
}

/** Frees the block the host wrote, if any. Safe to call twice. */
export function releaseHostValue(): void {
  const ptr = hostValuePtr();
  if (ptr != 0) heap.free(ptr);
  resetOutSlots();
}

/** Copies the host value into a managed ArrayBuffer, frees the host block. Empty → zero-length buffer. */
export function takeHostValue(): ArrayBuffer {
  const size = <i32>hostValueSize();
  const ptr = hostValuePtr();
  const copy = new ArrayBuffer(ptr == 0 ? 0 : size);
  if (ptr != 0 && size > 0) memory.copy(changetype<usize>(copy), ptr, size);
  releaseHostValue();
  return copy;
}

/** Copies the host value into a string (UTF-8), frees the host block. */
export function takeHostString(): string {
  const size = hostValueSize();
  const ptr = hostValuePtr();
  const text = ptr == 0 ? "" : String.UTF8.decodeUnsafe(ptr, size);
  releaseHostValue();
  return text;
}
