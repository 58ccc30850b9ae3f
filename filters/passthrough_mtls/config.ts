// passthrough_mtls plugin configuration: the shared mesh model plus four fields of its own,
// parsed once per root context. See README.md for every field.
import { ConfigReader, parseJson } from "../../assembly/json";
import { Mesh, MESH_FIELDS, parseMesh } from "../../assembly/mesh";

export const MODE_DIRECT = "direct";
export const MODE_SUBSET = "subset";
export const DEFAULT_MTLS_CLUSTER = "outbound_mtls_passthrough";
export const DEFAULT_SUBSET_CLUSTER = "passthrough_mtls_subset";

const OWN_FIELDS = ["localNetwork", "mode", "mtlsCluster", "subsetCluster"];

export class PassthroughConfig {
  constructor(
    readonly mesh: Mesh,
    /** Interned id of this proxy's network ("" is always 0; another unknown name is -1). */
    readonly localNetwork: i32,
    readonly localNetworkName: string,
    readonly subsetMode: bool,
    /** UTF-8 cluster names, encoded once: they go to the host as they are. */
    readonly mtlsCluster: ArrayBuffer,
    readonly subsetCluster: ArrayBuffer,
  ) {}
}

export class PassthroughConfigResult {
  constructor(readonly config: PassthroughConfig | null, readonly error: string) {}
}

function refuse(error: string): PassthroughConfigResult {
  return new PassthroughConfigResult(null, error);
}

export function parsePassthroughConfig(bytes: ArrayBuffer): PassthroughConfigResult {
  const parsed = parseJson(bytes);
  const root = parsed.value;
  if (!parsed.ok() || root === null) return refuse(parsed.error);
  const reader = new ConfigReader();
  if (!root.isObject()) {
    reader.fail("", "expected an object");
    return refuse(reader.error());
  }
  reader.onlyKnownFields(root, "", OWN_FIELDS.concat(MESH_FIELDS));
  const localNetwork = reader.optionalString(root, "localNetwork", "", "");
  const mode = reader.optionalEnum(root, "mode", "", [MODE_DIRECT, MODE_SUBSET], MODE_DIRECT);
  const mtlsCluster = reader.optionalString(root, "mtlsCluster", "", DEFAULT_MTLS_CLUSTER);
  const subsetCluster = reader.optionalString(root, "subsetCluster", "", DEFAULT_SUBSET_CLUSTER);
  if (!reader.failed() && mtlsCluster.length == 0) reader.fail("mtlsCluster", "must not be empty");
  if (!reader.failed() && subsetCluster.length == 0) reader.fail("subsetCluster", "must not be empty");
  const mesh: Mesh | null = reader.failed() ? null : parseMesh(root, reader, "");
  if (mesh === null || reader.failed()) return refuse(reader.error());
  return new PassthroughConfigResult(
    new PassthroughConfig(
      mesh,
      mesh.networkId(localNetwork),
      localNetwork,
      mode == MODE_SUBSET,
      String.UTF8.encode(mtlsCluster),
      String.UTF8.encode(subsetCluster),
    ),
    "",
  );
}
