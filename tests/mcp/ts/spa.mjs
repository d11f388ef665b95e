// A TypeScript-SDK McpServer upstream for the gateway's tests (QA qa-new15b S2).
// book_spa commits first, then returns structured content that breaks its own
// outputSchema: the SDK validates after the handler ran and answers an isError
// result although the booking was made. State in $SPA_STATE ({"booked": n}).
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";
import fs from "node:fs";

const STATE = process.env.SPA_STATE;
const load = () => { try { return JSON.parse(fs.readFileSync(STATE, "utf8")); } catch { return { booked: 0 }; } };
const server = new McpServer({ name: "spa-ts", version: "1.0.0" });
server.registerResource("spa", "inv://spa", { mimeType: "application/json" },
  async (uri) => ({ contents: [{ uri: uri.href, text: JSON.stringify(load()) }] }));
server.registerTool("book_spa", {
  description: "Book a spa slot.",
  inputSchema: { guest_id: z.number().int() },
  outputSchema: { spa_id: z.string(), total: z.number() },
}, async () => {
  const s = load(); s.booked += 1; fs.writeFileSync(STATE, JSON.stringify(s));
  const out = { spa_id: `S${s.booked}`, total: "45.00" };  // the bug: a string
  return { content: [{ type: "text", text: JSON.stringify(out) }], structuredContent: out };
});
await server.connect(new StdioServerTransport());
