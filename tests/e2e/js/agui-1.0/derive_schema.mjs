// Writes the AG-UI 1.0 JSON Schema the tests validate against (tests/support/agui/), derived
// from @ag-ui/core 1.0.4's validators (@ag-ui/core/schemas), which are themselves generated
// from the specification's schema (https://ag-ui.com/spec/1.0/schema.json). The published file
// is not in any package and the tests run without a network, so this derivation is what the
// repository keeps. One change to what zod writes: the specification closes every object that
// declares its members (the client strips and warns about anything else), while the validators
// pass unknown members through for the client's stripper; such objects are closed here.
//
// Usage (from this folder): node derive_schema.mjs > ../../../support/agui/ag-ui-1.0.schema.json
import * as schemas from "@ag-ui/core/schemas";
import { z } from "zod/v4";

function close(node) {
  if (Array.isArray(node)) return node.map(close);
  if (node === null || typeof node !== "object") return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) out[key] = close(value);
  if (out.type === "object" && out.properties && !("additionalProperties" in node && node.additionalProperties === false)) {
    out.additionalProperties = false;
  }
  return out;
}

function derive(schema) {
  const { $schema, ...rest } = z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io: "input",  // the wire: a member the SDK defaults when absent is optional
    unrepresentable: "any",
  });
  return close(rest);
}

const document = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  title: "AG-UI 1.0 event (derived from @ag-ui/core 1.0.4's validators)",
  $comment:
    "Derived by tests/e2e/js/agui-1.0/derive_schema.mjs from @ag-ui/core@1.0.4 (protocol version " +
    schemas.PROTOCOL_VERSION +
    "), whose validators are generated from https://ag-ui.com/spec/1.0/schema.json. Do not edit.",
  $ref: "#/$defs/Event",
  $defs: {
    Event: derive(schemas.EventSchema),
    RunAgentInput: derive(schemas.RunAgentInputSchema),
  },
};
process.stdout.write(JSON.stringify(document, null, 1) + "\n");
