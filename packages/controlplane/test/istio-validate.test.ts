// Istio YAML validation with Istio's rules: istio-api's invalid fixtures are rejected naming the
// field and giving the fixture's expected reason (`_err`), the valid fixtures and Istio's own samples
// and test configs are accepted, broken references are reported istioctl-analyze style, and
// `skua-controlplane validate` prints one line per problem and exits 0/1 (a real process).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';
import { formatProblem, isError, readDocument, readText } from '../src/istio/documents.ts';
import { buildMesh, collect, resourcesOf } from '../src/istio/build/build.ts';

const FIX = fileURLToPath(new URL('../../../../shared/fixtures/', import.meta.url));
const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
type Json = Record<string, unknown>;

/** The documents of an istio-api testdata file, each with the `_err` it must be rejected with (stripped). */
function fixtureDocs(rel: string): Array<{ doc: Json; err: string | undefined; name: string }> {
  return parseAllDocuments(readFileSync(path.join(FIX, rel), 'utf8')).map((d) => d.toJS() as Json).filter(Boolean).map((doc) => {
    const { _err, ...rest } = doc;
    return { doc: rest, err: _err === undefined ? undefined : String(_err), name: String((rest.metadata as Json).name) };
  });
}

describe("istio-api's testdata", () => {
  for (const kind of ['authz', 'peerauth', 'destinationrule']) {
    test(`${kind}-invalid.yaml: every document rejected, naming the field, with the expected reason`, () => {
      const docs = fixtureDocs(`istio-api/tests/testdata/${kind}-invalid.yaml`);
      assert.ok(docs.length >= 2);
      for (const { doc, err, name } of docs) {
        const errors = readDocument(doc, `${kind}-invalid.yaml`, 0).problems.filter(isError);
        assert.ok(errors.length > 0, `${name} was accepted`);
        const lines = errors.map(formatProblem);
        assert.ok(lines.some((l) => l.includes(err!)), `${name}: want ${JSON.stringify(err)} in ${lines.join(' | ')}`);
        for (const e of errors) assert.match(e.field, /^spec(\.|$)/, `${name}: the field is named (${e.field})`);
        assert.ok(lines.every((l) => l.includes(`(${doc.kind} default/${name})`)), lines.join('\n'));
      }
    });
    test(`${kind}-valid.yaml: every document accepted`, () => {
      for (const { doc, name } of fixtureDocs(`istio-api/tests/testdata/${kind}-valid.yaml`)) {
        const errors = readDocument(doc, `${kind}-valid.yaml`, 0).problems.filter(isError);
        assert.deepEqual(errors.map(formatProblem), [], name);
      }
    });
  }
});

describe("Istio's samples and test configs are valid", () => {
  const files = [
    ...readdirSync(path.join(FIX, 'istio-istio/samples/bookinfo/networking')).map((f) => `istio-istio/samples/bookinfo/networking/${f}`),
    'istio-istio/samples/bookinfo/gateway-api/route-reviews-90-10.yaml', 'istio-istio/samples/ambient-argo/application/reviews-waypoint.yaml',
    ...readdirSync(path.join(FIX, 'istio-istio/tests/testdata/config')).map((f) => `istio-istio/tests/testdata/config/${f}`),
    'istio-istio/pilot/pkg/security/authz/builder/testdata/http/single-policy-in.yaml', 'istio-istio/pilot/pkg/security/authz/builder/testdata/tcp/deny-both-http-tcp-in.yaml',
    ...['allow-full-in.yaml', 'deny-groups-in.yaml', 'peer-authn-strict-port-mtls-strict-and-permissive-in.yaml'].map((f) => `istio-istio/pilot/pkg/serviceregistry/ambient/testdata/${f}`),
  ];
  for (const rel of files) {
    test(path.basename(rel), () => {
      const docs = readText(readFileSync(path.join(FIX, rel), 'utf8'), rel);
      assert.ok(docs.length > 0 && docs.every((d) => d.resource), 'every document is a resource');
      assert.deepEqual(docs.flatMap((d) => d.problems).filter(isError).map(formatProblem), []);
    });
  }
});

function errorsOf(yaml: string): string[] {
  return readText(yaml, 't.yaml').flatMap((d) => d.problems).filter(isError).map(formatProblem);
}

