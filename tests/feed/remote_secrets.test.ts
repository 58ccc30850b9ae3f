// The checks a remote secret's kubeconfig passes before the feed builds a client from it: the
// rules of istiod's NewUntrustedRestConfig / sanitizeKubeConfig (its defaults: nothing that reads
// a local file or runs a program; `oidc` is the one auth provider allowed), and the Secret's
// data keys as cluster ids. The API-server side (a Secret added, rotated, deleted; impostors) is
// tests/feed/remote_clusters.test.ts.
// Run: node --import tsx --test tests/feed/remote_secrets.test.ts
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { stringify } from "yaml";
import { kubeconfigProblem, kubeconfigsOf, remoteKubeConfig } from "../../feed/src/remote_secrets.js";

function kubeconfig(user: Record<string, unknown>, o: { current?: string; server?: string } = {}): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "east", cluster: { server: o.server ?? "https://10.0.0.1:6443", "certificate-authority-data": "Y2E=" } }],
    users: [{ name: "east", user }],
    contexts: [{ name: "east", context: { cluster: "east", user: "east" } }],
    "current-context": o.current ?? "east",
  });
}

describe("feed: remote secrets' kubeconfigs", () => {
  it("accepts what create-remote-secret writes: a bearer token, or client certificate data, or the oidc auth provider", () => {
    assert.equal(kubeconfigProblem(kubeconfig({ token: "abc" })), "");
    assert.equal(kubeconfigProblem(kubeconfig({ "client-certificate-data": "Y2VydA==", "client-key-data": "a2V5" })), "");
    assert.equal(kubeconfigProblem(kubeconfig({ "auth-provider": { name: "oidc", config: { "id-token": "x" } } })), "");
  });

  for (const [what, user, message] of [
    ["a program to run (exec)", { exec: { apiVersion: "client.authentication.k8s.io/v1", command: "/bin/sh" } }, 'user "east": exec is not allowed'],
    ["the gcp auth provider", { "auth-provider": { name: "gcp" } }, 'user "east": auth provider "gcp" is not allowed'],
    ["a client certificate file", { "client-certificate": "/etc/passwd", "client-key-data": "a2V5" }, 'user "east": client-certificate is not allowed (a local file; use the -data field)'],
    ["a client key file", { "client-certificate-data": "Y2VydA==", "client-key": "/var/run/secrets/key" }, 'user "east": client-key is not allowed (a local file; use the -data field)'],
    ["a token file", { tokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token" }, 'user "east": tokenFile is not allowed (a local file; use the -data field)'],
    ["a token file as client-node spells it (read while the kubeconfig loads)", { "token-file": "/etc/shadow" }, 'user "east": token-file is not allowed (a local file; use the -data field)'],
  ] as const) {
    it(`refuses ${what}`, () => {
      assert.equal(kubeconfigProblem(kubeconfig(user as Record<string, unknown>)), message);
    });
  }

  it("refuses an empty, unparsable or incomplete kubeconfig with one line", () => {
    assert.equal(kubeconfigProblem(""), "kubeconfig is empty");
    assert.match(kubeconfigProblem("a: [unclosed"), /^kubeconfig cannot be loaded: /);
    assert.equal(kubeconfigProblem("- a list"), "kubeconfig cannot be loaded: not a mapping");
    assert.equal(kubeconfigProblem(kubeconfig({ token: "t" }, { current: "" })), "kubeconfig is not valid: no current-context");
    assert.equal(kubeconfigProblem(kubeconfig({ token: "t" }, { current: "west" })), 'kubeconfig is not valid: context "west" not found');
    assert.equal(kubeconfigProblem(kubeconfig({ token: "t" }, { server: "" })), 'kubeconfig is not valid: context "east" names no cluster with a server');
    for (const p of [kubeconfigProblem(""), kubeconfigProblem("a: [unclosed\nb: c")]) assert.ok(!p.includes("\n"));
  });

  it("the check and the client read one document: a merge key (<<) hiding exec, which the client's own YAML parser would apply, gives the client no exec", () => {
    // js-yaml (the client's parser) merges `<<: *a` into the user; the check's YAML 1.2 parser
    // keeps `<<` as a plain key. The client is built from the checked document, as JSON.
    const text = [
      "apiVersion: v1",
      "kind: Config",
      "x-hidden: &a { exec: { apiVersion: client.authentication.k8s.io/v1, command: /bin/sh } }",
      "clusters: [{ name: east, cluster: { server: 'https://10.0.0.1:6443' } }]",
      "users: [{ name: east, user: { <<: *a, token: abc } }]",
      "contexts: [{ name: east, context: { cluster: east, user: east } }]",
      "current-context: east",
    ].join("\n");
    assert.equal(kubeconfigProblem(text), "");
    const kc = remoteKubeConfig(text);
    assert.equal(kc.getCurrentUser()?.exec, undefined, "no exec reaches the client");
    assert.equal(kc.getCurrentUser()?.token, "abc");
    assert.equal(kc.getCurrentCluster()?.server, "https://10.0.0.1:6443");
    // Control: the same text given to the client directly would carry the exec.
    const direct = new (kc.constructor as new () => typeof kc)();
    direct.loadFromString(text);
    assert.ok(direct.getCurrentUser()?.exec, "js-yaml applies the merge key");
    // And a refused kubeconfig never reaches a client.
    assert.throws(() => remoteKubeConfig(kubeconfig({ "token-file": "/etc/shadow" })), /token-file is not allowed/);
  });

  it("an alias bomb is refused, not expanded (bounded cost)", () => {
    const bomb = ["a: &a [x, x, x, x, x, x, x, x, x, x]", ...Array.from({ length: 8 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(10).fill("*" + String.fromCharCode(97 + i)).join(", ")}]`)].join("\n");
    assert.match(kubeconfigProblem(bomb), /^kubeconfig cannot be loaded: /);
  });

  it("each data key is a cluster id, its value (base64 in the API) the kubeconfig", () => {
    const text = kubeconfig({ token: "abc" });
    const m = kubeconfigsOf({ metadata: { name: "istio-remote-secret-east" }, data: { east: Buffer.from(text).toString("base64"), west: Buffer.from("x").toString("base64") } });
    assert.deepEqual([...m.keys()], ["east", "west"]);
    assert.equal(m.get("east"), text);
    assert.equal(kubeconfigsOf({ metadata: { name: "empty" } }).size, 0);
  });
});
