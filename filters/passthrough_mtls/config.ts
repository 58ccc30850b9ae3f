// passthrough_mtls plugin configuration: the shared mesh model plus six fields of its own,
// parsed once per root context. See README.md for every field.
import { ByteSource, ConfigReader } from "../../assembly/json";
import { acceptConfig, ConfigResult, refuseConfig } from "../../assembly/runtime/config_root";
import { FeedConfig, MESH_FEED_FIELD, readFeedConfig } from "../../assembly/runtime/feed_config";
import { LocalNetwork, Mesh, MeshDocument, NodeNetwork, parseMeshDocument, parseMeshSource, resolveLocalNetwork } from "../../assembly/mesh";

export const MODE_DIRECT = "direct";
export const MODE_SUBSET = "subset";
export const DEFAULT_MTLS_CLUSTER = "outbound_mtls_passthrough";
export const DEFAULT_SUBSET_CLUSTER = "passthrough_mtls_subset";

const OWN_FIELDS = ["localNetwork", "mode", "mtlsCluster", "subsetCluster", "lbAddress", MESH_FEED_FIELD];

export class PassthroughConfig {
  /** Where live changes come from (null: the snapshot above is the model until the next configuration). */
  feed: FeedConfig | null = null;

  constructor(
    /** The model; replaced when the mesh feed delivers a new one (adoptMesh). */
    public mesh: Mesh,
    /** Interned id of this proxy's network ("" is always 0; another unknown name is -1). */
    public localNetwork: i32,
    readonly localNetworkName: string,
    /** The name and where it came from (localNetwork, node metadata NETWORK or the default). */
    readonly network: LocalNetwork,
    readonly subsetMode: bool,
    /** UTF-8 cluster names, encoded once: they go to the host as they are. */
    readonly mtlsCluster: ArrayBuffer,
    readonly subsetCluster: ArrayBuffer,
    /**
     * Write lb_address (the envoy.lb.address value) for every mesh pod: always in subset mode (its
     * bridge reads it), in direct mode only when `lbAddress: true` asks (an access log, say).
     */
    readonly writeLbAddress: bool,
  ) {}
}

/**
 * Streams the configuration (no JSON tree: a million pods fit) and reads the six own fields
 * from the small object parseMeshDocument hands back. Own-field problems are reported before
 * mesh problems, as the fields are checked first.
 */
export function parsePassthroughConfig(bytes: ArrayBuffer, node: NodeNetwork = NodeNetwork.absent()): ConfigResult<PassthroughConfig> {
  return configOf(parseMeshDocument(bytes, OWN_FIELDS), node);
}

/** parsePassthroughConfig over the host's configuration, read in windows (never whole in memory). */
export function parsePassthroughConfigFrom(source: ByteSource, node: NodeNetwork): ConfigResult<PassthroughConfig> {
  return configOf(parseMeshSource(source, OWN_FIELDS), node);
}

function configOf(doc: MeshDocument, node: NodeNetwork): ConfigResult<PassthroughConfig> {
  const root = doc.own;
  if (root === null) return refuseConfig<PassthroughConfig>(doc.error); // JSON, root type or unknown field
  const reader = new ConfigReader();
  const network = resolveLocalNetwork(reader, root, node);
  const mode = reader.optionalEnum(root, "mode", "", [MODE_DIRECT, MODE_SUBSET], MODE_DIRECT);
  const mtlsCluster = reader.optionalString(root, "mtlsCluster", "", DEFAULT_MTLS_CLUSTER);
  const subsetCluster = reader.optionalString(root, "subsetCluster", "", DEFAULT_SUBSET_CLUSTER);
  // Absent means false; read with the other fallback too, an explicit false is told apart.
  const lbAddress = reader.optionalBool(root, "lbAddress", "", false);
  const lbAddressRefused = !reader.optionalBool(root, "lbAddress", "", true);
  if (!reader.failed() && mode == MODE_SUBSET && lbAddressRefused) reader.fail("lbAddress", "subset mode needs it (its bridge balances on wasm.lb_address)");
  const feed = readFeedConfig(reader, root);
  if (!reader.failed() && mtlsCluster.length == 0) reader.fail("mtlsCluster", "must not be empty");
  if (!reader.failed() && subsetCluster.length == 0) reader.fail("subsetCluster", "must not be empty");
  if (reader.failed()) return refuseConfig<PassthroughConfig>(reader.error());
  const mesh = doc.mesh;
  if (mesh === null) return refuseConfig<PassthroughConfig>(doc.error);
  const config = new PassthroughConfig(
    mesh,
    mesh.networkId(network.name),
    network.name,
    network,
    mode == MODE_SUBSET,
    String.UTF8.encode(mtlsCluster),
    String.UTF8.encode(subsetCluster),
    mode == MODE_SUBSET || lbAddress,
  );
  config.feed = feed;
  return acceptConfig<PassthroughConfig>(config);
}

/** A model from the mesh feed: the network's interned id is the only thing derived from it. */
export function adoptMesh(config: PassthroughConfig, mesh: Mesh): string {
  config.localNetwork = mesh.networkId(config.localNetworkName);
  config.mesh = mesh;
  return "";
}
