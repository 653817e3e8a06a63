#!/usr/bin/env node
// Load test for the openai_http frontend: starts `runtime --frontend openai_http` on a loopback port, drives it with
// N concurrent streaming /v1/completions clients for a fixed time (a share of them hang up mid-stream), watches the
// server's resident memory and /metrics (including the KV blocks still held once it is idle), stops the server with
// SIGINT and says whether it held up. `--smoke` is the short run CI does. `--half-open N` holds N half-sent request
// headers open meanwhile (slowloris); `--burst M` replaces the timed load by M requests sent at once (overload).
// Bounded by design: fixed client count, fixed duration, every request has a timeout, and the tool stops by itself.
// Only node: built-ins, so it runs on a bare Node >= 20 without `npm install`.

import http from 'node:http';
import net from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';

const USAGE = `usage: node tools/load/http_load.mjs --runtime PATH --model PATH [options]

  --runtime PATH         the runtime executable (build/bin/runtime)
  --model PATH           GGUF model to serve
  --port N               free TCP port on 127.0.0.1 for the server (default: one the system picks)
  --smoke                a short run: --clients 16 --duration 10 unless those are given
  --clients N            concurrent streaming clients (default 64)
  --duration S           seconds during which clients start new requests (default 60)
  --disconnect-pct P     percent of requests that hang up after a few chunks (default 10)
  --max-tokens N         max_tokens per request (default 64)
  --request-timeout S    a request silent this long fails (default 60)
  --server-log PATH      where the server's stderr goes (default: a file in the temp dir)
  --server-args='ARGS'   more runtime flags, split on spaces (e.g. --server-args='--max-num-seqs 16'; the = is
                         needed since the value starts with a dash)
  --json PATH            also write the figures as JSON to PATH

  --half-open N          while the clients run, hold N connections that sent half a request header (slowloris),
                         re-opening each one the server closes, at most --half-open-rate per second (default 200)
  --burst M              instead of the timed load: M streaming requests at once, each counted as completed or 503
                         with Retry-After; server VmRSS before, peak and after; then one request must be served
  --burst-rss-limit-mib L  the burst fails when VmRSS peaks more than L MiB above its idle value (default 256)

Open files: the tool needs --clients + --half-open + --burst descriptors and more; it checks its soft limit
(ulimit -n, which the server inherits) and says how to raise it.

Exit code: 0 = passed; 1 = a non-disconnecting request failed, requests were still running/waiting at the end,
KV blocks were still held by sequences at the end (strata_kv_blocks used minus cached, per tier, or the series is
missing), resident memory grew more than 10% from the first to the last 10 s (judged on runs of 30 s or more), or
the server did not exit 0 on SIGINT, a burst request was neither completed nor 503 with Retry-After, none completed,
the request after the burst failed or the burst's VmRSS peak passed its limit; 2 = bad arguments, too low an
open-files limit, or the server did not come up.`;

const HOST = '127.0.0.1'; // loopback only: this tool never talks to another machine
const PROMPTS = ['Once upon a time', 'The little dog', 'One day, Lily went', 'Tom had a red ball', 'The sun was'];
const RSS_GROWTH_LIMIT = 0.10;
const RSS_WINDOW_S = 10;
const RSS_JUDGED_FROM_S = 3 * RSS_WINDOW_S; // shorter runs have (nearly) one window: growth would mean nothing
const KV_TIERS = ['device', 'host', 'nvme'];

function die(msg, code = 2) {
    process.stderr.write(`http_load: ${msg}\n`);
    process.exit(code);
}

