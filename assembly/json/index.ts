// JSON parsing and config reading for the filters: import from "../json" (or "./json").
export { JsonKind, JsonValue, JsonParseResult } from "./value";
export { parseJson, parseJsonString, MAX_DEPTH } from "./parser";
export { ConfigReader } from "./reader";
export { quoteForMessage, oneLine } from "./quote";
export { hashBytes, JsonNames, JsonStream, JsonToken } from "./stream";
export { writeJson } from "./write";
export { ByteSource, MemorySource } from "./source";
