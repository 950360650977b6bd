/** DestinationRule (networking.istio.io): subsets and traffic policies, with istiod's and the CRD's rules. */
import type { Node } from '../reader.ts';
import type { ClientTls, ConnectionPool, DestinationRule, LbPolicy, Meta, OutlierDetection, Subset, TrafficPolicy } from '../types.ts';
import { exportTo, hostProblem, isDns1123Label, labels, port } from './common.ts';

const SIMPLE_LB = ['UNSPECIFIED', 'LEAST_CONN', 'RANDOM', 'PASSTHROUGH', 'ROUND_ROBIN', 'LEAST_REQUEST'] as const;

function loadBalancer(n: Node | undefined): Pick<TrafficPolicy, 'lb' | 'hash'> {
  if (!n) return {};
  n.known(['simple', 'consistentHash', 'localityLbSetting', 'warmupDurationSecs', 'warmup', 'zoneAwareLbSetting', 'backendUtilization'], {
    localityLbSetting: 'there is one locality on this machine', zoneAwareLbSetting: 'there is one zone on this machine',
    warmupDurationSecs: 'slow start is not implemented by skua-proxy', warmup: 'slow start is not implemented by skua-proxy',
    backendUtilization: 'client-side weighted round robin is not implemented by skua-proxy',
  });
  const w = n.obj('warmup');
  if (w) {
    w.known(['duration', 'minimumPercent', 'aggression']);
    if (!w.has('duration')) w.error('duration', 'Required value');
    else w.duration('duration');
    w.num('minimumPercent', 0, 100);
    w.num('aggression', 0);
  }
  if (n.has('localityLbSetting') && n.has('zoneAwareLbSetting')) n.rule('only one of localityLbSetting and zoneAwareLbSetting can be set');
  const simple = n.oneOf('simple', SIMPLE_LB);
  const lb: LbPolicy | undefined = simple === 'LEAST_CONN' || simple === 'LEAST_REQUEST' ? 'LEAST_REQUEST' : simple === 'UNSPECIFIED' ? undefined : simple;
  const ch = n.obj('consistentHash');
  if (!ch) return { lb };
  if (simple) n.rule('only one of simple or consistentHash may be set');
  ch.known(['httpHeaderName', 'httpCookie', 'useSourceIp', 'httpQueryParameterName', 'ringHash', 'maglev', 'minimumRingSize'],
    { ringHash: 'ring parameters use Envoy\'s defaults', maglev: 'table size uses Envoy\'s default', minimumRingSize: 'ring parameters use Envoy\'s defaults' });
  if (ch.has('minimumRingSize') && (ch.has('ringHash') || ch.has('maglev'))) ch.rule('only one of MinimumRingSize or Maglev/Ringhash can be specified');
  const c = ch.obj('httpCookie');
  let cookie;
  if (c) {
    c.known(['name', 'path', 'ttl', 'attributes'], { attributes: 'cookie attributes are not set' });
    const name = c.reqStr('name');
    if (name === '') c.error('name', 'name required for HttpCookie');
    if (name) cookie = { name, path: c.str('path'), ttlMs: c.duration('ttl') };
  }
  const sources = ['httpHeaderName', 'httpCookie', 'useSourceIp', 'httpQueryParameterName'].filter((k) => ch.has(k));
  if (sources.length !== 1) ch.rule('exactly one of httpHeaderName, httpCookie, useSourceIp, httpQueryParameterName is required');
  return { lb: undefined, hash: { header: ch.str('httpHeaderName'), sourceIp: ch.bool('useSourceIp'), queryParameter: ch.str('httpQueryParameterName'), cookie } };
}