function parseOptions() {
    let values;
    try {
        ({ values } = parseArgs({
            options: {
                runtime: { type: 'string' }, model: { type: 'string' }, port: { type: 'string' },
                smoke: { type: 'boolean', default: false },
                clients: { type: 'string' }, duration: { type: 'string' },
                'disconnect-pct': { type: 'string', default: '10' }, 'max-tokens': { type: 'string', default: '64' },
                'request-timeout': { type: 'string', default: '60' }, 'server-log': { type: 'string' },
                'server-args': { type: 'string', default: '' },
                'half-open': { type: 'string', default: '0' }, 'half-open-rate': { type: 'string', default: '200' },
                burst: { type: 'string', default: '0' }, 'burst-rss-limit-mib': { type: 'string', default: '256' },
                json: { type: 'string' }, help: { type: 'boolean', short: 'h' },
            },
        }));
    } catch (e) {
        die(`${e.message}\n${USAGE}`);
    }
    if (values.help) { process.stdout.write(USAGE + '\n'); process.exit(0); }
    for (const k of ['runtime', 'model']) if (!values[k]) die(`--${k} is required\n${USAGE}`);
    values.clients ??= values.smoke ? '16' : '64';
    values.duration ??= values.smoke ? '10' : '60';
    const int = (name, lo, hi) => {
        const v = Number(values[name]);
        if (!Number.isInteger(v) || v < lo || v > hi) die(`--${name} must be an integer in [${lo}, ${hi}], got '${values[name]}'`);
        return v;
    };
    const o = {
        runtime: path.resolve(values.runtime), model: path.resolve(values.model),
        port: values.port === undefined ? null : int('port', 1, 65535), smoke: values.smoke,
        clients: int('clients', 1, 1024), duration: int('duration', 1, 3600), disconnectPct: int('disconnect-pct', 0, 100),
        maxTokens: int('max-tokens', 1, 100000), requestTimeout: int('request-timeout', 1, 3600),
        serverLog: values['server-log'] ?? path.join(os.tmpdir(), `strata-http-load-${process.pid}.log`),
        serverArgs: values['server-args'].split(/\s+/).filter(Boolean),
        halfOpen: int('half-open', 0, 100000), halfOpenRate: int('half-open-rate', 1, 100000),
        burst: int('burst', 0, 100000), burstRssLimitMiB: int('burst-rss-limit-mib', 1, 1 << 20),
        json: values.json,
    };
    // Every socket is a descriptor in this process (and the server, which inherits the limit, holds its share).
    const needed = o.clients + o.halfOpen + o.burst + 64;
    const limit = openFilesLimit();
    if (limit !== null && limit < needed) {
        die(`the open-files limit is ${limit} but this run needs about ${needed} descriptors; raise it first ` +
            `(ulimit -n ${Math.max(needed, 4096)}; the hard limit is ${openFilesLimit('Hard') ?? 'unknown'})`);
    }
    if (!fs.existsSync(o.runtime)) die(`runtime '${o.runtime}' does not exist (build it: ninja -C build runtime)`);
    if (!fs.existsSync(o.model)) die(`model '${o.model}' does not exist`);
    return o;
}

// The soft (or hard) limit on open files of this process, from /proc/self/limits; null when unreadable.
function openFilesLimit(which = 'Soft') {
    try {
        const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
        if (!m) return null;
        const v = which === 'Soft' ? m[1] : m[2];
        return v === 'unlimited' ? Infinity : Number(v);
    } catch {
        return null;
    }
}

// --- small HTTP helpers ---------------------------------------------------------------------------------------------

function getText(port, urlPath, timeoutMs = 5000) {
    return new Promise((resolve, reject) => {
        const req = http.get({ host: HOST, port, path: urlPath, agent: false, timeout: timeoutMs }, (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (d) => { body += d; });
            res.on('end', () => resolve({ status: res.statusCode, body }));
            res.on('error', reject);
        });
        req.on('timeout', () => req.destroy(new Error(`GET ${urlPath} timed out`)));
        req.on('error', reject);
    });
}

// Prometheus text -> { metric name: value } (labels dropped; the server exports one model).
function parseMetrics(text) {
    const out = {};
    for (const line of text.split('\n')) {
        if (!line || line.startsWith('#')) continue;
        const m = /^([^{\s]+)(\{[^}]*\})?\s+(\S+)$/.exec(line);
        if (m) out[m[1] + (m[1].endsWith('_bucket') ? m[2] : '')] = Number(m[3]);
    }
    return out;
}

