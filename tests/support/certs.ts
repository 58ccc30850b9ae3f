// Test-made PKI: a mesh CA and leaf certificates carrying SPIFFE URI SANs, written as PEM files
// Envoy and node:tls can load. Keys are ECDSA P-256 (fast to generate).
import { webcrypto } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
// @peculiar/x509 resolves its services through tsyringe, which needs the Reflect metadata polyfill.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const ALGORITHM = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

export interface PemPair {
  certPath: string;
  keyPath: string;
  cert: string;
  key: string;
}

export interface TestCa extends PemPair {
  /** Issues a leaf certificate (client and server usage) with these URI SANs. */
  issue(name: string, uris: string[], dnsNames?: string[]): Promise<PemPair>;
}

function pem(label: string, der: ArrayBuffer): string {
  const base64 = Buffer.from(der).toString("base64").replace(/(.{64})/g, "$1\n");
  return `-----BEGIN ${label}-----\n${base64}\n-----END ${label}-----\n`;
}

let serial = 1;
function nextSerial(): string {
  return (serial++).toString(16).padStart(2, "0");
}

function save(dir: string, name: string, cert: string, key: string): PemPair {
  const certPath = join(dir, `${name}.crt`);
  const keyPath = join(dir, `${name}.key`);
  writeFileSync(certPath, cert);
  writeFileSync(keyPath, key);
  return { certPath, keyPath, cert, key };
}

/**
 * A fresh key pair and a certificate it signs itself, valid from an hour ago for a day, saved as
 * `<dir>/<name>.crt` and `.key`: a CA (`extensions` make it one) or a self-signed leaf.
 */
async function selfSigned(dir: string, name: string, extensions: x509.Extension[]): Promise<PemPair & { cert509: x509.X509Certificate; keys: CryptoKeyPair }> {
  mkdirSync(dir, { recursive: true });
  const keys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ["sign", "verify"])) as CryptoKeyPair;
  const now = Date.now();
  const cert509 = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: nextSerial(),
    name: `CN=${name}`,
    notBefore: new Date(now - 3600_000),
    notAfter: new Date(now + 24 * 3600_000),
    keys,
    signingAlgorithm: ALGORITHM,
    extensions,
  });
  const key = pem("PRIVATE KEY", await webcrypto.subtle.exportKey("pkcs8", keys.privateKey));
  return { ...save(dir, name, cert509.toString("pem") + "\n", key), cert509, keys };
}

/** Creates a CA named `name` in `dir`. */
export async function createCa(dir: string, name = "mesh-ca"): Promise<TestCa> {
  const { cert509, keys, ...saved } = await selfSigned(dir, name, [
    new x509.BasicConstraintsExtension(true, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
  ]);
  return { ...saved, issue: issuer(dir, cert509, keys.privateKey) };
}

/** An existing CA (`<dir>/<name>.crt` and `.key`, as createCa wrote them) that issues into `outDir`. */
export async function loadCa(dir: string, name: string, outDir = dir): Promise<TestCa> {
  mkdirSync(outDir, { recursive: true });
  const certPath = join(dir, `${name}.crt`);
  const keyPath = join(dir, `${name}.key`);
  const cert = readFileSync(certPath, "utf8");
  const key = readFileSync(keyPath, "utf8");
  const der = Buffer.from(key.replace(/-----[^-]+-----|\s/g, ""), "base64");
  const signingKey = await webcrypto.subtle.importKey("pkcs8", der, { name: "ECDSA", namedCurve: "P-256" }, true, ["sign"]);
  return { certPath, keyPath, cert, key, issue: issuer(outDir, new x509.X509Certificate(cert), signingKey as unknown as CryptoKey) };
}

/** Issues leaf certificates (client and server usage) signed by the CA, written to `dir`. */
function issuer(dir: string, caCert: x509.X509Certificate, caKey: CryptoKey): TestCa["issue"] {
  const now = Date.now();
  return async function issue(leafName: string, uris: string[], dnsNames: string[] = []): Promise<PemPair> {
    const leafKeys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ["sign", "verify"])) as CryptoKeyPair;
    const names = [...uris.map((value) => ({ type: "url" as const, value })), ...dnsNames.map((value) => ({ type: "dns" as const, value }))];
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: nextSerial(),
      subject: `CN=${leafName}`,
      issuer: caCert.subject,
      notBefore: new Date(now - 3600_000),
      notAfter: new Date(now + 24 * 3600_000),
      publicKey: leafKeys.publicKey,
      signingKey: caKey,
      signingAlgorithm: ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
        new x509.SubjectAlternativeNameExtension(names),
      ],
    });
    const key = pem("PRIVATE KEY", await webcrypto.subtle.exportKey("pkcs8", leafKeys.privateKey));
    return save(dir, leafName, cert.toString("pem") + "\n", key);
  };
}

/** A self-signed leaf certificate (its own issuer, no CA behind it) with these URI SANs. */
export async function createSelfSigned(dir: string, name: string, uris: string[]): Promise<PemPair> {
  const { cert509: _, keys: __, ...saved } = await selfSigned(dir, name, [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
    new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
    new x509.SubjectAlternativeNameExtension(uris.map((value) => ({ type: "url" as const, value }))),
  ]);
  return saved;
}

/** SPIFFE identity of a service account. */
export function spiffe(namespace: string, serviceAccount: string, trustDomain = "cluster.local"): string {
  return `spiffe://${trustDomain}/ns/${namespace}/sa/${serviceAccount}`;
}