function connectionPool(n: Node | undefined): ConnectionPool | undefined {
  if (!n) return undefined;
  n.known(['tcp', 'http']);
  if (Object.keys(n.raw).length === 0) n.rule('connection pool must have at least one field');
  const t = n.obj('tcp'), h = n.obj('http');
  t?.known(['maxConnections', 'connectTimeout', 'tcpKeepalive', 'maxConnectionDuration', 'idleTimeout'],
    { tcpKeepalive: 'TCP keepalive socket options are not set', maxConnectionDuration: 'not enforced by skua-proxy', idleTimeout: 'TCP idle timeouts are not set' });
  h?.known(['http1MaxPendingRequests', 'http2MaxRequests', 'maxRequestsPerConnection', 'maxRetries', 'idleTimeout', 'h2UpgradePolicy', 'useClientProtocol', 'maxConcurrentStreams', 'http2KeepAlive'],
    { useClientProtocol: 'the upstream protocol follows the port protocol', maxConcurrentStreams: 'HTTP/2 stream limits use skua-proxy defaults', http2KeepAlive: 'HTTP/2 keepalive pings are not sent' });
  const ka = h?.obj('http2KeepAlive');
  if (ka) {
    ka.known(['interval', 'timeout']);
    if (!ka.has('interval')) ka.error('interval', 'http2 keepalive interval is required'); else ka.duration('interval');
    if (!ka.has('timeout')) ka.error('timeout', 'http2 keepalive timeout is required'); else ka.duration('timeout');
  }
  const nonNegative = (x: Node | undefined, k: string, what: string): number | undefined => {
    const v = x?.int(k);
    if (v !== undefined && v < 0) { x!.error(k, `${what} must be non-negative`); return undefined; }
    return v;
  };
  const h2 = h?.oneOf('h2UpgradePolicy', ['DEFAULT', 'DO_NOT_UPGRADE', 'UPGRADE'] as const);
  if (h2 === 'UPGRADE' && h?.bool('useClientProtocol')) h.error('useClientProtocol', 'use client protocol must not be true when H2UpgradePolicy is UPGRADE');
  return {
    maxConnections: nonNegative(t, 'maxConnections', 'max connections'), connectTimeoutMs: t?.duration('connectTimeout'),
    http1MaxPendingRequests: nonNegative(h, 'http1MaxPendingRequests', 'http1 max pending requests'),
    http2MaxRequests: nonNegative(h, 'http2MaxRequests', 'http2 max requests'),
    maxRequestsPerConnection: nonNegative(h, 'maxRequestsPerConnection', 'max requests per connection'),
    maxRetries: nonNegative(h, 'maxRetries', 'max retries'), idleTimeoutMs: h?.duration('idleTimeout'), h2Upgrade: h2 === 'UPGRADE' ? true : undefined,
  };
}

function outlier(n: Node | undefined): OutlierDetection | undefined {
  if (!n) return undefined;
  n.known(['consecutiveErrors', 'consecutive5xxErrors', 'consecutiveGatewayErrors', 'consecutiveLocalOriginFailures', 'splitExternalLocalOriginErrors', 'interval', 'baseEjectionTime', 'maxEjectionPercent', 'minHealthPercent', 'outlierDetectionHttpErrorCodes'],
    { consecutiveLocalOriginFailures: 'local-origin errors are counted with the others', splitExternalLocalOriginErrors: 'local-origin errors are counted with the others', outlierDetectionHttpErrorCodes: 'only 5xx and gateway errors count' });
  if (n.has('consecutiveErrors')) n.warn('consecutiveErrors', 'outlier detection consecutive errors is deprecated, use consecutiveGatewayErrors or consecutive5xxErrors instead');
  const pct = (k: string): number | undefined => {
    const v = n.int(k);
    if (v !== undefined && (v < 0 || v > 100)) { n.error(k, `percentage ${v} is not in range 0..100`); return undefined; }
    return v;
  };
  return {
    consecutive5xxErrors: n.int('consecutive5xxErrors', 0), consecutiveGatewayErrors: n.int('consecutiveGatewayErrors', 0),
    intervalMs: n.duration('interval'), baseEjectionTimeMs: n.duration('baseEjectionTime'), maxEjectionPercent: pct('maxEjectionPercent'), minHealthPercent: pct('minHealthPercent'),
  };
}

