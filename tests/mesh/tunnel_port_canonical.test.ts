// tunnel_port in the real Envoy: authorization and routing decide on the same service port and
// target port. A client hand-drives HBONE CONNECTs (real mTLS, test-made SPIFFE certificates) to
// the server sidecar of envoy-configs/tunnel_port_server.yaml with spellings an exact-match RBAC
// rule and a lenient parser could read differently ("081" is not "81" to RBAC but was 81 to the
// filter) and with the header repeated (RBAC's header rule matches ANY of several values, the
// filter was handed the first). Each one must be refused before the application is connected,
// and counted; the canonical value must still work.
//
// Four server sidecars, one after the other, for the same pod: the shipped config (guard + a DENY
// rule for service port 81), the same guard with an ALLOW-only rule (only 80), and both rules
// without the guard, where the filter's own checks (canonical service port, authority text equal
// to the canonical spelling of the address Envoy parsed from it) must still refuse what the rule
// let through. What the rules match is Envoy 1.40's behaviour, written down in policyRefuses().
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { parse } from "yaml";
import { EnvoyProcess } from "../support/envoy.js";
import { shippedConfig } from "../support/envoy_yaml.js";
import { hboneConnect, type ConnectHeaders } from "../support/hbone.js";
import { startBackend, type Backend } from "../support/tcp.js";
import { CERT_DIR, writeDemoCerts } from "../../scripts/demo-certs.js";

const POD = "127.0.0.21";
const AUTHORITY = `${POD}:9376`; // admin.default: 80 -> 9376 and 81 -> 9376 on this pod
const HEADER = "x-tunnel-service-port";
const GUARD_DENIED = "http.tunnel_port_inbound.rbac.tunnel_port_guard_.denied";
const POLICY_DENIED = "http.tunnel_port_inbound.rbac.denied";
const MALFORMED = "wasmcustom.tunnel_port.server.refused_malformed_port";
const MISSING = "wasmcustom.tunnel_port.server.refused_missing_port";
const MALFORMED_AUTHORITY = "wasmcustom.tunnel_port.server.refused_malformed_authority";
const ACCEPTED = "wasmcustom.tunnel_port.server.accepted";
/** Envoy's HTTP/2 codec refused the request itself (a malformed header field). */
const CODEC_ERROR = "http2.rx_messaging_error";

type Policy = "deny-81" | "allow-only-80";

/** Service-port spellings that are not one canonical port (ASCII decimal 1-65535, no leading
 *  zero, sign, space or other byte). */
const NON_CANONICAL: readonly string[] = [
  "081", "0081", "080", "+80", "-80", " 80", "80 ", " 81", "81 ", "0x50", "80a", "8O", "0", "00",
  "65536", "99999", "123456", "", "81,80", "80,81", "8".repeat(8000), "8\t0", "8\u00a00",
];
/** The header sent twice or more, each field canonical. */
const REPEATED: readonly string[][] = [["81", "80"], ["80", "81"], ["80", "80"], ["81", "81"], ["80", "80", "81"]];
/** Authorities whose target port (or address) is not in canonical form. */
const NON_CANONICAL_AUTHORITIES: readonly string[] = [
  `${POD}:09376`, `${POD}:+9376`, `${POD}:009376`, `[::ffff:${POD}]:9376`, `${POD}:65536`,
  `${POD}:0`, `${POD}:`, POD, `${POD}:9376,${POD}:7777`, `127.0.0.021:9376`,
];
/** Of those, the ones Envoy's original_dst still parses into an address (measured: it reads
 *  "09376" and "+9376" as 9376, and takes the IPv4-mapped form); the rest give no destination. */
const PARSED_BY_ENVOY: ReadonlySet<string> = new Set([`${POD}:09376`, `${POD}:+9376`, `${POD}:009376`, `[::ffff:${POD}]:9376`]);
/** Authorities Envoy's HTTP/2 codec itself refuses (measured: http2.invalid.header.field). */
const CODEC_REFUSED_AUTHORITIES: readonly string[] = [`${POD}:9376 `, ` ${POD}:9376`];

/**
 * What the classic HTTP RBAC header rule of each policy does with the values of one header, as
 * Envoy 1.40 evaluates it (measured: with the header repeated, an exact rule matches when ANY
 * one value matches; a missing header matches nothing).
 */
