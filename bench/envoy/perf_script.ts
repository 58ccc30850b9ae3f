// The samples of a perf.data file with their call chains, read from `perf script -F
// comm,period,ip,sym,dso`: a header line per sample ("wrk:worker_0   1000000"), then one indented
// line per frame ("\t    7f12ab  sym+0x10 (/usr/lib/libc.so.6)"), innermost first, then a
// blank line.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

export interface Frame {
  addr: number;
  sym: string;
  dso: string;
}

export interface Sample {
  comm: string;
  /** ns of cpu-clock (the fixed sampling period). */
  period: number;
  frames: Frame[];
}

const HEADER = /^(.*?)\s+(\d+)\s*$/;
const FRAME = /^\s+([0-9a-f]+)\s+(.*)\s+\((.*)\)\s*$/;

/** Turns perf script's lines into samples; feed every line, then `end()` for the last sample. */
export class PerfScriptParser {
  private sample: Sample | undefined;

  /** The sample this line completes, if any. */
  line(text: string): Sample | undefined {
    if (!text.trim()) {
      const done = this.sample;
      this.sample = undefined;
      return done;
    }
    if (!text.startsWith("\t") && !text.startsWith(" ")) {
      // a header that does not parse leaves the frames that follow to the previous sample
      const m = HEADER.exec(text);
      if (m) this.sample = { comm: m[1]!.trim(), period: Number(m[2]), frames: [] };
      return undefined;
    }
    const m = FRAME.exec(text);
    if (m && this.sample) this.sample.frames.push({ addr: parseInt(m[1]!, 16), sym: m[2]!, dso: m[3]! });
    return undefined;
  }

  end(): Sample | undefined {
    const done = this.sample;
    this.sample = undefined;
    return done;
  }
}

export function parsePerfScript(output: string): Sample[] {
  const parser = new PerfScriptParser();
  const samples: Sample[] = [];
  for (const text of output.split("\n")) {
    const s = parser.line(text);
    if (s) samples.push(s);
  }
  const last = parser.end();
  if (last) samples.push(last);
  return samples;
}

/** The samples of one perf.data file, streamed (a few seconds of call chains is tens of MB of text). */
export async function* perfSamples(perfData: string): AsyncGenerator<Sample> {
  const child = spawn("perf", ["script", "-i", perfData, "-F", "comm,period,ip,sym,dso"], { stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise<number | null>((done, fail) => {
    child.on("error", fail);
    child.on("close", done);
  });
  const parser = new PerfScriptParser();
  for await (const text of createInterface({ input: child.stdout, crlfDelay: Infinity })) {
    const s = parser.line(text);
    if (s) yield s;
  }
  const last = parser.end();
  if (last) yield last;
  const code = await exited;
  if (code !== 0) throw new Error(`perf script -i ${perfData} exited with ${code}`);
}
