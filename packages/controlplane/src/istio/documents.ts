/**
 * YAML text → Istio / Kubernetes resources, each validated on its own: a document's problems name
 * the file, the resource (`Kind namespace/name`) and the field, in istioctl's message style
 * (`Error [IST0106] (VirtualService default/reviews) spec.http[0].route: ...`).
 */
import { parseAllDocuments } from 'yaml';
import { Findings, Node, type Finding, type Level } from './reader.ts';
import type { Meta } from './types.ts';
import type { IstioResource } from './types-k8s.ts';
import { readVirtualService } from './validate/virtual-service.ts';
import { readDestinationRule } from './validate/destination-rule.ts';
import { readIstioGateway, readServiceEntry, readSidecar, readWorkloadEntry } from './validate/service-entry.ts';
import { readAuthorizationPolicy, readPeerAuthentication, readRequestAuthentication } from './validate/security.ts';
import { readHttpRoute, readK8sGateway } from './validate/gateway-api.ts';
import { readMeshConfig, readPod, readService } from './validate/kube.ts';

export interface Problem extends Finding {
  readonly file: string;
  /** `Kind namespace/name` (or the document position when it has no name). */
  readonly resource: string;
}

export function formatProblem(p: Problem): string {
  return `${p.file}: ${p.level} [${p.code}] (${p.resource}) ${p.field ? `${p.field}: ` : ''}${p.message}`;
}

export function isError(p: { readonly level: Level }): boolean {
  return p.level === 'Error';
}

export interface LoadedDoc {
  readonly resource: IstioResource | undefined;
  readonly problems: readonly Problem[];
}

const GROUP_VERSIONS: Record<string, readonly string[]> = {
  'networking.istio.io': ['v1', 'v1beta1', 'v1alpha3'],
  'security.istio.io': ['v1', 'v1beta1'],
  'gateway.networking.k8s.io': ['v1', 'v1beta1'],
  '': ['v1'],
  apps: ['v1'],
};

const KINDS: Record<string, readonly string[]> = {
  'networking.istio.io': ['VirtualService', 'DestinationRule', 'Gateway', 'ServiceEntry', 'WorkloadEntry', 'Sidecar'],
  'security.istio.io': ['PeerAuthentication', 'AuthorizationPolicy', 'RequestAuthentication'],
  'gateway.networking.k8s.io': ['Gateway', 'HTTPRoute'],
  '': ['Service', 'Pod', 'ConfigMap', 'Namespace', 'ServiceAccount'],
  apps: ['Deployment'],
};

type Reader = (meta: Meta, spec: Node, doc: Node, f: Findings) => IstioResource | undefined;

const READERS: Record<string, Reader> = {
  'networking.istio.io/VirtualService': (m, s) => ({ kind: 'VirtualService', value: readVirtualService(m, s) }),
  'networking.istio.io/DestinationRule': (m, s) => ({ kind: 'DestinationRule', value: readDestinationRule(m, s) }),
  'networking.istio.io/Gateway': (m, s) => ({ kind: 'Gateway', value: readIstioGateway(m, s) }),
  'networking.istio.io/ServiceEntry': (m, s) => ({ kind: 'ServiceEntry', value: readServiceEntry(m, s) }),
  'networking.istio.io/WorkloadEntry': (m, s) => ({ kind: 'WorkloadEntry', value: readWorkloadEntry(m, s) }),
  'networking.istio.io/Sidecar': (m, s) => ({ kind: 'Sidecar', value: readSidecar(m, s) }),
  'security.istio.io/PeerAuthentication': (m, s) => ({ kind: 'PeerAuthentication', value: readPeerAuthentication(m, s) }),
  'security.istio.io/AuthorizationPolicy': (m, s) => ({ kind: 'AuthorizationPolicy', value: readAuthorizationPolicy(m, s) }),
  'security.istio.io/RequestAuthentication': (m, s) => ({ kind: 'RequestAuthentication', value: readRequestAuthentication(m, s) }),
  'gateway.networking.k8s.io/Gateway': (m, s) => ({ kind: 'K8sGateway', value: readK8sGateway(m, s) }),
  'gateway.networking.k8s.io/HTTPRoute': (m, s) => ({ kind: 'HTTPRoute', value: readHttpRoute(m, s) }),
  '/Service': (m, s) => ({ kind: 'Service', value: readService(m, s) }),
  '/Pod': (m, s, d, f) => ({ kind: 'Pod', value: readPod(m, s, d.obj('status'), f) }),
};

