// skua-waypoint's command line: Istio's waypoint pod arguments go to pilot-agent's `proxy waypoint`
// (with or without the leading `proxy waypoint`), --help names the ports and the environment,
// another proxy type is refused with exit 2, and `version` prints the version. The bin runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { pilotArgs } from '../src/cli.ts';

const BIN = fileURLToPath(new URL('../bin/skua-waypoint.js', import.meta.url));
const run = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 30_000 });

test("the waypoint Deployment's args become pilot-agent's `proxy waypoint` args", () => {
  const istio = ['--domain', 'app.svc.cluster.local', '--serviceCluster', 'istio-waypoint.app', '--proxyLogLevel', 'warning', '--proxyComponentLogLevel', 'misc:error', '--log_output_level', 'default:info'];
  assert.deepEqual(pilotArgs(['proxy', 'waypoint', ...istio]), ['waypoint', ...istio]);
  assert.deepEqual(pilotArgs(istio), ['waypoint', ...istio]);
  assert.deepEqual(pilotArgs(['waypoint']), ['waypoint']);
  assert.throws(() => pilotArgs(['proxy', 'sidecar']), /runs waypoints only, not "sidecar"/);
});

test('--help names the ports and the environment; version; another proxy type exits 2', () => {
  const help = run('--help');
  assert.equal(help.status, 0);
  for (const s of ['15008', '15021 /healthz/ready', '15020', '15090', '15000', 'PROXY_CONFIG', 'CA_ADDR', 'POD_NAMESPACE', 'proxy waypoint']) assert.ok(help.stdout.includes(s), s);
  assert.equal(run('proxy', 'waypoint', '-h').stdout, help.stdout);
  assert.equal(run('version').stdout, 'skua-waypoint 0.1.0\n');
  const bad = run('proxy', 'router');
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /^Error: skua-waypoint runs waypoints only, not "router"/);
});
