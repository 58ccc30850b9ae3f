// The feed's metrics, exposed with prom-client (served at /metrics in Prometheus' text format).
// The rest of the feed talks to this small API (declare, set, add, observe, get, clear, text) and
// never to prom-client, so that a metric is one line at its call site and the library could be
// swapped without touching the callers.
//
// Each Metrics has its own prom-client Registry: tests run several feeds in one process, and
// each must show its own counters. The process and Node.js metrics (CPU, RSS, heap, event-loop
// lag, GC) describe the process, not a feed, so they live in one registry per process, created
// on first use and appended to every feed's text.
//
// prom-client wants a metric's label names when the metric is created; the callers name labels
// at each call instead. So a metric is created on its first write with that write's label
// names, and re-created with the union if a later write brings a new one (a histogram's buckets
// restart). Nothing here throws on a write: a write the metric's type cannot take (a counter
// going down, an observation of a gauge, a value that is not a number) is dropped. set() on a
// counter replaces its value.
//
// Gauges and counters are written on the channel's hot path (several per answer, 2,000 answers
// per version at fan-out): a write only updates the value kept here, found by the labels as the
// caller wrote them (no sorting or JSON per write), and prom-client reads the values when it is
// scraped (each metric's `collect`). Histograms are observed into prom-client at once (their
// buckets live there); they are written per render, not per answer.
import client from "prom-client";

export type Labels = Record<string, string>;
export type MetricType = "gauge" | "counter" | "histogram";

/** Buckets for durations measured in seconds, from 1 ms to 60 s (a render at 100k pods takes seconds). */
export const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

interface Family {
  type: MetricType;
  help: string;
  buckets: number[];
  labelNames: string[];
  metric?: client.Gauge | client.Counter | client.Histogram;
  /** Gauge and counter values by series (histograms: observations), for get() and scrapes. */
  series: Map<string, Series>;
  /**
   * The same series by the labels as a call site wrote them (names and values in the caller's
   * order: rawKey), so that a repeated write finds its series without sorting. Emptied whenever
   * a series is removed or the metric re-created.
   */
  byRawKey: Map<string, Series>;
  /**
   * The same series by a frozen label object, for call sites that write on every request and
   * keep their label objects, frozen (Object.freeze): no key is built. Replaced whenever byRawKey is
   * emptied.
   */
  byFrozen: WeakMap<Labels, Series>;
}

interface Series {
  labels: Labels;
  value: number;
}

/** The labels as written, names and values in the caller's order (\u0001 and \u0002 appear in no label). */
function rawKey(labels: Labels): string {
  let key = "";
  for (const k in labels) key += `${k}\u0001${labels[k]}\u0002`;
  return key;
}

/** The same labels with their names in order: prom-client prints them in the object's order. */
function ordered(labels: Labels): Labels {
  const keys = Object.keys(labels);
  if (keys.length < 2) return labels;
  const out: Labels = {};
  for (const k of keys.sort()) out[k] = labels[k];
  return out;
}

