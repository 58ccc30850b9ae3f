// Every benchmark figure is one JSON line on stdout, so runs can be diffed and charted.
export function emit(figure: Record<string, unknown>): void {
  const clean = Object.fromEntries(Object.entries(figure).filter(([, value]) => value !== undefined));
  process.stdout.write(`${JSON.stringify(clean)}\n`);
}
