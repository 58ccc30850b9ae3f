// A network's JSON snapshot made in slices on the event loop. Rendering a whole view at once
// (view.ts, then JSON.stringify) held the event loop for about half a second at 100k pods:
// every long poll, delta render and health probe waited behind it. Here:
//   - the network's view (delta/network_view.ts, kept up to date by the delta path) is captured
//     by reference in one step, O(objects): its objects are never changed in place (a change
//     replaces them), so the capture is the view as it stands at this version, whatever the
//     delta path does between slices;
//   - each object's JSON is made a slice at a time (`sliceObjects` of them or SLICE_CHARS of
//     JSON), the event loop turning between slices; each slice goes to `sink` as it is made;
//   - the sorting by uid and hostname, the join and the digest are the receiver's
//     (check_worker.ts runs them off the event loop, then checks the text).
// A service's endpoints are limited to the workloads in the view (view.ts endpointsInView).
import type { NetworkView } from "./delta/network_view.js";
import { endpointsInView, type ViewStats } from "./view.js";

export type Section = "workloads" | "services";

/** Receives one slice: the objects' sort keys (uid, hostname) and their JSON, in the same order. */
export type SliceSink = (section: Section, keys: string[], texts: string[]) => void;

/** A slice ends after this many objects or this many characters of JSON, whichever comes first. */
export const SLICE_OBJECTS = 1000;
export const SLICE_CHARS = 256 * 1024;

/** The captured view's objects go to `sink`, a slice per turn of the event loop; its stats at capture. */
export async function renderViewInSlices(view: NetworkView, sink: SliceSink, sliceObjects = SLICE_OBJECTS): Promise<ViewStats> {
  // The capture: flat arrays (keys and values iterate in the same order), a few ms at 100k pods;
  // a Map or Set copy of the same was ~30 ms in one step.
  const stats = view.stats();
  const uids = Array.from(view.workloads.keys());
  const workloads = Array.from(view.workloads.values());
  const services = Array.from(view.services.values());
  let keys: string[] = [];
  let texts: string[] = [];
  let chars = 0;
  const flush = async (section: Section) => {
    sink(section, keys, texts);
    keys = [];
    texts = [];
    chars = 0;
    await new Promise<void>((next) => setImmediate(next));
  };
  const add = (key: string, text: string) => {
    keys.push(key);
    texts.push(text);
    chars += text.length;
    return keys.length >= sliceObjects || chars >= SLICE_CHARS;
  };
  // The uids in the view at capture (a service names only those), built as the slices go.
  const inView = new Set<string>();
  for (let i = 0; i < uids.length; i++) {
    inView.add(uids[i]);
    if (add(uids[i], JSON.stringify(workloads[i]))) await flush("workloads");
  }
  if (keys.length > 0) await flush("workloads");
  for (const s of services) if (add(s.hostname, JSON.stringify(endpointsInView(s, inView)))) await flush("services");
  if (keys.length > 0) await flush("services");
  return stats;
}
