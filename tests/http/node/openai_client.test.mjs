// The openai_http frontend as the official `openai` npm client sees it: completions, chat, streaming, seed
// reproducibility and error statuses. Starts `runtime` on a free loopback port (STRATA_RUNTIME, STRATA_MODEL).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../../..');
const runtime = process.env.STRATA_RUNTIME ?? path.join(root, 'build/bin/runtime');
const model = process.env.STRATA_MODEL ?? path.resolve(root, '../shared/models/stories260K-f32.gguf');
const apiKey = 'sk-node-test';

let server;
let client;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

before(async () => {
  const port = await freePort();
  server = spawn(runtime, ['--model', model, '--frontend', 'openai_http', '--port', String(port), '--api-key', apiKey],
                 { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  await new Promise((resolve, reject) => {
    server.stderr.on('data', (d) => {
      log += d;
      if (log.includes(`ready on http://127.0.0.1:${port}`)) resolve();
    });
    server.on('exit', (code) => reject(new Error(`runtime exited with ${code}:\n${log}`)));
  });
  client = new OpenAI({ apiKey, baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
});

after(async () => {
  // Ctrl-C with the client's kept-alive connections still open: the server must exit 0.
  const code = await new Promise((resolve) => {
    server.once('exit', (c) => resolve(c));
    server.kill('SIGINT');
  });
  assert.equal(code, 0);
});

test('models lists the served model', async () => {
  const models = await client.models.list();
  assert.equal(models.data[0].id, 'stories260K');
});

test('greedy completion, then the same text streamed', async () => {
  const whole = await client.completions.create({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 16, temperature: 0 });
  assert.equal(whole.choices[0].finish_reason, 'length');
  assert.equal(whole.usage.completion_tokens, 16);
  assert.ok(whole.choices[0].text.startsWith(', there was a little girl'), whole.choices[0].text);

  const stream = await client.completions.create({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 16,
                                                   temperature: 0, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, whole.choices[0].text);
});

test('chat completion and streamed chat', async () => {
  const messages = [{ role: 'user', content: 'Tell me a story' }];
  const r = await client.chat.completions.create({ model: 'stories260K', messages, max_tokens: 10, temperature: 0 });
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.usage.completion_tokens, 10);
  const stream = await client.chat.completions.create({ model: 'stories260K', messages, max_tokens: 10, temperature: 0,
                                                        stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, r.choices[0].message.content);
  assert.equal(usage.completion_tokens, 10);
});

test('the same seed gives the same text, another seed another text', async () => {
  const ask = (seed) => client.completions.create({ model: 'stories260K', prompt: 'Lily', max_tokens: 40, temperature: 1, seed });
  const [a, b, c] = [await ask(1), await ask(1), await ask(2)];
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.notEqual(a.choices[0].text, c.choices[0].text);
});

test('errors arrive as APIError with the right status', async () => {
  await assert.rejects(client.completions.create({ model: 'nope', prompt: 'x' }), (e) => e instanceof OpenAI.APIError && e.status === 404);
  await assert.rejects(client.completions.create({ model: 'stories260K', prompt: 'x', temperature: 5 }),
                       (e) => e instanceof OpenAI.APIError && e.status === 400);
  const anonymous = new OpenAI({ apiKey: 'wrong', baseURL: client.baseURL, maxRetries: 0 });
  await assert.rejects(anonymous.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});
