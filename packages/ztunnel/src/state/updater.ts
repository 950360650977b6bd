/**
 * Feeds the state: WDS updates from the ADS client (an XdsHandler subscribing to every Address and
 * Authorization, as ztunnel does: wildcard, Delta only) and the local config file. A resource that
 * cannot be converted is refused by name (the NACK lists it) and the rest of the batch applies.
 */
import { compileIstioAuthorization, TYPE_URL, type XdsHandler, type XdsRejection, type XdsUpdate } from '../core.ts';
import { addressFromXds, authorizationFromXds } from './from-xds.ts';
import { parseLocalConfig } from './local-config.ts';
import type { ProxyState } from './store.ts';

const WILDCARD = { wildcard: true, names: new Set<string>() } as const;
const NOTHING = { wildcard: false, names: new Set<string>() } as const;

export class WdsHandler implements XdsHandler {
  private readonly state: ProxyState;
  /** Types with at least one accepted response (readiness waits for both). */
  readonly synced = new Set<string>();
  private readonly onSynced: (() => void) | undefined;

  constructor(state: ProxyState, onSynced?: () => void) {
    this.state = state;
    this.onSynced = onSynced;
  }

  interest(typeUrl: string): { readonly wildcard: boolean; readonly names: ReadonlySet<string> } {
    return typeUrl === TYPE_URL.address || typeUrl === TYPE_URL.authorization ? WILDCARD : NOTHING;
  }

  apply(update: XdsUpdate): Promise<readonly XdsRejection[]> {
    return Promise.resolve(this.applyNow(update));
  }

  /** The same, synchronously (tests, the local loader). */
  applyNow(update: XdsUpdate): readonly XdsRejection[] {
    // Refused before reaching us (undecodable, duplicate names): keep what we have under those names.
    const rejections: XdsRejection[] = [...(update.refused ?? [])];
    const isPolicy = update.typeUrl === TYPE_URL.authorization;
    if (!isPolicy && update.typeUrl !== TYPE_URL.address) {
      return update.resources.map((r) => ({ name: r.name, message: `ztunnel does not take ${update.typeUrl}` }));
    }
    for (const name of update.removed) {
      if (isPolicy) this.state.removePolicy(name); else this.state.removeAddress(name);
    }
    for (const res of update.resources) {
      try {
        if (isPolicy) this.state.upsertPolicy(authorizationFromXds(res.json));
        else {
          const a = addressFromXds(res.json);
          if (a.kind === 'workload') this.state.upsertWorkload(a.workload); else this.state.upsertService(a.service);
        }
      } catch (e) {
        rejections.push({ name: res.name, message: (e as Error).message });
      }
    }
    // Workload updates can change which policies select a workload: open connections are re-checked either way.
    this.state.notify(true);
    if (!this.synced.has(update.typeUrl)) {
      this.synced.add(update.typeUrl);
      if (this.synced.size === 2) this.onSynced?.();
    }
    return rejections;
  }
}

/**
 * Replaces the state with a local config file's content. The file is parsed and every policy
 * compiled before anything changes: a bad file leaves the last good state serving.
 */
export function loadLocalConfig(state: ProxyState, text: string): void {
  const cfg = parseLocalConfig(text);
  // Compile every policy before the clear, so a bad one throws while the old state still serves.
  for (const [i, p] of cfg.policies.entries()) compileIstioAuthorization(p, `policies[${i}].`);
  state.clear();
  for (const s of cfg.services) state.upsertService(s);
  for (const w of cfg.workloads) state.upsertWorkload(w);
  for (const p of cfg.policies) state.upsertPolicy(p);
  state.notify(true);
}
