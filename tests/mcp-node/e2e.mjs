// The end-to-end test's client: the official TypeScript MCP SDK spawns
// `mneme mcp` over stdio, lists the tools, adds a conversation, prints
// {"phase":"added"}, waits for a line on stdin (the test starts the sidecar
// and answers once it has segmented the conversation and run every job),
// then recalls it. Recalling only after the sidecar finished makes the
// result reproducible: recalled earlier, what comes back depends on which
// jobs ran yet. Usage: node e2e.mjs BIN CONV (DATABASE_URL in the
// environment). Prints the phase line, then one JSON line of what it saw;
// exits 1 on any failure.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, conv] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: bin, args: ["mcp"], env: process.env, stderr: "inherit" });
const client = new Client({ name: "mneme-e2e", version: "1.0.0" });
await client.connect(transport);

const tools = (await client.listTools()).tools.map((t) => t.name).sort();
const call = async (name, args) => {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) throw new Error(`${name}: ${res.content.map((c) => c.text).join(" ")}`);
  return res;
};

const day = Date.UTC(2026, 2, 1, 9, 0, 0);
const lines = [
  ["user", "I started learning the violin last month"],
  ["assistant", "How are the lessons going?"],
  ["user", "My teacher Anna says my bowing is too stiff"],
  ["assistant", "Loose wrists help; try slow open strings"],
  ["user", "The recital is planned for the spring"],
  ["assistant", "Good luck with the recital!"],
];
for (const [i, [role, content]] of lines.entries()) {
  await call("add_message", { conversation_id: conv, role, content, at: new Date(day + i * 60000).toISOString() });
}
// Two days later: the gap makes the sidecar cut the first session into an episode.
await call("add_message", { conversation_id: conv, role: "user", content: "Back again, hello", at: new Date(day + 2 * 86400000).toISOString() });

const badInput = await client.callTool({ name: "recall", arguments: { conversation_id: conv, query: "x", budget: -5 } });

console.log(JSON.stringify({ phase: "added" }));
const stdin = createInterface({ input: process.stdin });
const next = await stdin[Symbol.asyncIterator]().next();
stdin.close();
if (next.done) throw new Error("stdin closed before the sidecar ran");

const recall = await call("recall", { conversation_id: conv, query: "what is my violin teacher called?", budget: 80 });
const context = recall.structuredContent.context;
const search = await call("search", { conversation_id: conv, query: "violin teacher", k: 3 });
console.log(JSON.stringify({
  tools,
  context,
  bad_input_is_error: badInput.isError === true,
  bad_input: badInput.content.map((c) => c.text).join(" "),
  search_kinds: search.structuredContent.memories.map((m) => m.kind),
}));
await client.close();
