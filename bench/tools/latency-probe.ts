/**
 * Latency probe: `node bench/tools/latency-probe.ts <port> <rps> <connections> <seconds>`.
 * Sends GET / to 127.0.0.1:<port> at a fixed rate over keep-alive connections for at most
 * <seconds> (or until SIGTERM), open loop: each request's latency counts from the moment
 * it was due, so a stalled proxy shows up as the time its requests waited (no coordinated
 * omission). Prints one JSON line at the end: [[dueEpochMs, latencyMs, status], ...] where
 * status is the HTTP status, or 0 for an error.
 */
import http from 'node:http';

const [port, rps, connections, seconds] = process.argv.slice(2).map(Number);
if (!port || !rps || !connections || !seconds) {
  process.stderr.write('usage: latency-probe.ts <port> <rps> <connections> <seconds>\n');
  process.exit(2);
}

const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
const samples: Array<[number, number, number]> = [];
const epoch = (): number => performance.timeOrigin + performance.now();
const TICK_MS = 5;
const perTick = (rps * TICK_MS) / 1000;
let owed = 0;
let inFlight = 0;
let stopping = false;

function send(due: number): void {
  inFlight++;
  const done = (status: number): void => {
    inFlight--;
    samples.push([due, epoch() - due, status]);
    if (stopping && inFlight === 0) finish();
  };
  const req = http.get({ host: '127.0.0.1', port, path: '/', agent, timeout: 30_000 }, (res) => {
    res.resume();
    res.on('end', () => done(res.statusCode ?? 0));
    res.on('error', () => done(0));
  });
  req.on('timeout', () => req.destroy());
  req.on('error', () => done(0));
}

// Requests due in one tick are sent together; the agent queues them when every connection is busy.
const started = epoch();
let next = started;
const timer = setInterval(() => {
  const now = epoch();
  while (next <= now) {
    owed += perTick;
    for (; owed >= 1; owed--) send(next);
    next += TICK_MS;
  }
  if (now - started >= seconds * 1000) stop();
}, TICK_MS);

let finished = false;
function finish(): void {
  if (finished) return;
  finished = true;
  agent.destroy();
  process.stdout.write(JSON.stringify(samples) + '\n', () => process.exit(0));
}

function stop(): void {
  if (stopping) return;
  stopping = true;
  clearInterval(timer);
  if (inFlight === 0) finish();
  // Requests still outstanding after 1.5 s are reported as errors.
  setTimeout(() => { for (let i = inFlight; i > 0; i--) samples.push([epoch(), -1, 0]); finish(); }, 1500).unref();
}

process.on('SIGTERM', stop);