function tls(n: Node | undefined): ClientTls | undefined {
  if (!n) return undefined;
  n.known(['mode', 'clientCertificate', 'privateKey', 'caCertificates', 'credentialName', 'subjectAltNames', 'sni', 'insecureSkipVerify', 'caCrl'],
    { caCrl: 'certificate revocation lists are not checked' });
  const mode = n.oneOf('mode', ['DISABLE', 'SIMPLE', 'MUTUAL', 'ISTIO_MUTUAL'] as const) ?? 'DISABLE';
  if (n.has('credentialName')) n.error('credentialName', 'credentialName needs Kubernetes secrets; give clientCertificate/privateKey/caCertificates file paths instead');
  if (mode === 'ISTIO_MUTUAL') {
    for (const k of ['clientCertificate', 'privateKey', 'caCertificates']) if (n.has(k)) n.error(k, `ISTIO_MUTUAL TLS cannot have associated ${k === 'caCertificates' ? 'CA bundle' : k === 'privateKey' ? 'private key' : 'client certificate'}`);
  }
  if (mode === 'MUTUAL' && !n.has('credentialName')) {
    if (!n.has('clientCertificate')) n.error('clientCertificate', 'client certificate required for mutual tls');
    if (!n.has('privateKey')) n.error('privateKey', 'private key required for mutual tls');
  }
  return {
    mode, sni: n.str('sni'), subjectAltNames: n.strList('subjectAltNames'), caCertificates: n.str('caCertificates'),
    clientCertificate: n.str('clientCertificate'), privateKey: n.str('privateKey'), insecureSkipVerify: n.bool('insecureSkipVerify'),
  };
}

function trafficPolicy(n: Node | undefined, portLevelAllowed = true): TrafficPolicy | undefined {
  if (!n) return undefined;
  n.known(['loadBalancer', 'connectionPool', 'outlierDetection', 'tls', 'portLevelSettings', 'tunnel', 'proxyProtocol', 'retryBudget'],
    { tunnel: 'tunneling to a proxy is not translated', proxyProtocol: 'PROXY protocol to upstreams is not implemented by skua-proxy', retryBudget: 'retry budgets are not implemented by skua-proxy' });
  if (Object.keys(n.raw).length === 0) n.rule('traffic policy must have at least one field');
  if (n.has('tunnel') && n.has('proxyProtocol')) n.rule('tunnel and proxyProtocol must not be set together');
  const portLevel = new Map<number, TrafficPolicy>();
  for (const p of portLevelAllowed ? n.list('portLevelSettings') : []) {
    p.known(['port', 'loadBalancer', 'connectionPool', 'outlierDetection', 'tls']);
    const ps = p.obj('port');
    ps?.known(['number']);
    const num = ps ? port(ps, 'number') : undefined;
    if (num === undefined) { p.error('port', 'portTrafficPolicy must have valid port'); continue; }
    if (Object.keys(p.raw).length === 1) p.rule('port traffic policy must have at least one field');
    if (portLevel.has(num)) p.error('port', `duplicate port level settings for port ${num}`);
    portLevel.set(num, { ...loadBalancer(p.obj('loadBalancer')), connectionPool: connectionPool(p.obj('connectionPool')), outlier: outlier(p.obj('outlierDetection')), tls: tls(p.obj('tls')), portLevel: new Map() });
  }
  return { ...loadBalancer(n.obj('loadBalancer')), connectionPool: connectionPool(n.obj('connectionPool')), outlier: outlier(n.obj('outlierDetection')), tls: tls(n.obj('tls')), portLevel };
}

export function readDestinationRule(meta: Meta, spec: Node): DestinationRule {
  spec.known(['host', 'trafficPolicy', 'subsets', 'exportTo', 'workloadSelector']);
  const host = spec.reqStr('host') ?? '';
  if (host) { const p = hostProblem(host); if (p) spec.error('host', p); }
  if (spec.has('workloadSelector')) spec.error('workloadSelector', 'DestinationRules with a workloadSelector are not supported by skua yet');
  const names = new Set<string>();
  const subsets: Subset[] = [];
  for (const s of spec.list('subsets')) {
    s.known(['name', 'labels', 'trafficPolicy']);
    const name = s.reqStr('name') ?? '';
    if (name === '') s.error('name', 'subset name cannot be empty');
    else if (!isDns1123Label(name)) s.error('name', `subset name is invalid: ${name}`);
    if (names.has(name)) s.error('name', `duplicate subset names: ${name}`);
    names.add(name);
    subsets.push({ name, labels: labels(s, 'labels', 'subset labels'), trafficPolicy: trafficPolicy(s.obj('trafficPolicy')) });
  }
  return { meta, host, subsets, trafficPolicy: trafficPolicy(spec.obj('trafficPolicy')), exportTo: exportTo(spec) };
}