describe('istiod webhook rules', () => {
  const vs = (http: string): string => `apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: { name: r }\nspec:\n  hosts: [reviews]\n  http:\n${http}`;
  const cases: Array<[string, string, RegExp]> = [
    ['a negative weight', vs('  - route: [{ destination: { host: reviews }, weight: -1 }]\n'), /spec\.http\[0\]\.route\[0\]\.weight: weight -1 < 0/],
    ['route and redirect together', vs('  - route: [{ destination: { host: reviews } }]\n    redirect: { uri: /x }\n'), /spec\.http\[0\]: Invalid value: "object": HTTP route cannot contain both route and redirect/],
    ['an abort status out of range', vs('  - route: [{ destination: { host: reviews } }]\n    fault: { abort: { httpStatus: 700 } }\n'), /spec\.http\[0\]\.fault\.abort\.httpStatus: HTTP status 700 is not in range 200-599/],
    ['all weights zero', vs('  - route: [{ destination: { host: a }, weight: 0 }, { destination: { host: b }, weight: 0 }]\n'), /spec\.http\[0\]\.route: total destination weight = 0/],
    ['an invalid regex', vs('  - match: [{ uri: { regex: "(a" } }]\n    route: [{ destination: { host: reviews } }]\n'), /spec\.http\[0\]\.match\[0\]\.uri\.regex: invalid regular expression/],
    ['a bad duration', vs('  - route: [{ destination: { host: reviews } }]\n    timeout: 5 seconds\n'), /spec\.http\[0\]\.timeout: Invalid value: "5 seconds": must be a valid duration greater than 1ms/],
    ['a wildcard mesh host', 'apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: { name: r }\nspec: { hosts: ["*"], http: [{ route: [{ destination: { host: a } }] }] }\n', /spec\.hosts: wildcard host \* is not allowed for virtual services bound to the mesh gateway/],
    ['duplicate subsets', 'apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: { name: d }\nspec: { host: reviews, subsets: [{ name: v1 }, { name: v1 }] }\n', /spec\.subsets\[1\]\.name: duplicate subset names: v1/],
    ['a gateway port without a name', 'apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: { name: g }\nspec: { servers: [{ port: { number: 80, protocol: HTTP }, hosts: ["*"] }] }\n', /spec\.servers\[0\]\.port\.name: port name must be set/],
    ['a DENY policy without rules', 'apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: { name: p }\nspec: { action: DENY }\n', /spec\.rules: DENY action without `rules` is meaningless/],
    ['an unknown condition key', 'apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: { name: p }\nspec: { rules: [{ when: [{ key: request.foo, values: [x] }] }] }\n', /spec\.rules\[0\]\.when\[0\]\.key: unknown attribute \(request\.foo\)/],
    ['an unknown kind', 'apiVersion: networking.istio.io/v1\nkind: VirtualSevice\nmetadata: { name: r }\nspec: {}\n', /kind: no matches for kind "VirtualSevice"/],
    ['a pod without an address', 'apiVersion: v1\nkind: Pod\nmetadata: { name: p }\nspec: { containers: [{ name: a }] }\n', /status\.podIP: Required value/],
  ];
  for (const [what, yaml, want] of cases) {
    test(what, () => { const e = errorsOf(yaml); assert.ok(e.some((l) => want.test(l)), e.join('\n')); });
  }
  test('unknown fields are reported (the API server warns and drops them)', () => {
    const docs = readText(vs('  - route: [{ destination: { host: reviews } }]\n    wieght: 3\n'), 't.yaml');
    assert.match(docs[0].problems.map(formatProblem).join('\n'), /Warning \[IST0133\] \(VirtualService default\/r\) spec\.http\[0\]\.wieght: unknown field/);
  });
});

describe('references, istioctl analyze style', () => {
  const platform = `apiVersion: v1
kind: Service
metadata: { name: reviews }
spec: { ports: [{ port: 9080, name: http }], selector: { app: reviews } }
---
apiVersion: v1
kind: Pod
metadata: { name: reviews-v1-abc, labels: { app: reviews, version: v1 } }
spec: { containers: [{ name: reviews, ports: [{ containerPort: 9080 }] }] }
status: { podIP: 10.0.0.1 }
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: { name: reviews }
spec: { host: reviews, subsets: [{ name: v1, labels: { version: v1 } }] }
`;
  test('unknown subset, host, port and gateway; a gateway selecting no pod; a DestinationRule for no service', () => {
    const extra = `---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: { name: reviews }
spec:
  hosts: [reviews]
  gateways: [mesh, missing-gw]
  http:
  - route: [{ destination: { host: reviews, subset: v9 }, weight: 100 }, { destination: { host: nowhere }, weight: 0 }]
  - route: [{ destination: { host: reviews, port: { number: 9999 } } }]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: { name: gw }
spec: { selector: { istio: ingressgateway }, servers: [{ port: { number: 80, name: http, protocol: HTTP }, hosts: ["*"] }] }
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: { name: ghost }
spec: { host: ghost }
`;
    const docs = readText(platform + extra, 'refs.yaml');
    assert.deepEqual(docs.flatMap((d) => d.problems).filter(isError), []);
    const lines = buildMesh(collect(resourcesOf(docs))).problems.map(formatProblem);
    const want = [
      'refs.yaml: Error [IST0101] (VirtualService default/reviews) spec.http[0].route[0].destination.subset: Referenced host+subset in destinationrule not found: "reviews+v9"',
      'refs.yaml: Error [IST0101] (VirtualService default/reviews) spec.http[0].route[1].destination.host: Referenced host not found: "nowhere"',
      'refs.yaml: Error [IST0101] (VirtualService default/reviews) spec.http[1].route[0].destination.port: Referenced host:port not found: "reviews:9999"',
      'refs.yaml: Error [IST0101] (VirtualService default/reviews) spec.gateways[1]: Referenced gateway not found: "default/missing-gw"',
      'refs.yaml: Error [IST0101] (Gateway default/gw) spec.selector: Referenced selector not found: "istio=ingressgateway"',
      'refs.yaml: Warning [IST0174] (DestinationRule default/ghost) spec.host: The host ghost defined in the DestinationRule does not match any services in the mesh.',
    ];
    for (const w of want) assert.ok(lines.includes(w), `missing:\n${w}\nin:\n${lines.join('\n')}`);
  });
});

