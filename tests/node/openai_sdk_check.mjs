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

// A wrong key is an AuthenticationError (HTTP 401) in the SDK.
try {
  await new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 }).models.list();
  fail("a wrong key was accepted");
} catch (e) {
  if (e.status !== 401) fail(`wrong key gave ${e.status}`);
}
console.log(`openai sdk check: ok (${JSON.stringify(text)})`);
