// compose.yaml's profiles without starting anything: the default profile is exactly the sidecar
// mesh; each service of a profile carries the label containers/podman-compose/podman gates on
// (podman-compose 1.0.3 has no `profiles`), no default service needs a profiled one; and the shim,
// run over a stand-in podman, creates a labelled container only when COMPOSE_PROFILES names its
// profile, and still turns `service:X` into podman-compose's container name. compose.yaml is read
// with PyYAML (python3-yaml), as podman-compose reads it, and by compose-go, the loader docker compose uses
// (pinned in scripts/go-tools.sh), so the file stays valid for both.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from './lib/proxy.ts';
import { goTool } from './lib/go-tools.ts';

interface Service { profiles?: string[]; labels?: string[]; depends_on?: string[] | Record<string, unknown>; network_mode?: string }

const compose = JSON.parse(spawnSync('/usr/bin/python3', ['-c', 'import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))', path.join(repoRoot, 'compose.yaml')],
  { encoding: 'utf8' }).stdout) as { services: Record<string, Service> };
const services = Object.entries(compose.services);
const SIDECAR_MESH = ['istiod', 'kube', 'istio-ingressgateway', ...['productpage-v1', 'details-v1', 'reviews-v1', 'reviews-v2', 'ratings-v1'].flatMap((p) => [p, `${p}-init`, `${p}-proxy`])];

test('compose.yaml: the default profile is the sidecar mesh; every profiled service is labelled for the shim; nothing default needs a profiled service', () => {
  assert.deepEqual(services.filter(([, s]) => !s.profiles).map(([n]) => n).sort(), [...SIDECAR_MESH].sort());
  const ambient = services.filter(([, s]) => s.profiles).map(([n]) => n);
  assert.deepEqual(ambient.filter((n) => !/^(ambient-|ztunnel$|istio-cni$|waypoint$|kube-ambient$)/.test(n)), []);
  assert.equal(ambient.length, 14);
  for (const [name, s] of services) {
    const labelled = (s.labels ?? []).filter((l) => l.startsWith('io.skua.compose.profile=')).map((l) => l.slice(24));
    assert.deepEqual(labelled, s.profiles ?? [], `${name}: its io.skua.compose.profile labels (a list: podman-compose 1.0.3 reads no label maps)`);
    if (s.profiles) continue;
    const needs = [...(Array.isArray(s.depends_on) ? s.depends_on : Object.keys(s.depends_on ?? {})), ...(s.network_mode?.startsWith('service:') ? [s.network_mode.slice(8)] : [])];
    for (const n of needs) assert.equal(compose.services[n]?.profiles, undefined, `${name} (default profile) needs ${n}, which is in a profile`);
  }
});

test('the podman shim: a profiled container only when COMPOSE_PROFILES names the profile; service:X → container:<project>_X_1', () => {
  const shim = path.join(repoRoot, 'containers', 'podman-compose', 'podman');
  const call = (profiles: string | undefined, ...args: string[]) => {
    const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', SKUA_PODMAN: 'echo' };
    if (profiles !== undefined) env.COMPOSE_PROFILES = profiles;
    const r = spawnSync(shim, args, { encoding: 'utf8', env });
    return { code: r.status, out: r.stdout.trim(), err: r.stderr.trim() };
  };
  const ztunnel = ['run', '--name=p_ztunnel_1', '-d', '--label', 'io.podman.compose.project=p', '--label', 'io.skua.compose.profile=ambient', 'skua/ztunnel:dev'];
  for (const profiles of [undefined, '', 'other', 'ambientx']) {
    const r = call(profiles, ...ztunnel);
    assert.deepEqual(r, { code: 0, out: '', err: `podman shim: not creating p_ztunnel_1 (profile ambient; COMPOSE_PROFILES=${profiles ?? ''})` }, `COMPOSE_PROFILES=${profiles}`);
  }
  for (const profiles of ['ambient', 'other,ambient', '*']) assert.deepEqual(call(profiles, ...ztunnel), { code: 0, out: ztunnel.join(' '), err: '' }, `COMPOSE_PROFILES=${profiles}`);
  assert.equal(call(undefined, 'run', '--name=p_kube_1', '--label', 'io.podman.compose.project=p', 'skua/controlplane:dev').out, 'run --name=p_kube_1 --label io.podman.compose.project=p skua/controlplane:dev');
  const cni = call('ambient', 'create', '--name=p_a-cni_1', '--label', 'io.podman.compose.project=p', '--label', 'io.skua.compose.profile=ambient', '--network', 'service:a',
    '--net', 'p_default', '--network-alias', 'a-cni', 'skua/ztunnel:dev', 'cni-plugin');
  assert.equal(cni.out, 'create --name=p_a-cni_1 --label io.podman.compose.project=p --label io.skua.compose.profile=ambient --network container:p_a_1 skua/ztunnel:dev cni-plugin');
  assert.equal(call(undefined, 'rm', 'p_ztunnel_1').out, 'rm p_ztunnel_1', 'other commands pass through');
});

test('compose-go (the loader `docker compose` uses) accepts compose.yaml: every service, the long-form depends_on conditions, the profiles', async (t) => {
  const tool = await goTool('compose-go');
  if ('skip' in tool) { t.skip(tool.skip); return; }
  // It interpolates, normalises and checks the model's consistency (unknown services, networks, volumes).
  const r = spawnSync(tool.path, ['-format', 'json', path.join(repoRoot, 'compose.yaml')], { encoding: 'utf8', cwd: repoRoot });
  assert.equal(r.status, 0, r.stderr);
  const model = JSON.parse(r.stdout) as { services: Record<string, Service & { depends_on?: Record<string, { condition: string }> }> };
  assert.deepEqual(Object.keys(model.services).sort(), Object.keys(compose.services).sort());
  for (const pod of ['productpage-v1', 'details-v1', 'reviews-v1', 'reviews-v2', 'ratings-v1']) {
    assert.equal(model.services[`${pod}-proxy`].depends_on?.[`${pod}-init`]?.condition, 'service_completed_successfully', `${pod}-proxy waits for its istio-init`);
  }
  assert.deepEqual(Object.entries(model.services).filter(([, s]) => s.profiles).map(([n]) => n).sort(),
    services.filter(([, s]) => s.profiles).map(([n]) => n).sort());
});
