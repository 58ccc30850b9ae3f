// The feed's metrics in Prometheus' text format (served at /metrics). Small on purpose: gauges
// and counters with labels, no histograms (render and validation times are exposed as the last
// value plus a running sum and count).
type Labels = Record<string, string>;

function key(name: string, labels: Labels): string {
  const parts = Object.keys(labels)
    .sort()
    .map((k) => `${k}="${labels[k].replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`);
  return parts.length > 0 ? `${name}{${parts.join(",")}}` : name;
}

export class Metrics {
  private readonly values = new Map<string, { name: string; value: number }>();
  private readonly help = new Map<string, { type: "gauge" | "counter"; text: string }>();

  declare(name: string, type: "gauge" | "counter", text: string): void {
    this.help.set(name, { type, text });
  }

  set(name: string, labels: Labels, value: number): void {
    this.values.set(key(name, labels), { name, value });
  }

  add(name: string, labels: Labels, delta = 1): void {
    const k = key(name, labels);
    const v = this.values.get(k);
    this.values.set(k, { name, value: (v?.value ?? 0) + delta });
  }

  get(name: string, labels: Labels = {}): number | undefined {
    return this.values.get(key(name, labels))?.value;
  }

  /** Drops every series of `name` (e.g. gap reasons that no longer occur). */
  clear(name: string): void {
    for (const [k, v] of this.values) if (v.name === name) this.values.delete(k);
  }

  text(): string {
    const byName = new Map<string, string[]>();
    for (const [k, v] of [...this.values].sort(([a], [b]) => a.localeCompare(b))) {
      const lines = byName.get(v.name) ?? [];
      lines.push(`${k} ${v.value}`);
      byName.set(v.name, lines);
    }
    const out: string[] = [];
    for (const [name, lines] of byName) {
      const h = this.help.get(name);
      if (h) out.push(`# HELP ${name} ${h.text}`, `# TYPE ${name} ${h.type}`);
      out.push(...lines);
    }
    return out.join("\n") + "\n";
  }
}
