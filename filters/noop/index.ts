// The smallest network filter: every callback keeps its default. Benchmarks use it to measure
// what the runtime itself costs per connection.
import { registerRootContext, RootContext } from "../../assembly/runtime";
export * from "../../assembly/runtime/exports";

registerRootContext("noop", (id: u32): RootContext => new RootContext(id));