const WATCHED_METRICS = ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:request_success_total',
    'strata:request_failure_total', 'vllm:generation_tokens_total', 'vllm:prompt_tokens_total',
    'strata:requests_refused_busy_total', 'strata:http_connections_evicted_total', 'strata:http_connections_refused_total'];

async function scrapeMetrics(port) {
    const r = await getText(port, '/metrics');
    if (r.status !== 200) throw new Error(`/metrics answered ${r.status}`);
    const all = parseMetrics(r.body);
    const picked = {};
    for (const k of WATCHED_METRICS) picked[k] = all[k];
    return { picked, kv: parseKvBlocks(r.body) };
}

// strata_kv_blocks{...,tier="T",state="S"} V -> { T: { total, used, cached, held } } where held = used - cached
// (blocks sequences still hold; cached prefix blocks are reclaimable). null when the server exports no such series.
function parseKvBlocks(text) {
    const out = {};
    let seen = false;
    for (const line of text.split('\n')) {
        const m = /^strata_kv_blocks\{([^}]*)\}\s+(\S+)$/.exec(line);
        if (!m) continue;
        const tier = /(?:^|,)tier="([^"]*)"/.exec(m[1])?.[1];
        const state = /(?:^|,)state="([^"]*)"/.exec(m[1])?.[1];
        if (!tier || !state) continue;
        seen = true;
        (out[tier] ??= {})[state] = Number(m[2]);
    }
    if (!seen) return null;
    for (const t of Object.values(out)) t.held = (t.used ?? 0) - (t.cached ?? 0);
    return out;
}

const kvHeldTotal = (kv) => (kv === null ? null : Object.values(kv).reduce((a, t) => a + Math.abs(t.held), 0));

function freePort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.on('error', reject);
        s.listen(0, HOST, () => {
            const { port } = s.address();
            s.close(() => resolve(port));
        });
    });
}

// --- the server -----------------------------------------------------------------------------------------------------

function startServer(o) {
    const log = fs.openSync(o.serverLog, 'w');
    const child = spawn(o.runtime, ['--model', o.model, '--frontend', 'openai_http', '--port', String(o.port), ...o.serverArgs],
        { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    // Never leave a server behind if this tool dies early.
    process.on('exit', () => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); });
    return { child, exited };
}

async function waitHealthy(o, server, timeoutS = 60) {
    const deadline = Date.now() + timeoutS * 1000;
    let exitedEarly = null;
    server.exited.then((e) => { exitedEarly = e; });
    while (Date.now() < deadline) {
        if (exitedEarly) die(`the server exited during start-up (code ${exitedEarly.code}, signal ${exitedEarly.signal}); see ${o.serverLog}`);
        try {
            if ((await getText(o.port, '/health', 1000)).status === 200) return;
        } catch { /* not listening yet */ }
        await sleep(100);
    }
    die(`the server did not answer /health on ${HOST}:${o.port} within ${timeoutS} s; see ${o.serverLog}`);
}

function readRssKiB(pid) {
    try {
        const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
        return m ? Number(m[1]) : null;
    } catch {
        return null;
    }
}

// --- one streaming request ------------------------------------------------------------------------------------------

