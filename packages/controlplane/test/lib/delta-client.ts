// A real Delta ADS client over @grpc/grpc-js for control-plane tests: subscribes like ztunnel or
// Envoy, ACKs every response, and keeps what it holds (name → version and decoded proto-JSON).
import { Client, credentials, type ClientDuplexStream } from '@grpc/grpc-js';
import { DELTA_METHOD, SOTW_METHOD, decodeDeltaResponse, encodeDeltaRequest, encodeSotwRequest, type DeltaResponse, decodeResource } from '@skua/proxy/xds';

type Json = Record<string, unknown>;
const identity = (b: Buffer): Buffer => b;

export interface Held {
  readonly version: string;
  readonly json: Json;
}

export class DeltaClient {
  readonly responses: DeltaResponse[] = [];
  /** typeUrl → name → what the client holds. */
  readonly held = new Map<string, Map<string, Held>>();
  private readonly client: Client;
  private readonly call: ClientDuplexStream<Buffer, Buffer>;
  private readonly node: Json;
  private first = true;
  error: Error | undefined;

  constructor(port: number, node: Json) {
    this.node = node;
    this.client = new Client(`127.0.0.1:${port}`, credentials.createInsecure());
    this.call = this.client.makeBidiStreamRequest(DELTA_METHOD, identity, identity);
    this.call.on('data', (b: Buffer) => this.onResponse(decodeDeltaResponse(b)));
    this.call.on('error', (e: Error) => { this.error = e; });
  }

  /** Subscribes to a type (`[]` is the legacy wildcard, `['*']` the explicit one). */
  subscribe(typeUrl: string, names: string[]): void {
    this.write({ type_url: typeUrl, resource_names_subscribe: names });
  }

  private write(r: { type_url: string; resource_names_subscribe?: string[]; response_nonce?: string; error_detail?: { code: number; message: string } }): void {
    this.call.write(encodeDeltaRequest({
      node: this.first ? this.node : undefined, type_url: r.type_url, resource_names_subscribe: r.resource_names_subscribe ?? [],
      resource_names_unsubscribe: [], initial_resource_versions: {}, response_nonce: r.response_nonce ?? '', error_detail: r.error_detail,
    }));
    this.first = false;
  }

  private onResponse(r: DeltaResponse): void {
    this.responses.push(r);
    let m = this.held.get(r.type_url);
    if (!m) { m = new Map(); this.held.set(r.type_url, m); }
    for (const x of r.resources) m.set(x.name, { version: x.version, json: x.resource ? decodeResource(x.resource) : {} });
    for (const n of r.removed_resources) m.delete(n);
    this.write({ type_url: r.type_url, response_nonce: r.nonce });
  }

  names(typeUrl: string): string[] {
    return [...(this.held.get(typeUrl)?.keys() ?? [])].sort();
  }

  get(typeUrl: string, name: string): Json | undefined {
    return this.held.get(typeUrl)?.get(name)?.json;
  }

  async waitFor<T>(probe: () => T | undefined | false, what: string, timeoutMs = 5000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = probe();
      if (v !== undefined && v !== false) return v;
      if (this.error) throw this.error;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  close(): void {
    this.call.cancel();
    this.client.close();
  }
}

/** Opens a SotW stream, sends one request and returns how many responses arrived within `waitMs`. */
export async function sotwProbe(port: number, node: Json, typeUrl: string, waitMs = 300): Promise<number> {
  const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure());
  const call = client.makeBidiStreamRequest(SOTW_METHOD, identity, identity);
  let n = 0;
  call.on('data', () => { n++; });
  call.on('error', () => {});
  call.write(encodeSotwRequest({ version_info: '', node, resource_names: [], type_url: typeUrl, response_nonce: '' }));
  await new Promise((r) => setTimeout(r, waitMs));
  call.cancel();
  client.close();
  return n;
}
