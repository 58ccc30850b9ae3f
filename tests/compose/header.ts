// The commands docker-compose.yml's header tells a user to run, read from the file itself, so the
// test runs exactly what is written there (continuation lines joined, trailing notes dropped).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../support/paths.js";

export interface HeaderCommand {
  /** The service named last: the topology's application. */
  topology: string;
  /** Environment assignments written before `docker`. */
  env: Record<string, string>;
  argv: string[];
  text: string;
}

export function headerCommands(file = join(REPO_ROOT, "docker-compose.yml")): HeaderCommand[] {
  const header: string[] = [];
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (!line.startsWith("#")) break;
    header.push(line.replace(/^#\s?/, ""));
  }
  const commands: HeaderCommand[] = [];
  for (let i = 0; i < header.length; i++) {
    let text = header[i]!.trim();
    if (!/^([A-Z_]+=\S+\s+)*docker compose up\b/.test(text)) continue;
    while (text.endsWith("\\") && i + 1 < header.length) text = `${text.slice(0, -1).trim()} ${header[++i]!.trim()}`;
    // A note after the command is set off by two spaces: "docker compose up x   (direct mode)".
    text = text.split(/\s{2,}/)[0]!.trim();
    const words = text.split(/\s+/);
    const env: Record<string, string> = {};
    while (/^[A-Z_]+=/.test(words[0]!)) {
      const [key, ...value] = words.shift()!.split("=");
      env[key!] = value.join("=");
    }
    commands.push({ topology: words[words.length - 1]!, env, argv: words, text });
  }
  return commands;
}