function policyRefuses(policy: Policy, values: readonly string[]): boolean {
  return policy === "deny-81" ? values.includes("81") : !values.includes("80");
}

/** The server sidecar config for one variant, from the shipped file. */
function serverConfig(policy: Policy, guard: boolean): object {
  const config = parse(shippedConfig("tunnel_port_server.yaml"));
  const hcm = config.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const names = hcm.http_filters.map((f: { name: string }) => f.name);
  assert.deepEqual(names, ["tunnel_port.guard", "envoy.filters.http.rbac", "envoy.filters.http.set_filter_state", "envoy.filters.http.router"]);
  if (!guard) hcm.http_filters.shift();
  const rbac = hcm.http_filters.find((f: { name: string }) => f.name === "envoy.filters.http.rbac").typed_config;
  assert.equal(rbac.rules.action, "DENY", "the shipped policy denies service port 81");
  if (policy === "allow-only-80") {
    rbac.rules = {
      action: "ALLOW",
      policies: { "allow-service-port-80": { permissions: [{ header: { name: HEADER, string_match: { exact: "80" } } }], principals: [{ any: true }] } },
    };
  }
  return config;
}

function show(values: readonly string[]): string {
  return JSON.stringify(values.map((v) => (v.length > 20 ? `${v.slice(0, 8)}…(${v.length} bytes)` : v)));
}

