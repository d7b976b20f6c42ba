// One non-streaming and one streaming chat completion through the official OpenAI SDK.
// Usage: node openai_sdk_check.mjs BASE_URL API_KEY MODEL. Exits non-zero on any mismatch.
import OpenAI from "openai";

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30000 });
const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Say something." },
];

function fail(msg) {
  console.error(`openai sdk check: ${msg}`);
  process.exit(1);
}

const models = await client.models.list();
if (!models.data.some((m) => m.id === model)) fail(`model ${model} not listed`);

const whole = await client.chat.completions.create({
  model, messages, max_tokens: 12, temperature: 0, ignore_eos: true,
});
const text = whole.choices[0].message.content;
if (typeof text !== "string") fail("no message content");
if (whole.usage.completion_tokens !== 12) fail(`completion_tokens ${whole.usage.completion_tokens}`);
if (whole.choices[0].finish_reason !== "length") fail(`finish_reason ${whole.choices[0].finish_reason}`);

const stream = await client.chat.completions.create({
  model, messages, max_tokens: 12, temperature: 0, ignore_eos: true, stream: true,
  stream_options: { include_usage: true },
});
let streamed = "";
let usage = null;
let finish = null;
for await (const chunk of stream) {
  for (const c of chunk.choices) {
    streamed += c.delta?.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
  if (chunk.usage) usage = chunk.usage;
}
if (streamed !== text) fail(`streamed text ${JSON.stringify(streamed)} != ${JSON.stringify(text)}`);
if (!usage || usage.completion_tokens !== 12) fail(`stream usage ${JSON.stringify(usage)}`);
if (finish !== "length") fail(`stream finish_reason ${finish}`);

// Logprobs: one entry per token with its top alternatives, the same streamed and whole.
const lpArgs = { model, messages, max_tokens: 6, temperature: 0, ignore_eos: true,
  logprobs: true, top_logprobs: 2 };
const lpWhole = await client.chat.completions.create(lpArgs);
const lpContent = lpWhole.choices[0].logprobs?.content ?? [];
if (lpContent.length !== 6) fail(`logprobs entries ${lpContent.length}`);
for (const e of lpContent) {
  if (!(e.logprob <= 0) || e.top_logprobs.length !== 2 || !Array.isArray(e.bytes)) {
    fail(`logprob entry ${JSON.stringify(e)}`);
  }
}
const lpStream = await client.chat.completions.create({ ...lpArgs, stream: true });
const lpStreamed = [];
for await (const chunk of lpStream) {
  for (const c of chunk.choices) lpStreamed.push(...(c.logprobs?.content ?? []));
}
if (JSON.stringify(lpStreamed) !== JSON.stringify(lpContent)) fail("streamed logprobs differ");

// n choices.
const several = await client.chat.completions.create({
  model, messages, max_tokens: 4, temperature: 0, ignore_eos: true, n: 2,
});
if (several.choices.length !== 2 || several.choices[1].index !== 1) fail("n: 2 choices");

// A field that would change the output and is not implemented is a 400 naming it.
try {
  await client.chat.completions.create({ model, messages, max_tokens: 2,
    tools: [{ type: "function", function: { name: "f", parameters: {} } }] });
  fail("tools were accepted");
} catch (e) {
  if (e.status !== 400 || e.param !== "tools") fail(`tools gave ${e.status} ${e.param}`);
}

// A JSON schema holds the answer: its fields are bounded, so it must end, and it parses.
const schema = { type: "object", additionalProperties: false, required: ["ok", "size", "tag"],
  properties: { ok: { type: "boolean" }, size: { enum: ["s", "m", "l"] },
                tag: { type: "string", maxLength: 4 } } };
const structured = await client.chat.completions.create({ model, messages, max_tokens: 400,
  response_format: { type: "json_schema", json_schema: { name: "t", schema, strict: true } } });
if (structured.choices[0].finish_reason !== "stop") {
  fail(`schema answer ended by ${structured.choices[0].finish_reason}`);
}
const obj = JSON.parse(structured.choices[0].message.content);
if (typeof obj.ok !== "boolean" || !["s", "m", "l"].includes(obj.size) ||
    typeof obj.tag !== "string" || [...obj.tag].length > 4) {
  fail(`schema answer ${structured.choices[0].message.content}`);
}

// A wrong key is an AuthenticationError (HTTP 401) in the SDK.
try {
  await new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 }).models.list();
  fail("a wrong key was accepted");
} catch (e) {
  if (e.status !== 401) fail(`wrong key gave ${e.status}`);
}
console.log(`openai sdk check: ok (${JSON.stringify(text)})`);
