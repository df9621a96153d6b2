// Codex's TypeScript SDK with relay in the Codex binary's place (docs/codex-compat.md).
//
// The SDK runs `relay exec --experimental-json` for each turn and reads Codex's event stream
// from it. relay's scripted model answers, from a model script: nothing leaves the machine.
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Codex, type ThreadItem } from "@openai/codex-sdk";

const folder = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

// The `relay` command on PATH (or RELAY_BIN); each Codex object plays its own model script,
// passed as relay's own configuration key through Codex's `--config`.
function codex(script: string): Codex {
  return new Codex({
    codexPathOverride: process.env.RELAY_BIN ?? "relay",
    config: { model_script: path.join(folder, script) },
  });
}

function describe(item: ThreadItem): string {
  switch (item.type) {
    case "mcp_tool_call":
      return `${item.server}/${item.tool} ${item.status}`;
    case "command_execution":
      return `${item.command} ${item.status} (exit ${item.exit_code})`;
    case "agent_message":
    case "reasoning":
      return item.text;
    default:
      return item.type;
  }
}

const options = { workingDirectory: folder, skipGitRepoCheck: true };

// A thread, and one turn run to its end.
const thread = codex("first.model.json").startThread(options);
const turn = await thread.run("What is in this folder?");
console.log(`thread ${thread.id}`);
for (const item of turn.items) {
  console.log(`  ${item.type}: ${describe(item)}`);
}
console.log(`answer: ${turn.finalResponse}`);
console.log(`usage: ${turn.usage?.input_tokens} input tokens, ${turn.usage?.output_tokens} output`);

// The same thread from a new Codex object, its next turn streamed event by event.
const resumed = codex("second.model.json").resumeThread(thread.id!, options);
const { events } = await resumed.runStreamed("Which of them is the program?");
for await (const event of events) {
  switch (event.type) {
    case "item.started":
    case "item.completed":
      console.log(`${event.type} ${event.item.type}: ${describe(event.item)}`);
      break;
    case "turn.failed":
      throw new Error(event.error.message);
    default:
      console.log(event.type);
  }
}
console.log(`resumed thread ${resumed.id}`);
