// Drives an engine (relay, or the Codex binary) through Codex's TypeScript SDK: one scenario
// per run, named by the first argument; what the SDK returned is printed as one JSON object.
//
// The environment says where things are: RELAY_SDK_MODULE (the SDK's dist/index.js, as a file
// URL), RELAY_SDK_ENGINE (the executable in Codex's place), RELAY_SDK_BASE_URL (the model
// server), RELAY_SDK_CWD (the thread's working directory) and RELAY_SDK_CONFIG (JSON: the
// Codex object's `config`, as the SDK passes it in --config keys).
const { Codex } = await import(process.env.RELAY_SDK_MODULE);

const codexOptions = {
  codexPathOverride: process.env.RELAY_SDK_ENGINE,
  baseUrl: process.env.RELAY_SDK_BASE_URL,
  apiKey: "sk-sdk-test",
  config: JSON.parse(process.env.RELAY_SDK_CONFIG ?? "{}"),
};
const threadOptions = {
  model: "gpt-sdk",
  workingDirectory: process.env.RELAY_SDK_CWD,
  skipGitRepoCheck: true,
  sandboxMode: "danger-full-access",
  modelReasoningEffort: "low",
  approvalPolicy: "never",
  networkAccessEnabled: false,
  webSearchMode: "disabled",
};

function turn(thread, result) {
  return { id: thread.id, ...result };
}

async function events(thread, prompt) {
  const { events } = await thread.runStreamed(prompt);
  const seen = [];
  for await (const event of events) {
    seen.push(event);
  }
  return seen;
}

const scenarios = {
  async run() {
    const thread = new Codex(codexOptions).startThread(threadOptions);
    return turn(thread, await thread.run("Say hello."));
  },
  async streamed() {
    const thread = new Codex(codexOptions).startThread(threadOptions);
    const seen = await events(thread, "Run echo.");
    return { id: thread.id, events: seen };
  },
  async continued() {
    const thread = new Codex(codexOptions).startThread(threadOptions);
    const first = turn(thread, await thread.run("First question."));
    const second = turn(thread, await thread.run("Second question."));
    return { turns: [first, second] };
  },
  async resumed() {
    const thread = new Codex(codexOptions).startThread(threadOptions);
    const first = turn(thread, await thread.run("First question."));
    const again = new Codex(codexOptions).resumeThread(thread.id, threadOptions);
    const second = turn(again, await again.run("Second question."));
    return { turns: [first, second] };
  },
  async schema() {
    const thread = new Codex(codexOptions).startThread(threadOptions);
    const outputSchema = JSON.parse(process.env.RELAY_SDK_SCHEMA);
    try {
      return turn(thread, await thread.run("Fill the form.", { outputSchema }));
    } catch (error) {
      return { id: thread.id, error: error.message };
    }
  },
  async failed() {
    const thread = new Codex(codexOptions).startThread(threadOptions);
    try {
      await thread.run("Do something refused.");
    } catch (error) {
      return { id: thread.id, error: error.message };
    }
    return { id: thread.id, error: null };
  },
};

const scenario = scenarios[process.argv[2]];
if (scenario === undefined) {
  console.error(`unknown scenario ${process.argv[2]}`);
  process.exit(2);
}
console.log(JSON.stringify(await scenario()));
