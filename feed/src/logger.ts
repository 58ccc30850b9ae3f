// The feed's log lines (its own module: everything that logs imports it, the controller included).
export type Logger = (level: "info" | "warn" | "error", message: string) => void;

const RANK = { info: 0, warn: 1, error: 2 } as const;

/** One line per event on stderr; FEED_LOG_LEVEL=warn (or error) drops the per-publish info lines. */
export const defaultLogger: Logger = (level, message) => {
  const floor = RANK[(process.env.FEED_LOG_LEVEL ?? "info") as keyof typeof RANK] ?? 0;
  if (RANK[level] >= floor) console.error(`${new Date().toISOString()} ${level} ${message}`);
};
