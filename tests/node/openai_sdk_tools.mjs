// Tool calls through the official OpenAI SDK, against a server whose chat template knows tools
// (Llama 3.1 or Qwen 2.5). Usage: node openai_sdk_tools.mjs BASE_URL API_KEY MODEL.
// Exits non-zero on any mismatch.
import OpenAI from "openai";

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });

function fail(msg) {
  console.error(`openai sdk tools: ${msg}`);
  process.exit(1);
}

const tools = [
  { type: "function", function: { name: "get_weather", description: "Weather in a city",
    parameters: { type: "object", required: ["city"], properties: {
      city: { type: "string", maxLength: 12 }, unit: { enum: ["celsius", "fahrenheit"] } } } } },
  { type: "function", function: { name: "add", description: "Adds two integers",
    parameters: { type: "object", required: ["a", "b"], properties: {
      a: { type: "integer" }, b: { type: "integer" } } } } },
];
const messages = [{ role: "user", content: "What is the weather in Oslo?" }];

function check(call, where) {
  if (call.type !== "function" || !call.id) fail(`${where}: call ${JSON.stringify(call)}`);
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === "get_weather") {
    if (typeof args.city !== "string") fail(`${where}: arguments ${call.function.arguments}`);
  } else if (call.function.name === "add") {
    if (!Number.isInteger(args.a) || !Number.isInteger(args.b)) {
      fail(`${where}: arguments ${call.function.arguments}`);
    }
  } else {
    fail(`${where}: unknown tool ${call.function.name}`);
  }
}

let calls = 0;
for (const seed of [1, 2, 3, 4]) {
  const body = { model, messages, tools, tool_choice: "required", seed, temperature: 1,
                 max_tokens: 300 };
  const plain = await client.chat.completions.create(body);
  const choice = plain.choices[0];
  if (choice.finish_reason !== "tool_calls") fail(`finish_reason ${choice.finish_reason}`);
  const call = choice.message.tool_calls?.[0];
  if (!call) fail(`no tool_calls in ${JSON.stringify(choice.message)}`);
  check(call, `seed ${seed}`);
  ++calls;

  // Streamed: the SDK's chunks carry the call in delta.tool_calls, as plain.
  const stream = await client.chat.completions.create({ ...body, stream: true });
  let name = "", args = "", finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      for (const tc of c.delta?.tool_calls ?? []) {
        name += tc.function?.name ?? "";
        args += tc.function?.arguments ?? "";
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  if (finish !== "tool_calls" || name !== call.function.name || args !== call.function.arguments) {
    fail(`streamed ${name} ${args} ${finish} vs plain ${call.function.name} ${call.function.arguments}`);
  }

  // The call and its result go back; the server renders them and answers.
  const next = await client.chat.completions.create({ model, tools, max_tokens: 4,
    messages: [...messages, choice.message,
               { role: "tool", tool_call_id: call.id, content: "sunny, 12 C" }] });
  if (!["stop", "length", "tool_calls"].includes(next.choices[0].finish_reason)) {
    fail(`second turn ended by ${next.choices[0].finish_reason}`);
  }
}

// A named tool is the one called.
const named = await client.chat.completions.create({ model, messages, tools, seed: 9,
  tool_choice: { type: "function", function: { name: "add" } }, max_tokens: 300 });
const call = named.choices[0].message.tool_calls?.[0];
if (!call || call.function.name !== "add") fail(`named call ${JSON.stringify(named.choices[0])}`);
check(call, "named");
console.log(`openai sdk tools: ok (${calls + 1} calls, last ${call.function.arguments})`);