// Resolves to { kind: 'ok' | 'disconnected' | 'failed', reason?, ttftMs?, tokens }. `hangUpAfter` > 0 makes the
// client close its socket after that many text chunks, as a user closing a browser tab would.
function streamCompletion(o, agent, body, hangUpAfter) {
    return new Promise((resolve) => {
        const started = performance.now();
        let settled = false;
        let ttftMs = null;
        let textChunks = 0;
        let completionTokens = null;
        let finishReason = null;
        let sawDone = false;
        let afterDone = false;
        let buffer = '';
        const finish = (result) => {
            if (settled) return;
            settled = true;
            resolve({ ttftMs, tokens: completionTokens ?? textChunks, ...result });
        };
        const fail = (reason) => { finish({ kind: 'failed', reason }); req.destroy(); };

        const payload = JSON.stringify(body);
        const req = http.request({
            host: HOST, port: o.port, path: '/v1/completions', method: 'POST', agent,
            headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) },
        }, (res) => {
            if (res.statusCode !== 200) {
                let errBody = '';
                res.setEncoding('utf8');
                res.on('data', (d) => { if (errBody.length < 4096) errBody += d; });
                res.on('end', () => finish({ kind: 'failed', reason: `HTTP ${res.statusCode}`, status: res.statusCode,
                    retryAfter: res.headers['retry-after'], body: errBody }));
                res.on('error', (e) => fail(`response: ${e.message}`));
                return;
            }
            if (!String(res.headers['content-type']).startsWith('text/event-stream')) {
                return fail(`content-type '${res.headers['content-type']}'`);
            }
            res.setEncoding('utf8');
            res.on('data', (d) => {
                if (settled) return;
                buffer += d;
                let cut;
                while ((cut = buffer.indexOf('\n\n')) >= 0) {
                    const event = buffer.slice(0, cut);
                    buffer = buffer.slice(cut + 2);
                    if (!event.startsWith('data: ') || event.includes('\n')) return fail(`malformed SSE event '${event.slice(0, 80)}'`);
                    if (sawDone) afterDone = true;
                    const data = event.slice(6);
                    if (data === '[DONE]') { sawDone = true; continue; }
                    let j;
                    try { j = JSON.parse(data); } catch { return fail(`SSE data is not JSON: '${data.slice(0, 80)}'`); }
                    if (j.error) return fail(`error event: ${j.error.message}`);
                    if (j.usage) completionTokens = j.usage.completion_tokens;
                    const choice = j.choices?.[0];
                    if (!choice) continue;
                    if (typeof choice.text !== 'string') return fail('chunk without choices[0].text');
                    if (choice.finish_reason) finishReason = choice.finish_reason;
                    if (choice.text.length > 0) {
                        if (ttftMs === null) ttftMs = performance.now() - started;
                        ++textChunks;
                        if (hangUpAfter > 0 && textChunks >= hangUpAfter) {
                            finish({ kind: 'disconnected' });
                            req.destroy(); // closes the socket mid-stream; the agent opens a fresh one next time
                            return;
                        }
                    }
                }
            });
            res.on('end', () => {
                if (settled) return;
                if (buffer.length > 0) return fail(`stream ended inside an event: '${buffer.slice(0, 80)}'`);
                if (!sawDone) return fail('stream ended without data: [DONE]');
                if (afterDone) return fail('events after data: [DONE]');
                if (finishReason !== 'length' && finishReason !== 'stop') return fail(`finish_reason '${finishReason}'`);
                finish({ kind: 'ok' });
            });
            res.on('error', (e) => fail(`response: ${e.message}`));
            res.on('aborted', () => fail('response aborted by the server'));
        });
        req.setTimeout(o.requestTimeout * 1000, () => fail(`no data for ${o.requestTimeout} s`));
        req.on('error', (e) => fail(`request: ${e.message}`));
        req.end(payload);
    });
}

// --- slow and overloading clients ----------------------------------------------------------------------------------

// What a slowloris client sends: a request header cut off in its middle, never finished.
const HALF_HEADER = `POST /v1/completions HTTP/1.1\r\nHost: ${HOST}\r\nContent-Type: application/json\r\nContent-Le`;

