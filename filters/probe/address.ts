// Splits Envoy's printed socket address ("10.0.0.1:80", "[::1]:80") into its IP part.

/** The IP of "ip:port" / "[ipv6]:port"; the input unchanged when it has no port. */
export function hostOfAddress(address: string): string {
  if (address.startsWith("[")) {
    const close = address.indexOf("]");
    return close > 0 ? address.substring(1, close) : address;
  }
  const colon = address.lastIndexOf(":");
  return colon > 0 ? address.substring(0, colon) : address;
}
