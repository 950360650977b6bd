/**
 * One skua-ztunnel process: configuration from the environment, the state from LOCAL_XDS and/or
 * WDS, the proxies — per pod in in-pod (shared) mode, driven by ZDS; one set in this namespace in
 * dedicated mode — the admin/stats/readiness servers, and a graceful drain.
 */
import { readFileSync } from 'node:fs';
import { log, StatsStore, type AdsClient, type HboneServer } from './core.ts';
import { configDump, connectionsDump } from './admin/config-dump.ts';
import { startAdminServers, type StartedServers } from './admin/servers.ts';
import type { ZtunnelConfig } from './config.ts';
import { ConnectionManager } from './connections.ts';
import { WorkloadManager, type InpodWorkload, type PodProxies } from './inpod/workload-manager.ts';
import { ZdsClient } from './inpod/zds-client.ts';
import type { ProxyInputs } from './proxy/inputs.ts';
import { podHboneConnector, podHboneServer, type HbonePoolSettings } from './proxy/hbone.ts';
import { handleInboundHbone } from './proxy/inbound-hbone.ts';
import { caRootPem, ztunnelIssuer } from './identity/ca-issuer.ts';
import { certificatesDump } from './admin/certificates.ts';
import { CertificateManager } from './core.ts';
import { startProxies } from './proxy/pod-proxies.ts';
import { HostSockets, InPodSockets, type SocketFactory } from './proxy/sockets.ts';
import { ProxyState } from './state/store.ts';
import { loadLocalConfig, WdsHandler } from './state/updater.ts';
import { ZtunnelMetrics } from './telemetry/metrics.ts';
import { writeAccessLogLine } from './telemetry/access-log-writer.ts';
import { startNativeHeapTrim } from './native-heap-trim.ts';
import { startWdsClient } from './xds-client.ts';
import { Forwarder, readResolvConf } from './core.ts';
import { startPodDns } from './dns/pod-dns.ts';

export interface AppOptions {
  readonly cfg: ZtunnelConfig;
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Ports for admin/stats/readiness (tests pass 0). */
  readonly adminPorts?: { admin: number; stats: number; readiness: number };
  readonly accessLog?: (line: string) => void;
}

export class ZtunnelApp {
  readonly cfg: ZtunnelConfig;
  readonly state = new ProxyState();
  readonly metrics = new ZtunnelMetrics();
  readonly connections: ConnectionManager;
  readonly manager: WorkloadManager | undefined;
  private zds: ZdsClient | undefined;
  private ads: AdsClient | undefined;
  private wds: WdsHandler | undefined;
  private servers: StartedServers | undefined;
  private dedicated: PodProxies | undefined;
  private readonly opts: AppOptions;
  private draining = false;
  private stopHeapTrim: (() => void) | undefined;
  /** Workload certificates from the CA (undefined without CA_ADDRESS: HBONE is then unavailable). */
  readonly certs: CertificateManager | undefined;
  private readonly closeIssuer: (() => void) | undefined;
  private readonly hboneSettings: HbonePoolSettings;

  constructor(opts: AppOptions) {
    this.opts = opts;
    this.cfg = opts.cfg;
    this.connections = new ConnectionManager(this.state);
    if (this.cfg.proxyMode === 'shared') this.manager = new WorkloadManager((pod) => this.startPod(pod));
    const c = this.cfg;
    this.hboneSettings = { maxStreamsPerConnection: c.poolMaxStreamsPerConnection, idleReleaseMs: c.poolUnusedReleaseTimeoutMs, streamWindow: c.streamWindow, connectionWindow: c.connectionWindow };
    if (c.caAddress) {
      const issuer = ztunnelIssuer(c);
      this.closeIssuer = issuer.close;
      this.certs = new CertificateManager({ issue: issuer.issue, ttlSec: c.secretTtlSec, rootCertPem: caRootPem(c) });
    }
  }

  get ports(): StartedServers['ports'] | undefined {
    return this.servers?.ports;
  }

  private inputs(proxyUid: string, sockets: SocketFactory, local: () => ReturnType<ProxyInputs['localWorkload']>): ProxyInputs {
    const cfg = this.cfg;
    return {
      state: this.state, network: cfg.network, hbonePort: cfg.inboundPort, illegalPorts: cfg.illegalPorts, metrics: this.metrics,
      accessLog: this.opts.accessLog ?? writeAccessLogLine, connections: this.connections, sockets, proxyUid,
      hbone: this.certs ? podHboneConnector(sockets, this.certs, this.hboneSettings) : undefined, localWorkload: local,
      originalSource: cfg.requireOriginalSource ?? true, rng: Math.random,
    };
  }

  private async startPod(pod: InpodWorkload): Promise<PodProxies> {
    const cfg = this.cfg;
    const sockets = new InPodSockets(pod.netnsFd, cfg.packetMark ?? 0x539, cfg.requireOriginalSource !== false);
    const { name, namespace, serviceAccount } = pod.info;
    const local = () => this.state.workloadByInfo(cfg.localNode, namespace, name, serviceAccount);
    const pi = this.inputs(pod.uid, sockets, local);
    const hbone = this.hboneInbound(pi);
    const proxies = await startProxies(pi, {
      outboundPort: cfg.outboundPort, inboundPlaintextPort: cfg.inboundPlaintextPort, inboundPort: cfg.inboundPort,
      bindAddress: '0.0.0.0', terminationDeadlineMs: cfg.terminationDeadlineMs, hbone,
    });
    const stopPrefetch = this.prefetchWhenKnown(local);
    let dns: Awaited<ReturnType<typeof startPodDns>> | undefined;
    if (cfg.dnsProxy) {
      try {
        dns = await startPodDns({ netnsFd: pod.netnsFd, namespace, state: this.state, network: cfg.network, clusterDomain: cfg.clusterDomain, forwarder: this.forwarder(), port: cfg.dnsPort });
      } catch (e) {
        stopPrefetch();
        await proxies.close();
        throw e;
      }
    }
    return { close: async () => { stopPrefetch(); await dns?.close(); await proxies.close(); pi.hbone?.close(); hbone?.destroy(); } };
  }