// Holds `n` half-open connections: each connects and sends HALF_HEADER; one the server closes (header timeout, or
// closed to make room at max_connections) is opened again. Opens (first ones included) are paced by a token bucket of
// `ratePerS` per second, so the tool never floods the listen queue. stop() closes them all.
function holdHalfOpen(o, n, ratePerS) {
    const st = { opened: 0, closedByServer: 0, connectErrors: 0, open: 0, maxOpen: 0, bytesFromServer: 0 };
    const sockets = new Set();
    let pending = n; // connections to (re)open
    let stopped = false;
    let tokens = 0;
    let last = performance.now();
    const openOne = () => {
        const s = net.connect({ host: HOST, port: o.port });
        sockets.add(s);
        let connected = false;
        s.on('connect', () => {
            connected = true;
            ++st.opened;
            st.maxOpen = Math.max(st.maxOpen, ++st.open);
            s.write(HALF_HEADER);
        });
        s.on('data', (d) => { st.bytesFromServer += d.length; }); // never expected: a reply to half a header
        s.on('error', () => { if (!connected) ++st.connectErrors; });
        s.on('close', () => {
            sockets.delete(s);
            if (connected) --st.open;
            if (stopped) return;
            if (connected) ++st.closedByServer;
            ++pending;
        });
    };
    const timer = setInterval(() => {
        const now = performance.now();
        tokens = Math.min(ratePerS / 10, tokens + (ratePerS * (now - last)) / 1000); // bursts of at most 100 ms' worth
        last = now;
        while (!stopped && tokens >= 1 && pending > 0) {
            --pending;
            tokens -= 1;
            openOne();
        }
    }, 10);
    return {
        st,
        stop() {
            stopped = true;
            clearInterval(timer);
            for (const s of sockets) s.destroy();
        },
    };
}

// A 503 as the server answers overload: Retry-After and an OpenAI-shaped error body.
function isBusyReply(r) {
    if (r.status !== 503 || !r.retryAfter || !(Number(r.retryAfter) > 0)) return false;
    try {
        const e = JSON.parse(r.body).error;
        return typeof e?.message === 'string' && typeof e?.type === 'string';
    } catch {
        return false;
    }
}

// M streaming requests at once, each on its own connection; every one must complete or be refused with 503 and
// Retry-After. VmRSS is read before, every 100 ms during, and after; then one more request must be served.
async function runBurst(o, pid) {
    const rssIdle = readRssKiB(pid);
    let rssPeak = rssIdle;
    const timer = setInterval(() => {
        const kib = readRssKiB(pid);
        if (kib !== null) rssPeak = Math.max(rssPeak, kib);
    }, 100);
    const body = (i) => ({ prompt: PROMPTS[i % PROMPTS.length], max_tokens: o.maxTokens, temperature: 0.8, seed: i, stream: true });
    const started = performance.now();
    const results = await Promise.all(Array.from({ length: o.burst }, (_, i) => streamCompletion(o, false, body(i), 0)));
    const seconds = (performance.now() - started) / 1000;
    clearInterval(timer);
    const rssAfter = readRssKiB(pid);
    const b = { requests: o.burst, completed: 0, busy: 0, other: 0, others: {}, seconds, tokens: 0 };
    for (const r of results) {
        if (r.kind === 'ok') {
            ++b.completed;
            b.tokens += r.tokens;
        } else if (isBusyReply(r)) {
            ++b.busy;
        } else {
            ++b.other;
            const why = r.status === 503 ? `${r.reason} without Retry-After or an error body` : r.reason;
            b.others[why] = (b.others[why] ?? 0) + 1;
        }
    }
    const after = await streamCompletion(o, false, body(o.burst), 0);
    Object.assign(b, { rss_kib_idle: rssIdle, rss_kib_peak: rssPeak, rss_kib_after: rssAfter, after_burst: after.kind === 'ok' ? 'ok' : after.reason });
    return b;
}

// --- the run --------------------------------------------------------------------------------------------------------

function percentile(sorted, p) {
    if (sorted.length === 0) return null;
    return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);

