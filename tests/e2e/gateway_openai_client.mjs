// The official `openai` npm client through holdback-gateway: completions and chat, streaming and
// not, models.list, and an error reply parsed as an APIError. Run by gateway_clients_e2e.sh:
//   node gateway_openai_client.mjs http://127.0.0.1:PORT
// Exits non-zero (with the reason) on the first failed check.
import OpenAI from 'openai';

const base = process.argv[2];
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 10000 });
const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };
const check = (cond, msg) => { if (!cond) fail(msg); };

const c = await client.completions.create({ model: 'fake-model', prompt: 'hi', max_tokens: 5 });
check(c.choices?.[0]?.text?.length > 0, `completion without text: ${JSON.stringify(c)}`);
check(c.usage?.completion_tokens === 5, `completion usage: ${JSON.stringify(c.usage)}`);

let pieces = 0;
const cs = await client.completions.create({ model: 'fake-model', prompt: 'hi', max_tokens: 6, stream: true });
for await (const chunk of cs) { if (chunk.choices?.[0]?.text) pieces++; }
check(pieces === 6, `streamed completion: ${pieces} chunks, want 6`);

const chat = await client.chat.completions.create({
  model: 'fake-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 },
  { headers: { 'x-gateway-inference-objective': 'interactive' } });
check(chat.choices?.[0]?.message?.content?.length > 0, `chat without content: ${JSON.stringify(chat)}`);

let deltas = 0;
const chs = await client.chat.completions.create({
  model: 'fake-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 7, stream: true });
for await (const chunk of chs) { if (chunk.choices?.[0]?.delta?.content) deltas++; }
check(deltas === 7, `streamed chat: ${deltas} deltas, want 7`);

const models = await client.models.list();
const ids = [];
for await (const m of models) ids.push(m.id);
check(ids.includes('fake-model'), `models.list: ${JSON.stringify(ids)}`);

try {
  await client.get('/no-such-route');
  fail('GET /v1/no-such-route succeeded');
} catch (e) {
  check(e instanceof OpenAI.APIError && e.status === 404, `404 not an APIError: ${e}`);
  check(typeof e.error?.message === 'string' && e.error?.type, `404 body: ${JSON.stringify(e.error)}`);
}
console.log(`openai ${OpenAI.VERSION ?? ''}: completions, chat (streaming and not), models.list, 404 APIError: ok`);
