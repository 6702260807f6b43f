// `agentkit acp` driven by the official ACP TypeScript SDK (@agentclientprotocol/sdk 2.x),
// run by tests/test_acp_node.py. One argument: a JSON object
//   {modules: ".../node_modules", agent: [argv...], cwd, env: {...}, mode}
// mode "session" (default): a whole session with the stable API; "children": the
// unstable API's sub-agent sessions (clientCapabilities.subagents).
// The model is played by the test's FakeOpenAIServer (see the Python side for the script).
// Checks as it goes (exit 1 with "ASSERT ..." on stderr) and prints one line
// "RESULT <json>" with what the Python side checks further.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const config = JSON.parse(process.argv[2]);
const require = createRequire(join(config.modules, "..", "package.json"));
const entry = config.mode === "children" ? "@agentclientprotocol/sdk/unstable" : "@agentclientprotocol/sdk";
const acp = await import(pathToFileURL(require.resolve(entry)).href);

function check(condition, message) {
  if (!condition) throw new Error(`ASSERT ${message}`);
}

function start() {
  const child = spawn(config.agent[0], config.agent.slice(1), {
    cwd: config.cwd,
    env: { ...process.env, ...config.env },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const updates = [];
  const permissions = [];
  const waiters = [];
  const app = acp
    .client({ name: "agentkit-node-test" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      updates.push(params);
      for (const w of [...waiters]) w();
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      permissions.push(params);
      const allow = params.options.find((o) => o.kind === "allow_once");
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const connection = app.connect(stream);
  const until = (predicate, ms = 60000) =>
    new Promise((resolve, reject) => {
      if (predicate()) return resolve();
      const timer = setTimeout(() => reject(new Error("ASSERT timed out waiting")), ms);
      const w = () => {
        if (predicate()) {
          clearTimeout(timer);
          waiters.splice(waiters.indexOf(w), 1);
          resolve();
        }
      };
      waiters.push(w);
    });
  return { child, exited, updates, permissions, agent: connection.agent, connection, until };
}

async function initialize(agent, extra = {}) {
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false, ...extra },
    clientInfo: { name: "agentkit-node-test", version: "0.0.1" },
  });
  check(init.protocolVersion === 1, "protocol version 1");
  check(init.agentCapabilities.loadSession === true, "loadSession advertised");
  check(init.agentInfo.name === "agentkit", "agent info");
  return init;
}

function cards(updates, sessionId) {
  const byId = new Map();
  for (const { sessionId: sid, update } of updates) {
    if (sid !== sessionId) continue;
    if (update.sessionUpdate !== "tool_call" && update.sessionUpdate !== "tool_call_update") continue;
    if (!byId.has(update.toolCallId)) byId.set(update.toolCallId, []);
    byId.get(update.toolCallId).push(update);
  }
  return byId;
}

const lastStatus = (list) => list.filter((u) => u.status).map((u) => u.status).at(-1);
const text = (updates, kind) =>
  updates
    .filter((p) => p.update.sessionUpdate === kind)
    .map((p) => p.update.content.text)
    .join("");

async function wholeSession() {
const result = {};
// ---------------------------------------------------------------- first agent
let first = start();
try {
  await initialize(first.agent);
  const { sessionId, modes } = await first.agent.request(acp.methods.agent.session.new, {
    cwd: config.cwd,
    mcpServers: [],
  });
  check(modes.currentModeId === "workspace-write", "the sandbox mode");
  result.sessionId = sessionId;

  const turn = await first.agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "do the work" }],
  });
  check(turn.stopReason === "end_turn", `end_turn, got ${turn.stopReason}`);
  const chunks = first.updates.filter((p) => p.update.sessionUpdate === "agent_message_chunk");
  check(chunks.length >= 2, "the answer streamed in several chunks");
  result.answer = text(first.updates, "agent_message_chunk");
  const turnCards = cards(first.updates, sessionId);
  result.cards = [...turnCards.values()].map((list) => ({
    title: list[0].title,
    kind: list[0].kind,
    statuses: list.filter((u) => u.status).map((u) => u.status),
    content: list.at(-1).content ?? [],
  }));
  for (const card of result.cards) check(card.statuses.at(-1) === "completed", `${card.title} completed`);

  // Cancel: a blocking sub-agent runs a long command; Stop ends the turn.
  const slow = first.agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "now the long job" }],
  });
  await first.until(() =>
    [...cards(first.updates, sessionId).values()].some(
      (list) => list[0].title.includes("sub-agent 2") && list.some((u) => JSON.stringify(u.content ?? "").includes("Running sleep")),
    ),
  );
  await first.agent.notify(acp.methods.agent.session.cancel, { sessionId });
  const cancelled = await slow;
  check(cancelled.stopReason === "cancelled", `cancelled, got ${cancelled.stopReason}`);
  const longCard = [...cards(first.updates, sessionId).values()].find((list) => list[0].title.includes("sub-agent 2"));
  result.cancelledCard = lastStatus(longCard);

  try {
    await first.agent.request(acp.methods.agent.session.prompt, {
      sessionId: "conv_unknown",
      prompt: [{ type: "text", text: "hello?" }],
    });
    check(false, "an unknown session must be refused");
  } catch (error) {
    check(error instanceof acp.RequestError && error.code === -32002, `-32002, got ${error.code}`);
    result.unknownSession = error.message;
  }
} finally {
  first.child.stdin.end(); // the editor leaves: the agent closes everything and exits
}
result.firstExit = await first.exited;

