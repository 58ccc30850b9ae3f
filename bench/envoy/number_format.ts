// Fixed-point text for the report tables. Rounds the exact binary value half to even (toFixed
// rounds an exact tie up, which biases sums of many rounded cells), optionally with thousands
// separators and a sign.

/** `value` with `digits` decimals; `grouped`: 1,234,567; `signed`: a "+" on values ≥ 0. */
export function fixed(value: number, digits: number, options: { grouped?: boolean; signed?: boolean } = {}): string {
  if (!Number.isFinite(value)) return String(value);
  const negative = value < 0 || Object.is(value, -0);
  // toFixed(100) is the exact decimal expansion of any double of magnitude ≥ 2^-48 (fewer than
  // 100 fractional digits); anything smaller rounds to zero at the precisions used here.
  const exact = Math.abs(value).toFixed(100);
  const point = exact.indexOf(".");
  let kept = exact.slice(0, point) + exact.slice(point + 1, point + 1 + digits);
  const rest = exact.slice(point + 1 + digits);
  const last = Number(kept.at(-1));
  const roundUp = rest[0]! > "5" || (rest[0] === "5" && (/[1-9]/.test(rest.slice(1)) || last % 2 === 1));
  if (roundUp) kept = increment(kept);
  let whole = kept.slice(0, kept.length - digits);
  const fraction = kept.slice(kept.length - digits);
  if (options.grouped) whole = whole.replace(/\B(?=(\d{3})+$)/g, ",");
  const sign = negative ? "-" : options.signed ? "+" : "";
  return sign + whole + (digits > 0 ? "." + fraction : "");
}

/** A string of decimal digits plus one. */
function increment(digits: string): string {
  const out = digits.split("");
  for (let i = out.length - 1; i >= 0; i--) {
    if (out[i] !== "9") {
      out[i] = String(Number(out[i]) + 1);
      return out.join("");
    }
    out[i] = "0";
  }
  return "1" + out.join("");
}