describe('the README', () => {
  test("its light Pod form is valid and becomes a sidecar'd workload", () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const pod = /### Workloads[\s\S]*?```yaml\n([\s\S]*?)```/.exec(readme)?.[1];
    assert.ok(pod, 'the README has the Pod example');
    const svc = 'apiVersion: v1\nkind: Service\nmetadata: { name: reviews }\nspec: { ports: [{ port: 9080, name: http }], selector: { app: reviews } }\n---\n';
    const docs = readText(svc + pod, 'README.md');
    assert.deepEqual(docs.flatMap((d) => d.problems).filter(isError).map(formatProblem), []);
    const { mesh } = buildMesh(collect(resourcesOf(docs)));
    const w = mesh.workloads[0];
    assert.deepEqual({ ip: w.ip, sidecar: w.sidecar, out: w.outboundIp, app: [...w.app], services: w.services, capture: mesh.capture },
      { ip: '127.0.20.21', sidecar: true, out: '127.0.21.21', app: [[9080, { address: '127.0.0.1', port: 41234 }]], services: ['reviews.default.svc.cluster.local'], capture: 'none' });
  });
});

describe('skua-controlplane validate (a real process)', () => {
  const run = (...args: string[]): { code: number | null; out: string; err: string } => {
    const r = spawnSync(process.execPath, [MAIN, 'validate', ...args], { encoding: 'utf8', timeout: 30_000 });
    return { code: r.status, out: r.stdout, err: r.stderr };
  };
  test('valid files: exit 0; a schema error or a broken reference: exit 1, one line per problem naming file, resource and field', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'skua-validate-'));
    try {
      const good = path.join(dir, 'good.yaml');
      writeFileSync(good, readFileSync(path.join(FIX, 'istio-istio/samples/bookinfo/networking/destination-rule-all.yaml'), 'utf8'));
      const ok = run(good);
      assert.equal(ok.code, 0, ok.out + ok.err);
      assert.doesNotMatch(ok.out, /Error/);
      const bad = path.join(dir, 'bad.yaml');
      const docs = parseAllDocuments(readFileSync(path.join(FIX, 'istio-api/tests/testdata/peerauth-invalid.yaml'), 'utf8')).map((d) => { const { _err, ...x } = d.toJS() as Json; void _err; return stringify(x); });
      writeFileSync(bad, docs.join('---\n'));
      const r = run(bad, good);
      assert.equal(r.code, 1);
      const lines = r.out.trim().split('\n').filter((l) => / Error /.test(l));
      assert.equal(lines.length, docs.length, r.out);
      assert.match(lines[0], /^.*bad\.yaml: Error \[IST0106\] \(PeerAuthentication default\/bad-mode\) spec\.mtls\.mode: Unsupported value: "BLAH"/);
      const ref = path.join(dir, 'ref.yaml');
      writeFileSync(ref, 'apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: { name: r }\nspec: { hosts: [reviews], http: [{ route: [{ destination: { host: reviews, subset: v1 } }] }] }\n');
      const rr = run(ref);
      assert.equal(rr.code, 1);
      assert.match(rr.out, /ref\.yaml: Error \[IST0101\] \(VirtualService default\/r\) spec\.http\[0\]\.route\[0\]\.destination\.host: Referenced host not found: "reviews"/);
      assert.equal(run().code, 2);
    } finally { rmSync(dir, { recursive: true, force: true }); }
  });
});