// ------------------------------------------------- second agent: load, continue
const second = start();
try {
  await initialize(second.agent);
  const listed = await second.agent.request(acp.methods.agent.session.list, { cwd: config.cwd });
  result.listed = listed.sessions.map((s) => [s.sessionId, s.title]);
  await second.agent.request(acp.methods.agent.session.load, {
    sessionId: result.sessionId,
    cwd: config.cwd,
    mcpServers: [],
  });
  result.replayed = second.updates.map((p) => p.update.sessionUpdate);
  result.replayedUser = text(second.updates, "user_message_chunk");
  result.replayedCards = [...cards(second.updates, result.sessionId).values()].map((l) => [l[0].title, l[0].status]);
  const again = await second.agent.request(acp.methods.agent.session.prompt, {
    sessionId: result.sessionId,
    prompt: [{ type: "text", text: "and after loading?" }],
  });
  check(again.stopReason === "end_turn", "the loaded session answers");
  result.afterLoad = text(second.updates.slice(result.replayed.length), "agent_message_chunk");
} finally {
  second.child.stdin.end();
}
result.secondExit = await second.exited;
return result;
}

// A blocking sub-agent as a child session; a second one, terminated through its child id.
async function children() {
  const result = {};
  const agent = start();
  try {
    await initialize(agent.agent, { subagents: {} });
    const { sessionId } = await agent.agent.request(acp.methods.agent.session.new, { cwd: config.cwd, mcpServers: [] });
    result.sessionId = sessionId;
    const turn = agent.agent.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: "delegate" }],
    });
    const child = (n) => `${sessionId}/sub-agent-${n}`;
    // Sub-agent 2 sleeps: cancel its child session once it runs its command.
    await agent.until(() =>
      agent.updates.some((p) => p.sessionId === child(2) && p.update.sessionUpdate === "tool_call"),
    );
    await agent.agent.notify(acp.methods.agent.session.cancel, { sessionId: child(2) });
    const done = await turn;
    check(done.stopReason === "end_turn", `end_turn, got ${done.stopReason}`);
    result.parent = agent.updates
      .filter((p) => p.sessionId === sessionId && p.update.sessionUpdate === "subagent_update")
      .map((p) => p.update);
    result.child1 = agent.updates.filter((p) => p.sessionId === child(1)).map((p) => p.update);
    result.child2 = agent.updates.filter((p) => p.sessionId === child(2)).map((p) => p.update);
    result.answer = text(agent.updates.filter((p) => p.sessionId === sessionId), "agent_message_chunk");
  } finally {
    agent.child.stdin.end();
  }
  result.exit = await agent.exited;
  return result;
}

const result = config.mode === "children" ? await children() : await wholeSession();
console.log(`RESULT ${JSON.stringify(result)}`);
