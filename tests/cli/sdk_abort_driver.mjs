// Drives an engine (relay, or the Codex binary) through Codex's TypeScript SDK for what a
// caller sees when a run cannot go as asked: one scenario per run, named by the first
// argument; what the SDK's call rejected with is printed as one JSON object.
//
// The environment says where things are, as for sdk_driver.mjs: RELAY_SDK_MODULE,
// RELAY_SDK_ENGINE, RELAY_SDK_BASE_URL, RELAY_SDK_CWD; and RELAY_SDK_LOG, the model server's
// request log, which the abort scenario watches to abort while the turn's request is open.
import fs from "node:fs";

const { Codex } = await import(process.env.RELAY_SDK_MODULE);

const codex = new Codex({
  codexPathOverride: process.env.RELAY_SDK_ENGINE,
  baseUrl: process.env.RELAY_SDK_BASE_URL,
  apiKey: "sk-sdk-test",
});

function rejection(error) {
  return { name: error.name, message: error.message, code: error.code ?? null };
}

const scenarios = {
  // The caller aborts while the model server holds the turn's request open.
  async abort() {
    const thread = codex.startThread({
      model: "gpt-sdk",
      workingDirectory: process.env.RELAY_SDK_CWD,
      skipGitRepoCheck: true,
    });
    const controller = new AbortController();
    const watcher = setInterval(() => {
      const log = process.env.RELAY_SDK_LOG;
      if (fs.existsSync(log) && fs.readFileSync(log, "utf8").length > 0) {
        clearInterval(watcher);
        controller.abort();
      }
    }, 10);
    try {
      await thread.run("Wait for the server.", { signal: controller.signal });
      return { rejected: null };
    } catch (error) {
      return { rejected: rejection(error) };
    } finally {
      clearInterval(watcher);
    }
  },
  // A base URL and no model.
  async no_model() {
    const thread = codex.startThread({
      workingDirectory: process.env.RELAY_SDK_CWD,
      skipGitRepoCheck: true,
    });
    try {
      await thread.run("Say hello.");
      return { rejected: null };
    } catch (error) {
      return { rejected: rejection(error) };
    }
  },
};

const scenario = scenarios[process.argv[2]];
if (scenario === undefined) {
  console.error(`unknown scenario ${process.argv[2]}`);
  process.exit(2);
}
console.log(JSON.stringify(await scenario()));
