// The live connection contexts by id, shared by the lifecycle exports (exports.ts) and the
// optional data exports (exports_data.ts). Connections come and go all the time: a table that
// allocates nothing per connection.
import { ConnectionContext } from "./context";
import { ContextTable } from "./context_table";

export const connections = new ContextTable<ConnectionContext>();
