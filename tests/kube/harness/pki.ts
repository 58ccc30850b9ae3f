// The API server's credentials, made fresh for every cluster the harness starts: a CA, the
// serving certificate for 127.0.0.1, client certificates (the user is the CN, the groups are
// O entries, exactly how kube-apiserver's x509 authenticator reads them), and the service-account
// signing key pair that TokenRequest needs. ECDSA P-256 throughout: quick to generate.
import { webcrypto } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
// @peculiar/x509 resolves its services through tsyringe, which needs the Reflect metadata polyfill.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const ALGORITHM = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY_MS = 24 * 3600_000;

export interface ClientCredentials {
  cert: string;
  key: string;
}

export interface ClusterPki {
  caPath: string;
  ca: string;
  servingCertPath: string;
  servingKeyPath: string;
  serviceAccountPublicKeyPath: string;
  serviceAccountSigningKeyPath: string;
  /** A client certificate for `user` in `groups` (system:masters is cluster-admin, RBAC or not). */
  client(user: string, groups?: string[]): Promise<ClientCredentials>;
}

function pem(label: string, der: ArrayBuffer): string {
  const base64 = Buffer.from(der).toString("base64").replace(/(.{64})/g, "$1\n");
  return `-----BEGIN ${label}-----\n${base64}\n-----END ${label}-----\n`;
}

async function keyPair(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(ALGORITHM, true, ["sign", "verify"])) as CryptoKeyPair;
}

async function privatePem(keys: CryptoKeyPair): Promise<string> {
  return pem("PRIVATE KEY", await webcrypto.subtle.exportKey("pkcs8", keys.privateKey));
}

/** RFC 4514 name; a value with a comma or similar would need escaping, so refuse it. */
function distinguishedName(commonName: string, organizations: string[]): string {
  for (const value of [commonName, ...organizations]) {
    if (/[,+"\\<>;=]/.test(value)) throw new Error(`kube harness: certificate name part '${value}' has a character that needs escaping`);
  }
  return [`CN=${commonName}`, ...organizations.map((group) => `O=${group}`)].join(", ");
}

export async function createClusterPki(dir: string, clusterName: string): Promise<ClusterPki> {
  const now = Date.now();
  let serial = 1;
  const nextSerial = () => (serial++).toString(16).padStart(2, "0");

  const caKeys = await keyPair();
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: nextSerial(),
    name: `CN=${clusterName}-ca`,
    notBefore: new Date(now - 3600_000),
    notAfter: new Date(now + 7 * DAY_MS),
    keys: caKeys,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    ],
  });
  const ca = caCert.toString("pem") + "\n";

  async function issue(subject: string, usage: x509.ExtendedKeyUsage, names: x509.JsonGeneralName[]): Promise<ClientCredentials> {
    const keys = await keyPair();
    const extensions: x509.Extension[] = [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([usage]),
    ];
    if (names.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(names));
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: nextSerial(),
      subject,
      issuer: caCert.subject,
      notBefore: new Date(now - 3600_000),
      notAfter: new Date(now + 7 * DAY_MS),
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: ALGORITHM,
      extensions,
    });
    return { cert: cert.toString("pem") + "\n", key: await privatePem(keys) };
  }

  const serving = await issue(distinguishedName("kube-apiserver", []), x509.ExtendedKeyUsage.serverAuth, [
    { type: "ip", value: "127.0.0.1" },
    { type: "dns", value: "localhost" },
    { type: "dns", value: "kubernetes.default.svc" },
  ]);
  const saKeys = await keyPair();

  const paths = {
    caPath: join(dir, "ca.crt"),
    servingCertPath: join(dir, "apiserver.crt"),
    servingKeyPath: join(dir, "apiserver.key"),
    serviceAccountPublicKeyPath: join(dir, "sa.pub"),
    serviceAccountSigningKeyPath: join(dir, "sa.key"),
  };
  writeFileSync(paths.caPath, ca);
  writeFileSync(paths.servingCertPath, serving.cert);
  writeFileSync(paths.servingKeyPath, serving.key, { mode: 0o600 });
  writeFileSync(paths.serviceAccountPublicKeyPath, pem("PUBLIC KEY", await webcrypto.subtle.exportKey("spki", saKeys.publicKey)));
  writeFileSync(paths.serviceAccountSigningKeyPath, await privatePem(saKeys), { mode: 0o600 });

  return {
    ...paths,
    ca,
    client: (user, groups = []) => issue(distinguishedName(user, groups), x509.ExtendedKeyUsage.clientAuth, []),
  };
}