function seriesKey(labels: Labels): string {
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}=${JSON.stringify(labels[k])}`)
    .join(",");
}

let processRegistry: client.Registry | undefined;

/** The process-wide registry with prom-client's default metrics (created once). */
function processMetrics(): client.Registry {
  if (!processRegistry) {
    processRegistry = new client.Registry();
    client.collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

export class Metrics {
  private readonly registry = new client.Registry();
  private readonly families = new Map<string, Family>();

  constructor(private readonly withProcessMetrics = true) {}

  /** Names a metric, its type and help text; histograms take their buckets (in seconds by default). */
  declare(name: string, type: MetricType, help: string, buckets: number[] = SECONDS_BUCKETS): void {
    const f = this.families.get(name);
    if (f && f.type === type) {
      f.help = help;
      f.buckets = buckets;
      return;
    }
    if (f) this.drop(name, f);
    this.families.set(name, { type, help, buckets, labelNames: [], series: new Map(), byRawKey: new Map(), byFrozen: new WeakMap() });
  }

  set(name: string, rawLabels: Labels, value: number): void {
    if (!Number.isFinite(value)) return;
    const f = this.family(name, "gauge");
    if (f.type === "histogram") return;
    this.series(name, f, rawLabels).value = value;
  }

  add(name: string, rawLabels: Labels, delta = 1): void {
    if (!Number.isFinite(delta)) return;
    const f = this.family(name, name.endsWith("_total") ? "counter" : "gauge");
    if (f.type === "histogram" || (f.type === "counter" && delta < 0)) return;
    this.series(name, f, rawLabels).value += delta;
  }

  /** One observation of a histogram (declared with declare(name, "histogram", ...)). */
  observe(name: string, rawLabels: Labels, value: number): void {
    const labels = ordered(rawLabels);
    if (!Number.isFinite(value)) return;
    const f = this.family(name, "histogram");
    if (f.type !== "histogram") return;
    const k = seriesKey(labels);
    const metric = this.ensure(name, f, labels);
    const s = f.series.get(k);
    if (s) s.value++;
    else f.series.set(k, { labels, value: 1 });
    (metric as client.Histogram).observe(labels, value);
  }

  /** A gauge's or counter's value, a histogram's number of observations; undefined if never written. */
  get(name: string, labels: Labels = {}): number | undefined {
    return this.families.get(name)?.series.get(seriesKey(labels))?.value;
  }

  /** Every metric declared or written, by name (the documented list is checked against it). */
  names(): string[] {
    return [...this.families.keys()].sort();
  }

  /** Drops the series of `name` whose labels include all of `labels` (e.g. a cluster removed at run time). */
  remove(name: string, labels: Labels): void {
    const f = this.families.get(name);
    if (!f) return;
    const wanted = Object.entries(labels);
    for (const [k, s] of f.series) {
      if (!wanted.every(([l, v]) => s.labels[l] === v)) continue;
      f.series.delete(k);
      if (f.type === "histogram") f.metric?.remove(s.labels);
    }
    f.byRawKey.clear();
    f.byFrozen = new WeakMap();
  }

  /** Drops every series of `name` (e.g. gap reasons that no longer occur). */
  clear(name: string): void {
    const f = this.families.get(name);
    if (!f) return;
    f.series.clear();
    f.byRawKey.clear();
    f.byFrozen = new WeakMap();
    // Removed rather than reset: a label-less metric would otherwise show 0 for "no value".
    if (f.metric) this.registry.removeSingleMetric(name);
    f.metric = undefined;
    f.labelNames = [];
  }

  /** Prometheus' text format: this feed's metrics, then the process's. */
  async text(): Promise<string> {
    const own = await this.registry.metrics();
    return this.withProcessMetrics ? own + (await processMetrics().metrics()) : own;
  }

  readonly contentType = client.register.contentType;

  private family(name: string, type: MetricType): Family {
    let f = this.families.get(name);
    if (!f) {
      f = { type, help: name, buckets: SECONDS_BUCKETS, labelNames: [], series: new Map(), byRawKey: new Map(), byFrozen: new WeakMap() };
      this.families.set(name, f);
    }
    return f;
  }

  /** A gauge's or counter's series for these labels (created, with its metric, on first write). */
  private series(name: string, f: Family, rawLabels: Labels): Series {
    const frozen = Object.isFrozen(rawLabels);
    if (frozen) {
      const hit = f.byFrozen.get(rawLabels);
      if (hit) return hit;
    }
    const raw = rawKey(rawLabels);
    const known = f.byRawKey.get(raw);
    if (known) {
      if (frozen) f.byFrozen.set(rawLabels, known);
      return known;
    }
    const labels = ordered(rawLabels);
    const k = seriesKey(labels);
    this.ensure(name, f, labels);
    let s = f.series.get(k);
    if (!s) {
      s = { labels, value: 0 };
      f.series.set(k, s);
    }
    f.byRawKey.set(raw, s);
    if (frozen) f.byFrozen.set(rawLabels, s);
    return s;
  }

  /**
   * The prom-client metric for a write with these labels, (re-)created if needed. A gauge or
   * counter reads its values from `f.series` when scraped; a histogram's buckets restart.
   */
  private ensure(name: string, f: Family, labels: Labels): client.Gauge | client.Counter | client.Histogram {
    const missing = Object.keys(labels).filter((l) => !f.labelNames.includes(l));
    if (f.metric && missing.length === 0) return f.metric;
    if (f.metric) this.registry.removeSingleMetric(name);
    f.labelNames = [...f.labelNames, ...missing].sort();
    const common = { name, help: f.help, labelNames: f.labelNames, registers: [this.registry] };
    if (f.type === "histogram") {
      f.metric = new client.Histogram({ ...common, buckets: f.buckets });
      f.series.clear();
      f.byRawKey.clear();
      f.byFrozen = new WeakMap();
    } else if (f.type === "counter") {
      f.metric = new client.Counter({
        ...common,
        collect(this: client.Counter) {
          this.reset();
          for (const s of f.series.values()) if (s.value > 0) this.inc(s.labels, s.value);
        },
      });
    } else {
      f.metric = new client.Gauge({
        ...common,
        collect(this: client.Gauge) {
          this.reset();
          for (const s of f.series.values()) this.set(s.labels, s.value);
        },
      });
    }
    return f.metric;
  }

  private drop(name: string, f: Family): void {
    if (f.metric) this.registry.removeSingleMetric(name);
    this.families.delete(name);
  }
}
