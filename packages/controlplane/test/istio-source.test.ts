// The watched --istio directory: a file with an error keeps its last good content serving while the
// others apply; a broken reference is reported without refusing anything; every replacement of a
// file (write + rename, as editors and `skua-controlplane apply` do) is picked up, again and again;
// `apply`/`delete` keep one file per resource identity.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { decodeResource, TYPE_URL } from '@skua/proxy/xds';
import type { ResourceGroup } from '../src/ads/resources.ts';
import { IstioSource } from '../src/istio/source.ts';
import { applyText, deleteText } from '../src/istio/apply.ts';
import { BOOKINFO_PLATFORM, fixture } from './lib/istio-fixtures.ts';

type Json = Record<string, unknown>;
const PP = 'sidecar~10.244.0.11~productpage-v1-6b7f-x1.default~default.svc.cluster.local';

/** The reviews routes productpage's sidecar gets: cluster name per route. */
function reviewsClusters(groups: readonly ResourceGroup[]): string[] {
  const rc = groups.filter((g) => g.nodes.exact.has(PP)).map((g) => g.byType.get(TYPE_URL.route)?.get('9080')).find((x) => x);
  if (!rc) return [];
  const vh = ((decodeResource(rc.any).virtual_hosts as Json[]).find((v) => String(v.name).startsWith('reviews.'))!);
  return (vh.routes as Json[]).map((r) => String((r.route as Json).cluster ?? JSON.stringify(((r.route as Json).weighted_clusters as Json).clusters)));
}

const vs = (subset: string): string => `apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: { name: reviews }\nspec: { hosts: [reviews], http: [{ route: [{ destination: { host: reviews, subset: ${subset} } }] }] }\n`;

function replace(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

const dirs: string[] = [];
const sources: IstioSource[] = [];
after(() => { for (const s of sources) s.close(); for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

function start(): { dir: string; src: IstioSource } {
  const dir = mkdtempSync(path.join(tmpdir(), 'skua-istio-src-'));
  dirs.push(dir);
  const src = new IstioSource(dir);
  sources.push(src);
  return { dir, src };
}

describe('IstioSource', () => {
  test('a bad file keeps its last good content; others apply; broken references are only reported', () => {
    const { dir, src } = start();
    mkdirSync(path.join(dir, 'platform'));
    writeFileSync(path.join(dir, 'platform', 'bookinfo.yaml'), BOOKINFO_PLATFORM);
    writeFileSync(path.join(dir, 'dr.yaml'), fixture('istio-istio/samples/bookinfo/networking/destination-rule-all.yaml'));
    const vsFile = path.join(dir, 'vs.yaml');
    writeFileSync(vsFile, vs('v1'));
    assert.deepEqual(reviewsClusters(src.load()), ['outbound|9080|v1|reviews.default.svc.cluster.local']);
    assert.deepEqual(src.report(), []);
    // A schema error: the file's last good content keeps serving, the problem names file, resource and field.
    replace(vsFile, vs('v2').replace('hosts: [reviews]', 'hosts: [reviews], http2: nope, tcp: 7'));
    assert.deepEqual(reviewsClusters(src.load()), ['outbound|9080|v1|reviews.default.svc.cluster.local']);
    assert.match(src.report().join('\n'), /vs\.yaml: Error \[IST0106\] \(VirtualService default\/reviews\) spec\.tcp: Invalid value: "integer": spec\.tcp in body must be of type array \(the file's last good content keeps serving\)/);
    // Another file still applies meanwhile.
    writeFileSync(path.join(dir, 'ratings.yaml'), vs('v1').replaceAll('reviews', 'ratings'));
    src.load();
    assert.ok(src.report().every((l) => l.startsWith('vs.yaml: ')), src.report().join('\n'));
    // A broken reference applies (as istiod would) and is reported like istioctl analyze.
    replace(vsFile, vs('v9'));
    assert.deepEqual(reviewsClusters(src.load()), ['outbound|9080|v9|reviews.default.svc.cluster.local']);
    assert.deepEqual(src.report(), ['vs.yaml: Error [IST0101] (VirtualService default/reviews) spec.http[0].route[0].destination.subset: Referenced host+subset in destinationrule not found: "reviews+v9"']);
  });

  test('every replacement of a file by rename is seen, again and again', async () => {
    const { dir, src } = start();
    writeFileSync(path.join(dir, 'platform.yaml'), BOOKINFO_PLATFORM);
    writeFileSync(path.join(dir, 'dr.yaml'), fixture('istio-istio/samples/bookinfo/networking/destination-rule-all.yaml'));
    const file = path.join(dir, 'vs.yaml');
    writeFileSync(file, vs('v1'));
    src.load();
    const seen: string[][] = [];
    // A long poll interval: the directory watchers alone must see each change.
    src.watch((g) => { seen.push(reviewsClusters(g)); }, 50, 3_600_000);
    for (const subset of ['v2', 'v3', 'v1', 'v2']) {
      const want = `outbound|9080|${subset}|reviews.default.svc.cluster.local`;
      replace(file, vs(subset));
      const deadline = Date.now() + 5000;
      while (seen.at(-1)?.[0] !== want) {
        assert.ok(Date.now() < deadline, `${subset}: saw ${JSON.stringify(seen)}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  });
});

describe('skua-controlplane apply/delete into the directory', () => {
  test('one file per resource identity: re-applying replaces, delete removes, -n sets missing namespaces', () => {
    const { dir } = start();
    const first = applyText(dir, fixture('istio-istio/samples/bookinfo/networking/virtual-service-all-v1.yaml'));
    assert.deepEqual(first.map((r) => r.id), ['VirtualService default/productpage', 'VirtualService default/reviews', 'VirtualService default/ratings', 'VirtualService default/details']);
    applyText(dir, fixture('istio-istio/samples/bookinfo/networking/virtual-service-reviews-50-v3.yaml'));
    assert.equal(readdirSync(dir).length, 4);
    applyText(dir, fixture('istio-api/tests/testdata/authz-valid.yaml'), 'foo');
    assert.ok(readdirSync(dir).includes('foo.authorizationpolicy.security.istio.io.full.yaml'));
    deleteText(dir, fixture('istio-istio/samples/bookinfo/networking/virtual-service-all-v1.yaml'));
    assert.deepEqual(readdirSync(dir).sort(), ['foo.authorizationpolicy.security.istio.io.full.yaml', 'foo.authorizationpolicy.security.istio.io.service-account-and-namespace-principal-split.yaml']);
  });
});