async function main() {
    const o = parseOptions();
    o.port ??= await freePort();
    const server = startServer(o);
    await waitHealthy(o, server);
    const pid = server.child.pid;
    const metricsBefore = (await scrapeMetrics(o.port)).picked;

    // Slowloris: the half-open connections are all opened (paced) before the real clients start, and held until they end.
    let holder = null;
    if (o.halfOpen > 0 && o.burst === 0) {
        holder = holdHalfOpen(o, o.halfOpen, o.halfOpenRate);
        const deadline = performance.now() + ((2 * o.halfOpen) / o.halfOpenRate + 10) * 1000;
        while (holder.st.opened < o.halfOpen && performance.now() < deadline) await sleep(50);
    }
    const burst = o.burst > 0 ? await runBurst(o, pid) : null;

    const stats = { completed: 0, failed: 0, disconnects: 0, hangUpsUnreached: 0, tokens: 0, ttftMs: [], failures: {} };
    const rss = []; // { t: seconds since load start, kib }
    const loadStart = performance.now();
    const loadEnd = burst ? loadStart : loadStart + o.duration * 1000; // a burst run has no timed load
    const sampleRss = () => {
        const kib = readRssKiB(pid);
        if (kib !== null) rss.push({ t: (performance.now() - loadStart) / 1000, kib });
    };
    const rssIdleKiB = readRssKiB(pid); // before any request: the baseline, outside both windows
    const rssTimer = setInterval(sampleRss, 1000);
    const loadavgStart = os.loadavg();

    // Every `period`-th request hangs up: an exact share, spread over the clients rather than bunched.
    const period = o.disconnectPct > 0 ? Math.round(100 / o.disconnectPct) : 0;
    let requestNumber = 0;

    async function client(index) {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        let n = 0;
        while (performance.now() < loadEnd) {
            const k = requestNumber++;
            const hangUp = period > 0 && k % period === period - 1;
            const hangUpAfter = hangUp ? 2 + (k % 4) : 0; // after 2..5 text chunks
            const body = {
                prompt: PROMPTS[(index + n) % PROMPTS.length], max_tokens: o.maxTokens, temperature: 0.8,
                seed: index * 100000 + n, stream: true, stream_options: { include_usage: true },
            };
            ++n;
            const r = await streamCompletion(o, agent, body, hangUpAfter);
            stats.tokens += r.tokens;
            if (r.ttftMs !== null) stats.ttftMs.push(r.ttftMs);
            if (r.kind === 'disconnected') ++stats.disconnects;
            else if (r.kind === 'ok') { ++stats.completed; if (hangUp) ++stats.hangUpsUnreached; }
            else {
                ++stats.failed;
                stats.failures[r.reason] = (stats.failures[r.reason] ?? 0) + 1;
            }
        }
        agent.destroy();
    }

    await Promise.all(Array.from({ length: burst ? 0 : o.clients }, (_, i) => client(i)));
    const slow = holder ? { ...holder.st, still_open_at_end: holder.st.open } : null;
    if (holder) holder.stop();
    const loadSeconds = (performance.now() - loadStart) / 1000;
    clearInterval(rssTimer);
    sampleRss();
    const loadavgEnd = os.loadavg();

    // Cancelled streams leave the engine (and give their KV blocks back) when it next looks at them; give it a moment
    // before judging the gauges.
    let scraped = await scrapeMetrics(o.port);
    const settled = (x) => x.picked['vllm:num_requests_running'] === 0 && x.picked['vllm:num_requests_waiting'] === 0 &&
        (x.kv === null || kvHeldTotal(x.kv) === 0);
    for (let i = 0; i < 50 && !settled(scraped); ++i) {
        await sleep(100);
        scraped = await scrapeMetrics(o.port);
    }
    const metricsAfter = scraped.picked;
    const kvAfter = scraped.kv;

    server.child.kill('SIGINT');
    const exit = await Promise.race([server.exited, sleep(30000).then(() => null)]);
    if (exit === null) server.child.kill('SIGKILL');

    const first = rss.filter((s) => s.t < RSS_WINDOW_S).map((s) => s.kib);
    const last = rss.filter((s) => s.t >= loadSeconds - RSS_WINDOW_S).map((s) => s.kib);
    const rssFirst = mean(first);
    const rssLast = mean(last);
    const rssGrowth = rssFirst ? (rssLast - rssFirst) / rssFirst : null;
    const rssJudged = !burst && o.duration >= RSS_JUDGED_FROM_S;
    const rssPeak = rss.length ? Math.max(...rss.map((s) => s.kib)) : null;
    const ttft = [...stats.ttftMs].sort((a, b) => a - b);

    const report = {
        command: process.argv.slice(1).join(' '),
        clients: o.clients, duration_s: o.duration, load_seconds: loadSeconds, max_tokens: o.maxTokens,
        requests_completed: stats.completed, requests_failed: stats.failed, failures: stats.failures,
        disconnects: stats.disconnects, hang_ups_not_reached: stats.hangUpsUnreached,
        tokens: stats.tokens, tokens_per_s: stats.tokens / loadSeconds,
        ttft_ms_p50: percentile(ttft, 50), ttft_ms_p99: percentile(ttft, 99),
        rss_growth_judged: rssJudged, rss_kib_idle: rssIdleKiB, rss_kib_peak: rssPeak, rss_kib_first_10s: rssFirst, rss_kib_last_10s: rssLast, rss_growth: rssGrowth, rss_samples: rss.length,
        rss_series_kib: rss.map((s) => [Number(s.t.toFixed(1)), s.kib]),
        half_open: slow && { sockets: o.halfOpen, rate_per_s: o.halfOpenRate, ...slow }, burst,
        server_args: o.serverArgs,
        metrics_before: metricsBefore, metrics_after: metricsAfter, kv_blocks_after: kvAfter,
        loadavg_start: loadavgStart, loadavg_end: loadavgEnd,
        server_exit: exit ?? { code: null, signal: 'SIGKILL (no exit within 30 s of SIGINT)' },
        server_log: o.serverLog,
    };

    const problems = [];
    if (stats.failed > 0) problems.push(`${stats.failed} non-disconnecting request(s) failed`);
    if (metricsAfter['vllm:num_requests_running'] !== 0) problems.push(`vllm:num_requests_running is ${metricsAfter['vllm:num_requests_running']} at the end`);
    if (metricsAfter['vllm:num_requests_waiting'] !== 0) problems.push(`vllm:num_requests_waiting is ${metricsAfter['vllm:num_requests_waiting']} at the end`);
    if (kvAfter === null) problems.push('/metrics has no strata_kv_blocks series (the engine did not report its KV blocks)');
    else if (!(kvAfter.device?.total > 0)) problems.push('the device reports no KV blocks at all: the held-blocks check would prove nothing');
    for (const tier of KV_TIERS) {
        const t = kvAfter?.[tier];
        if (kvAfter !== null && t === undefined) problems.push(`/metrics has no strata_kv_blocks series for tier ${tier}`);
        else if (t && t.held !== 0) problems.push(`${t.held} KV block(s) of tier ${tier} still held by sequences at the end (used ${t.used}, cached ${t.cached})`);
    }
    if (slow && slow.opened < o.halfOpen) problems.push(`only ${slow.opened} of ${o.halfOpen} half-open connections could be opened`);
    if (burst) {
        if (burst.other > 0) problems.push(`${burst.other} burst request(s) neither completed nor got 503 with Retry-After: ${JSON.stringify(burst.others)}`);
        if (burst.completed === 0) problems.push('no burst request completed');
        if (burst.after_burst !== 'ok') problems.push(`the request after the burst failed: ${burst.after_burst}`);
        if (burst.rss_kib_peak - burst.rss_kib_idle > o.burstRssLimitMiB * 1024) {
            problems.push(`VmRSS peaked ${((burst.rss_kib_peak - burst.rss_kib_idle) / 1024).toFixed(1)} MiB above idle during the burst (limit ${o.burstRssLimitMiB} MiB)`);
        }
    } else if (rssGrowth === null) problems.push('no resident-memory samples');
    else if (rssJudged && rssGrowth > RSS_GROWTH_LIMIT) problems.push(`resident memory grew ${(rssGrowth * 100).toFixed(1)}% (limit ${RSS_GROWTH_LIMIT * 100}%)`);
    if (!exit || exit.code !== 0) problems.push(`the server did not exit 0 on SIGINT (${JSON.stringify(report.server_exit)})`);
    report.problems = problems;

    const f = (x, d = 1) => (x === null || x === undefined ? 'n/a' : x.toFixed(d));
    const mib = (kib) => f(kib / 1024, 2);
    const lines = burst ? [
        `burst of ${burst.requests} streaming requests at once, max_tokens ${o.maxTokens}${o.serverArgs.length ? `, server ${o.serverArgs.join(' ')}` : ''} (${f(burst.seconds, 1)} s)`,
        `completed                 ${burst.completed}  (${burst.tokens} tokens)`,
        `503 with Retry-After      ${burst.busy}`,
        `anything else             ${burst.other}${burst.other ? '  ' + JSON.stringify(burst.others) : ''}`,
        `server VmRSS              idle ${mib(burst.rss_kib_idle)} MiB, peak ${mib(burst.rss_kib_peak)} MiB, after ${mib(burst.rss_kib_after)} MiB`,
        `request after the burst   ${burst.after_burst}`,
    ] : [
        `clients ${o.clients}, duration ${o.duration} s (load ran ${f(loadSeconds, 1)} s), max_tokens ${o.maxTokens}, disconnect ${o.disconnectPct}%${o.serverArgs.length ? `, server ${o.serverArgs.join(' ')}` : ''}`,
        `requests completed        ${stats.completed}`,
        `failed (non-disconnect)   ${stats.failed}${stats.failed ? '  ' + JSON.stringify(stats.failures) : ''}`,
        `disconnects done          ${stats.disconnects}${stats.hangUpsUnreached ? ` (+${stats.hangUpsUnreached} finished before the hang-up point)` : ''}`,
        `tokens/s (aggregate)      ${f(stats.tokens / loadSeconds)}  (${stats.tokens} tokens)`,
        `time to first token       p50 ${f(report.ttft_ms_p50)} ms, p99 ${f(report.ttft_ms_p99)} ms`,
        ...(slow ? [`half-open sockets         ${o.halfOpen} held (at most ${o.halfOpenRate}/s opened): ${slow.opened} opened, ${slow.closedByServer} closed by the server, at most ${slow.maxOpen} open at once, ${slow.still_open_at_end} open at the end, ${slow.connectErrors} connect errors, ${slow.bytesFromServer} bytes received`] : []),
        `server VmRSS              first ${RSS_WINDOW_S} s ${f(rssFirst / 1024, 2)} MiB, last ${RSS_WINDOW_S} s ${f(rssLast / 1024, 2)} MiB (${rssGrowth === null ? 'n/a' : (rssGrowth >= 0 ? '+' : '') + (rssGrowth * 100).toFixed(2) + '%'}, ${rss.length} samples; idle before the load ${f(rssIdleKiB / 1024, 2)} MiB, peak ${f(rssPeak / 1024, 2)} MiB)${rssJudged ? '' : `; growth not judged on a run under ${RSS_JUDGED_FROM_S} s`}`,
    ];
    lines.push(
        `metrics before            ${WATCHED_METRICS.map((k) => `${k}=${metricsBefore[k]}`).join(' ')}`,
        `metrics after             ${WATCHED_METRICS.map((k) => `${k}=${metricsAfter[k]}`).join(' ')}`,
        `KV blocks held at the end ${kvAfter === null ? 'n/a (no strata_kv_blocks series)' : KV_TIERS.map((t) => `${t} ${kvAfter[t]?.held ?? 'n/a'} (used ${kvAfter[t]?.used ?? 'n/a'}, cached ${kvAfter[t]?.cached ?? 'n/a'}, total ${kvAfter[t]?.total ?? 'n/a'})`).join(', ')}`,
        `load average (1/5/15 min) start ${loadavgStart.map((x) => x.toFixed(2)).join(' ')}, end ${loadavgEnd.map((x) => x.toFixed(2)).join(' ')}`,
        `server exit on SIGINT     ${JSON.stringify(report.server_exit)}  (log: ${o.serverLog})`,
        problems.length ? `FAILED: ${problems.join('; ')}` : 'PASSED',
    );
    process.stdout.write(lines.join('\n') + '\n');
    if (o.json) fs.writeFileSync(o.json, JSON.stringify(report, null, 2) + '\n');
    process.exit(problems.length ? 1 : 0);
}

main().catch((e) => die(e.stack ?? String(e)));
