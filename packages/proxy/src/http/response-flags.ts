/** Envoy's response flags (short form, as in access logs and istio's response_flags label). */
export const Flag = {
  None: '-',
  NoRouteFound: 'NR',
  NoHealthyUpstream: 'UH',
  UpstreamConnectionFailure: 'UF',
  UpstreamConnectionTermination: 'UC',
  UpstreamRemoteReset: 'UR',
  UpstreamRequestTimeout: 'UT',
  UpstreamOverflow: 'UO',
  NoClusterFound: 'NC',
  DownstreamConnectionTermination: 'DC',
  DownstreamProtocolError: 'DPE',
  StreamIdleTimeout: 'SI',
  DurationTimeout: 'DT',
  LocalReset: 'LR',
  UpstreamProtocolError: 'UPE',
  DirectResponse: 'DR',
  UnauthorizedExternalService: 'UAEX',
  OverloadManager: 'OM',
} as const;

export type ResponseFlag = (typeof Flag)[keyof typeof Flag];

/** Local reply bodies as Envoy writes them. */
export const LocalBody = {
  noHealthyUpstream: 'no healthy upstream',
  timeout: 'upstream request timeout',
  overflow: 'upstream connect error or disconnect/reset before headers. reset reason: overflow',
  connectFailure: 'upstream connect error or disconnect/reset before headers. reset reason: connection failure',
  remoteReset: 'upstream connect error or disconnect/reset before headers. reset reason: remote reset',
  connectionTermination: 'upstream connect error or disconnect/reset before headers. reset reason: connection termination',
  protocolError: 'upstream connect error or disconnect/reset before headers. reset reason: protocol error',
  streamIdle: 'stream timeout',
  overloaded: 'envoy overloaded',
} as const;