for (const guard of [true, false]) {
  for (const policy of ["deny-81", "allow-only-80"] as const) {
    describe(`tunnel_port server, ${guard ? "guard" : "NO guard (the filter alone)"} + ${policy} rule`, () => {
      let envoy: EnvoyProcess;
      let app: Backend;
      let sentinel: Backend; // a port this pod does not serve

      before(async () => {
        await writeDemoCerts();
        app = await startBackend("app-p1-9376", POD, 9376);
        sentinel = await startBackend("sentinel-7777", POD, 7777);
        envoy = await EnvoyProcess.start({ name: `tunnel-port-canonical-${guard ? "guard" : "noguard"}-${policy}`, adminPort: 15000, adminAddress: POD, config: serverConfig(policy, guard) });
      });

      after(async () => {
        await envoy?.stop();
        await app?.close();
        await sentinel?.close();
      });

      /** One CONNECT; returns whether the app saw a connection and how each counter moved. */
      async function tunnel(authority: string, headers: ConnectHeaders) {
        const sentinelAccepted = sentinel.accepted;
        const before = await envoy.stats();
        const accepted = app.accepted;
        const result = await hboneConnect(`${POD}:15008`, authority, headers, CERT_DIR, "sidecar", "payload", 2000);
        const stats = await envoy.waitForStats((s) => [GUARD_DENIED, POLICY_DENIED, MALFORMED, MISSING, MALFORMED_AUTHORITY, ACCEPTED, CODEC_ERROR].some((k) => (s.get(k) ?? 0) !== (before.get(k) ?? 0)), 3000);
        const delta = (name: string) => (stats.get(name) ?? 0) - (before.get(name) ?? 0);
        return {
          status: result.status,
          reachedApp: app.accepted !== accepted || result.received.includes("app-p1") || sentinel.accepted !== sentinelAccepted,
          guard: delta(GUARD_DENIED),
          policy: delta(POLICY_DENIED),
          malformed: delta(MALFORMED),
          missing: delta(MISSING),
          malformedAuthority: delta(MALFORMED_AUTHORITY),
          accepted: delta(ACCEPTED),
        };
      }

      /** Asserts one refused CONNECT: no app connection, and counted by the component that should. */
      function assertRefused(what: string, outcome: Awaited<ReturnType<typeof tunnel>>, values: readonly string[]) {
        assert.equal(outcome.reachedApp, false, `${what}: the application was connected`);
        assert.notEqual(outcome.status, 200, `${what}: the tunnel was established`);
        assert.equal(outcome.accepted, 0, `${what}: the filter accepted it`);
        if (guard) {
          assert.deepEqual([outcome.guard, outcome.policy, outcome.malformed, outcome.missing], [1, 0, 0, 0], `${what}: refused by the guard (403), once`);
          assert.equal(outcome.status, 403, what);
        } else if (policyRefuses(policy, values)) {
          assert.deepEqual([outcome.policy, outcome.malformed, outcome.missing], [1, 0, 0], `${what}: refused by the ${policy} rule`);
        } else {
          // The rule let it through; the filter sees every value joined by "," and refuses.
          const absent = values.length === 0 || (values.length === 1 && values[0] === "");
          assert.deepEqual([outcome.policy, outcome.malformed, outcome.missing], absent ? [0, 0, 1] : [0, 1, 0], `${what}: refused by the filter`);
        }
      }

      it("the canonical service port still works, and the rule still decides on it", async () => {
        const allowed = await tunnel(AUTHORITY, { [HEADER]: "80" });
        assert.equal(allowed.status, 200);
        assert.equal(allowed.reachedApp, true);
        assert.equal(allowed.accepted, 1);
        const denied = await tunnel(AUTHORITY, { [HEADER]: "81" });
        assert.equal(denied.status, 403, "81 is refused by both policies");
        assert.equal(denied.reachedApp, false);
        assert.equal(denied.policy, 1);
        if (guard) assert.equal(denied.guard, 0, "a canonical value passes the guard");
      });

      it("refuses every non-canonical spelling of the service port before the app connects, counted", async () => {
        for (const value of NON_CANONICAL) assertRefused(`service port ${show([value])}`, await tunnel(AUTHORITY, { [HEADER]: value }), [value]);
      });

      it("refuses the header repeated, in either order, before the app connects, counted", async () => {
        for (const values of REPEATED) assertRefused(`service port headers ${show(values)}`, await tunnel(AUTHORITY, { [HEADER]: values }), values);
      });

      it("refuses a CONNECT without the header, counted", async () => {
        assertRefused("no service port header", await tunnel(AUTHORITY, {}), []);
      });

      if (guard) {
        it("refuses a non-canonical authority (target port or address spelling) before the app connects, counted", async () => {
          for (const authority of NON_CANONICAL_AUTHORITIES) {
            const outcome = await tunnel(authority, { [HEADER]: "80" });
            assert.equal(outcome.reachedApp, false, `authority ${authority}: the application was connected`);
            assert.equal(outcome.status, 403, `authority ${authority}`);
            assert.equal(outcome.guard, 1, `authority ${authority}: counted by the guard`);
          }
          for (const authority of CODEC_REFUSED_AUTHORITIES) {
            const before = (await envoy.stats()).get(CODEC_ERROR) ?? 0;
            const outcome = await tunnel(authority, { [HEADER]: "80" });
            assert.equal(outcome.reachedApp, false, `authority ${JSON.stringify(authority)}: the application was connected`);
            assert.notEqual(outcome.status, 200);
            const after = (await envoy.stats()).get(CODEC_ERROR) ?? 0;
            assert.equal(after - before, 1, `authority ${JSON.stringify(authority)}: refused by the HTTP/2 codec, counted`);
          }
        });

        it("a host header beside :authority changes nothing: the target stays the authority's, the unserved port is never reached", async () => {
          const outcome = await tunnel(AUTHORITY, { [HEADER]: "80", host: `${POD}:7777` });
          assert.equal(sentinel.accepted, 0, "port 7777 was reached through a host header");
          assert.equal(outcome.guard + outcome.policy + outcome.malformed + outcome.missing + outcome.malformedAuthority + outcome.accepted, 1, "decided once, by one component");
        });
      } else {
        it("without the guard, the filter refuses a non-canonical authority itself: it compares the text with the address Envoy parsed", async () => {
          for (const authority of NON_CANONICAL_AUTHORITIES) {
            const outcome = await tunnel(authority, { [HEADER]: "80" });
            assert.equal(outcome.reachedApp, false, `authority ${authority}: the application was connected`);
            assert.notEqual(outcome.status, 200, `authority ${authority}`);
            const expected = PARSED_BY_ENVOY.has(authority) ? [1, 0] : [0, 1];
            assert.deepEqual([outcome.malformedAuthority, outcome.missing], expected, `authority ${authority}: ${PARSED_BY_ENVOY.has(authority) ? "refused_malformed_authority" : "refused_missing_port (no destination)"}`);
          }
        });
      }
    });
  }
}