const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

function readMeta(doc: Node, kind: string, apiVersion: string, file: string, index: number): Meta {
  const md = doc.obj('metadata');
  const name = md?.str('name') ?? '';
  if (!md?.has('name')) doc.error('metadata.name', 'Required value: name or generateName is required');
  else if (name.length > 253 || !NAME.test(name)) md.invalid('name', name, 'a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \'-\' or \'.\'');
  const namespace = md?.str('namespace') ?? 'default';
  if (md?.has('namespace') && !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(namespace)) md!.invalid('namespace', namespace, 'a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \'-\'');
  return { kind, apiVersion, name, namespace, labels: md?.strMap('labels') ?? {}, annotations: md?.strMap('annotations') ?? {}, file, index };
}

/** One parsed document → its resource (undefined when it is not one we read) and problems. */
export function readDocument(raw: unknown, file: string, index: number): LoadedDoc {
  const f = new Findings();
  const where = `document ${index + 1}`;
  const done = (resource: IstioResource | undefined, id: string): LoadedDoc => ({ resource, problems: f.list.map((x) => ({ ...x, file, resource: id })) });
  const doc = Node.of(raw, '', f);
  if (!doc) return done(undefined, where);
  doc.known(['apiVersion', 'kind', 'metadata', 'spec', 'status', 'data']);
  const apiVersion = doc.str('apiVersion') ?? '', kind = doc.str('kind') ?? '';
  if (!doc.has('apiVersion')) doc.error('apiVersion', 'Required value');
  if (!doc.has('kind')) doc.error('kind', 'Required value');
  const slash = apiVersion.lastIndexOf('/');
  const group = slash < 0 ? '' : apiVersion.slice(0, slash), version = apiVersion.slice(slash + 1);
  const meta = readMeta(doc, kind, apiVersion, file, index);
  const id = meta.name ? `${kind || 'resource'} ${meta.namespace}/${meta.name}` : where;
  if (!apiVersion || !kind) return done(undefined, id);
  if (!GROUP_VERSIONS[group]?.includes(version) || !KINDS[group]?.includes(kind)) {
    doc.error('kind', `no matches for kind ${JSON.stringify(kind)} in version ${JSON.stringify(apiVersion)}`);
    return done(undefined, id);
  }
  const reader = READERS[`${group}/${kind}`];
  if (!reader) {
    if (kind === 'ConfigMap') {
      if (meta.name !== 'istio') return done({ kind: 'Ignored', value: meta }, id);
      return done({ kind: 'MeshConfig', value: readMeshConfig(meta, doc.obj('data'), f) }, id);
    }
    // Namespaces matter for their labels (istio.io/use-waypoint); cluster-scoped, named by metadata.name.
    if (kind === 'Namespace') return done({ kind: 'Namespace', value: { meta } }, `Namespace ${meta.name}`);
    if (kind === 'Deployment') doc.warn('kind', 'Deployments are not run here: declare each replica as a Pod with its address (status.podIP)');
    return done({ kind: 'Ignored', value: meta }, id);
  }
  const spec = doc.obj('spec') ?? new Node({}, 'spec', f);
  if (!doc.has('spec')) doc.error('spec', 'Required value');
  if (doc.has('status') && kind !== 'Pod') doc.notApplied('status', 'status is written by controllers');
  return done(reader(meta, spec, doc, f), id);
}

/** A file's documents (a YAML stream; `kind: List` items are read one by one). */
export function readText(text: string, file: string): LoadedDoc[] {
  const out: LoadedDoc[] = [];
  const docs = parseAllDocuments(text);
  let index = 0;
  for (const d of Array.isArray(docs) ? docs : [docs]) {
    if (d.errors.length) {
      out.push({ resource: undefined, problems: [{ level: 'Error', code: 'IST0106', file, resource: `document ${index + 1}`, field: '', message: `invalid YAML: ${d.errors[0].message}` }] });
      index++;
      continue;
    }
    const raw = d.toJS() as unknown;
    if (raw === null || raw === undefined) continue;
    const items = typeof raw === 'object' && (raw as Record<string, unknown>).kind === 'List' && Array.isArray((raw as Record<string, unknown>).items)
      ? (raw as Record<string, unknown>).items as unknown[] : [raw];
    for (const item of items) out.push(readDocument(item, file, index++));
  }
  return out;
}