  /** 15008 for one workload: TLS with its certificate, then each CONNECT to the inbound handler. */
  private hboneInbound(pi: ProxyInputs): HboneServer | undefined {
    if (!this.certs) return undefined;
    return podHboneServer(this.certs, () => pi.localWorkload()?.identity, (inb) => handleInboundHbone(pi, inb, this.cfg.enableResponseBaggage), this.hboneSettings);
  }

  /** Fetches a workload's certificate ahead of its first connection (ztunnel prefetches for local workloads). */
  private prefetch(identity: string | undefined): void {
    if (identity && this.certs) this.certs.get(identity).catch((e: Error) => log.warn(`certificate for ${identity}: ${e.message}`));
  }

  /**
   * Prefetches the pod's certificate now, or as soon as WDS names its workload (the pod may arrive
   * over ZDS first); returns what stops waiting.
   */
  private prefetchWhenKnown(local: () => { readonly identity: string } | undefined): () => void {
    const now = local()?.identity;
    if (now || !this.certs) { this.prefetch(now); return () => {}; }
    const stop = this.state.subscribe({
      changed: () => {
        const id = local()?.identity;
        if (id) { stop(); this.prefetch(id); }
      },
    });
    return stop;
  }

  private forwarderCache: Forwarder | undefined;
  private forwarder(): Forwarder {
    if (!this.forwarderCache) {
      let text = '';
      try { text = readFileSync('/etc/resolv.conf', 'utf8'); } catch { /* no resolvers: forwarding fails with SERVFAIL */ }
      this.forwarderCache = new Forwarder({ servers: readResolvConf(text).servers });
    }
    return this.forwarderCache;
  }

  /** Names of what is not ready yet (readiness answers 500 until empty). */
  pending(): string[] {
    const out: string[] = [];
    if (this.draining) out.push('draining');
    if (this.wds && this.wds.synced.size < 2) out.push('state manager');
    if (this.manager && !this.manager.ready) out.push('workload proxy manager');
    if (this.cfg.proxyMode === 'dedicated' && !this.dedicated) out.push('proxy');
    return out;
  }

  async start(): Promise<void> {
    const cfg = this.cfg;
    this.stopHeapTrim = startNativeHeapTrim();
    if (cfg.localXds) {
      const text = cfg.localXds.kind === 'file' ? readFileSync(cfg.localXds.path, 'utf8') : cfg.localXds.text;
      loadLocalConfig(this.state, text);
    }
    if (cfg.xdsAddress) {
      this.wds = new WdsHandler(this.state, () => log.info('WDS: initial state received'));
      this.ads = startWdsClient(cfg, this.wds, new StatsStore(), this.opts.env);
    }
    this.servers = await startAdminServers({
      configDump: () => configDump(this.state, this.connections, certificatesDump(this.certs), this.manager?.locals() ?? this.dedicatedLocals()),
      connections: () => connectionsDump(this.connections, this.manager?.locals() ?? this.dedicatedLocals()),
      metrics: () => this.metrics.render(),
      pending: () => this.pending(),
      quit: () => { void this.drain().then(() => process.exit(0)); },
    }, this.opts.adminPorts ?? { admin: cfg.adminPort, stats: cfg.statsPort, readiness: cfg.readinessPort });
    if (this.manager) {
      this.zds = new ZdsClient(cfg.inpodUds, this.manager);
      this.zds.start();
    } else {
      const w = cfg.proxyWorkload!;
      const sockets = new HostSockets(cfg.packetMark);
      const local = () => this.state.workloadByInfo(undefined, w.namespace, w.name, w.serviceAccount);
      const pi = this.inputs(`${w.namespace}/${w.name}`, sockets, local);
      const hbone = this.hboneInbound(pi);
      const proxies = await startProxies(pi, {
        outboundPort: cfg.outboundPort, inboundPlaintextPort: cfg.inboundPlaintextPort, inboundPort: cfg.inboundPort,
        bindAddress: '0.0.0.0', terminationDeadlineMs: cfg.terminationDeadlineMs, hbone,
      });
      this.dedicated = { close: async () => { await proxies.close(); pi.hbone?.close(); hbone?.destroy(); } };
    }
  }

  private dedicatedLocals() {
    const w = this.cfg.proxyWorkload;
    if (!w) return [];
    return [{ uid: `${w.namespace}/${w.name}`, name: w.name, namespace: w.namespace, serviceAccount: w.serviceAccount, state: this.dedicated ? 'Up' : 'Pending' }];
  }

  /** SIGTERM: readiness fails, listeners stop, connections get the termination deadline, then everything closes. */
  async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    this.stopHeapTrim?.();
    await this.zds?.stop();
    await Promise.all([this.manager?.drainAll(), this.dedicated?.close()]);
    this.ads?.stop();
    this.certs?.stop();
    this.closeIssuer?.();
    await this.servers?.close();
  }
}
