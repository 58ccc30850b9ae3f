// The shared mesh model: import from "../../assembly/mesh" (filters) or "../mesh" (assembly).
// See README.md for the configuration schema, the API and the memory budget.
export {
  Address,
  FAMILY_NONE,
  FAMILY_V4,
  FAMILY_V6,
  formatAddress,
  formatAddressUtf8,
  formatIp,
  IpParse,
  parseIpBytes,
  parseIpString,
  parseSocketAddress,
  parseSocketAddressString,
  writeAddress,
  writeIp,
} from "./ip";
export { LbMode, Mesh, RefTarget, Scope, TlsMode } from "./model";
export {
  DEFAULT_HBONE_PORT,
  MAX_ADDRESSES,
  MAX_LOCALITIES,
  MAX_NETWORKS,
  MAX_SERVICE_ITEMS,
  MAX_SERVICES,
  MAX_WORKLOADS,
  MESH_FIELDS,
  MeshLimits,
  MeshDocument,
  MeshParseResult,
  parseMesh,
  parseMeshConfig,
  parseMeshConfigString,
  parseMeshDocument,
  parseMeshSource,
} from "./parse";
export { destinationText, readDestination } from "./destination";
export {
  LOCAL_NETWORK_FIELD,
  LocalNetwork,
  NetworkSource,
  NODE_NETWORK_PATH,
  NodeNetwork,
  nodeNetworkFromHost,
  networkOfKind,
  readNodeNetwork,
  resolveLocalNetwork,
} from "./local_network";
export { applyMeshMessage, collectAfterMessage, COLLECT_AFTER_MESSAGE_BYTES, MeshApplyResult } from "./wire_apply";
export { KIND_DELTA, KIND_FULL, KIND_NO_CHANGE } from "./wire";
