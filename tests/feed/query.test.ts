// The channel's query reader (feed/src/query.ts) against the platform's own URLSearchParams: the
// feed reads a poll's epoch, version, wait, format, digest and repair from it, and must read
// every query exactly as URLSearchParams would, whether it reads it in place or hands it on.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseQuery } from "../../feed/src/query.js";

const NAMES = ["epoch", "version", "wait", "format", "digest", "repair", "a", "ep", "epochs", "", "a=b", "="];

function agrees(query: string): void {
  const ours = parseQuery(query);
  const platform = new URLSearchParams(query);
  for (const name of NAMES) assert.equal(ours.get(name), platform.get(name), `${JSON.stringify(query)}: ${JSON.stringify(name)}`);
}

test("a poll's query, and the odd ones, read as URLSearchParams reads them", () => {
  const cases = [
    "",
    "epoch=17&version=4&wait=25&format=3&digest=00ff00ff00ff00ff",
    "epoch=1&epoch=2",
    "epoch&version=",
    "epoch==1&version=a=b",
    "&&epoch=1&&",
    "=1&epoch=2",
    "?epoch=1",
    "??epoch=1",
    "epoch=%31&version=1+2",
    "ep%6fch=5",
    "epoch=1%",
    "epochs=1&epoch=2",
    "a=1&ep=2&epoch=3",
    "repair=1",
    "wait=25&wait=",
  ];
  for (const q of cases) agrees(q);
});

test("the costliest queries a head can carry are read as URLSearchParams reads them", () => {
  // 16 KiB of pairs without "=" (each a near miss for the names read), and one long pair: each
  // get() looks at a pair from its start only, so these cost no more than their length.
  agrees("epoch&".repeat(2730));
  agrees(`${"epoc&".repeat(3000)}epoch=7`);
  agrees(`digest=${"f".repeat(16 << 10)}`);
  agrees(`${"e".repeat(16 << 10)}&version=3`);
});

test("random queries from the characters that matter read the same", () => {
  // A fixed seed (xorshift): the same queries every run.
  let s = 0x9e3779b9;
  const next = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
  const pieces = ["epoch", "version", "wait", "digest", "a", "ep", "=", "&", "?", "%", "%31", "+", "1", "f", ""];
  for (let i = 0; i < 5000; i++) {
    let q = "";
    const n = Math.floor(next() * 12);
    for (let j = 0; j < n; j++) q += pieces[Math.floor(next() * pieces.length)];
    agrees(q);
  }
});
